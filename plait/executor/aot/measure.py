"""Measured costs: instruction counts of every operator call of a model under QEMU, as a cost database.

    art = plait.build(mod, target="c -mcpu=cortex-m7f", executor="aot", config={"c.host_simulation": True})
    db, rows = measure(mod, art)                      # builds the firmware, one QEMU run with the plugin
    db.save("costs.json")                             # plait explain/compile/run --costs costs.json

Each graph node of the AOT artifact calls one operator function (a fused group of Relay calls). The
instruction-counting plugin (:mod:`plait.executor.aot.insn_plugin`) gets one address range per operator
function (from the ELF's symbol table, ``arm-none-eabi-nm``: address with the Thumb bit cleared, size)
and marks every entry to one with the instructions executed before it. A node's count is the difference
between its function's entry and the next node's (the last: the next semihosting call, when ``main``
writes the outputs): its callees (soft-float routines, ``memcpy``, libm) and the few instructions of
argument set-up in ``plait_<name>_run`` included. A function shared by several nodes is measured per
call that way (each entry is one call, in execution order), not divided.

A node's count is shared by the Relay calls of its group in proportion to the analytic model's
single-call estimates (so a ``relu`` fused after a convolution gets its small part) and recorded per
call signature (:func:`plait.placement.cost.signature`) and piece target;
calls with the same signature are averaged. Time = instructions x the core's cycles per instruction
(:data:`CPI`, estimates) / the piece's clock (``clock_mhz`` fact).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plait.errors import PlaitError
from plait.executor.aot.insn_plugin import plugin_library, read_counts, write_ranges

# Cycles per instruction of each core: ESTIMATES (QEMU has no timing model; it counts instructions).
# Derived from Arm's published Dhrystone figures relative to a 1-IPC core and the cores' pipelines:
# M0 (3 stages, 2-cycle loads, 3-cycle taken branches) ~1.4; M3/M4 (2-cycle loads, pipelined LDM) ~1.25;
# M7 (dual-issue, 6 stages) ~0.8; M55 (dual-issue scalar with MVE beats) ~1.0.
CPI = {"cortex-m0": 1.4, "cortex-m0plus": 1.3, "cortex-m3": 1.25, "cortex-m4": 1.25, "cortex-m7": 0.8,
       "cortex-m55": 1.0}
SOURCE = "measured qemu"


class MeasureError(PlaitError):
    """A model cannot be measured (no Cortex-M piece, an unmatched operator function, no counts)."""


@dataclass(frozen=True)
class CallCount:
    """One graph node's measured call: its function, the Relay calls it runs (signatures, op names, the
    analytic model's uncalibrated single-call estimates in seconds) and its instructions and seconds."""

    node: int
    func: str
    signatures: tuple[str, ...]
    ops: tuple[str, ...]
    analytic: tuple[float, ...]
    instructions: int
    seconds: float

    def shares(self) -> list[float]:
        """Each Relay call's share of the node's measurement: in proportion to its analytic estimate (the
        model's view of where the work is; equal shares when it has none)."""
        total = sum(self.analytic)
        return [a / total if total > 0 else 1 / len(self.ops) for a in self.analytic]


def function_ranges(elf: str | Path, names: list[str]) -> dict[str, tuple[int, int]]:
    """``name -> (lo, hi)`` of the ELF's functions ``names`` (``arm-none-eabi-nm -S``; Thumb bit cleared)."""
    nm = shutil.which("arm-none-eabi-nm")
    if nm is None:
        raise MeasureError("measuring needs arm-none-eabi-nm (apt-get install -y gcc-arm-none-eabi)")
    out = subprocess.run([nm, "-S", "--defined-only", str(elf)], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tT" and f[3] in names:
            lo = int(f[0], 16) & ~1
            found[f[3]] = (lo, lo + int(f[1], 16))
    missing = [n for n in names if n not in found]
    if missing:
        raise MeasureError(f"the firmware {elf} has no function {', '.join(missing)}")
    return found


def core_of(target: Any) -> str:
    """The ``-mcpu`` core of a Cortex-M target without the FPU suffix (``cortex-m7f`` -> ``cortex-m7``)."""
    cpu = str(target.options.get("mcpu", ""))
    return cpu[:-1] if cpu.endswith("f") and cpu[:-1] in CPI else cpu


def _units(mod: Any, target: str) -> list[tuple[Any, ...]]:
    """The non-view Relay calls of ``mod``'s main as placement groups them (fused groups, single calls),
    in execution order: what the AOT graph's nodes call."""
    from plait.pipeline.explain import explain

    return explain(mod, target).assignment.units()


def _matches(func: str, group: tuple[Any, ...]) -> bool:
    from plait.lowering.lower import c_name

    base = c_name("fused_" + "_".join(c_name(c.op.name) for c in group))
    return func == base or base.startswith(re.sub(r"_\d+$", "", func))  # a clash suffix, a cut name


def measuring_target(target: Any) -> Any:
    """The single-piece target a Cortex-M piece ``target`` is measured as: on its board, or on
    ``mps2-an385`` for the microbit (ARMv6-M code runs unchanged there, same instructions), with the
    chip's RAM and flash raised to the board's (so that placement and the memory checks admit any model
    the board holds). The generated code is the piece's; entries are recorded under ``str(target)``."""
    from plait.target.boards import board_for, get_board

    board = board_for(target)
    if board.name == "microbit":
        board = get_board("mps2-an385")
    o = target.options
    return target.with_options({"board": board.name,
                                "ram-kb": max(int(o.get("ram-kb") or 0), board.ram.size // 1024),
                                "flash-kb": max(int(o.get("flash-kb") or 0), board.constants.size // 1024)})


def measure(mod: Any, art: Any, inputs: dict[str, np.ndarray] | None = None, timeout_s: float = 120.0,
            cache_dir: str | None = None, key: str | None = None) -> tuple[Any, list[CallCount]]:
    """Run ``art`` (``mod`` built with ``executor="aot"`` for one Cortex-M piece, e.g. by :func:`build_for_measure`)
    under QEMU with the counting plugin; returns
    (a :class:`~plait.placement.cost.CostDatabase` of the calls, the per-node counts). ``inputs``: default
    a fixed-seed standard normal sample of each input (soft-float counts depend a little on the data);
    ``key``: the target string the entries are recorded under (default the artifact's piece target; a
    composite's piece measured through :func:`measuring_target` gives its own)."""
    from plait.executor.aot.qemu import QemuModule
    from plait.placement.cost import CostDatabase, CostModel, signature
    from plait.schedule import machine_for
    target = art.target
    ct = art.composite
    if len(ct.pieces) != 1 or core_of(ct.pieces[0].target) not in CPI:
        raise MeasureError(f"measure needs an artifact built for one Cortex-M piece "
                           f"(one of {', '.join(sorted(CPI))}), got '{target}'")
    the_piece = ct.pieces[0]
    piece = the_piece.target
    core = core_of(piece)
    with tempfile.TemporaryDirectory(prefix="plait_measure_") as tmp:
        m = QemuModule(art, timeout_s=timeout_s, build_dir=Path(tmp) / "fw")
        nodes = art.metadata["placement"]
        funcs = sorted({n["func"] for n in nodes})  # C symbol: <name>_<func>
        syms = function_ranges(m.elf, [*(f"{art.name}_{f}" for f in funcs), "sh_open"])
        ranges = {n if n == "sh_open" else n[len(art.name) + 1:]: r for n, r in syms.items()}
        order = sorted(ranges, key=lambda n: ranges[n][0])
        write_ranges(Path(tmp) / "ranges.txt", [ranges[n] for n in order])
        so = plugin_library(cache_dir)
        m.qemu_args = ["-plugin", f"{so},in={Path(tmp) / 'ranges.txt'},out={Path(tmp) / 'counts.txt'}"]
        if inputs is None:
            rng = np.random.default_rng(0)
            inputs = {i["name"]: rng.standard_normal(i["shape"]).astype(i["dtype"]) for i in art.metadata["inputs"]}
        m(**inputs)
        counts = read_counts(Path(tmp) / "counts.txt", len(order))
    marks = [(order[r], before) for r, before in counts.marks]
    calls = [k for k, (n, _) in enumerate(marks) if n != "sh_open"]
    if [marks[k][0] for k in calls] != [n["func"] for n in nodes]:
        raise MeasureError(f"the firmware entered {[marks[k][0] for k in calls]}, expected the graph's "
                           f"{[n['func'] for n in nodes]}")
    units = _units(mod, target)
    if len(units) != len(nodes) or not all(_matches(n["func"], g) for n, g in zip(nodes, units)):
        raise MeasureError("the graph's operator functions do not match placement's groups: "
                           f"{[n['func'] for n in nodes]}")
    clock = machine_for(piece).clock_mhz * 1e6
    cm = CostModel(use_schedule=True)
    rows = []
    for node, g, k in zip(nodes, units, calls):
        n = marks[k + 1][1] - marks[k][1]
        rows.append(CallCount(node["node"], node["func"], tuple(signature(c) for c in g), tuple(c.op_name for c in g),
                              tuple(cm.call_cost(c, the_piece).seconds for c in g), n, n * CPI[core] / clock))
    per_sig: dict[str, list[float]] = {}
    for r in rows:
        for s, share in zip(r.signatures, r.shares()):
            per_sig.setdefault(s, []).append(r.instructions * share)
    db = CostDatabase()
    key = str(piece) if key is None else key
    extra = {} if key == str(piece) else {"measured_as": str(piece)}
    for s, v in per_sig.items():
        insns = float(np.mean(v))
        db.add(s, key, insns * CPI[core] / clock, instructions=insns, source=SOURCE,
               board=m.board.name, cpi=CPI[core], clock_mhz=clock / 1e6, calls=len(v), **extra)
    fit_calibration(db, key, rows)
    return db, rows


def calibration_samples(rows: list[CallCount]) -> list[tuple[str, float, float]]:
    """``(op, measured seconds, analytic seconds)`` of every Relay call of ``rows`` (its share of its node's
    measurement, :meth:`CallCount.shares`)."""
    return [(op, r.seconds * sh, a) for r in rows for op, a, sh in zip(r.ops, r.analytic, r.shares()) if a > 0]


def fit_calibration(db: Any, target: str, rows: list[CallCount]) -> dict[str, float]:
    """Fit the analytic model of ``target`` to the measured ``rows`` (of one or more models) and record the
    factors in ``db``: per op, the median of measured / analytic over its calls; "*" the median over all.
    Returns the factors."""
    samples = calibration_samples(rows)
    by_op: dict[str, list[float]] = {}
    for op, measured, analytic in samples:
        by_op.setdefault(op, []).append(measured / analytic)
    factors = {op: float(np.median(v)) for op, v in by_op.items()}
    if samples:
        factors["*"] = float(np.median([m / a for _, m, a in samples]))
    for op, k in factors.items():
        db.set_factor(target, op, k)
    return factors


def median_error(rows: list[CallCount], factors: dict[str, float] | None = None) -> float:
    """The median over the calls of |k x analytic - measured| / measured (k: the op's factor, else "*",
    else 1: the uncalibrated model)."""
    f = factors or {}
    errs = [abs(f.get(op, f.get("*", 1.0)) * a - m) / m for op, m, a in calibration_samples(rows) if m > 0]
    return float(np.median(errs)) if errs else 0.0


__all__ = ["CPI", "CallCount", "MeasureError", "SOURCE", "calibration_samples", "core_of",
           "fit_calibration", "function_ranges", "measure", "measuring_target", "median_error"]
