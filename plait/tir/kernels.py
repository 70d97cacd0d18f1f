"""Kernels: hand-written routines a schedule calls by an abstract name, declared with the computation
they implement; the backends that ship an implementation register it.

A :class:`Kernel` is the interface: its name (``"q8_conv"``, ``"dot_u8_s8"``...), its parameters
(pointers to elements of a dtype, and int32 scalars), its result, which pointers it writes through,
and its **reference**: a numpy function over the arguments as the TIR interpreter passes them (a
pointer as the flat view of its buffer from that element on, a scalar as a numpy scalar), so that
:func:`plait.tir.evaluate` runs a scheduled function that calls a kernel and tests check an
implementation against it. A :class:`KernelImpl` is one backend's implementation: the backend kind
(``"c"``), its function's name there, its source and the instruction sets it has bodies for (each
source also has a portable body computing the same numbers). :data:`KERNELS` and
:data:`IMPLEMENTATIONS` are :class:`plait.registry.Registry` tables; a backend registers its
implementations with :func:`implement` when its kernel module is imported (the c kind's:
:mod:`plait.backends.c.kernels`).

In TIR a kernel call is ``Call(kind="kernel")`` naming the abstract kernel (:func:`call_kernel`; printed
``call_kernel(void, "q8_conv", ...)``): schedules and operators never name a backend's function. A code
generator asks :func:`implementation` for its own one; a kernel it has none for is a
:class:`plait.tir.errors.KernelError` naming the kernel, the backend and the backends that have one.

Why here: the interface belongs to the IR, below ``plait/te``, ``plait/op`` and ``plait/schedule`` (which
ask for kernels) and beside the interpreter and the verifier (which run and check the calls), as the math
intrinsics of :mod:`plait.tir.intrin` are; the backends sit far above and register implementations.
The in-tree kernels are declared at the end of this module (int8 convolutions' sums and the integer dot
products of the C backend's AVX2/VNNI and SMLAD kernels); a plugin declares its own with :func:`declare`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.errors import RegistryError
from plait.registry import Registry
from plait.tir.errors import KernelError
from plait.tir.expr import AddressOf, Call, PrimExpr, const

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class KernelParam:
    """One parameter: a pointer to ``dtype`` elements (``pointer``; ``writes`` when the kernel may store
    through it, else it only reads) or a scalar of ``dtype``."""

    name: str
    dtype: str
    pointer: bool = False
    writes: bool = False


@dataclass(frozen=True)
class Kernel:
    """An abstract kernel: ``name``, ``params``, ``result`` (``"void"`` or a scalar dtype), ``reference``
    (numpy: ``reference(*args)`` writes through the pointer views it writes and returns the result, or
    None for ``void``) and ``doc`` (what it computes, one sentence)."""

    name: str
    params: tuple[KernelParam, ...]
    result: str
    reference: Callable[..., Any]
    doc: str = ""

    @property
    def writes(self) -> tuple[int, ...]:
        """The positions of the pointer parameters the kernel writes through."""
        return tuple(k for k, p in enumerate(self.params) if p.pointer and p.writes)

    def signature(self) -> str:
        """``void q8_outer(uint8* x, int8* w, int32* sums, int32 n, ...)`` (messages, docs)."""
        ps = ", ".join(f"{p.dtype}* {p.name}" if p.pointer else f"{p.dtype} {p.name}" for p in self.params)
        return f"{self.result} {self.name}({ps})"

    def check(self, args: tuple[PrimExpr, ...], result: str) -> None:
        """Raise a :class:`KernelError` unless ``args`` (and the call's dtype ``result``) fit the
        parameters: an address of a buffer of the parameter's dtype for a pointer, a value of its dtype
        for a scalar."""
        where = f"kernel '{self.name}' ({self.signature()})"
        if result != self.result:
            raise KernelError(f"{where} returns {self.result}, called as returning {result}")
        if len(args) != len(self.params):
            raise KernelError(f"{where} takes {len(self.params)} argument(s), got {len(args)}")
        for p, a in zip(self.params, args):
            if p.pointer:
                if not isinstance(a, AddressOf) or a.buffer.dtype != p.dtype:
                    got = f"the address of a {a.buffer.dtype} buffer" if isinstance(a, AddressOf) else a.dtype
                    raise KernelError(f"{where}: '{p.name}' needs the address of a {p.dtype} buffer, got {got}")
            elif a.dtype != p.dtype:
                raise KernelError(f"{where}: '{p.name}' needs a {p.dtype} value, got {a.dtype}")


@dataclass(frozen=True)
class KernelImpl:
    """A backend's implementation of kernel ``kernel``: the backend kind, ``symbol`` (its function's
    name in that backend's code), ``source`` (its text, which the backend puts in the code that calls
    it) and ``features`` (the instruction-set bodies the source chooses at compile time, e.g.
    ``("avx512vnni", "avx2")``; every source also has a portable body computing the same numbers)."""

    kernel: str
    backend: str
    symbol: str
    source: str
    features: tuple[str, ...] = ()


KERNELS: Registry[Kernel] = Registry("kernel")
"""Abstract kernel name -> :class:`Kernel`."""

IMPLEMENTATIONS: Registry[KernelImpl] = Registry("kernel implementation")
"""``"<backend>:<kernel>"`` -> :class:`KernelImpl`."""


def declare(kernel: Kernel) -> Kernel:
    """Register an abstract kernel (a duplicate name raises)."""
    if not _IDENT.fullmatch(kernel.name):
        raise KernelError(f"kernel name {kernel.name!r} is not an identifier")
    return KERNELS.register(kernel.name, kernel)


def get_kernel(name: str) -> Kernel:
    """The declared kernel ``name``; a :class:`KernelError` (with "did you mean") for another name."""
    try:
        return KERNELS.get(name)
    except RegistryError as exc:
        raise KernelError(str(exc)) from None


def implement(impl: KernelImpl) -> KernelImpl:
    """Register a backend's implementation of a declared kernel (one per backend and kernel)."""
    get_kernel(impl.kernel)
    if not _IDENT.fullmatch(impl.symbol):
        raise KernelError(f"the {impl.backend} implementation of kernel '{impl.kernel}': {impl.symbol!r} "
                          "is not an identifier")
    return IMPLEMENTATIONS.register(f"{impl.backend}:{impl.kernel}", impl)


def implementations(backend: str) -> list[KernelImpl]:
    """Every implementation the ``backend`` kind has registered, by kernel name."""
    return [impl for _, impl in IMPLEMENTATIONS.items() if impl.backend == backend]


def implementation(kernel: str, backend: str) -> KernelImpl:
    """``backend``'s implementation of ``kernel``; a :class:`KernelError` when it has none, naming the
    loaded backends that have one."""
    get_kernel(kernel)
    key = f"{backend}:{kernel}"
    if key in IMPLEMENTATIONS:
        return IMPLEMENTATIONS.get(key)
    others = sorted(impl.backend for _, impl in IMPLEMENTATIONS.items() if impl.kernel == kernel)
    where = f"implemented by: {', '.join(others)}" if others else "no loaded backend implements it"
    raise KernelError(f"the {backend} backend has no implementation of kernel '{kernel}' ({where})")


def call_kernel(name: str, *args: Any) -> PrimExpr:
    """A call of the declared kernel ``name`` (its result dtype); pointers are passed with
    :func:`plait.tir.op.address_of`, Python ints become int32 immediates."""
    k = get_kernel(name)
    xs = tuple(const(a, "int32") if isinstance(a, int) else const(a) for a in args)
    k.check(xs, k.result)
    return Call(k.result, name, xs, "kernel")


def written_args(call: Call) -> tuple[int, ...] | None:
    """The argument positions a kernel call writes through (its declaration's); None for any other call
    (every address passed to an extern function may be written)."""
    if call.kind != "kernel" or call.name not in KERNELS:
        return None
    return KERNELS.get(call.name).writes


def run_reference(name: str, dtype: str, *args: Any) -> Any:
    """Kernel ``name``'s reference on interpreter values (the TIR interpreter's kernel calls)."""
    out = get_kernel(name).reference(*args)
    return None if dtype == "void" else out


# ---- the in-tree kernels --------------------------------------------------------------------------

def _ptr(name: str, dtype: str, writes: bool = False) -> KernelParam:
    return KernelParam(name, dtype, pointer=True, writes=writes)


def _ints(*names: str) -> tuple[KernelParam, ...]:
    return tuple(KernelParam(n, "int32") for n in names)


def _wrap(v: Any) -> Any:
    """int64 sums as C's int32 arithmetic gives them (modulo 2**32)."""
    return np.asarray(v, np.int64).astype(np.int32)


def _i64(view: np.ndarray, size: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(view[:size], np.int64).reshape(shape)


def _q8_outer(x, w, sums, n, p, c, o) -> None:  # type: ignore[no-untyped-def]
    n, p, c, o = (int(v) for v in (n, p, c, o))
    xs = _i64(x, n * p * c, (n, p, c))
    ws = _i64(w, o * c, (o // 16, c // 4, 16, 4)).transpose(0, 2, 1, 3).reshape(o, c)
    sums[:n * o * p] = _wrap(np.einsum("npc,oc->nop", xs, ws)).reshape(-1)


def _q8_conv(x, w, sums, n, hp, wp, cp, oh, ow, o, kh, kw, sh, sw, dh, dw) -> None:  # type: ignore[no-untyped-def]
    n, hp, wp, cp, oh, ow, o, kh, kw, sh, sw, dh, dw = (int(v) for v in (n, hp, wp, cp, oh, ow, o, kh, kw, sh, sw,
                                                                         dh, dw))
    nb = -(-o // 16)
    xs = _i64(x, n * hp * wp * cp, (n, hp, wp, cp))
    ws = _i64(w, nb * kh * kw * cp * 16, (nb, kh, kw, cp // 4, 16, 4)).transpose(0, 4, 1, 2, 3, 5)
    ws = ws.reshape(nb * 16, kh, kw, cp)[:o]
    acc = np.zeros((n, oh, ow, o), np.int64)
    for ry in range(kh):
        for rx in range(kw):
            win = xs[:, ry * dh:ry * dh + (oh - 1) * sh + 1:sh, rx * dw:rx * dw + (ow - 1) * sw + 1:sw, :]
            acc += np.einsum("nyxc,oc->nyxo", win, ws[:, ry, rx, :])
    sums[:acc.size] = _wrap(acc).reshape(-1)


def _dw16(x, w, sums, n, hp, wpc, c, oh, ow, kh, kw, sh, sw, dh, dw) -> None:  # type: ignore[no-untyped-def]
    n, hp, wpc, c, oh, ow, kh, kw, sh, sw, dh, dw = (int(v) for v in (n, hp, wpc, c, oh, ow, kh, kw, sh, sw, dh, dw))
    xs = _i64(x, n * hp * wpc, (n, hp, wpc // c, c))
    ws = _i64(w, kh * kw * c, (kh, kw, c))
    acc = np.zeros((n, oh, ow, c), np.int64)
    for ry in range(kh):
        for rx in range(kw):
            acc += xs[:, ry * dh:ry * dh + (oh - 1) * sh + 1:sh, rx * dw:rx * dw + (ow - 1) * sw + 1:sw, :] * ws[ry, rx]
    sums[:acc.size] = _wrap(acc).reshape(-1)


def _dot(a, b, n, za, zb) -> Any:  # type: ignore[no-untyped-def]
    n = int(n)
    return np.int32(_wrap(np.sum((_i64(a, n, (n,)) - int(za)) * (_i64(b, n, (n,)) - int(zb)))))


def _dot2(a, b0, b1, n, za, zb, out) -> None:  # type: ignore[no-untyped-def]
    out[:2] = _wrap([int(out[0]) + int(_dot(a, b0, n, za, zb)), int(out[1]) + int(_dot(a, b1, n, za, zb))])


def _dw2(x, w, out, kh, kw, xr, xc, wr, wc) -> None:  # type: ignore[no-untyped-def]
    s = [0, 0]
    for ry in range(int(kh)):
        for rx in range(int(kw)):
            xo, wo = ry * int(xr) + rx * int(xc), ry * int(wr) + rx * int(wc)
            for k in (0, 1):
                s[k] += int(x[xo + k]) * int(w[wo + k])
    out[:2] = _wrap(s)


DOT_TYPES = {"u8": "uint8", "s8": "int8", "s16": "int16"}
"""The short operand type names of the dot-product kernels' names -> dtypes."""


def dot_kernel_name(a: str, za: bool, b: str, zb: bool, pair: bool = False) -> str:
    """The dot-product kernel of operands of short types ``a``, ``b`` (:data:`DOT_TYPES`), with zero
    points or not: ``dot_<a>[z]_<b>[z]``; ``dot2_...`` for the paired one (one run against two)."""
    return f"dot{'2' if pair else ''}_{a}{'z' if za else ''}_{b}{'z' if zb else ''}"


DOT_KINDS = tuple([("s16", False, "s16", False)] + [(a, za, b, zb) for a in ("u8", "s8") for b in ("u8", "s8")
                                                    for za in (False, True) for zb in (False, True)])
"""The operand kinds (a, za, b, zb) the dot products exist for: int16 pairs without zero points, every
pair of 8-bit types with and without zero points."""


def _declare_builtins() -> None:
    declare(Kernel("q8_outer", (_ptr("x", "uint8"), _ptr("w", "int8"), _ptr("sums", "int32", True),
                                *_ints("n", "p", "c", "o")), "void", _q8_outer,
                   "The int32 sums [n, o, p] of a 1x1 convolution: x uint8 [n, p, c] (pixels channels-last), "
                   "w int8 [o/16, c/4, 16, 4]."))
    declare(Kernel("q8_conv", (_ptr("x", "uint8"), _ptr("w", "int8"), _ptr("sums", "int32", True),
                               *_ints("n", "hp", "wp", "cp", "oh", "ow", "o", "kh", "kw", "sh", "sw", "dh", "dw")),
                   "void", _q8_conv,
                   "The int32 sums [n, oh, ow, o] of a channels-last convolution: x uint8 [n, hp, wp, cp] (padded, "
                   "cp % 4 == 0), w int8 [ceil(o/16), kh * kw * cp / 4, 16, 4]; strides sh, sw, dilations dh, dw."))
    declare(Kernel("dw16", (_ptr("x", "int16"), _ptr("w", "int16"), _ptr("sums", "int32", True),
                            *_ints("n", "hp", "wpc", "c", "oh", "ow", "kh", "kw", "sh", "sw", "dh", "dw")),
                   "void", _dw16,
                   "The int32 sums [n, oh, ow, c] of a channels-last depthwise convolution: x int16 [n, hp, wpc] "
                   "(wpc: the padded width times c), w int16 [kh, kw * c]."))
    declare(Kernel("dw2_s16", (_ptr("x", "int16"), _ptr("w", "int16"), _ptr("out", "int32", True),
                               *_ints("kh", "kw", "xr", "xc", "wr", "wc")), "void", _dw2,
                   "Two adjacent channels of a depthwise convolution: out[k] = sum over ry < kh, rx < kw of "
                   "x[ry * xr + rx * xc + k] * w[ry * wr + rx * wc + k]."))
    for a, za, b, zb in DOT_KINDS:
        ta, tb = DOT_TYPES[a], DOT_TYPES[b]
        declare(Kernel(dot_kernel_name(a, za, b, zb), (_ptr("a", ta), _ptr("b", tb), *_ints("n", "za", "zb")),
                       "int32", _dot, "The sum over i < n of (a[i] - za) * (b[i] - zb) (za, zb 0 without 'z')."))
        declare(Kernel(dot_kernel_name(a, za, b, zb, pair=True),
                       (_ptr("a", ta), _ptr("b0", tb), _ptr("b1", tb), *_ints("n", "za", "zb"),
                        _ptr("out", "int32", True)), "void", _dot2,
                       "out[k] += the sum over i < n of (a[i] - za) * (bk[i] - zb), k = 0, 1."))


_declare_builtins()

__all__ = ["DOT_KINDS", "DOT_TYPES", "IMPLEMENTATIONS", "KERNELS", "Kernel", "KernelError", "KernelImpl",
           "KernelParam", "call_kernel", "declare", "dot_kernel_name", "get_kernel", "implement", "implementation",
           "implementations", "run_reference", "written_args"]
