"""Every kernel the C backend implements (plait/backends/c/kernels.py) computes its declaration's reference
(plait/tir/kernels.py): a PrimFunc calling the kernel on random arguments is built by the C backend (the
kernel's source in the file's head) and run, and the same PrimFunc is run by the TIR interpreter (which
runs the reference); the results are equal. Each ISA body of a kernel is checked where this machine can
run it (AVX2 and AVX-512 VNNI by the CPU's flags, else skipped with the reason; the DSP bodies run on Arm
cores only: tests/embedded/test_dsp_dot.py runs them under QEMU), and every kernel's portable C body
everywhere. Integer results never depend on the body."""

from __future__ import annotations

import platform
import zlib

import numpy as np
import pytest

from plait.backends.c.kernels import FEATURES  # noqa: F401 - registers the C backend's implementations
from plait.target.host import cpu_has
from plait.tir.expr import IntImm
from plait.tir.kernels import call_kernel, get_kernel, implementations
from plait.tir.op import address_of
from plait.tir.stmt import Buffer, BufferStore, Evaluate, PrimFunc

from .conftest import assert_same, run_c, run_ref

X86 = platform.machine().lower() in ("x86_64", "amd64")

BODIES = {
    "portable": ("c -march=x86-64" if X86 else "c", None),
    "avx2": ("c -march=x86-64-v3", ("avx2",)),
    "avx512vnni": ("c -march=icelake-server", ("avx512f", "avx512_vnni")),
}
"""ISA body -> (the target whose C takes it, the CPU flags running it needs)."""

_DOT_N = 21  # (two blocks of 8 and a tail)


def _scalars(name: str, rng: np.random.Generator) -> dict[str, int]:
    """The scalar arguments of each kernel's case (shapes with partial blocks and tails)."""
    if name == "q8_outer":
        return dict(n=1, p=7, c=8, o=32)
    if name == "q8_conv":
        return dict(n=1, hp=6, wp=7, cp=8, oh=4, ow=3, o=20, kh=3, kw=2, sh=1, sw=2, dh=1, dw=2)
    if name == "dw16":
        return dict(n=1, hp=6, wpc=7 * 20, c=20, oh=4, ow=3, kh=3, kw=3, sh=1, sw=2, dh=1, dw=1)
    if name == "dw2_s16":
        return dict(kh=3, kw=3, xr=30, xc=6, wr=12, wc=4)
    a, b = name.split("_", 1)[1].split("_")
    zs = {}
    for key, t in (("za", a), ("zb", b)):
        lo, hi = (0, 255) if t.startswith("u8") else (-128, 127)
        zs[key] = int(rng.integers(lo, hi + 1)) if t.endswith("z") else 0
    return dict(n=_DOT_N, **zs)


def _size(name: str, param: str, s: dict[str, int]) -> int:
    """The elements of pointer ``param`` the kernel reads or writes."""
    if name == "q8_outer":
        return {"x": s["n"] * s["p"] * s["c"], "w": s["o"] * s["c"], "sums": s["n"] * s["o"] * s["p"]}[param]
    if name == "q8_conv":
        nb = -(-s["o"] // 16)
        return {"x": s["n"] * s["hp"] * s["wp"] * s["cp"], "w": nb * s["kh"] * s["kw"] * s["cp"] * 16,
                "sums": s["n"] * s["oh"] * s["ow"] * s["o"]}[param]
    if name == "dw16":
        return {"x": s["n"] * s["hp"] * s["wpc"], "w": s["kh"] * s["kw"] * s["c"],
                "sums": s["n"] * s["oh"] * s["ow"] * s["c"]}[param]
    if name == "dw2_s16":
        return {"x": (s["kh"] - 1) * s["xr"] + (s["kw"] - 1) * s["xc"] + 2,
                "w": (s["kh"] - 1) * s["wr"] + (s["kw"] - 1) * s["wc"] + 2, "out": 2}[param]
    return 2 if param == "out" else _DOT_N


def _random(dtype: str, size: int, rng: np.random.Generator) -> np.ndarray:
    if dtype in ("int16", "int32"):  # (int16 operands are zero-point-adjusted 8-bit values: within +-255)
        return rng.integers(-255, 256, size).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size).astype(dtype)


def _case(name: str, seed: int):
    """(a PrimFunc calling kernel ``name`` once, its arguments): its pointers are the PrimFunc's buffers
    (inputs first, then the ones it writes; an int32 result is stored to ``r[0]``), its scalars constants."""
    k = get_kernel(name)
    rng = np.random.default_rng(seed)
    s = _scalars(name, rng)
    bufs = {p.name: Buffer(p.name, (IntImm(_size(name, p.name, s)),), p.dtype) for p in k.params if p.pointer}
    args = [address_of(bufs[p.name]) if p.pointer else IntImm(s[p.name], p.dtype) for p in k.params]
    c = call_kernel(name, *args)
    params = [bufs[p.name] for p in k.params if p.pointer and not p.writes] + \
             [bufs[p.name] for p in k.params if p.pointer and p.writes]
    if k.result == "void":
        body = Evaluate(c)
    else:
        r = Buffer("r", (IntImm(1),), k.result)
        params.append(r)
        body = BufferStore(r, c, (IntImm(0),))
    func = PrimFunc(tuple(params), body).with_attrs({"global_symbol": f"run_{name}", "num_inputs": len(params) - 1})
    values = [_random(b.dtype, int(b.shape[0].value), rng) for b in params]
    return func, values


# (the DSP bodies are Arm code: tests/embedded/test_dsp_dot.py runs them under QEMU against the same
# references' callers; here every kernel's portable body and the x86-64 bodies)
CASES = [(impl.kernel, body) for impl in implementations("c") for body in ("portable", *impl.features) if body != "dsp"]


def test_every_kernel_has_a_case_and_every_declared_kernel_an_implementation():
    names = {impl.kernel for impl in implementations("c")}
    assert {"q8_outer", "q8_conv", "dw16", "dw2_s16", "dot_u8_s8", "dot2_s16_s16"} <= names
    for name in names:
        _case(name, 0)


@pytest.mark.parametrize("name,body", CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_the_c_implementation_computes_the_reference(name, body, cache_dir):
    if body != "portable" and not X86:
        pytest.skip(f"the {body} body is x86-64 code")
    target, needs = BODIES[body]
    func, values = _case(name, zlib.crc32(name.encode()))
    want = run_ref(func, values)
    missing = [f for f in needs or () if not cpu_has(f)]
    if missing:
        pytest.skip(f"this CPU has no {', '.join(missing)} to run the {body} body")
    (got,) = run_c([func], [values], cache_dir, target=target)
    assert_same(got, want)
