"""TIR nodes: construction checks, Python operator sugar, identity semantics, PrimFunc in a Relay module."""

import dataclasses

import pytest

from plait import relay, tir
from plait.ir import FuncType, TensorType, TupleType
from plait.tir import (
    Add, Buffer, Call, Evaluate, FloatImm, For, IntImm, PrimFunc, SeqStmt, Var, seq,
)
from plait.tir.scalar import _INTRIN_IMPL

from .fixtures import matmul

x, y = Var("x", "int32"), Var("y")
f, b = Var("f", "float32"), Var("b", "bool")


def test_sugar_builds_checked_nodes_and_promotes_python_numbers():
    e = x * 2 + 1
    assert isinstance(e, tir.Add) and e.dtype == "int32" and e.b.dtype == "int32" and e.a.b.value == 2
    assert (1.5 - f).a.dtype == "float32" and (2 / f).dtype == "float32"
    assert isinstance(x // 3, tir.FloorDiv) and isinstance(x % 3, tir.FloorMod)
    assert isinstance(3 < x, tir.GT) and (x <= 3).dtype == "bool"
    assert isinstance(b & (x > 0), tir.And) and isinstance(b | b, tir.Or) and isinstance(~b, tir.Not)
    assert isinstance(b ^ b, tir.NE)
    assert isinstance(x & 7, tir.BitwiseAnd) and isinstance(~x, tir.BitwiseNot) and isinstance(1 << x, tir.ShiftLeft)
    assert str(-x) == "0i32 - x" and str(-f) == "f * -1.0"
    assert str(tir.max(x, 0) + tir.min(0, x)) == "max(x, 0i32) + min(0i32, x)"
    assert str(tir.cast("float32", x) + 0.5) == "cast(float32, x) + 0.5" and tir.cast("int32", x) is x
    assert str(tir.exp(f) + 4) == "exp(f) + 4.0" and tir.isnan(f).dtype == "bool"
    assert str(tir.all_(x > 0, x < 9, b)) == "x > 0i32 and x < 9i32 and b" and str(tir.any_()) == "False"
    assert tir.const(3).dtype == "int64" and tir.const(0.5).dtype == "float32" and tir.const(True).dtype == "bool"


@pytest.mark.parametrize("build,message", [
    (lambda: x + y, "'+': operand dtypes differ: int32 and int64 (insert a cast)"),
    (lambda: x + 1.5, "'+': cannot convert the Python float 1.5 to int32"),
    (lambda: x + 2 ** 40, "'+': 1099511627776 does not fit in int32 [-2147483648, 2147483647]"),
    (lambda: f // 2, "'//' needs integer operands, got float32; use floor(a / b) for floats"),
    (lambda: x / 2, "'/' needs float operands, got int32; '/' is true division: use // (floordiv) or truncdiv "
                    "for integers"),
    (lambda: b + 1, "'+': cannot convert the Python int 1 to bool"),
    (lambda: tir.select(x, 1, 2), "select: the condition must be bool, got int32"),
    (lambda: tir.exp(x), "intrinsic 'exp' needs float arguments, got int32"),
    (lambda: tir.pow(f), "intrinsic 'pow' takes 2 argument(s), got 1"),
    (lambda: tir.call_intrin("sigmoid", f), "unknown intrinsic 'sigmoid'"),
    (lambda: tir.call_intrin("expp", f), "unknown intrinsic 'expp'; did you mean 'exp' or 'exp2' or 'expm1'?"),
    (lambda: bool(x < 3), "a TIR expression has no Python truth value: LT(x < 3i32) (use tir.select / "
                          "tir.logical_and, or compare nodes with `is`)"),
    (lambda: tir.cast("int33", x), "cast: unsupported dtype 'int33' (expected one of bool, float16, float32, "
                                   "float64, int16, int32, int64, int8, uint16, uint32, uint64, uint8)"),
    (lambda: IntImm(300, "int8"), "IntImm: 300 does not fit in int8 [-128, 127]"),
    (lambda: IntImm(1.5), "IntImm: value must be an int, got 1.5"),
    (lambda: FloatImm(1e6, "float16"), "FloatImm: 1000000.0 overflows float16"),
    (lambda: Add(x, 1), "Add: operand b must be a PrimExpr, got 1"),
    (lambda: SeqStmt((Evaluate(0),)), "SeqStmt needs at least 2 statements, got 1; use tir.seq(...)"),
    (lambda: For(x, 0, 4, "spiral", Evaluate(0)),
     "For 'x': kind must be one of serial, parallel, vectorized, unrolled, got 'spiral'"),
    (lambda: Call("float32", "exp", (f,), "builtin"), "Call 'exp': kind must be one of intrin, extern, kernel, got 'builtin'"),
    (lambda: tir.let(Var("t", "int32"), y, lambda t: t), "let 't': the variable is int32 but the value is int64"),
    (lambda: tir.address_of(x), "address_of: expected a buffer load such as A[0, 0] or a Buffer, got Var(x)"),
])
def test_checked_construction_errors(build, message):
    with pytest.raises(tir.TIRError) as e:
        build()
    assert str(e.value) == message


def test_nodes_are_frozen_and_compared_by_identity():
    a, c = x + 1, x + 1
    assert a != c and a == a and len({a, c}) == 2 and tir.structural_equal(a, c)
    assert Var("i") != Var("i")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.a = y  # type: ignore[misc]
    r = dataclasses.replace(a, b=IntImm(2, "int32"))
    assert isinstance(r, tir.Add) and r.a is x and r.dtype == "int32"
    assert FloatImm(0.1).value == float(__import__("numpy").float32(0.1))


def test_seq_flattens_and_normalizes():
    s1, s2, s3 = Evaluate(1), Evaluate(2), Evaluate(3)
    assert tir.is_no_op(seq()) and seq(s1) is s1
    s = seq(s1, [s2, None, seq(s3, s1)])
    assert isinstance(s, SeqStmt) and s.stmts == (s1, s2, s3, s1)
    assert SeqStmt((SeqStmt((s1, s2)), s3)).stmts == (s1, s2, s3)


def test_buffer_sugar():
    A = Buffer("A", (4, 8))
    i = Var("i")
    load = A[i, 3]
    assert isinstance(load, tir.BufferLoad) and load.indices[1].dtype == "int64" and load.dtype == "float32"
    st = A.store((i, 0), 1)
    assert isinstance(st.value, FloatImm) and st.indices[1].value == 0
    assert A.static_shape == (4, 8) and Buffer("B", (Var("n"), 2)).static_shape is None
    assert tir.address_of(A).indices[0].value == 0


def test_prim_func_relay_type_and_attrs():
    mm = matmul(2, 3, 4)
    assert mm.relay_type == FuncType((TensorType((2, 4)), TensorType((4, 3))), TensorType((2, 3)))
    assert mm.name == "matmul"
    two = PrimFunc(mm.params, mm.body, {"num_inputs": 1})
    assert two.relay_type == FuncType((TensorType((2, 4)),), TupleType((TensorType((4, 3)), TensorType((2, 3)))))
    assert PrimFunc(mm.params, mm.body).relay_type is None  # no num_inputs
    n = Var("n")
    sym = PrimFunc((Buffer("A", (n,)), Buffer("B", (n,))), Evaluate(0), {"num_inputs": 1})
    assert sym.relay_type == FuncType((TensorType(("n",)),), TensorType(("n",)))
    g = mm.with_attrs(piece="m7")
    assert g.attrs["piece"] == "m7" and g.body is mm.body and mm.attrs.get("piece") == "c"
    assert mm.with_body(Evaluate(0)).params == mm.params


def test_prim_func_lives_in_a_relay_module_and_types_calls():
    mm = matmul(2, 3, 4)
    a, w = relay.var("a", (2, 4)), relay.var("w", (4, 3))
    main = relay.Function((a, w), relay.Call(relay.GlobalVar("mm"), (a, w)))
    mod = relay.IRModule({"main": main, "mm": mm})
    relay.infer_type(mod)
    assert mod.main.checked_type == FuncType((TensorType((2, 4)), TensorType((4, 3))), TensorType((2, 3)))


def test_intrinsic_table_is_complete():
    for name, intr in tir.INTRINSICS.items():
        assert set(intr.c) == {"float16", "float32", "float64"}, name
        assert name in _INTRIN_IMPL, name
        assert all(t.count("{") == intr.arity for t in intr.c.values()), name
    assert tir.get_intrinsic("exp").c["float32"] == "expf({0})" and tir.get_intrinsic("exp").c["float64"] == "exp({0})"
    assert tir.get_intrinsic("isnan").result_dtype("float32") == "bool"
    assert "sigmoid" not in tir.INTRINSICS
