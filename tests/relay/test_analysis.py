"""Structural equality and hashing: binding-position variables, exact attrs, bitwise constants,
paths in failure messages, consistency of the hash, iterative on 20,000-call chains."""

import subprocess
import sys

import numpy as np
import pytest

from plait.ir import FuncType, TensorType, TupleType
from plait.relay import (
    Call, Function, GlobalVar, If, IRModule, Let, Tuple, TupleGetItem, Var, assert_structural_equal, call, const,
    structural_equal, structural_hash, var,
)

T2 = TensorType((2,))


def check_equal(a, b, **kw):
    assert structural_equal(a, b, **kw)
    assert_structural_equal(a, b, **kw)
    assert structural_hash(a, **kw) == structural_hash(b, **kw)


def check_differ(a, b, message, hash_differs=True, **kw):
    assert not structural_equal(a, b, **kw)
    with pytest.raises(AssertionError) as e:
        assert_structural_equal(a, b, **kw)
    assert str(e.value) == message
    if hash_differs:
        assert structural_hash(a, **kw) != structural_hash(b, **kw)


def relu_fn(name):
    x = var(name, (2,))
    return Function((x,), call("nn.relu", x))


def test_alpha_equivalent_functions_are_equal_and_names_ignored():
    check_equal(relu_fn("x"), relu_fn("completely different"))


def test_variables_compare_by_binding_position():
    a, b = var("a", (2,)), var("b", (2,))
    f1 = Function((a, b), call("add", a, b))
    a2, b2 = var("a", (2,)), var("b", (2,))
    f2 = Function((a2, b2), call("add", b2, a2))
    check_differ(f1, f2, "structurally different at root.body.args[0]: variables differ: "
                         "Var(%a) (bound, maps to Var(%a)) vs Var(%b)")


def test_let_binds_variables():
    x = var("x", (2,))
    v1, v2 = Var("v"), Var("w")
    e1 = Function((x,), Let(v1, call("nn.relu", x), call("add", v1, x)))
    x2 = var("x", (2,))
    e2 = Function((x2,), Let(v2, call("nn.relu", x2), call("add", v2, x2)))
    check_equal(e1, e2)
    e3 = Function((x2,), Let(v2, call("nn.relu", x2), call("add", x2, v2)))
    check_differ(e1, e3, "structurally different at root.body.body.args[0]: variables differ: "
                         "Var(%v) (bound, maps to Var(%w)) vs Var(%x)")


def test_free_variables_by_identity_unless_mapped():
    x, y = var("x", (2,)), var("x", (2,))
    check_equal(call("nn.relu", x), call("nn.relu", x))
    # (free variables hash by name hint and type: same-named ones collide, which is allowed)
    check_differ(call("nn.relu", x), call("nn.relu", y),
                 "structurally different at root.args[0]: free variables differ: Var(%x) vs Var(%x)",
                 hash_differs=False)
    check_equal(call("nn.relu", x), call("nn.relu", y), map_free_vars=True)
    # mapped free variables must still form a bijection
    assert not structural_equal(call("add", x, x), call("add", x, y), map_free_vars=True)
    assert not structural_equal(call("add", x, y), call("add", x, x), map_free_vars=True)
    # and have equal types
    z = var("z", (3,))
    assert not structural_equal(call("nn.relu", x), call("nn.relu", z), map_free_vars=True)


def test_parameter_types_and_return_types_and_function_attrs():
    x1, x2 = var("x", (2,)), var("x", (3,))
    check_differ(Function((x1,), x1), Function((x2,), x2),
                 "structurally different at root.params[0].type_annotation: types differ: "
                 "Tensor[(2,), float32] vs Tensor[(3,), float32]")
    x3 = var("x", (2,))
    check_differ(Function((x1,), x1, T2), Function((x3,), x3),
                 "structurally different at root.ret_type: types differ: Tensor[(2,), float32] vs None")
    check_differ(Function((x1,), x1, attrs={"Primitive": 1}), Function((x3,), x3, attrs={"Primitive": 2}),
                 "structurally different at root.attrs['Primitive']: function attributes differ: 1 vs 2")
    check_differ(Function((x1,), x1), Function((x3, var("y")), x3),
                 "structurally different at root: numbers of parameters differ: 1 vs 2")


def test_operators_attrs_and_meta():
    x = var("x", (1, 3, 8, 8))
    w = var("w", (4, 3, 3, 3))
    a = call("nn.conv2d", x, w, strides=(1, 1))
    b = call("nn.conv2d", x, w, strides=(2, 2))
    check_differ(a, b, "structurally different at root.attrs['strides']: attributes differ: (1, 1) vs (2, 2)")
    check_equal(call("nn.conv2d", x, w), call("nn.conv2d", x, w, strides=[1, 1], groups=1))
    check_differ(call("add", x, x), call("multiply", x, x),
                 "structurally different at root.op: callees differ: add vs multiply")
    check_differ(call("nn.relu", x, meta={"name": "r1"}), call("nn.relu", x, meta={"name": "r2"}),
                 "structurally different at root.meta['name']: call metadata differ: 'r1' vs 'r2'")
    check_differ(call("nn.relu", x, meta={"name": "r1"}), call("nn.relu", x),
                 "structurally different at root.meta['name']: call metadata differ: 'r1' vs (absent)")


def test_attribute_values_compare_exactly_by_kind():
    x = var("x", (2,))

    def m(v):
        return call("nn.relu", x, meta={"k": v})

    for a, b in [(1, 1.0), (1, True), (0.0, -0.0), ((1, 2), (1, 2, 3)), (None, 0), ("1", 1)]:
        assert not structural_equal(m(a), m(b)), (a, b)
        assert structural_hash(m(a)) != structural_hash(m(b))
    check_equal(m(float("nan")), m(-float("nan")))
    check_equal(m((1, (2.5, "s"), None)), m([1, [2.5, "s"], None]))


def test_constants_bitwise():
    check_equal(const(np.array([np.nan, 1.0], "float32")), const(np.array([np.nan, 1.0], "float32")))
    check_differ(const(np.array([0.0, 1.0], "float32")), const(np.array([0.0, -1.0], "float32")),
                 "structurally different at root: constant data differ at index (1,): 1.0 vs -1.0")
    check_differ(const(np.zeros((2, 2), "float32")), const(np.array([[0, 0], [0, -0.0]], "float32")),
                 "structurally different at root: constant data differ at index (1, 1): 0.0 vs -0.0")
    check_differ(const(np.zeros(2, "float32")), const(np.zeros(2, "float64")),
                 "structurally different at root: constant dtypes differ: float32 vs float64")
    check_differ(const(np.zeros(2, "int8")), const(np.zeros((1, 2), "int8")),
                 "structurally different at root: constant shapes differ: (2,) vs (1, 2)")
    # two NaNs with different payloads are different constants
    nan1 = np.array([0x7FC00000], "uint32").view("float32")
    nan2 = np.array([0x7FC00001], "uint32").view("float32")
    assert not structural_equal(const(nan1), const(nan2))


def test_globals_by_name_and_node_kinds():
    check_equal(Call(GlobalVar("f"), ()), Call(GlobalVar("f"), ()))
    check_differ(Call(GlobalVar("f"), ()), Call(GlobalVar("g"), ()),
                 "structurally different at root.op: global functions differ: @f vs @g")
    x = var("x", (2,))
    check_differ(Tuple([x]), TupleGetItem(Tuple([x]), 0),
                 "structurally different at root: node kinds differ: Tuple(1 fields) vs TupleGetItem(.0)")
    check_differ(TupleGetItem(Tuple([x, x]), 0), TupleGetItem(Tuple([x, x]), 1),
                 "structurally different at root.index: tuple indices differ: 0 vs 1")
    check_differ(Tuple([x]), Tuple([x, x]), "structurally different at root: numbers of tuple fields differ: 1 vs 2")
    c = var("c", (), "bool")
    check_differ(If(c, x, call("nn.relu", x)), If(c, x, x),
                 "structurally different at root.false_branch: node kinds differ: Call(nn.relu) vs Var(%x)")


def test_sharing_need_not_match():
    x = var("x", (2,))
    r = call("nn.relu", x)
    dag = call("add", r, r)
    tree = call("add", call("nn.relu", x), call("nn.relu", x))
    check_equal(dag, tree)
    # a shared function literal against two copies of it
    f = relu_fn("p")
    check_equal(Tuple([f, f]), Tuple([relu_fn("a"), relu_fn("b")]))


def test_types_and_modules():
    check_equal(TupleType([T2, FuncType([T2], T2)]), TupleType([T2, FuncType([T2], T2)]))
    check_differ(TensorType(("n", 3)), TensorType(("m", 3)),
                 "structurally different at root: types differ: Tensor[(n, 3), float32] vs Tensor[(m, 3), float32]")
    m1 = IRModule({"main": relu_fn("x"), "f": relu_fn("y")}, attrs={"input_names": ("x",)})
    m2 = IRModule({"main": relu_fn("a"), "f": relu_fn("b")}, attrs={"input_names": ("x",)})
    check_equal(m1, m2)
    check_differ(m1, m2.with_attrs(input_names=("y",)),
                 "structurally different at attrs['input_names']: module attributes differ: ('x',) vs ('y',)")
    check_differ(m1, m2.without("f"), "structurally different at module: functions differ: @f vs (absent)")
    x = var("x", (2,))
    m3 = m2.with_function("f", Function((x,), call("nn.relu", call("nn.relu", x))))
    check_differ(m1, m3, "structurally different at @f.body.args[0]: node kinds differ: Var(%y) vs Call(nn.relu)")
    assert not structural_equal(m1, m1["main"])
    assert not structural_equal(T2, var("x", (2,)))


def chain(n, last="add"):
    x = var("x", (2,))
    z = x
    for i in range(n):
        z = call("nn.relu", z) if i % 2 else call(last if i == 0 else "add", z, x)
    return Function((x,), z)


def test_long_chains_are_iterative():
    a, b = chain(20000), chain(20000)
    check_equal(a, b)
    c = chain(20000, last="multiply")
    with pytest.raises(AssertionError) as e:
        assert_structural_equal(a, c)
    assert str(e.value) == ("structurally different at root.body(.args[0])*19999.op: "
                            "callees differ: add vs multiply")
    assert structural_hash(a) != structural_hash(c)


def test_hash_is_deterministic_across_processes():
    code = ("from plait.relay import *; import numpy as np\n"
            "x = var('x', ('n', 3)); f = Function((x,), call('add', call('nn.relu', x, meta={'name': 'r'}),"
            " const(np.arange(3, dtype='float32'))))\n"
            "print(structural_hash(IRModule({'main': f}, attrs={'a': (1.5, None)})))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout for seed in (1, 2)}
    assert len(outs) == 1
    x = var("x", ("n", 3))
    f = Function((x,), call("add", call("nn.relu", x, meta={"name": "r"}), const(np.arange(3, dtype="float32"))))
    assert outs == {f"{structural_hash(IRModule({'main': f}, attrs={'a': (1.5, None)}))}\n"}


def test_modules_with_prim_funcs_compare_structurally():
    from plait.lowering.lower import LowerToTIR
    from plait.frontend.onnx import from_onnx
    from plait.relay import infer_type
    from plait.relay.passes import FuseOps
    from plait.relay.text import parse_module, print_module
    from plait.target import Target
    from plait.testing.onnx_models import mlp

    lowered = LowerToTIR(target=Target("c"))(FuseOps()(infer_type(from_onnx(mlp(sizes=(8, 16, 4))))))
    back = parse_module(print_module(lowered))
    assert structural_equal(back, lowered)
    assert structural_hash(back) == structural_hash(lowered)
    other = LowerToTIR(target=Target("c"))(FuseOps()(infer_type(from_onnx(mlp(sizes=(8, 16, 4), seed=1)))))
    assert not structural_equal(other, lowered)  # different weights
