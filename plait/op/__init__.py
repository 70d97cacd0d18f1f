"""The standard operator library. Importing this package registers every operator.

Each operator declares its attribute schema, type relation, numpy reference, fusion kind and
cost (see :mod:`plait.ir.op`). Use :func:`plait.ir.get_op` to look one up by name.
"""

from plait.op import tensor  # noqa: F401
from plait.op import reduce  # noqa: F401
from plait.op import transform  # noqa: F401
from plait.op import gather  # noqa: F401
from plait.op import image  # noqa: F401
from plait.op import nn  # noqa: F401
