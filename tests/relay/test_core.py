"""Relay nodes, iterative traversal, type inference and the interpreter on core constructs."""

import numpy as np
import pytest

from plait.errors import InterpreterError, PlaitError, TypeInferenceError
from plait.ir import FuncType, TensorType, TupleType
from plait.relay import (
    Call, Constant, ExprMutator, Function, GlobalVar, If, IRModule, Let, Tuple, TupleGetItem, Var, call, const,
    free_vars, infer_type, post_order, run, var,
)

F32 = "float32"


def chain(n: int):
    x = var("x", (2, 3))
    z = x
    for i in range(n):
        z = call("add", call("nn.relu", z), x)
    return x, z


def test_nodes_are_immutable_and_identity_compared():
    x = var("x", (2,))
    c1, c2 = call("nn.relu", x), call("nn.relu", x)
    assert c1 != c2 and c1 == c1 and len({c1, c2}) == 2
    with pytest.raises(Exception):
        c1.args = ()  # type: ignore[misc]
    k = const([1.0, 2.0], F32)
    with pytest.raises(ValueError):
        k.data[0] = 3.0
    assert GlobalVar("f") == GlobalVar("f")


def test_call_validates_attrs_and_args():
    with pytest.raises(PlaitError) as e:
        call("add", var("a"), var("b"), alpha=1)
    assert str(e.value) == "operator 'add': unknown attribute 'alpha' (valid: none)"
    with pytest.raises(PlaitError) as e:
        Call(call("add", var("a"), var("b")).op, (np.zeros(2),))
    assert "is not a Relay expression" in str(e.value)


def test_post_order_children_first_and_shared_once():
    x = var("x", (2,))
    r = call("nn.relu", x)
    out = call("add", r, r)
    order = list(post_order(out))
    assert order == [x, r, out]


def test_long_chain_infer_and_run_without_recursion_error():
    x, z = chain(10000)  # 20,000 calls
    mod = IRModule.from_expr(z)
    infer_type(mod)
    assert mod.main.checked_type == FuncType((TensorType((2, 3)),), TensorType((2, 3)))
    xv = np.full((2, 3), -1.0, F32)
    out = run(mod, {"x": xv})
    # relu(-1) + -1 = -1, then relu(-1) + -1 = -1 ...
    np.testing.assert_array_equal(out, xv)
    xv = np.ones((2, 3), F32)
    np.testing.assert_array_equal(run(mod, [xv]), np.full((2, 3), 10001.0, F32))


def test_mutator_rewrites_bottom_up_and_keeps_sharing():
    x, z = chain(5000)

    class ReluToAddZero(ExprMutator):
        def rewrite_call(self, pre, post):
            if post.op_name == "nn.relu":
                return call("add", post.args[0], const(np.float32(0)))
            return post

    new = ReluToAddZero().visit(z)
    ops = [n.op_name for n in post_order(new) if isinstance(n, Call)]
    assert ops.count("nn.relu") == 0 and ops.count("add") == 10000
    assert free_vars(new) == [x]


def test_mutator_identity_returns_same_object():
    x, z = chain(10)
    assert ExprMutator().visit(z) is z


def test_infer_tuple_let_if_function():
    x = var("x", (2, 2))
    t = Tuple([x, call("nn.relu", x)])
    v = Var("v")
    body = Let(v, TupleGetItem(t, 1), call("add", v, x))
    cond = var("c", (), "bool")
    e = If(cond, body, x)
    mod = IRModule.from_expr(Function((x, cond), e))
    infer_type(mod)
    assert e.checked_type == TensorType((2, 2))
    assert v.checked_type == TensorType((2, 2))
    assert t.checked_type == TupleType([TensorType((2, 2)), TensorType((2, 2))])
    xv = np.array([[-1, 2], [3, -4]], F32)
    np.testing.assert_array_equal(run(mod, {"x": xv, "c": np.array(True)}), np.maximum(xv, 0) + xv)
    np.testing.assert_array_equal(run(mod, {"x": xv, "c": np.array(False)}), xv)


def test_global_function_calls_and_symbolic_binding():
    a = var("a", ("n", 3))
    f = Function((a,), call("nn.relu", a))
    x = var("x", (5, 3))
    main = Function((x,), Call(GlobalVar("f"), (x,)))
    mod = IRModule({"f": f, "main": main})
    infer_type(mod)
    assert main.body.checked_type == TensorType((5, 3))
    xv = np.linspace(-1, 1, 15, dtype=F32).reshape(5, 3)
    np.testing.assert_array_equal(run(mod, {"x": xv}), np.maximum(xv, 0))


def test_global_function_with_if():
    i = var("i", (), "float32")
    c = var("c", (), "bool")
    f = Function((i, c), If(c, call("add", i, const(np.float32(1))), i), TensorType(()))
    x = var("x", ())
    b = var("b", (), "bool")
    main = Function((x, b), Call(GlobalVar("f"), (x, b)))
    mod = IRModule({"f": f, "main": main})
    assert float(run(mod, {"x": np.float32(2), "b": np.array(True)})) == 3.0


def test_recursion_needs_return_annotation():
    i = var("i", ())
    f = Function((i,), Call(GlobalVar("f"), (i,)))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(IRModule({"f": f}))
    assert str(e.value) == "global function '@f' is recursive: annotate its return type"


def test_type_mismatch_message_names_call_op_and_types():
    a, b = var("a", (2, 3)), var("b", (4,))
    mod = IRModule.from_expr(call("add", a, b, meta={"name": "Add_1", "op_type": "Add"}))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(mod)
    assert str(e.value) == (
        "type mismatch in @main: call 'Add_1' (operator 'add') with argument types "
        "(Tensor[(2, 3), float32], Tensor[(4,), float32]): shapes (2, 3) and (4,) do not broadcast: "
        "at axis -1 expected equal sizes or 1, got 3, 4")


def test_function_argument_mismatch_message():
    a = var("a", (2,))
    f = Function((a,), a)
    x = var("x", (3,))
    mod = IRModule({"f": f, "main": Function((x,), Call(GlobalVar("f"), (x,)))})
    with pytest.raises(TypeInferenceError) as e:
        infer_type(mod)
    assert str(e.value) == ("type mismatch in @main: call (operator '@f'): argument 0: "
                            "expected Tensor[(2,), float32], got Tensor[(3,), float32]")


def test_unknown_global_and_untyped_var():
    with pytest.raises(TypeInferenceError) as e:
        infer_type(IRModule({"main": Function((), Call(GlobalVar("g"), ()))}))
    assert str(e.value) == "reference to unknown global function '@g'"
    v = Var("v")
    with pytest.raises(TypeInferenceError) as e:
        infer_type(IRModule({"main": Function((), call("nn.relu", v))}))
    assert str(e.value) == "in @main: variable %v has no type annotation"


def test_if_condition_must_be_scalar_bool():
    x = var("x", (2,))
    mod = IRModule.from_expr(Function((x,), If(x, x, x)))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(mod)
    assert str(e.value) == "in @main: if condition must be a single bool, got Tensor[(2,), float32]"


def test_module_lookup_did_you_mean():
    mod = IRModule({"main": Function((), const(1.0))})
    with pytest.raises(PlaitError) as e:
        mod["mian"]
    assert str(e.value) == "unknown global function 'mian'; did you mean 'main'?"


def test_interpreter_input_checks():
    x = var("x", (2,))
    mod = IRModule.from_expr(Function((x,), call("nn.relu", x)))
    with pytest.raises(PlaitError) as e:
        run(mod, {"y": np.zeros(2, F32)})
    assert str(e.value) == "unknown input 'y' (inputs are: x)"
    with pytest.raises(PlaitError) as e:
        run(mod, {})
    assert str(e.value) == "missing input 'x' (inputs are: x)"
    with pytest.raises(PlaitError) as e:
        run(mod, {"x": np.zeros(3, F32)})
    assert str(e.value) == "input 'x': expected shape (2,), got (3,)"
    with pytest.raises(PlaitError) as e:
        run(mod, {"x": np.zeros(2, "float64")})
    assert str(e.value) == "input 'x': expected dtype float32, got float64"
    with pytest.raises(PlaitError) as e:
        run(mod, {"x": np.zeros(2, ">f8")})
    assert str(e.value) == "input 'x': expected dtype float32, got >f8"
    big_endian = np.array([1.5, -2.0], ">f4")  # float32 in the other byte order: the same values
    np.testing.assert_array_equal(run(mod, {"x": big_endian}), run(mod, {"x": big_endian.astype(F32)}))


def test_interpreter_checks_reference_outputs():
    from plait.ir.op import Op, OpPattern
    from plait.op._common import elementwise_cost

    bad = Op("test.bad_ref", rel=lambda a, at: a[0], ref=lambda a, at: a[0].astype("float64"),
             cost=elementwise_cost(1), pattern=OpPattern.ELEMWISE)
    x = var("x", (2,))
    mod = IRModule.from_expr(Function((x,), Call(bad, (x,), meta={"name": "n0"})))
    with pytest.raises(InterpreterError) as e:
        run(mod, {"x": np.zeros(2, F32)})
    assert str(e.value) == ("call 'n0' (operator 'test.bad_ref'): reference returned float64[2], "
                            "expected Tensor[(2,), float32]")
