"""Running an AOT artifact's firmware on an emulated Cortex-M board (QEMU, semihosting).

    m = QemuModule(art)                  # adds firmware/ (plait.executor.aot.firmware), builds fw.elf with make
    y, = m(x=x)                          # writes in/<field>.bin, runs QEMU, reads out/<field>.bin
    run_firmware(elf, board, workdir, timeout_s=60)   # one QEMU run of any semihosting ELF

QEMU runs ``qemu-system-arm -M <machine> -nographic -semihosting-config enable=on,target=native
-kernel fw.elf`` in a directory holding the input files, with a time limit (``timeout_s``, default
:data:`DEFAULT_TIMEOUT_S`). The firmware's exit status (semihosting EXIT_EXTENDED) is QEMU's. Every
failure is a :class:`QemuError` naming the board: QEMU or the cross compiler missing (with the apt
line), the time limit, a hard fault, a non-zero exit status, a missing output file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.executor.aot.artifact import AotArtifact
from plait.executor.aot.firmware import STATUS_FAULT, add_firmware
from plait.executor.inputs import bind_inputs
from plait.ir.types import DTYPES
from plait.target.boards import Board, bigger_board_hint

DEFAULT_TIMEOUT_S = 60.0
QEMU = "qemu-system-arm"
APT = "apt-get install -y --no-install-recommends"
_OVERFLOW = re.compile(r"region [`']?(\w+)'? overflowed by (\d+) bytes")


class QemuError(PlaitError):
    """Building or running firmware under QEMU failed."""


def _need(tool: str, package: str, board: Board) -> None:
    if shutil.which(tool) is None:
        raise QemuError(f"board '{board.name}': {tool} is not installed (Debian/Ubuntu: {APT} {package})")


def build_firmware(directory: str | Path, board: Board) -> Path:
    """``make -C <directory> firmware`` (an exported artifact with firmware/); the ELF's path."""
    _need("arm-none-eabi-gcc", "gcc-arm-none-eabi libnewlib-arm-none-eabi", board)
    _need("make", "make", board)
    d = Path(directory)
    r = subprocess.run(["make", "-s", "-j2", "-C", str(d), "firmware"], capture_output=True, text=True)
    if r.returncode != 0:
        text = r.stderr + r.stdout
        m = _OVERFLOW.search(text)
        if m:
            raise QemuError(f"board '{board.name}' is too small for the firmware: its {m.group(1)} overflowed by "
                            f"{int(m.group(2)):,} B{bigger_board_hint(board)}")
        if "plait: RAM overflowed" in text:
            raise QemuError(f"board '{board.name}' is too small for the firmware: its {board.ram.name} "
                            f"({board.ram.size:,} B) does not hold data, pools and a {board.stack_bytes:,} B stack"
                            f"{bigger_board_hint(board)}")
        raise QemuError(f"board '{board.name}': building the firmware failed:\n{text.strip()[-4000:]}")
    return d / "firmware" / "fw.elf"


def run_firmware(elf: str | Path, board: Board, workdir: str | Path, timeout_s: float = DEFAULT_TIMEOUT_S,
                 extra: Sequence[str] = ()) -> str:
    """Run ``elf`` on ``board`` under QEMU in ``workdir`` (its semihosting files are relative to it);
    returns what it printed. ``extra``: more QEMU arguments (e.g. ``-plugin``). QemuError on a time-out,
    a hard fault or a non-zero exit status."""
    _need(QEMU, "qemu-system-arm", board)
    cmd = [QEMU, "-M", board.machine, "-nographic", "-monitor", "none", "-serial", "none",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(Path(elf).resolve()), *extra]
    try:
        r = subprocess.run(cmd, cwd=str(workdir), capture_output=True, text=True, timeout=timeout_s,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise QemuError(f"board '{board.name}': the firmware did not finish within {timeout_s:g} s (QEMU stopped; "
                        "an endless loop, or raise the time limit)") from None
    printed = (r.stderr + r.stdout).strip()
    said = "; ".join(line[len("plait: "):] for line in printed.splitlines() if line.startswith("plait: "))
    if r.returncode == STATUS_FAULT and "hard fault" in said:
        raise QemuError(f"board '{board.name}': the firmware hit a hard fault (exit status {STATUS_FAULT})")
    if r.returncode != 0:
        why = f": {said}" if said else (f": {printed[-2000:]}" if printed else "")
        raise QemuError(f"board '{board.name}': the firmware exited with status {r.returncode}{why}")
    return printed


class QemuModule:
    """Runs an :class:`AotArtifact` for one Cortex-M piece on its board under QEMU (a composite target: one
    image on the board of its largest core, :mod:`plait.executor.aot.firmware_composite`).

    ``m(*inputs, **inputs) -> list[np.ndarray]`` like ``AotModule``; ``timeout_s`` bounds each run.
    The firmware is built once (in ``build_dir``, default a temporary directory) when the module is made.
    """

    executor = "aot"

    def __init__(self, art: AotArtifact, timeout_s: float = DEFAULT_TIMEOUT_S, build_dir: str | Path | None = None):
        self.art = art
        self.board = add_firmware(art) if "firmware" not in art.metadata else _board(art)
        self.timeout_s = timeout_s
        self.lock = threading.RLock()
        self._tmp = None if build_dir is not None else tempfile.TemporaryDirectory(prefix="plait_fw_")
        self.dir = Path(build_dir if build_dir is not None else self._tmp.name)  # type: ignore[union-attr]
        art.export(self.dir)
        self.elf = build_firmware(self.dir, self.board)
        md = art.metadata
        self.input_names = [i["name"] for i in md["inputs"]]
        self.output_names = [o["name"] for o in md["outputs"]]
        self.printed = ""
        self.qemu_args: list[str] = []  # more QEMU arguments for every run (plait.executor.aot.measure: -plugin)

    def _given(self, args: tuple, inputs: dict[str, Any]) -> list[np.ndarray]:
        md = self.art.metadata
        given = bind_inputs(self.input_names, args, inputs, QemuError)
        out = []
        for info in md["inputs"]:
            a = np.asarray(given[info["name"]])
            want = np.dtype(DTYPES[info["dtype"]])
            if a.dtype != want or list(a.shape) != list(info["shape"]):
                raise QemuError(f"input '{info['name']}': expected {want}{list(info['shape'])}, got "
                                f"{a.dtype}{list(a.shape)}")
            out.append(a)
        return out

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Write the inputs, run the firmware under QEMU, read the outputs (copies)."""
        values = self._given(args, inputs)
        md = self.art.metadata
        with self.lock, tempfile.TemporaryDirectory(prefix="plait_qemu_") as work:
            os.makedirs(os.path.join(work, "in"))
            os.makedirs(os.path.join(work, "out"))
            for info, a in zip(md["inputs"], values):
                np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tofile(
                    os.path.join(work, "in", f"{info['field']}.bin"))
            self.printed = run_firmware(self.elf, self.board, work, self.timeout_s, self.qemu_args)
            outs = []
            for info in md["outputs"]:
                path = os.path.join(work, "out", f"{info['field']}.bin")
                if not os.path.isfile(path) or os.path.getsize(path) != info["bytes"]:
                    raise QemuError(f"board '{self.board.name}': the firmware wrote no output file "
                                    f"out/{info['field']}.bin of {info['bytes']:,} B (output '{info['name']}')")
                dt = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
                outs.append(np.fromfile(path, dt).astype(dt.newbyteorder("="), copy=False).reshape(info["shape"]))
            return outs

    def __repr__(self) -> str:
        return f"QemuModule({self.art.name!r}, board={self.board.name!r})"


def _board(art: AotArtifact) -> Board:
    from plait.target.boards import get_board

    return get_board(art.metadata["firmware"]["board"])


__all__ = ["DEFAULT_TIMEOUT_S", "QemuError", "QemuModule", "build_firmware", "run_firmware"]
