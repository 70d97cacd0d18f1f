"""The ``blas`` target kind: matrix products and convolutions through OpenBLAS's ``cblas_sgemm``.

    art = plait.build(mod, "host: c; blas: blas", place="*=blas?")   # every call blas can run, on blas
    art = plait.build(mod, "host: c; blas: blas")                    # placement by cost (the cost hook)

The kind has no code generator of its own; it proves the ``relay_to_tir`` hook (docs/kind-blas.md):

- ``supports``: ``nn.dense``, ``nn.matmul`` (numpy semantics: 1-D operands, broadcast batch dims)
  and ``nn.conv2d`` with ``groups == 1`` (NCHW), float32, static non-empty shapes;
- ``relay_to_tir`` (through :func:`plait.backend.hook_lowering.lower_regions`): each such call
  becomes a PrimFunc whose body is ``call_extern`` of ``cblas_sgemm`` (``cblas_sgemv`` when one side
  of the product is a vector), row-major; a batch loop for batched matmuls; a 1x1 stride-1 unpadded
  convolution is one GEMM per image; any other convolution first writes the im2col matrix
  ``[C*KH*KW, OH*OW]`` into a ``global.workspace`` buffer (a TIR loop nest, zero padding split out
  statically, no per-element test) that the memory planner sees like any other workspace;
- ``cost``: seconds from a GEMM throughput model measured on the build machine (:func:`gemm_seconds`);
- ``build`` attribute: the c backend's C path, linking OpenBLAS (``-L -l -Wl,-rpath``).

OpenBLAS comes from the ``scipy-openblas32`` wheel (optional extra ``plait[blas]``), imported lazily;
its symbols carry a prefix (``scipy_cblas_sgemm``), found at first use. Option ``-threads`` (default 1:
fair single-thread comparisons) is applied by every PrimFunc (``openblas_set_num_threads``) before its
first product, so an exported artifact keeps it; ``-threads=0`` leaves OpenBLAS's own default.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import math
import os
from dataclasses import dataclass
from typing import Any

from plait.errors import PlaitError
from plait.ir.types import TensorType
from plait.relay.expr import Call
from plait.target import Option, register_hook, register_kind
from plait.tir import Allocate, Buffer, Evaluate, For, PrimFunc, Var, seq, simplify
from plait.tir.expr import FloatImm, IntImm
from plait.tir.op import address_of, call_extern

NEEDS = "target kind 'blas' needs scipy-openblas32: pip install 'plait[blas]'"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enum values
INT32_MAX = 2**31 - 1
OPS = ("nn.dense", "nn.matmul", "nn.conv2d")


class BlasError(PlaitError):
    """OpenBLAS is missing or unusable."""


# ---- the library --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenBLAS:
    lib_dir: str
    library: str  # -l name
    include_dir: str
    path: str  # the shared library
    prefix: str  # of every exported symbol ("scipy_" for scipy-openblas32)

    def symbol(self, name: str) -> str:
        return self.prefix + name

    @property
    def link_flags(self) -> list[str]:
        return [f"-L{self.lib_dir}", f"-l{self.library}", f"-Wl,-rpath,{self.lib_dir}"]


@functools.lru_cache(maxsize=None)
def openblas() -> OpenBLAS:
    """The OpenBLAS of ``scipy-openblas32``; raises :class:`BlasError` when it is not installed."""
    try:
        import scipy_openblas32 as sob  # type: ignore[import-not-found]
    except ImportError:
        raise BlasError(NEEDS) from None
    lib_dir, name = sob.get_lib_dir(), sob.get_library()
    paths = sorted(glob.glob(os.path.join(lib_dir, f"lib{name}.*")))
    if not paths:
        raise BlasError(f"{NEEDS} (no lib{name} shared library in {lib_dir})")
    try:
        lib = ctypes.CDLL(paths[0])
    except OSError as exc:
        raise BlasError(f"{NEEDS} (cannot load {paths[0]}: {exc})") from None
    for prefix in ("scipy_", ""):
        if hasattr(lib, prefix + "cblas_sgemm"):
            return OpenBLAS(lib_dir, name, sob.get_include_dir(), paths[0], prefix)
    raise BlasError(f"{NEEDS} ({paths[0]} exports no cblas_sgemm)")


# ---- what a call needs: a list of products ------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A supported call as matrix products: ``count`` products ``[m, k] @ [k, n]`` (``im2col`` floats
    written first per product for a convolution)."""

    op: str
    m: int
    n: int
    k: int
    count: int
    im2col: int = 0  # floats of the im2col matrix (0: none)


def _tensor(t: Any) -> TensorType | None:
    if isinstance(t, TensorType) and t.is_static and t.dtype == "float32":
        return t
    return None


def _prod(xs: Any) -> int:
    return math.prod(int(x) for x in xs)


def plan(call: Call) -> Plan | None:
    """The products of ``call`` if blas can run it, else None."""
    if call.op_name not in OPS or len(call.args) != 2:
        return None
    if not all(a.has_type for a in call.args) or not call.has_type:
        return None
    a, b, out = (_tensor(x.checked_type) for x in (*call.args, call))
    if a is None or b is None or out is None or not all(_prod(t.shape) for t in (a, b, out)):
        return None
    if call.op_name == "nn.dense":
        p = Plan("nn.dense", _prod(a.shape[:-1]), b.shape[0], b.shape[1], 1)
    elif call.op_name == "nn.matmul":
        m = 1 if a.ndim == 1 else a.shape[-2]
        n = 1 if b.ndim == 1 else b.shape[-1]
        batch_a = _prod(a.shape[:-2]) if a.ndim > 2 else 1
        batch_b = _prod(b.shape[:-2]) if b.ndim > 2 else 1
        batch_o = _prod(out.shape) // (m * n)
        if batch_b == 1:  # a's batch folds into the rows of one product
            p = Plan("nn.matmul", batch_a * m, n, a.shape[-1], 1)
        else:
            p = Plan("nn.matmul", m, n, a.shape[-1], batch_o)
    else:
        if call.attrs["groups"] != 1 or a.ndim != 4:
            return None
        nb, c, _, _ = a.shape
        o, _, kh, kw = b.shape
        oh, ow = out.shape[2:]
        direct = kh == kw == 1 and tuple(call.attrs["strides"]) == (1, 1) and not any(call.attrs["padding"])
        p = Plan("nn.conv2d", o, oh * ow, c * kh * kw, nb, 0 if direct else c * kh * kw * oh * ow)
    if max(p.m, p.n, p.k, p.count, p.im2col, p.m * p.k, p.k * p.n, p.m * p.n) > INT32_MAX:
        return None
    return p


def supports(call: Call, target: Any) -> bool:
    """The ``supports`` hook: float32 dense / matmul / conv2d (groups 1) of static, non-empty shapes."""
    openblas()  # placing on blas without OpenBLAS: the clear message, now
    return plan(call) is not None


# ---- cost ---------------------------------------------------------------------------------------

# Measured on the build machine (AMD EPYC Zen 3 at 2445 MHz, AVX2 + FMA, one thread), OpenBLAS 0.3.29
# of scipy-openblas32, with bench/blas_speed.py (docs/kind-blas.md): GFLOP/s of large sgemm, the
# fixed cost of one cblas call from a plait PrimFunc, and how small products fall short of the peak.
PEAK_GFLOPS = 60.0
CALL_OVERHEAD_S = 0.4e-6
HALF_SIZE = (8.0, 8.0, 24.0)  # m, n, k at which a dimension alone halves the throughput
IM2COL_BYTES_PER_S = 6e9  # the im2col loop nest: read + write of one float each


def gemm_seconds(m: int, n: int, k: int) -> float:
    """Estimated seconds of one single-thread ``[m, k] @ [k, n]`` product (no call overhead)."""
    eff = 1.0
    for size, half in zip((m, n, k), HALF_SIZE):
        eff *= size / (size + half)
    return 2.0 * m * n * k / (PEAK_GFLOPS * 1e9 * eff)


def cost(call: Call, target: Any) -> float | None:
    """The ``cost`` hook: estimated seconds of ``call`` on blas (None for calls it cannot run)."""
    p = plan(call)
    if p is None:
        return None
    per = gemm_seconds(p.m, p.n, p.k) + CALL_OVERHEAD_S + p.im2col * 8 / IM2COL_BYTES_PER_S
    return p.count * per


# ---- lowering -----------------------------------------------------------------------------------


def _i32(v: int) -> IntImm:
    return IntImm(int(v), "int32")


class _Emitter:
    def __init__(self, target: Any):
        self.lib = openblas()
        self.threads = int(target.options["threads"]) if "threads" in target.options else 1

    def prologue(self) -> list[Any]:
        if self.threads <= 0:
            return []
        return [Evaluate(call_extern("void", self.lib.symbol("openblas_set_num_threads"), _i32(self.threads)))]

    def product(self, trans_b: bool, m: int, n: int, k: int, a: Any, lda: int, b: Any, ldb: int, c: Any,
                ldc: int) -> Evaluate:
        """``C[m, n] = A[m, k] @ op(B)`` (row-major; ``op(B) = B.T`` with ``trans_b``, B then ``[n, k]``)."""
        one, zero = FloatImm(1.0), FloatImm(0.0)
        if m == 1:  # a row vector: y[n] = op(B).T @ a
            trans = NO_TRANS if trans_b else TRANS
            rows, cols = (n, k) if trans_b else (k, n)
            return Evaluate(call_extern("void", self.lib.symbol("cblas_sgemv"), _i32(ROW_MAJOR), _i32(trans),
                                        _i32(rows), _i32(cols), one, b, _i32(ldb), a, _i32(1), zero, c, _i32(1)))
        if n == 1:  # a column: y[m] = A @ b (b contiguous either way)
            return Evaluate(call_extern("void", self.lib.symbol("cblas_sgemv"), _i32(ROW_MAJOR), _i32(NO_TRANS),
                                        _i32(m), _i32(k), one, a, _i32(lda), b, _i32(1), zero, c, _i32(ldc)))
        return Evaluate(call_extern("void", self.lib.symbol("cblas_sgemm"), _i32(ROW_MAJOR), _i32(NO_TRANS),
                                    _i32(TRANS if trans_b else NO_TRANS), _i32(m), _i32(n), _i32(k), one, a,
                                    _i32(lda), b, _i32(ldb), zero, c, _i32(ldc)))


def _dense(em: _Emitter, call: Call, ins: list[Buffer], out: Buffer) -> Any:
    x, w = ins
    p = plan(call)
    assert p is not None
    return em.product(True, p.m, p.n, p.k, address_of(x), p.k, address_of(w), p.k, address_of(out), p.n)


def _matmul(em: _Emitter, call: Call, ins: list[Buffer], out: Buffer) -> Any:
    a, b = ins
    p = plan(call)
    assert p is not None
    m, n, k = p.m, p.n, p.k
    ld_a, ld_b = k, n
    if p.count == 1:  # no batch, or b without one: a's batch rows fold into m
        return em.product(False, m, n, k, address_of(a), ld_a, address_of(b), ld_b, address_of(out), n)
    bo = out.static_shape[: out.ndim - (a.ndim > 1) - (b.ndim > 1)]
    loops = [Var(f"b{d}") for d in range(len(bo))]

    def index(buf: Buffer, rank_mat: int) -> tuple:
        shape = buf.static_shape
        nb = buf.ndim - rank_mat
        idx = []
        for e in range(nb):
            d = len(bo) - nb + e
            idx.append(loops[d] if shape[e] != 1 else IntImm(0))
        return tuple(idx) + tuple(IntImm(0) for _ in range(rank_mat))

    stmt: Any = em.product(False, m, n, k, address_of(a, *index(a, min(a.ndim, 2))), ld_a,
                           address_of(b, *index(b, min(b.ndim, 2))), ld_b,
                           address_of(out, *index(out, out.ndim - len(bo))), n)
    for v, ext in reversed(list(zip(loops, bo))):
        stmt = For(v, 0, ext, "serial", stmt)
    return stmt


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _conv2d(em: _Emitter, call: Call, ins: list[Buffer], out: Buffer) -> Any:
    x, w = ins
    nb, c, h, wd = x.static_shape
    o, _, kh, kw = w.static_shape
    _, _, oh, ow = out.static_shape
    s, pad, d = call.attrs["strides"], call.attrs["padding"], call.attrs["dilation"]
    p = plan(call)
    assert p is not None
    n = Var("n")
    kk, pp = c * kh * kw, oh * ow
    if not p.im2col:  # 1x1, stride 1, no padding: out[n] (O x HW) = w (O x C) @ x[n] (C x HW)
        gemm = em.product(False, o, pp, c, address_of(w), c, address_of(x, n, 0, 0, 0), pp,
                          address_of(out, n, 0, 0, 0), pp)
        return For(n, 0, nb, "serial", gemm) if nb > 1 else _subst_n(gemm, n)
    col = Buffer("col", (c, kh, kw, oh, ow), "float32", "global.workspace")
    ci = Var("c")
    taps = []
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0] - pad[0], j * d[1] - pad[1]  # input row/col of output (0, 0) for this tap
            lo_h, hi_h = (min(max(_ceil_div(-h0, s[0]), 0), oh), min(max(_ceil_div(h - h0, s[0]), 0), oh))
            lo_w, hi_w = (min(max(_ceil_div(-w0, s[1]), 0), ow), min(max(_ceil_div(wd - w0, s[1]), 0), ow))
            hi_h, hi_w = max(hi_h, lo_h), max(hi_w, lo_w)

            def zeros(r0: int, r1: int, c0: int, c1: int, i: int = i, j: int = j) -> Any:
                if r1 <= r0 or c1 <= c0:
                    return None
                y, z = Var("y"), Var("z")
                return For(y, r0, r1 - r0, "serial",
                           For(z, c0, c1 - c0, "serial", col.store((ci, i, j, y, z), FloatImm(0.0))))

            y, z = Var("y"), Var("z")
            copy = None
            if hi_w > lo_w:
                copy = For(z, lo_w, hi_w - lo_w, "serial",
                           col.store((ci, i, j, y, z), x[n, ci, y * s[0] + h0, z * s[1] + w0]))
            rows = None
            if hi_h > lo_h:
                rows = For(y, lo_h, hi_h - lo_h, "serial", seq(zeros_row(col, ci, i, j, y, 0, lo_w), copy,
                                                                zeros_row(col, ci, i, j, y, hi_w, ow)))
            taps += [zeros(0, lo_h, 0, ow), rows, zeros(hi_h, oh, 0, ow)]
    fill = For(ci, 0, c, "serial", seq(*taps))
    gemm = em.product(False, o, pp, kk, address_of(w), kk, address_of(col), pp, address_of(out, n, 0, 0, 0), pp)
    return Allocate(col, For(n, 0, nb, "serial", seq(fill, gemm)))


def zeros_row(col: Buffer, ci: Var, i: int, j: int, y: Var, c0: int, c1: int) -> Any:
    if c1 <= c0:
        return None
    z = Var("z")
    return For(z, c0, c1 - c0, "serial", col.store((ci, i, j, y, z), FloatImm(0.0)))


def _subst_n(stmt: Any, n: Var) -> Any:
    from plait.tir import substitute

    return substitute(stmt, {n: IntImm(0)})


_LOWER = {"nn.dense": _dense, "nn.matmul": _matmul, "nn.conv2d": _conv2d}


def lower_call(call: Call) -> PrimFunc | None:
    """The PrimFunc of one supported call (None: not supported, default lowering)."""
    from plait.backend.hook_lowering import call_buffers
    from plait.target import Target

    if plan(call) is None:
        return None
    em = _Emitter(Target.current(allow_none=False))
    ins, (out,) = call_buffers(call)
    body = _LOWER[call.op_name](em, call, ins, out)
    name = "sgemm_" + call.op_name.split(".")[-1]
    return simplify(PrimFunc((*ins, out), seq(*em.prologue(), body), {"global_symbol": name}))


def relay_to_tir(mod: Any) -> Any:
    """The ``relay_to_tir`` hook: every region function of the blas piece, through :func:`lower_call`."""
    from plait.backend.hook_lowering import lower_regions

    openblas()
    return lower_regions(mod, lower_call)


# ---- build --------------------------------------------------------------------------------------


def build(mod: Any, target: Any, ctx: Any = None) -> Any:
    """The blas kind's ``build`` attribute: the PrimFuncs of ``mod`` (name order) through the c
    backend's host C path, linked against OpenBLAS."""
    from plait.backend.c import build_c

    lib = openblas()
    config = getattr(ctx, "config", None) or {}
    funcs = [f if f.name else f.with_attrs(global_symbol=key)
             for key, f in sorted(mod.items()) if isinstance(f, PrimFunc)]
    return build_c(funcs, target, cache_dir=config.get("cc.cache_dir"), name="blas", link_flags=lib.link_flags)


BLAS = register_kind(
    "blas",
    device_type="cpu",
    can_host=False,
    doc="matrix products and convolutions through OpenBLAS cblas_sgemm (scipy-openblas32), on the host CPU; "
        "needs a host piece (e.g. 'host: c; blas: blas')",
    options=(Option("threads", int, 1, "OpenBLAS threads (openblas_set_num_threads); 0: OpenBLAS's default"),),
    default_keys=("cpu",),
    attrs={"build": build, "schedule_rules": "cpu"},
)
register_hook("blas", "supports", supports)
register_hook("blas", "cost", cost)
register_hook("blas", "relay_to_tir", relay_to_tir)

__all__ = ["BLAS", "BlasError", "NEEDS", "OpenBLAS", "Plan", "build", "cost", "gemm_seconds", "lower_call",
           "openblas", "plan", "relay_to_tir", "supports"]
