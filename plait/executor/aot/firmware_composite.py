"""Firmware for a composite target: every piece's code in one image, on the board of its largest core.

    board = composite_board(art)         # e.g. mps2-an500 for "low_power_cpu: c -mcpu=cortex-m0;
                                         #                      inference_cpu: c -mcpu=cortex-m7f"
    flags = source_flags(art)            # src/<file>.c -> the cross flags of the piece it belongs to

No QEMU board carries two different Cortex-M cores, so a composite target's AOT C runs as one image on
the board of the piece whose core runs the code of every other piece (its architecture at least theirs,
an FPU when a piece uses one; ARMv6-M < ARMv7-M < ARMv7E-M < ARMv8.1-M): each piece's operator file is
compiled with that piece's own ``-mcpu`` (ARMv6-M code runs unchanged on an ARMv7-M core), the entry
point, the device copies, the constants and the firmware's own files with the host piece's flags.

One image has one float calling convention: ``-mfloat-abi=hard`` objects (FPU registers for float
arguments) do not link with soft-float ones (ld: "uses VFP register arguments"). Pieces built for hard
float are therefore compiled with ``-mfloat-abi=softfp``: the same FPU instructions, float arguments in
core registers. The operator functions take only pointers, so their code is the same instruction for
instruction (checked for ds_cnn's M7F operators with objdump). The run libraries (libgcc, newlib's
``memcpy`` and libm) are linked once, those of the host piece's core.
"""

from __future__ import annotations

from typing import Any

from plait.target.boards import ARCH_ORDER, Board, board_for, check_board
from plait.target.errors import TargetError

HARD, SOFTFP = "-mfloat-abi=hard", "-mfloat-abi=softfp"


def is_composite(art: Any) -> bool:
    """True when the artifact's target has more than one piece."""
    return len(art.composite.pieces) > 1


def _uses_fpu(flags: list[str]) -> bool:
    return any(f in (HARD, SOFTFP) for f in flags) and "-mfpu=none" not in flags


def image_flags(flags: list[str]) -> list[str]:
    """A source's cross flags in a composite image: contraction off, hard float as ``softfp``."""
    return [SOFTFP if f == HARD else f for f in flags if not f.startswith("-ffp-contract")] + ["-ffp-contract=off"]


def source_flags(art: Any) -> dict[str, list[str]]:
    """The flags of each C source of the artifact (``src/...``) in the composite image."""
    return {s["file"]: image_flags(list(s["flags"])) for s in art.metadata["sources"]}


def composite_board(art: Any) -> Board:
    """The board that runs every piece's code: among the boards of the pieces with C sources (their
    ``-board``, else their core's default), the one of the newest architecture on which every piece's
    code runs. TargetError (naming the pieces) when there is none or a piece is not for a Cortex-M core."""
    composite = art.composite
    used = {s["piece"] for s in art.metadata["sources"]}
    pieces = [p for p in composite.pieces if p.name in used]
    flags = {s["piece"]: list(s["flags"]) for s in art.metadata["sources"]}
    boards: list[Board] = []
    for piece in pieces:
        try:
            boards.append(board_for(piece.target))
        except TargetError as exc:
            raise TargetError(f"piece '{piece.name}' of the composite target: {exc}") from None
    for board in sorted(boards, key=lambda b: (-ARCH_ORDER.index(b.arch), not b.fpu)):
        try:
            for piece in pieces:
                check_board(str(piece.target.options["mcpu"]), board.name, _uses_fpu(flags[piece.name]))
        except TargetError:
            continue
        return board
    names = ", ".join(f"'{p.name}' ({b.name})" for p, b in zip(pieces, boards))
    raise TargetError(f"no board runs the code of every piece of '{art.target}': the pieces' boards {names} "
                      "each lack an architecture or an FPU another piece needs; give one piece a -board= "
                      "that runs them all")


def makefile_overrides(art: Any, common: list[str]) -> str:
    """Make's target-specific ``CFLAGS`` of the objects whose piece's flags differ from ``common``."""
    lines = ["", "# composite target: each piece's sources with its own core's flags (hard float as softfp)"]
    for file, flags in source_flags(art).items():
        if flags != common:
            lines.append(f"$(OBJ)/{file.split('/')[-1][:-2]}.o: CFLAGS = {' '.join(flags)}")
    return "\n".join(lines) + "\n"


__all__ = ["composite_board", "image_flags", "is_composite", "makefile_overrides", "source_flags"]
