"""PrimFuncs and hostile inputs at the edges of TIR's numeric semantics, shared by the sanitizer test
(test_c_sanitizers.py), the CPU-level test (test_c_cpu_levels.py) and the LLVM backend's tests.

Each :class:`EdgeProgram` is a PrimFunc with its input arrays (outputs start zeroed): casts of NaN,
infinities and out-of-range floats to every integer type, every integer operator on each type's
edge values (division by zero, ``INT_MIN / -1``, shifts by every amount, overflowing products),
quantize-like cast chains, and a few lowered operators (gather with out-of-range indices, conv2d,
softmax, reductions, resize) on inputs holding NaN and infinities. Loops over the element-wise
programs are ``vectorized`` and long enough that vector instructions run on these values (the
AVX-512 bug this guards against was in a vectorized loop).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from plait import tir
from plait.schedule.rules import default_schedule
from plait.tir import Buffer, For, PrimFunc, Var, seq

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass
class EdgeProgram:
    """``func`` with its inputs; ``exact``: every output must match bit for bit (False: float outputs
    computed through libm, whose last bits may differ from numpy's)."""

    name: str
    func: PrimFunc
    inputs: list[np.ndarray]
    exact: bool = True
    op: str = ""  # a lowered operator: its name and attributes (its numpy reference is another oracle)
    attrs: dict | None = None
    status: int = 0  # what the function returns: non-zero, a run-time check stops it (outputs unspecified)

    def outputs(self) -> list[np.ndarray]:
        return [np.zeros(b.static_shape, b.dtype) for b in self.func.params[len(self.inputs):]]


def hostile_floats(dtype: str) -> np.ndarray:
    """NaN, infinities, signed zeros, fractions, and the values at and around every integer type's
    limits, as ``dtype`` holds them."""
    vals = [0.0, -0.0, 0.5, -0.5, -0.99, -1.0, 2.5, -2.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, 32767.5,
            -32768.75, 65535.9, 65536.0, 2.0**31 - 128, 2.0**31, -2.0**31, -2.0**31 - 256, 2.0**32 - 256, 2.0**32,
            2.0**63, -2.0**63, 2.0**64, 1e30, -1e30, float(np.finfo(dtype).max), float(np.finfo(dtype).min),
            float("nan"), float("inf"), float("-inf")]
    with np.errstate(over="ignore"):
        return np.array(vals, dtype)


def int_edges(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    vals = {int(info.min), int(info.min) + 1, -7, -1, 0, 1, 2, 7, int(info.max) - 1, int(info.max)}
    return sorted(v for v in vals if info.min <= v <= info.max)


def _tile(x: np.ndarray, reps: int = 3, extra: int = 5) -> np.ndarray:
    """``x`` repeated (vector loop bodies) plus a few more (a scalar remainder loop)."""
    return np.concatenate([np.tile(x, reps), x[:extra]])


def _elementwise(name: str, ins: list[Buffer], outs: list[tuple[str, object]], n: int) -> PrimFunc:
    obufs = [Buffer(f"y{k}", (n,), d) for k, (d, _) in enumerate(outs)]
    i = Var("i")
    loads = [b[i] for b in ins]
    body = For(i, 0, n, "vectorized", seq(*[o.store(i, fn(*loads)) for o, (_, fn) in zip(obufs, outs)]))
    return PrimFunc((*ins, *obufs), body, {"global_symbol": name, "num_inputs": len(ins)})


def cast_program(src: str) -> EdgeProgram:
    """Every cast of hostile ``src`` floats: to each integer type, bool and the other float types."""
    x = _tile(hostile_floats(src))
    dsts = [*INT_DTYPES, "bool", *(d for d in FLOAT_DTYPES if d != src)]
    outs = [(d, lambda v, d=d: tir.cast(d, v)) for d in dsts]
    return EdgeProgram(f"casts_{src}", _elementwise(f"casts_{src}", [Buffer("x", (len(x),), src)], outs, len(x)), [x])


def int_program(dtype: str) -> EdgeProgram:
    """Every integer operator on all pairs of ``dtype``'s edge values and on shift amounts from
    ``-width - 2`` to ``2 * width + 1``; casts to every other type."""
    edges = int_edges(dtype)
    width = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    amounts = [v for v in range(-width - 2, 2 * width + 2) if info.min <= v <= info.max]
    pairs = [(a, b) for a in edges for b in edges] + [(a, s) for a in edges for s in amounts]
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    c = lambda v: tir.const(v, dtype)  # noqa: E731
    ops = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, tir.floordiv, tir.floormod, tir.truncdiv,
           tir.truncmod, tir.shift_left, tir.shift_right, tir.min, tir.max, lambda x, y: (x & y) | (x ^ y),
           lambda x, y: tir.bitwise_not(x), lambda x, y: tir.truncdiv(x, c(0)), lambda x, y: tir.floormod(x, c(7)),
           lambda x, y: tir.shift_left(x, c(width - 1)), lambda x, y: tir.shift_right(x, c(width + 1)),
           lambda x, y: x * c(int(info.max))]
    if dtype[0] != "u":
        ops += [lambda x, y: tir.floordiv(x, c(-1)), lambda x, y: tir.truncmod(x, c(-1)), lambda x, y: c(0) - x]
    outs = [(dtype, op) for op in ops]
    outs += [(d, lambda x, y, d=d: tir.cast(d, x)) for d in (*INT_DTYPES, "bool", *FLOAT_DTYPES) if d != dtype]
    outs += [("bool", lambda x, y: x < y), ("bool", lambda x, y: tir.eq(x, y))]
    ins = [Buffer("a", (len(a),), dtype), Buffer("b", (len(b),), dtype)]
    return EdgeProgram(f"ints_{dtype}", _elementwise(f"ints_{dtype}", ins, outs, len(a)), [a, b])


def quantize_program() -> EdgeProgram:
    """QuantizeLinear / DequantizeLinear-like chains on hostile floats: round, add a zero point,
    clamp or not (the cast saturates), convert back."""
    x = _tile(np.concatenate([hostile_floats("float32"), np.linspace(-300, 300, 29, dtype=np.float32)]))
    scale, zp = tir.const(0.37), tir.const(3.0)

    def q(d: str, clamp: bool):
        def fn(v):
            r = tir.nearbyint(v / scale) + zp
            if clamp:
                lo, hi = (float(np.iinfo(d).min), float(np.iinfo(d).max))
                r = tir.min(tir.max(r, tir.const(lo)), tir.const(hi))
            return tir.cast(d, r)
        return fn

    def dq(d: str):
        return lambda v: (tir.cast("float32", tir.cast("int32", q(d, False)(v)) - tir.const(3, "int32"))) * scale

    outs = [("uint8", q("uint8", True)), ("int8", q("int8", True)), ("uint8", q("uint8", False)),
            ("int8", q("int8", False)), ("int32", q("int32", False)), ("float32", dq("uint8")), ("float32", dq("int8")),
            ("int16", lambda v: tir.cast("int16", tir.cast("float16", v)))]
    f = _elementwise("quantize", [Buffer("x", (len(x),), "float32")], outs, len(x))
    return EdgeProgram("quantize", f, [x])


@functools.lru_cache(maxsize=None)
def element_programs() -> tuple[EdgeProgram, ...]:
    """The cast, integer and quantize programs: every output exact on every CPU (built once)."""
    return (*(cast_program(s) for s in FLOAT_DTYPES), *(int_program(d) for d in INT_DTYPES), quantize_program())


def _lower(op: str, arrays: list[np.ndarray], target: str, **attrs) -> PrimFunc:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "te"))
    from computes_util import lower  # noqa: E402 - the tests' shared lowering helper

    func, _ = lower(op, arrays, **attrs)
    return default_schedule(func, target)


@functools.lru_cache(maxsize=None)
def operator_programs(target: str = "c") -> tuple[EdgeProgram, ...]:
    """A few operators lowered and scheduled for ``target``, on inputs with NaN and infinities (and
    gather indices at the ends of their axis, and far outside it: there the function stops at its
    index check and returns status 1, ``EdgeProgram.status``)."""
    rng = np.random.default_rng(5)

    # the resize references multiply dense interpolation matrices: a NaN or inf input reaches every
    # output through its zero weights (0 * inf), while the compute reads only the taps. They are
    # compared with the interpreter alone (op="" below), the others with their reference too.
    def data(shape, dtype="float32", special=True):
        x = rng.uniform(-3, 3, shape).astype(dtype)
        if special:
            flat = x.reshape(-1)
            flat[:4] = [np.nan, np.inf, -np.inf, 1e30][:flat.size]
        return x

    i64 = np.iinfo(np.int64)
    cases = [
        ("take", [data((4, 5)), np.array([[0, -1, 3], [-4, 2, -3]], "int64")], {"axis": 0}, True),
        ("gather_elements", [np.arange(12, dtype="int32").reshape(3, 4),
                             np.array([[0, -1, 2, -3], [-2, 0, 1, 2]], "int32")], {"axis": 0}, True),
        ("gather_nd", [data((3, 4)), np.array([[2, -4], [-3, 3]], "int64")], {}, True),
        ("take", [data((4, 5)), np.array([[0, -1, 3], [int(i64.min), int(i64.max), -4]], "int64")], {"axis": 0}, 1),
        ("gather_elements", [np.arange(12, dtype="int32").reshape(3, 4),
                             np.array([[0, -1, 2, 99], [-99, 0, 2**31 - 1, -2**31]], "int32")], {"axis": 0}, 1),
        ("gather_nd", [data((3, 4)), np.array([[2, 4], [-3, 3]], "int64")], {}, 1),
        ("nn.conv2d", [data((1, 3, 6, 6)), data((4, 3, 3, 3), special=False)],
         {"padding": (1, 1, 1, 1), "strides": (2, 1)}, True),
        ("nn.softmax", [data((3, 9))], {"axis": -1}, False),
        ("sum", [np.array([[2**31 - 1, 5, -3], [-2**31, -1, 7]], "int32")], {"axis": (1,), "keepdims": False}, True),
        ("max", [data((4, 6))], {"axis": (1,), "keepdims": True}, True),
        ("image.resize2d", [data((1, 2, 4, 5))], {"size": (7, 3)}, True),
        ("image.resize2d", [data((1, 1, 5, 4))], {"size": (3, 7), "method": "cubic"}, True),
        ("cast", [_tile(hostile_floats("float32"), 1, 0)], {"dtype": "int16"}, True),
        ("divide", [np.array([7, -2**31, 5, -9], "int32"), np.array([0, -1, 2, 0], "int32")], {}, True),
        ("mod", [np.array([7, -2**31, 5, -9], "int32"), np.array([0, -1, -2, 0], "int32")], {}, True),
        ("power", [np.array([3, 10, -10, 2], "int8"), np.array([40, 3, 3, -1], "int8")], {}, False),
        ("l2_norm", [np.array([[46341, 46341], [3, 4]], "int32")], {"axis": (1,), "keepdims": False}, False),
        ("left_shift", [np.array([1, 200, 7, 255], "uint8"), np.array([9, 1, 0, 255], "uint8")], {}, True),
        ("abs", [np.array([-2**31, -1, 0, 2**31 - 1], "int32")], {}, True),  # abs(INT_MIN) wraps to INT_MIN
        ("negative", [np.array([int(i64.min), -1, 0, int(i64.max)], "int64")], {}, True),
        ("mean", [np.array([[2**31 - 1, 2**31 - 1, 1], [-2**31, -2**31, -5]], "int32")], {"axis": (1,)}, True),
    ]
    out = []
    for k, (op, arrays, attrs, exact) in enumerate(cases):
        f = _lower(op, arrays, target, **attrs)
        name = f"op{k}_{op.replace('.', '_')}"
        ref_op = "" if op == "image.resize2d" else op
        status = 0 if isinstance(exact, bool) else exact
        out.append(EdgeProgram(name, f.with_attrs(global_symbol=name), arrays, exact is True, ref_op, attrs, status))
    return tuple(out)


def reference(p: EdgeProgram) -> list[np.ndarray] | None:
    """The numpy reference's outputs of a lowered operator, None where it refuses the inputs (gather
    indices outside their axis: the reference raises, compiled code returns status 1)."""
    from plait.errors import PlaitError
    from plait.op import get_op

    op = get_op(p.op)
    try:
        with np.errstate(all="ignore"):  # inf * 0 in a conv's matmul
            want = op.ref([x.copy() for x in p.inputs], op.make_attrs(p.attrs or {}))
    except PlaitError:
        return None
    return [np.asarray(w) for w in want] if isinstance(want, tuple) else [np.asarray(want)]


_INTERPRETED: dict[int, tuple[EdgeProgram, list[np.ndarray]]] = {}


def interpret(p: EdgeProgram) -> list[np.ndarray]:
    """The outputs of ``p`` by the TIR interpreter (the oracle; computed once per program). A program
    that stops at a run-time check must stop there in the interpreter too; its outputs are then
    unspecified, and the list is empty."""
    if id(p) not in _INTERPRETED:
        args = [*(x.copy() for x in p.inputs), *p.outputs()]
        if p.status:
            with pytest.raises(tir.TIRCheckError) as e:
                tir.evaluate(p.func, *args)
            assert e.value.status == p.status, str(e.value)
            args = args[:len(p.inputs)]
        else:
            tir.evaluate(p.func, *args)
        _INTERPRETED[id(p)] = (p, args[len(p.inputs):])
    return [a.copy() for a in _INTERPRETED[id(p)][1]]


def assert_outputs_equal(got: list[np.ndarray], want: list[np.ndarray], exact: bool, what: str) -> None:
    """Bit for bit (NaN payloads aside: any NaN equals any NaN), or within float32 rounding for the float
    outputs of a program that is not ``exact`` (libm's last bits, FMA contraction, vector reductions)."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        msg = f"{what}: output {k} ({w.dtype})"
        assert g.dtype == w.dtype and g.shape == w.shape, msg
        if w.dtype.kind == "f" and not exact:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-6,
                                       equal_nan=True, err_msg=msg)
        elif w.dtype.kind == "f":
            same = (g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))
            assert same.all(), f"{msg}: differs at {np.flatnonzero(~same)[:8]}: {g[~same][:4]} vs {w[~same][:4]}"
        else:
            np.testing.assert_array_equal(g, w, err_msg=msg)


# x86-64 psABI micro-architecture levels: the /proc/cpuinfo flags each one adds to the previous
_LEVEL_FLAGS = {
    "x86-64": (),
    "x86-64-v2": ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"),
    "x86-64-v3": ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
    "x86-64-v4": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
X86_LEVELS = tuple(_LEVEL_FLAGS)


def cpu_flags() -> set[str]:
    """This machine's CPU flags (Linux), empty elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def level_runs_here(level: str) -> bool:
    """Can this machine run code built for the x86-64 ``level`` (it and every level below it)?"""
    have = cpu_flags()
    need = [f for lv in X86_LEVELS[:X86_LEVELS.index(level) + 1] for f in _LEVEL_FLAGS[lv]]
    return all(f in have for f in need)
