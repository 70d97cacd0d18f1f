"""The ``blas`` target kind: matrix products and convolutions through OpenBLAS's ``cblas_sgemm``.

    art = plait.build(mod, "host: c; blas: blas", place="*=blas?")   # every call blas can run, on blas
    art = plait.build(mod, "host: c; blas: blas")                    # placement by cost (the cost hook)

The kind has no code generator of its own; it proves the ``relay_to_tir`` hook (docs/kind-blas.md):

- ``supports``: ``nn.dense``, ``nn.matmul`` (numpy semantics: 1-D operands, broadcast batch dims)
  and ``nn.conv2d`` with ``groups == 1`` (NCHW), float32, static non-empty shapes;
- ``relay_to_tir`` (through :func:`plait.lowering.hook_lowering.lower_regions`): each such call
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
from plait.target import TargetError
from plait.target.backend import Backend, option
from plait.tir import Allocate, Buffer, Evaluate, For, PrimFunc, Var, seq, simplify, substitute
from plait.tir.expr import FloatImm, IntImm
from plait.tir.op import address_of, call_extern

NEEDS = "target kind 'blas' needs scipy-openblas32: pip install 'plait[blas]'"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enum values
INT32_MAX = 2**31 - 1
OPS = ("nn.dense", "nn.matmul", "nn.conv2d")
INT_OPS = ("qnn.dense", "qnn.matmul", "qnn.conv2d")  # declined with a reason (no integer GEMM here)


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


def supports(call: Call, target: Any) -> bool | tuple[bool, str]:
    """The ``supports`` hook: float32 dense / matmul / conv2d (groups 1) of static, non-empty shapes;
    the integer products of quantized models are declined with the reason."""
    openblas()  # placing on blas without OpenBLAS: the clear message, now
    if call.op_name in INT_OPS:
        return False, (f"'{call.op_name}' is an 8-bit integer product: OpenBLAS's cblas_sgemm computes in "
                       "float32 only (run it on a 'c' piece)")
    return plan(call) is not None


# ---- cost ---------------------------------------------------------------------------------------

# OpenBLAS picks its kernels from the CPU's widest SIMD, so its single-thread speed is fitted per vector-width
# class of the host, each on one machine by ``python bench/blas_speed.py`` (a C loop calling OpenBLAS as the
# PrimFuncs do; least squares in log space of the best of several runs: the machine is shared, the best run
# is the unloaded one, the same best case the analytic estimates of other kinds describe), and kept in
# flops per cycle of that machine's effective clock (the one plait.target.host probes: boost included) so that the clock
# of the machine it runs on scales it.


@dataclass(frozen=True)
class SgemmFit:
    """OpenBLAS's speed on one vector-width class: ``cblas_sgemm``'s ``flops_per_cycle`` on large products
    and the ``half`` sizes (m, n, k) at which that dimension alone would halve it; ``cblas_sgemv``'s
    ``gemv_bytes_per_cycle`` (it streams the matrix); ``fma_bits``: the widest vector one FMA pipe of the
    measured machine takes in one pass (sgemm's speed scales with it); ``source``: the measurements."""

    flops_per_cycle: float
    half: tuple[float, float, float]
    gemv_bytes_per_cycle: float
    fma_bits: int
    source: str


SGEMM_FITS = {
    256: SgemmFit(80e3 / 2445, (2.0, 4.0, 4.0), 55e3 / 2445, 256,
                  "AMD EPYC Zen 3, 2445 MHz, AVX2 + FMA, OpenBLAS 0.3.34 (Haswell kernels): 78-86 GFLOP/s on "
                  "large products (256^3: 85.7), every sgemm shape within 11%; sgemv 1x512x512 in 21 us"),
    512: SgemmFit(113e3 / 3700, (0.5, 1.0, 1.0), 90e3 / 3700, 256,
                  "AMD EPYC Zen 4 with AVX-512 (avx512f; 512-bit FMAs in two 256-bit passes), 2596 MHz nominal, "
                  "3700 MHz effective (plait.target.host's probe), OpenBLAS of scipy-openblas32: 95-116 GFLOP/s from 32x64x64 to 256^3, every shape "
                  "from 16^3 up within 25%; sgemv (a dense layer's [n, k] weights) 1x256x512 in 5.4 us and 1x512x512 "
                  "in 11.9 us on a quiet machine (plait tune's timing: alternated, medians of 30; 7.5 us under load)"),
}
CALL_OVERHEAD_S = 0.1e-6  # one cblas call from a PrimFunc (8x8x8 sgemm: 0.04-0.14 us in all)
IM2COL_BYTES_PER_S = 50e9  # the im2col loop nest, 4 bytes read + 4 written per element (ResNet 3x3
# 64x56x56: 1.8M elements in 0.2-0.25 ms)


def sgemm_fit(target: Any = None) -> tuple[SgemmFit, float]:
    """The fit of ``target``'s vector-width class and the clock (MHz) to apply it at: the target's
    ``simd_bits``, ``fma_bits`` and ``clock_mhz`` facts (``blas -simd-bits=512 -clock-mhz=2445``), else this
    machine's (OpenBLAS runs on the host). A class without a fit takes the widest fitted class below it;
    sgemm's flops per cycle scale with the FMA pass width (:func:`plait.schedule.machine.fma_bits`: 128-bit
    SSE / NEON half the 256-bit class, full-width AVX-512 pipes twice the fitted Zen 4)."""
    from plait.schedule.machine import fact, fma_bits
    from plait.target.host import measure

    simd = fact(target, "simd_bits", None) if target is not None else None
    clock = fact(target, "clock_mhz", None) if target is not None else None
    if simd is None:
        simd = int(measure("simd_bits").value or 128)  # type: ignore[arg-type]
        fma = min(simd, int(measure("fma_bits").value or simd))  # type: ignore[arg-type]
    else:
        simd = int(simd)  # type: ignore[arg-type]
        fma = fma_bits(target, simd)
    clock = float(clock if clock is not None else measure("clock_mhz").value or 2000)  # type: ignore[arg-type]
    below = [b for b in SGEMM_FITS if b <= simd]
    f = SGEMM_FITS[simd] if simd in SGEMM_FITS else SGEMM_FITS[max(below) if below else min(SGEMM_FITS)]
    if fma == f.fma_bits:
        return f, clock
    return SgemmFit(f.flops_per_cycle * fma / f.fma_bits, f.half, f.gemv_bytes_per_cycle, fma,
                    f"{f.source} (scaled to {fma}-bit FMA passes)"), clock


def gemm_seconds(m: int, n: int, k: int, target: Any = None) -> float:
    """Estimated seconds of one single-thread ``[m, k] @ [k, n]`` product (no call overhead):
    ``cblas_sgemv`` (m or n = 1) is bound by streaming the matrix, ``cblas_sgemm`` by the FMA units,
    less efficient on small dimensions (:func:`sgemm_fit` of ``target``)."""
    fit, clock = sgemm_fit(target)
    if m == 1 or n == 1:
        return 4.0 * (m * k + k * n + m * n) / (fit.gemv_bytes_per_cycle * clock * 1e6)
    eff = 1.0
    for size, half in zip((m, n, k), fit.half):
        eff *= size / (size + half)
    return 2.0 * m * n * k / (fit.flops_per_cycle * clock * 1e6 * eff)


def cost(call: Call, target: Any) -> float | None:
    """The ``cost`` hook: estimated seconds of ``call`` on blas (None for calls it cannot run)."""
    p = plan(call)
    if p is None:
        return None
    per = gemm_seconds(p.m, p.n, p.k, target) + CALL_OVERHEAD_S + p.im2col * 8.0 / IM2COL_BYTES_PER_S
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


def _valid(n_out: int, start: int, stride: int, n_in: int) -> tuple[int, int]:
    """The outputs ``o`` in ``[lo, hi)`` whose input ``o * stride + start`` lies in ``[0, n_in)``."""
    lo = min(max(-(start // stride), 0), n_out)  # ceil(-start / stride)
    hi = min(max(-((start - n_in) // stride), lo), n_out)  # ceil((n_in - start) / stride)
    return lo, hi


def _row(y: Var, cols: tuple[int, int], store: Any) -> Any:
    """``for z in [c0, c1): store(y, z)``, or None when empty."""
    c0, c1 = cols
    if c1 <= c0:
        return None
    z = Var("z")
    return For(z, c0, c1 - c0, "serial", store(y, z))


def _block(rows: tuple[int, int], cols: tuple[int, int], store: Any) -> Any:
    r0, r1 = rows
    if r1 <= r0 or cols[1] <= cols[0]:
        return None
    y = Var("y")
    return For(y, r0, r1 - r0, "serial", _row(y, cols, store))


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
        return For(n, 0, nb, "serial", gemm) if nb > 1 else substitute(gemm, {n: IntImm(0)})
    # im2col: col[c, i, j, y, z] = x[n, c, y * s0 + i * d0 - pad_top, z * s1 + j * d1 - pad_left], 0 in
    # the padding; per kernel tap (i, j) the rows / columns that read padding are loops of their own
    col = Buffer("col", (c, kh, kw, oh, ow), "float32", "global.workspace")
    ci = Var("c")
    taps = []
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0] - pad[0], j * d[1] - pad[1]  # input row / column of output (0, 0)
            (lo_h, hi_h), (lo_w, hi_w) = _valid(oh, h0, s[0], h), _valid(ow, w0, s[1], wd)

            def zero(y: Any, z: Any, i: int = i, j: int = j) -> Any:
                return col.store((ci, i, j, y, z), FloatImm(0.0))

            def copy(y: Any, z: Any, i: int = i, j: int = j, h0: int = h0, w0: int = w0) -> Any:
                return col.store((ci, i, j, y, z), x[n, ci, y * s[0] + h0, z * s[1] + w0])

            y = Var("y")
            middle = None
            if hi_h > lo_h:
                middle = For(y, lo_h, hi_h - lo_h, "serial",
                             seq(_row(y, (0, lo_w), zero), _row(y, (lo_w, hi_w), copy), _row(y, (hi_w, ow), zero)))
            taps += [_block((0, lo_h), (0, ow), zero), middle, _block((hi_h, oh), (0, ow), zero)]
    fill = For(ci, 0, c, "serial", seq(*taps))
    gemm = em.product(False, o, pp, kk, address_of(w), kk, address_of(col), pp, address_of(out, n, 0, 0, 0), pp)
    return Allocate(col, For(n, 0, nb, "serial", seq(fill, gemm)))


_LOWER = {"nn.dense": _dense, "nn.matmul": _matmul, "nn.conv2d": _conv2d}


def lower_call(call: Call, target: Any) -> PrimFunc | None:
    """The PrimFunc of one supported call for ``target`` (None: not supported, default lowering)."""
    from plait.lowering.hook_lowering import call_buffers

    if plan(call) is None:
        return None
    em = _Emitter(target)
    ins, (out,) = call_buffers(call)
    body = _LOWER[call.op_name](em, call, ins, out)
    name = "sgemm_" + call.op_name.split(".")[-1]
    return simplify(PrimFunc((*ins, out), seq(*em.prologue(), body), {"global_symbol": name}))


def relay_to_tir(mod: Any, target: Any) -> Any:
    """The ``relay_to_tir`` hook: every region function of the blas piece, through :func:`lower_call`."""
    from plait.lowering.hook_lowering import lower_regions

    openblas()
    return lower_regions(mod, target, lambda call: lower_call(call, target))


# ---- measuring the library (where the cost constants come from) --------------------------------

_TIMER = r"""
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
extern void PREFIXcblas_sgemm(int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, float, void*, int32_t,
                              void*, int32_t, float, void*, int32_t);
extern void PREFIXcblas_sgemv(int32_t, int32_t, int32_t, int32_t, float, void*, int32_t, void*, int32_t, float,
                              void*, int32_t);
extern void PREFIXopenblas_set_num_threads(int32_t);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void product(int32_t m, int32_t n, int32_t k, float* a, float* b, float* c) {
  if (m == 1) PREFIXcblas_sgemv(101, 112, k, n, 1.0f, b, n, a, 1, 0.0f, c, 1);
  else if (n == 1) PREFIXcblas_sgemv(101, 111, m, k, 1.0f, a, k, b, 1, 0.0f, c, 1);
  else PREFIXcblas_sgemm(101, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
/* best over `trials` of the mean time of `reps` calls, in seconds */
double plait_blas_time(int32_t m, int32_t n, int32_t k, int32_t reps, int32_t trials) {
  float* a = malloc(sizeof(float) * (size_t)m * k);
  float* b = malloc(sizeof(float) * (size_t)k * n);
  float* c = malloc(sizeof(float) * (size_t)m * n);
  for (int64_t i = 0; i < (int64_t)m * k; ++i) a[i] = (float)(i % 7) * 0.01f;
  for (int64_t i = 0; i < (int64_t)k * n; ++i) b[i] = (float)(i % 5) * 0.01f;
  PREFIXopenblas_set_num_threads(1);
  product(m, n, k, a, b, c);
  double best = 1e30;
  for (int32_t t = 0; t < trials; ++t) {
    double t0 = now();
    for (int32_t r = 0; r < reps; ++r) product(m, n, k, a, b, c);
    double dt = (now() - t0) / reps;
    if (dt < best) best = dt;
  }
  free(a); free(b); free(c);
  return best;
}
"""


def measure(shapes: Any, seconds_per_shape: float = 0.05, trials: int = 5) -> list[float]:
    """Seconds of one single-thread product ``[m, k] @ [k, n]`` for each ``(m, n, k)``, measured by a
    small C loop calling OpenBLAS the way the lowered PrimFuncs do (sgemv when m or n is 1): the best
    of ``trials`` means. What the constants of :func:`gemm_seconds` were fitted to."""
    from plait.runtime.cc import compile_source

    lib = openblas()
    path = compile_source(_TIMER.replace("PREFIX", lib.prefix), name="plait_blas_timer", flags=["-O2"],
                          link_flags=lib.link_flags)
    timer = ctypes.CDLL(str(path)).plait_blas_time
    timer.restype = ctypes.c_double
    timer.argtypes = [ctypes.c_int32] * 5
    out = []
    for m, n, k in shapes:
        guess = gemm_seconds(m, n, k) + CALL_OVERHEAD_S
        reps = max(1, min(100000, int(seconds_per_shape / trials / guess)))
        out.append(float(timer(m, n, k, reps, trials)))
    return out


SHAPES = [(8, 8, 8), (16, 16, 16), (32, 32, 16), (32, 16, 32), (32, 64, 64), (32, 256, 64), (32, 64, 256),
          (64, 125, 40), (64, 125, 64), (64, 64, 64), (128, 128, 128), (64, 784, 576), (64, 3136, 576),
          (256, 256, 256), (1, 512, 256), (1, 512, 512), (1, 10, 512), (1, 12, 64), (1, 64, 64), (64, 1, 64),
          (1, 1024, 1024)]


def main() -> None:
    """``python bench/blas_speed.py``: measured vs modelled seconds for :data:`SHAPES`."""
    print(f"OpenBLAS {openblas().path}, one thread")
    print(f"{'m':>5s} {'n':>5s} {'k':>5s} {'measured us':>12s} {'model us':>10s} {'GFLOP/s':>8s} {'model/meas':>10s}")
    for (m, n, k), t in zip(SHAPES, measure(SHAPES)):
        est = gemm_seconds(m, n, k) + CALL_OVERHEAD_S  # this machine's class
        print(f"{m:5d} {n:5d} {k:5d} {t * 1e6:12.2f} {est * 1e6:10.2f} {2 * m * n * k / t * 1e-9:8.1f} {est / t:10.2f}")


# ---- build --------------------------------------------------------------------------------------


def build(mod: Any, target: Any, ctx: Any = None) -> Any:
    """The blas kind's code generation: the PrimFuncs of ``mod`` (name order) through the c backend's
    host C path, linked against OpenBLAS."""
    from plait.backends.c.backend import build_c, prim_funcs

    lib = openblas()
    config = getattr(ctx, "config", None) or {}
    return build_c(prim_funcs(mod), target, cache_dir=config.get("cc.cache_dir"), name="blas",
                   link_flags=lib.link_flags)


@dataclass(frozen=True)
class BlasOptions:
    """Options of the ``blas`` kind."""

    threads: int = option(1, "OpenBLAS threads (openblas_set_num_threads); 0: OpenBLAS's default")


class BlasBackend(Backend):
    """OpenBLAS sgemm for dense/matmul/conv2d (``relay_to_tir``), the rest by default lowering."""

    name = "blas"
    Options = BlasOptions
    device_type = "cpu"
    can_host = False
    doc = ("matrix products and convolutions through OpenBLAS cblas_sgemm (scipy-openblas32), on the host CPU; "
           "needs a host piece (e.g. 'host: c; blas: blas')")
    default_keys = ("cpu",)

    def normalize(self, options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        if options["threads"] < 0:
            raise TargetError(f"target kind 'blas': -threads must be >= 0 (0: OpenBLAS's default), "
                              f"got {options['threads']}")
        return options, []

    def supports(self, call: Any, target: Any) -> bool | tuple[bool, str]:
        return supports(call, target)

    def cost(self, call: Any, target: Any) -> float | None:
        return cost(call, target)

    def relay_to_tir(self, mod: Any, target: Any) -> Any:
        return relay_to_tir(mod, target)

    def tir_to_runtime(self, mod: Any, target: Any, ctx: Any) -> Any:
        return build(mod, target, ctx)


__all__ = ["BlasBackend", "BlasError", "NEEDS", "OpenBLAS", "Plan", "build", "cost", "gemm_seconds", "lower_call",
           "openblas", "plan", "relay_to_tir", "supports"]
