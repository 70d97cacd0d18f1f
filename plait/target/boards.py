"""Boards: where a Cortex-M piece's code runs under QEMU (the machine, its core and its memory map).

    board = board_for(Target("c -mcpu=cortex-m0"))        # microbit (the cortex-m0 default)
    board = board_for(Target("c -mcpu=cortex-m0 -board=mps2-an385"))
    board.code, board.ram                                   # Memory(name, origin, size)
    check_board_fits(board, code_bytes=..., ram_bytes=...)  # TargetError when it does not hold the model

A piece's capacities stay the chip's (its tag's facts or ``-ram-kb``/``-flash-kb``): a board only says
where the code runs, and it must be at least as large as what the build needs. The maps are QEMU's
(hw/arm/nrf51_soc.c, mps2.c, mps2-tz.c; checked with QEMU 7.2, see docs/embedded.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.target.errors import TargetError

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Memory:
    """A memory region: its name in the linker script, start address and size in bytes."""

    name: str
    origin: int
    size: int


@dataclass(frozen=True)
class Board:
    """A QEMU machine (``machine``: the ``-M`` name) with its core, its architecture level (what code
    it runs: ARMv6-M < ARMv7-M < ARMv7E-M < ARMv8.1-M), whether it has an FPU, and where code and
    constants (``code``) and data, pools and the stack (``ram``) go. ``rodata``: where read-only data
    (the model's constants) go instead of ``code`` on a board whose boot memory is small (the AN547's
    512 KiB ITCM); None: in ``code``."""

    name: str
    machine: str
    core: str
    arch: str
    fpu: bool
    code: Memory
    ram: Memory
    stack_bytes: int
    doc: str
    rodata: Memory | None = None

    @property
    def constants(self) -> Memory:
        """The memory that holds the model's constants: ``rodata`` if the board has one, else ``code``."""
        return self.rodata or self.code


#: the architectures in the order of the code they run (each runs the code of those before it)
ARCH_ORDER = ("armv6-m", "armv7-m", "armv7e-m", "armv8.1-m")

BOARDS: dict[str, Board] = {b.name: b for b in (
    Board("microbit", "microbit", "cortex-m0", "armv6-m", False, Memory("FLASH", 0x0, 256 * KIB),
          Memory("RAM", 0x20000000, 16 * KIB), 2 * KIB, "BBC micro:bit (nRF51822): the only Cortex-M0 board"),
    Board("mps2-an385", "mps2-an385", "cortex-m3", "armv7-m", False, Memory("FLASH", 0x0, 4 * MIB),
          Memory("RAM", 0x20000000, 4 * MIB), 64 * KIB, "Arm MPS2 AN385 (Cortex-M3); runs Cortex-M0 code too"),
    Board("mps2-an386", "mps2-an386", "cortex-m4", "armv7e-m", True, Memory("FLASH", 0x0, 4 * MIB),
          Memory("RAM", 0x20000000, 4 * MIB), 64 * KIB, "Arm MPS2 AN386 (Cortex-M4 with FPU)"),
    Board("mps2-an500", "mps2-an500", "cortex-m7", "armv7e-m", True, Memory("FLASH", 0x0, 4 * MIB),
          Memory("RAM", 0x20000000, 4 * MIB), 64 * KIB, "Arm MPS2 AN500 (Cortex-M7 with FPU)"),
    Board("mps3-an547", "mps3-an547", "cortex-m55", "armv8.1-m", True, Memory("ITCM", 0x0, 512 * KIB),
          Memory("SRAM2", 0x21000000, 4 * MIB), 64 * KIB,
          "Arm MPS3 AN547 (Cortex-M55, MVE): code in the ITCM, constants in the 2 MiB SRAM, data in the "
          "4 MiB SRAM2", rodata=Memory("SRAM", 0x01000000, 2 * MIB)),
)}

#: the board each Cortex-M core runs on by default (after -mcpu=<core>f is read as the core + FPU)
DEFAULT_BOARDS = {"cortex-m0": "microbit", "cortex-m0plus": "mps2-an385", "cortex-m1": "microbit",
                  "cortex-m3": "mps2-an385", "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500",
                  "cortex-m55": "mps3-an547"}

#: the architecture of each Cortex-M core plait knows
CORE_ARCH = {"cortex-m0": "armv6-m", "cortex-m0plus": "armv6-m", "cortex-m1": "armv6-m", "cortex-m3": "armv7-m",
             "cortex-m4": "armv7e-m", "cortex-m7": "armv7e-m", "cortex-m55": "armv8.1-m"}


def _core(cpu: str) -> str:
    return cpu.split(".", 1)[0]  # cortex-m0.small-multiply -> cortex-m0


def get_board(name: str) -> Board:
    """The board called ``name``; TargetError listing the known boards otherwise."""
    if name not in BOARDS:
        raise TargetError(f"unknown board '{name}' (known boards: {', '.join(BOARDS)})")
    return BOARDS[name]


def check_board(cpu: str, name: str, hard_float: bool = False) -> None:
    """``-board=name`` must be known, and its core must run code built for ``cpu`` (its architecture
    at least the cpu's; an FPU when the code uses hardware floating point)."""
    board = get_board(name)
    core = _core(cpu)
    if core not in CORE_ARCH:
        raise TargetError(f"-board={name}: no board runs code for -mcpu={cpu} (boards run "
                          f"{', '.join(sorted(CORE_ARCH))})")
    if ARCH_ORDER.index(board.arch) < ARCH_ORDER.index(CORE_ARCH[core]):
        raise TargetError(f"-board={name}: its {board.core} ({board.arch}) cannot run code for {core} "
                          f"({CORE_ARCH[core]}); default board for {core}: {DEFAULT_BOARDS[core]}")
    if hard_float and not board.fpu:
        raise TargetError(f"-board={name}: its {board.core} has no FPU, and the code for -mcpu={cpu} uses "
                          f"hardware floating point; default board for {core}: {DEFAULT_BOARDS[core]}")


def board_for(target: Any) -> Board:
    """The board of a ``c`` target for a Cortex-M core: its ``-board``, else its core's default."""
    opts = target.options
    cpu = str(opts.get("mcpu") or "")
    if not cpu.startswith("cortex-m"):
        raise TargetError(f"target '{target}' is not for a Cortex-M core: no board runs it under QEMU")
    name = opts.get("board") or DEFAULT_BOARDS.get(_core(cpu))
    if not name:
        raise TargetError(f"-mcpu={cpu} has no default board; give one with -board= (known boards: "
                          f"{', '.join(BOARDS)})")
    return get_board(name)


def bigger_board_hint(board: Board) -> str:
    """What to do when ``board`` is too small (the microbit: its Cortex-M0 code runs on mps2-an385)."""
    return " (Cortex-M0 code runs unchanged on mps2-an385: -board=mps2-an385)" if board.name == "microbit" else ""


def check_board_fits(board: Board, code_bytes: int, ram_bytes: int, what: str = "the model") -> None:
    """TargetError when ``board`` cannot hold ``what``: ``code_bytes`` (the constants) in its constants
    memory, ``ram_bytes`` (data, pools, buffers and the stack) in its RAM."""
    for mem, need in ((board.constants, code_bytes), (board.ram, ram_bytes)):
        if need > mem.size:
            hint = bigger_board_hint(board)
            raise TargetError(f"board '{board.name}' is too small for {what}: its {mem.name} holds "
                              f"{mem.size:,} B, {need:,} B needed{hint}")


__all__ = ["ARCH_ORDER", "BOARDS", "Board", "CORE_ARCH", "DEFAULT_BOARDS", "Memory", "bigger_board_hint", "board_for",
           "check_board", "check_board_fits", "get_board"]
