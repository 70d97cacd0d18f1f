"""Kernels (plait/tir/kernels.py): the registry's errors, kernel calls in the text form and the verifier, and the
interpreter running a scheduled function that calls kernels (each kernel's numpy reference) with the numbers of
the same function unscheduled (the stage's loops). That each C implementation computes its reference:
tests/backends/test_c_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest

from plait.ir.attrs import Attrs
from plait.lowering.lower import lower_function
from plait.relay import IRModule, call, infer_type, var
from plait.relay.expr import Function
from plait.tir import evaluate, parse_prim_func, print_prim_func, verify
from plait.tir.errors import KernelError, TIRVerifyError
from plait.tir.expr import Call, IntImm
from plait.tir.functor import pre_order
from plait.tir.kernels import KERNELS, Kernel, KernelImpl, call_kernel, get_kernel, implement, implementation
from plait.tir.op import address_of
from plait.tir.stmt import Buffer, BufferStore, PrimFunc


def _dot_func() -> PrimFunc:
    a, b, r = Buffer("a", (IntImm(8),), "uint8"), Buffer("b", (IntImm(8),), "int8"), Buffer("r", (IntImm(1),), "int32")
    c = call_kernel("dot_u8z_s8", address_of(a), address_of(b), 8, 3, 0)
    return PrimFunc((a, b, r), BufferStore(r, c, (IntImm(0),))).with_attrs({"global_symbol": "d", "num_inputs": 2})


def test_a_kernel_call_prints_parses_verifies_and_runs_its_reference():
    func = _dot_func()
    text = print_prim_func(func)
    assert 'call_kernel(int32, "dot_u8z_s8", address_of(a[0]), address_of(b[0]), 8i32, 3i32, 0i32)' in text
    assert print_prim_func(parse_prim_func(text)) == text
    a, b, r = np.arange(8, dtype=np.uint8), np.arange(-4, 4, dtype=np.int8), np.zeros(1, np.int32)
    evaluate(func, a, b, r)
    assert r[0] == int(((a.astype(int) - 3) * b).sum())


def test_kernel_errors_name_the_kernel():
    with pytest.raises(KernelError, match="unknown kernel 'q8_conf'; did you mean 'q8_conv'"):
        get_kernel("q8_conf")
    a = Buffer("a", (IntImm(8),), "int8")
    with pytest.raises(KernelError, match=r"'a' needs the address of a uint8 buffer, got the address of a int8"):
        call_kernel("dot_u8_s8", address_of(a), address_of(a), 8, 0, 0)
    with pytest.raises(KernelError, match="takes 5 argument"):
        call_kernel("dot_s8_s8", address_of(a), address_of(a), 8)
    with pytest.raises(KernelError, match="the llvm backend has no implementation of kernel 'q8_conv'"):
        implementation("q8_conv", "llvm")
    with pytest.raises(KernelError, match="unknown kernel 'nope'"):
        implement(KernelImpl("nope", "c", "plait_nope", ""))
    bad = Call("int32", "dot_s8_s8", (address_of(a), address_of(a)), "kernel")  # (built without the check)
    r = Buffer("r", (IntImm(1),), "int32")
    with pytest.raises(TIRVerifyError, match="takes 5 argument"):
        verify(PrimFunc((a, r), BufferStore(r, bad, (IntImm(0),))))


def test_a_kernel_no_loaded_backend_implements_is_a_clear_error():
    snap = KERNELS.snapshot()
    try:
        from plait.tir.kernels import declare

        declare(Kernel("toy", (), "void", lambda: None))
        with pytest.raises(KernelError, match=r"kernel 'toy' \(no loaded backend implements it\)"):
            implementation("toy", "c")
    finally:
        KERNELS.restore(snap)


def test_llvm_cannot_call_the_c_kernels():
    import plait.backends.c.kernels  # noqa: F401 - the C backend's implementations
    from plait.backends.llvm.backend import codegen_llvm
    from plait.backends.llvm.emit import LLVMCodegenError

    with pytest.raises(LLVMCodegenError, match="no implementation of kernel 'dot_u8z_s8' .implemented by: c"):
        codegen_llvm([_dot_func()], "llvm")


def _primitive(*params, body):
    return infer_type(IRModule.from_expr(Function(params, body, None, Attrs({"Primitive": 1, "name": "q"}))))["main"]


def _conv(c: int, o: int, groups: int = 1, layout: str = "NCHW", k: int = 3, pad: int = 1):
    shape = (1, c, 6, 5) if layout == "NCHW" else (1, 6, 5, c)
    x, w = var("x", shape, "int8"), var("w", (o, c // groups, k, k), "int8")
    return _primitive(x, w, body=call("qnn.conv2d", x, w, input_zero_point=-3, groups=groups,
                                      padding=(pad,) * 4, data_layout=layout))


CASES = {
    "dot2 (Cortex-M4)": ("c -mcpu=cortex-m4f", lambda: _conv(64, 16, k=1, pad=0), "dot2_"),
    "dw2_s16 (Cortex-M4)": ("c -mcpu=cortex-m4f", lambda: _conv(64, 64, 64), "dw2_s16"),
    "q8_conv (AVX2)": ("c -march=x86-64-v3 -simd-bits=256 -int8-dot=none", lambda: _conv(8, 20, layout="NHWC"),
                       "q8_conv"),
    "dw16 (AVX2)": ("c -march=x86-64-v3 -simd-bits=256 -int8-dot=none", lambda: _conv(32, 32, 32, "NHWC"), "dw16"),
    "q8_outer (VNNI)": ("c -simd-bits=512 -int8-dot=vnni", lambda: _conv(64, 32, k=1, pad=0), "q8_outer"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_interpreter_checks_a_scheduled_function_that_calls_a_kernel(case):
    target, make, kernel = CASES[case]
    fn = make()
    func = lower_function(fn, "q", target)
    called = {n.name for n in pre_order(func.body) if isinstance(n, Call) and n.kind == "kernel"}
    assert any(k.startswith(kernel) for k in called), called
    loops = lower_function(fn, "q", target, schedule=False)
    rng = np.random.default_rng(0)
    ins = [rng.integers(-128, 128, tuple(int(d.value) for d in p.shape)).astype(p.dtype)
           for p in func.params[:len(fn.params)]]
    outs = []
    for f in (func, loops):
        rest = [np.zeros(tuple(int(d.value) for d in p.shape), p.dtype) for p in f.params[len(fn.params):]]
        evaluate(f, *ins, *rest)
        outs.append(rest[0])
    np.testing.assert_array_equal(outs[0], outs[1])
