"""``python3 -m plait.cli``: the ``plait`` command."""

import sys

from plait.cli import main

sys.exit(main())
