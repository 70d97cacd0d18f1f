"""What ``plait run`` does with a run's outputs, a model's or an exported artifact's
(:mod:`plait.cli.run`, :mod:`plait.cli.artifact_run`): ``--output`` checked before the run and written
as a .npz keyed by the output names, or the outputs printed; then the timing report."""

from __future__ import annotations

import argparse
import os
from typing import Callable, Sequence

from plait.cli.messages import say, shorten
from plait.errors import PlaitError


def print_outputs(args: argparse.Namespace, names: Sequence[str], outs: Sequence,
                  report_timing: Callable[[], None] = lambda: None) -> int:
    """Write the outputs to ``--output`` (and say where), or print them, then the timing (--repeat,
    --profile, --json); the exit code."""
    import numpy as np

    if args.output is not None:
        path = _write_outputs(args.output, names, outs)
        say(f"wrote {len(outs)} output(s) to {path}: {', '.join(shorten(n, 200) for n in names)}")
    else:
        for name, value in zip(names, outs):
            print(f"{shorten(name, 200)}: {value.dtype}{list(value.shape)}")
            print(np.array2string(value, threshold=64))
    report_timing()
    return 0


def check_output_file(path: str) -> None:
    """Fail before the run when ``--output`` cannot be written (no such directory, a directory)."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise PlaitError(f"--output: '{path}' is a directory; give a file name, e.g. {os.path.join(path, 'out.npz')}")
    if not os.path.isdir(parent):
        raise PlaitError(f"--output: cannot write '{path}': the directory '{parent}' does not exist")


def _write_outputs(path: str, names: Sequence[str], values: Sequence) -> str:
    """Write ``values`` keyed by ``names`` as a .npz to exactly ``path`` (numpy would append ".npz";
    ``np.savez(f, **d)`` would also break on an output named "file"). Returns the path written."""
    import zipfile

    import numpy as np
    from numpy.lib import format as npformat

    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise PlaitError(f"--output: the model has two outputs named '{shorten(dup, 200)}'; a .npz needs "
                         "distinct names")
    for name in names:
        size = len(f"{name}.npy".encode("utf-8", "surrogatepass"))
        if size > 0xFFFF:  # a zip entry's name has a 16-bit length
            raise PlaitError(f"--output: output '{shorten(name, 200)}' has a name too long for a .npz entry "
                             f"({size:,} bytes with '.npy'; a zip allows 65,535)")
    def write(dest) -> None:
        with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, value in zip(names, values):
                with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                    npformat.write_array(f, np.asarray(value), allow_pickle=False)

    try:
        if os.path.exists(path) and not os.path.isfile(path):  # /dev/null, a pipe: a zip needs to seek
            import io

            buf = io.BytesIO()
            write(buf)
            with open(path, "wb") as f:
                f.write(buf.getbuffer())
        else:
            write(path)
    except OSError as exc:
        raise PlaitError(f"--output: cannot write '{path}': {exc.strerror or exc}") from None
    return path
