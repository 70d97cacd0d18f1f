"""The Relay text format: parse(print(m)) is structurally m, print(parse(print(m))) is print(m) byte for
byte, over fixtures covering every node kind, weird names, every dtype, symbolic shapes, large
constants (metadata section or side table) and every attribute kind; random DAG modules
(hypothesis); a 20,000-call chain; exact parse error messages with line and column."""

import base64

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from plait.errors import ParseError, PlaitError
from plait.ir import DTYPES, FuncType, TensorType, TupleType
from plait.op import get_op, list_ops
from plait.ir.op import REQUIRED
from plait.relay import (
    Call, Function, GlobalVar, If, IRModule, Let, Tuple, TupleGetItem, Var, assert_structural_equal, call,
    const, parse_expr, parse_module, post_order, print_expr, print_module, print_with_constants, structural_equal,
    structural_hash, var,
)

T2 = TensorType((2,))


# ---- fixtures ------------------------------------------------------------------------------------


def fx_example():
    x = var("x", ("n", 3, 224, 224))
    w = var("w", (8, 3, 3, 3))
    scale = const(np.linspace(-1, 1, 8 * 222, dtype="float32").reshape(1, 8, 1, 222))
    y = call("nn.conv2d", x, w, meta={"name": "conv1", "op_type": "Conv"})
    y = call("add", y, const(np.arange(8, dtype="float32").reshape(1, 8, 1, 1) / 4))
    y = call("nn.relu", call("multiply", y, scale))
    return IRModule({"main": Function((x, w), y, TensorType(("n", 8, 222, 222)))},
                    attrs={"input_names": ("x", "w"), "output_names": ("y",)})


def fx_all_nodes():
    x, c = var("x", (2,)), var("c", (), "bool")
    p = var("p", (2,))
    closure = Function((p,), call("add", p, x), T2, {"Primitive": 1})
    g = Var("g")  # let-bound, no annotation
    v = Call(g, (x,))
    t2 = Tuple([v, x])
    a, b = var("a", (2,)), var("b", (2,))
    curried = Function((a,), Function((b,), call("add", a, b)))
    i = var("i", (2,))
    loop = Var("loop", FuncType([T2], T2))
    rec = Let(loop, Function((i,), If(c, Call(loop, (i,)), i), T2), Call(loop, (x,)))
    u = Var("u")
    braced = Let(u, call("nn.relu", x), call("add", u, u))
    body = Tuple([
        Tuple(()), Tuple([v]), TupleGetItem(t2, 1), If(c, TupleGetItem(t2, 0), TupleGetItem(Tuple([x]), 0)),
        Call(Call(curried, (x,)), (x,)), Call(GlobalVar("helper"), (x,), {"k": 1}), rec, braced, x,
        GlobalVar("helper"),
    ])
    main = Function((x, c), Let(g, closure, body))
    q = Var("q")  # parameter without annotation
    helper = Function((q,), call("nn.relu", q), None, {"Primitive": 1, "target": "c"})
    return IRModule({"main": main, "helper": helper})


WEIRD = ["x", "x", "x_1", "0", "", "a/b:0", 'q"uote', "new\nline", "sp ace", "ünï", "\x00\x7f", "\ud800", "\\"]


def fx_weird_names():
    params = [Var(n, T2) for n in WEIRD]
    body = params[0]
    for p in params[1:]:
        body = call("add", body, p, meta={n: n for n in WEIRD[3:]})
    calls = Tuple([body, Call(GlobalVar("a/b"), ()), Call(GlobalVar("0"), ())])
    k = Var("x_1", T2)
    return IRModule({
        "main": Function(params, Let(k, body, Tuple([calls, k]))),
        "a/b": Function((), Tuple(())), "0": Function((), const(1.0)),
    }, attrs={"input_names": tuple(WEIRD), "": "empty key", "a b": 1})


SPECIAL = {
    "bool": [True, False], "int8": [-128, 127, 0], "int16": [-32768, 32767], "int32": [-2**31, 2**31 - 1],
    "int64": [-2**63, 2**63 - 1], "uint8": [0, 255], "uint16": [65535], "uint32": [2**32 - 1],
    "uint64": [2**64 - 1, 0], "float16": [0.1, 65504, 6e-8, -0.0, np.inf, np.nan, -np.inf],
    "float32": [0.1, 3.4028235e38, 1e-45, -0.0, np.inf, np.nan, 1 / 3],
    "float64": [0.1, 1.7976931348623157e308, 5e-324, -0.0, -np.inf, np.nan, 1 / 3],
}


def fx_dtypes():
    rng = np.random.default_rng(0)
    fields = []
    for dt, vals in SPECIAL.items():
        fields.append(const(np.array(vals, dt)))
        fields.append(const(np.array(vals[0], dt)))  # scalar
        raw = rng.integers(0, 256, 40 * DTYPES[dt].itemsize, dtype=np.uint8)
        big = raw.view(dt).reshape(5, 8) if dt != "bool" else (raw > 127).reshape(5, 8)
        fields.append(const(big))  # random bit patterns: NaN payloads, subnormals...
        fields.append(const(np.zeros((0, 3), dt)))
        fields.append(var(f"v_{dt}", (2,), dt))
    odd_nan = np.array([0x7FC00001, 0xFFC00000], "uint32").view("float32")  # payload and sign: base64 inline
    fields.append(const(odd_nan))
    params = [f for f in fields if isinstance(f, Var)]
    return IRModule({"main": Function(params, Tuple(fields))})


def fx_symbolic():
    x = var("x", ("n", "?", 3))
    t = Var("t", TupleType([T2, TupleType([TensorType((), "int8")]), TupleType([])]))
    f = Var("f", FuncType([TensorType(("n",))], TensorType(("n",))))
    y = var("y", ("n",))
    ret = TupleType([TensorType(("n", "?", 3)), TensorType(("n",)), TupleType([T2])])
    return IRModule({"main": Function((x, t, f, y), Tuple([x, Call(f, (y,)), TupleGetItem(t, 0)]), ret)})


ATTR_VALUES = {
    "none": None, "t": True, "f": False, "zero": 0, "neg": -7, "big": 2**80, "fl": 0.1, "negzero": -0.0,
    "inf": float("inf"), "ninf": float("-inf"), "nan": float("nan"), "tiny": 5e-324, "huge": 1.7976931348623157e308,
    "one": 1.0, "s": 'a "quoted"\n\ttab \\ back ü \x01', "empty_s": "", "ints": (1, -2, 3), "floats": (0.5, -1e-30),
    "nested": ((1, 2), (), ((None, "x"), (True,))), "empty": (), "mixed": (1, 1.0, True, "1", None),
}


def fx_attr_kinds():
    x = var("x", (2,))
    fn_attrs = dict(ATTR_VALUES)
    c = Call(GlobalVar("f"), (x,), ATTR_VALUES, ATTR_VALUES)
    return IRModule({"main": Function((x,), c, None, fn_attrs), "f": Function((x,), x, T2, fn_attrs)},
                    attrs=ATTR_VALUES)


def fx_op_attrs():
    x = var("x", (1, 4, 8, 8))
    w = var("w", (4, 1, 3, 3))
    y = call("nn.conv2d", x, w, strides=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1), groups=4)
    y = call("nn.leaky_relu", y, alpha=0.1)
    y = call("clip", y, a_max=6.0)
    y = call("cast", y, dtype="float16")
    y = call("image.resize2d", y, size=(8, 8), method="linear", roi=(0.0, 0.5, 1.0, 1.0))
    s = call("split", y, sections=(2, 2), axis=1)
    z = call("nn.softmax", TupleGetItem(s, 1), axis=-1)
    return IRModule({"main": Function((x, w), Tuple([TupleGetItem(s, 0), z]))})


def fx_sharing():
    x, c = var("x", (2,)), var("c", (), "bool")
    r = call("nn.relu", x)
    small = const(np.array([1.0, 2.0], "float32"))
    big = const(np.arange(64, dtype="float32"))
    t = Tuple([r, small])
    v = Var("v")
    shared_let = Let(v, call("add", r, small), call("multiply", v, v))
    branch = If(c, call("add", r, big), r)
    f = Function((var("p", (2,)),), r)
    body = Tuple([t, t, shared_let, shared_let, branch, branch, Call(f, (x,)), Call(f, (r,)), big, small])
    return IRModule({"main": Function((x, c), body)})


def fx_functions():
    a = var("a", ())
    f = Function((a,), Call(GlobalVar("g"), (a, a)), TensorType(()))
    b1, b2 = var("b", ()), var("b", ())
    g = Function((b1, b2), call("add", b1, b2), TensorType(()), {"inline": False})
    x = var("x", ())
    return IRModule({"main": Function((x,), Call(GlobalVar("f"), (x,))), "f": f, "g": g, "k": Function((), Tuple(()))})


FIXTURES = {f.__name__[3:]: f for f in (fx_example, fx_all_nodes, fx_weird_names, fx_dtypes, fx_symbolic,
                                         fx_attr_kinds, fx_op_attrs, fx_sharing, fx_functions)}


def nodes(mod):
    return sum(len(list(post_order(f))) for f in mod.values())


def check_round_trip(mod):
    text = print_module(mod, metadata=True)
    back = parse_module(text)
    assert_structural_equal(back, mod)
    assert print_module(back, metadata=True) == text
    assert nodes(back) == nodes(mod)  # the same sharing
    plain, table = print_with_constants(mod)
    assert plain == print_module(mod, metadata=False)
    assert text.startswith(plain.split("// metadata section omitted")[0])
    back2 = parse_module(plain, constants=table)
    assert_structural_equal(back2, mod)
    assert print_module(back2, metadata=False) == plain
    return text


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_round_trip(name):
    mod = FIXTURES[name]()
    text = check_round_trip(mod)
    assert print_module(FIXTURES[name]()) == print_module(mod)  # deterministic for a fresh copy
    assert structural_hash(parse_module(text)) == structural_hash(mod)


def test_example_text():
    assert print_module(fx_example(), metadata=False) == """\
#[version = "0.1"]
#[input_names=["x", "w"], output_names=["y"]]
def @main(%x: Tensor[(n, 3, 224, 224), float32], %w: Tensor[(8, 3, 3, 3), float32]) -> Tensor[(n, 8, 222, 222), float32] {
  %0 = nn.conv2d(%x, %w, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1) #[name="conv1", op_type="Conv"];
  %1 = add(%0, const(float32, (1, 8, 1, 1), [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]));
  %2 = multiply(%1, meta[constant][0]);
  nn.relu(%2)
}

// metadata section omitted: 1 large constant (include it with metadata=True or plait show --metadata)
"""


def test_all_nodes_text():
    text = print_module(fx_all_nodes())
    assert "def @helper(%q) #[Primitive=1, target=\"c\"] {\n  nn.relu(%q)\n}" in text
    assert "  let %g = fn (%p: Tensor[(2,), float32]) -> Tensor[(2,), float32] #[Primitive=1] {\n" in text
    assert "  let %loop: fn (Tensor[(2,), float32]) -> Tensor[(2,), float32] = fn (%i" in text
    assert "  %0 = ();\n  %1 = %g(%x);\n  %2 = (%1,);\n" in text
    assert "  %7 = fn (%a: Tensor[(2,), float32]) {\n    fn (%b: Tensor[(2,), float32]) {\n" in text
    assert "  %5 = if (%c) {\n    %3.0\n  } else {\n    %6 = (%x,);\n    %6.0\n  };\n" in text
    assert "@helper(%x, k=1);" in text


def test_names_are_quoted_and_distinct():
    text = print_module(fx_weird_names())
    head = text.splitlines()[10]
    assert head.startswith('def @main(%x: Tensor[(2,), float32], %x_1: Tensor[(2,), float32], '
                           '%x_1_1: Tensor[(2,), float32], %"0": Tensor[(2,), float32], %"": ')
    assert "  let %x_1_2: Tensor[(2,), float32] = %11;\n" in text  # a 4th distinct Var with an 'x'-like name
    for name in ['%"a/b:0"', '%"q\\"uote"', '%"new\\nline"', '%"sp ace"', '%"ünï"', '%"\\u0000\\u007f"',
                 '%"\\ud800"', '%"\\\\"', '@"a/b"', '@"0"']:
        assert name in text
    assert '\n#[""="empty key", "a b"=1, input_names=["x", "x", "x_1", "0", "", ' in text


def test_dataflow_bindings_are_not_lets():
    x = var("x", (2,))
    mod = parse_module('def @main(%x: Tensor[(2,), float32]) {\n  %0 = nn.relu(%x);\n  %1 = add(%0, %0);\n  %1\n}')
    body = mod["main"].body
    assert isinstance(body, Call) and body.args[0] is body.args[1] and body.args[0].args[0] is mod["main"].params[0]
    mod = parse_module('def @main(%x: Tensor[(2,), float32]) {\n  let %y = nn.relu(%x);\n  add(%y, %y)\n}')
    body = mod["main"].body
    assert isinstance(body, Let) and body.body.args[0] is body.var
    r = call("nn.relu", x)
    assert_structural_equal(parse_expr("%0 = nn.relu(%x);\nadd(%0, %0)", free_vars=[x]), call("add", r, r))


def test_constants_format_and_bit_exact():
    assert print_expr(const(np.float32(0.1))) == "const(float32, (), [0.1])"
    assert print_expr(const(np.array([2**64 - 1], "uint64"))) == "const(uint64, (1,), [18446744073709551615])"
    assert print_expr(const(np.zeros((0, 3)))) == "const(float64, (0, 3), [])"
    assert print_expr(const(np.array([1.0, np.nan, -0.0], "float16"))) == "const(float16, (3,), [1.0, nan, -0.0])"
    odd = np.array([0x7FC00001], "uint32").view("float32")
    assert print_expr(const(odd)) == 'const(float32, (1,), base64"AQDAfw==")'
    rng = np.random.default_rng(1)
    for dt in DTYPES:
        for n in (1, 16, 17, 100):
            raw = rng.integers(0, 256, n * DTYPES[dt].itemsize, dtype=np.uint8)
            arr = raw.view(dt) if dt != "bool" else raw > 100
            back = parse_expr(print_expr(const(arr), metadata=True))
            assert back.data.dtype == arr.dtype and back.data.tobytes() == arr.tobytes(), (dt, n)


def test_large_constants_metadata_section_and_table():
    big = const(np.arange(17, dtype="int32"))
    x = var("x", (17,), "int32")
    mod = IRModule.from_expr(Function((x,), call("add", call("add", x, big), big)))
    text = print_module(mod, metadata=True)
    assert "  %0 = add(%x, meta[constant][0]);\n  add(%0, meta[constant][0])\n" in text
    section = text[text.index("#[metadata]"):]
    encoded = base64.b64encode(np.arange(17, dtype="<i4").tobytes()).decode()
    assert section == f'#[metadata]\nmeta[constant][0] = const(int32, (17,), base64"{encoded}")\n'
    back = parse_module(text)
    assert back["main"].body.args[1] is back["main"].body.args[0].args[1]  # one Constant for one index
    plain, table = print_with_constants(mod)
    assert table == [big] and "#[metadata]" not in plain
    assert parse_module(plain, constants=table)["main"].body.args[1] is big
    assert_structural_equal(parse_module(plain, constants=[np.arange(17, dtype="int32")]), mod)
    with pytest.raises(ParseError) as e:
        parse_module(plain)
    assert str(e.value) == ("<text>:3:16: parse error: meta[constant][0] is not defined: the text has no metadata "
                            "section and no constants table was given (print with metadata=True)")
    with pytest.raises(ParseError) as e:
        parse_module(plain.replace("[0]", "[3]"), constants=table)
    assert str(e.value) == ("<text>:3:16: parse error: meta[constant][3] is not defined "
                            "(the constants table has 1 entries)")


def test_float_attributes_exact():
    x = var("x", (2,))
    vals = [0.1, 5e-324, 1.7976931348623157e308, -0.0, float("inf"), float("-inf"), 1 / 3, 1e16, 123456789.0]
    e = call("nn.leaky_relu", x, alpha=float("nan"), meta={f"v{i}": v for i, v in enumerate(vals)})
    back = parse_expr(print_expr(e), free_vars=[x])
    assert np.isnan(back.attrs["alpha"])
    for i, v in enumerate(vals):
        got = back.meta[f"v{i}"]
        assert type(got) is float and np.float64(got).tobytes() == np.float64(v).tobytes()


def test_expr_printing_and_free_vars():
    x, y = var("x", (2,)), var("x", (2,))
    e = call("add", call("nn.relu", x), y)
    assert str(e) == "%0 = nn.relu(%x);\nadd(%0, %x_1)"
    assert_structural_equal(parse_expr(str(e), free_vars={"x": x, "x_1": y}), e)
    assert str(x) == "%x" and str(GlobalVar("a b")) == '@"a b"' and str(Tuple([])) == "()"
    with pytest.raises(ParseError) as err:
        parse_expr(str(e))
    assert str(err.value) == "<text>:1:14: parse error: undefined variable %x"


def test_handwritten_text_comments_and_trailing_commas():
    text = """
    // a comment
    #[version = "0.1"]
    def @main(%x: Tensor[(2,), float32],) -> (Tensor[(2,), float32],) {   // trailing comma
      %0 = nn.relu(%x);   // relu
      (add(%0, nn.relu(%x)),)
    }
    """
    mod = parse_module(text)
    x = mod["main"].params[0]
    assert mod["main"].ret_type == TupleType([T2])
    assert_structural_equal(mod["main"].body, Tuple([call("add", call("nn.relu", x), call("nn.relu", x))]))


def chain(n):
    x = var("x", (2, 3))
    z = x
    for _ in range(n // 2):
        z = call("add", call("nn.relu", z), x)
    return IRModule.from_expr(Function((x,), z))


def test_20000_call_chain():
    mod = chain(20000)
    text = print_module(mod)
    assert text.count("\n") == 20003
    back = parse_module(text)
    assert_structural_equal(back, mod)
    assert print_module(back) == text


class _Foreign:
    """A stand-in for a function kind that is neither Relay nor TIR."""

    def __init__(self, body):
        self.body = body

    def __eq__(self, other):
        return isinstance(other, _Foreign) and other.body == self.body


def test_other_function_kinds_cannot_be_printed_and_compare_with_eq():
    from plait.ir.base import BaseFunc

    class Prim(_Foreign, BaseFunc):
        pass

    mod = IRModule({"main": chain(4)["main"], "p": Prim("a[i]")})
    with pytest.raises(PlaitError) as e:
        print_module(mod)
    assert str(e.value) == "cannot print global @p: no text printer for Prim"
    same = IRModule({"main": mod["main"], "p": Prim("a[i]")})
    assert_structural_equal(same, mod)
    assert structural_hash(same) == structural_hash(mod)
    assert not structural_equal(mod, mod.with_function("p", Prim("b[i]")))


# ---- random DAG modules ---------------------------------------------------------------------------


def _simple_ops():
    """Registered operators taking 1-3 arguments whose attributes all have defaults."""
    out = []
    for name in list_ops():
        op = get_op(name)
        if all(a.default is not REQUIRED for a in op.attrs):
            n = op.num_inputs if isinstance(op.num_inputs, int) else op.num_inputs[0]
            if 1 <= n <= 3:
                out.append((name, n))
    return out


OPS = _simple_ops()
names = st.sampled_from(WEIRD + ["y", "z", "x_2"]) | st.text(max_size=4)
attr_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3), max_leaves=6)
metas = st.dictionaries(names, attr_values, max_size=2)
small_ints = st.integers(-3, 3)
ATTR_KINDS = {
    "int": small_ints, "float": st.floats(), "bool": st.booleans(), "str": st.text(max_size=4),
    "ints": st.lists(small_ints, max_size=4), "floats": st.lists(st.floats(), max_size=3),
    "dtype": st.sampled_from(sorted(DTYPES)), "any": attr_values,
}


@st.composite
def op_attrs(draw, op):
    """Some of ``op``'s attributes, with values of the schema's kinds."""
    out = {}
    for spec in op.attrs:
        if draw(st.booleans()):
            values = st.sampled_from(spec.choices) if spec.choices else ATTR_KINDS[spec.kind]
            out[spec.name] = draw(st.none() | values if spec.optional else values)
    return out
shapes = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=6)


@st.composite
def constants(draw):
    dt = draw(st.sampled_from(sorted(DTYPES)))
    arr = draw(hnp.arrays(DTYPES[dt], draw(shapes)))
    return const(arr)


def _block(draw, pool, depth, size):
    """Append ``size`` random nodes built from ``pool`` (outer values); return the last one."""
    local = list(pool)
    pick = lambda: local[draw(st.integers(0, len(local) - 1))]  # noqa: E731
    kinds = ["call", "call", "call", "tuple", "getitem", "const"] + (["let", "if", "fn"] if depth < 2 else [])
    for _ in range(size):
        kind = draw(st.sampled_from(kinds))
        if kind == "call":
            name, n = draw(st.sampled_from(OPS))
            new = call(name, *[pick() for _ in range(n)], meta=draw(metas), **draw(op_attrs(get_op(name))))
        elif kind == "tuple":
            new = Tuple([pick() for _ in range(draw(st.integers(0, 3)))])
        elif kind == "getitem":
            new = TupleGetItem(pick(), draw(st.integers(0, 3)))
        elif kind == "const":
            new = draw(constants())
        elif kind == "let":
            v = Var(draw(names), draw(st.none() | st.just(T2)))
            new = Let(v, pick(), _block(draw, local + [v], depth + 1, draw(st.integers(0, 3))))
        elif kind == "if":
            new = If(pick(), _block(draw, local, depth + 1, draw(st.integers(0, 3))),
                     _block(draw, local, depth + 1, draw(st.integers(0, 3))))
        else:
            params = [Var(draw(names), T2) for _ in range(draw(st.integers(0, 2)))]
            f = Function(params, _block(draw, local + params, depth + 1, draw(st.integers(0, 3))),
                         draw(st.none() | st.just(T2)), draw(metas))
            new = f if draw(st.booleans()) else Call(f, [pick() for _ in params])
        local.append(new)
    return local[-1]


@st.composite
def modules(draw):
    params = [Var(draw(names), T2) for _ in range(draw(st.integers(1, 3)))]
    main = Function(params, _block(draw, params, 0, draw(st.integers(1, 12))))
    funcs = {"main": main}
    if draw(st.booleans()):
        funcs[draw(names)] = Function((), Call(GlobalVar("main"), params[:0]))
    return IRModule(funcs, draw(metas))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_random_modules_round_trip(mod):
    check_round_trip(mod)


# ---- parse errors ----------------------------------------------------------------------------------

HEAD = 'def @main(%x: Tensor[(2,), float32], %w: Tensor[(4, 3, 3, 3), float32]) {\n'

ERRORS = [
    (HEAD + "  %0 = add(%x, %x;\n  %0\n}", "2:18: expected ',' or ')' but found ';'"),
    (HEAD + "  %0 = nn.conv3x(%x, %w);\n  %0\n}",
     "2:8: unknown operator 'nn.conv3x'; did you mean 'nn.conv2d' or 'qnn.conv2d'?"),
    (HEAD + "  %0 = add(%x, %y);\n  %0\n}", "2:16: undefined variable %y"),
    (HEAD + "  %0 = add(%x, %1);\n  %0\n}", "2:16: undefined temporary %1"),
    (HEAD + "  %0 = nn.relu(%x);\n  %0 = nn.relu(%x);\n  %0\n}", "3:3: %0 is already defined"),
    (HEAD + "  nn.relu(%x, alpha=0.5)\n}", "2:15: operator 'nn.relu': unknown attribute 'alpha' (valid: none)"),
    (HEAD + "  nn.conv2d(%x, %w, groups=1, strides=2)\n}",
     "2:31: operator 'nn.conv2d', attribute 'strides': expected ints, got 2"),
    (HEAD + "  reshape(%x)\n}", "2:3: operator 'reshape': missing required attribute 'newshape'"),
    (HEAD + "  nn.leaky_relu(%x, alpha=0.5, alpha=0.5)\n}", "2:32: duplicate attribute 'alpha'"),
    (HEAD + "  nn.leaky_relu(alpha=0.5, %x)\n}",
     "2:28: expected an attribute 'name=value' (arguments come before attributes)"),
    (HEAD + "  if (%x; { %x } else { %x }\n}", "2:9: expected ')' but found ';'"),
    (HEAD + "  %0 = nn.relu(%x)\n  %0\n}", "3:3: expected ';' but found '%0'"),
    (HEAD + "  %0 = nn.relu(%x);\n", "3:1: expected an expression but found end of input"),
    (HEAD + "  %0 = nn.relu(%x);\n  %0\n", "4:1: expected '}' but found end of input"),
    (HEAD + "  %0 = let %y = %x;\n  %0\n}", "2:8: expected an expression but found 'let'"),
    (HEAD + '  %0 = nn.relu(%x) #[name="a\\q"];\n  %0\n}', "2:29: invalid escape sequence '\\q' in string"),
    (HEAD + '  %0 = nn.relu(%x) #[name="abc];\n  %0\n}', "2:27: unterminated string literal"),
    (HEAD + "  %0 = nn.relu(%x) $;\n  %0\n}", "2:20: unexpected character '$'"),
    (HEAD + "  const(float33, (), [1])\n}",
     "2:9: unsupported dtype 'float33' (supported: bool, int8, int16, int32, int64, uint8, uint16, uint32, "
     "uint64, float16, float32, float64)"),
    (HEAD + "  const(float32, (2, 2), [1.0, 2.0, 3.0])\n}", "2:26: constant has 3 values but shape (2, 2) needs 4"),
    (HEAD + "  const(uint8, (1,), [256])\n}", "2:23: value 256 is out of range for uint8"),
    (HEAD + "  const(bool, (1,), [1])\n}", "2:22: expected a bool value but found '1'"),
    (HEAD + '  const(int8, (2,), base64"AAAA")\n}', "2:27: constant data has 3 bytes but int8[2] needs 2"),
    (HEAD + "  meta[tensor][0]\n}", "2:8: unknown metadata kind 'tensor' (expected 'constant')"),
    ('def @main(%x: Tensor[(2,), float31]) {\n  %x\n}',
     "1:28: unsupported dtype 'float31' (supported: bool, int8, int16, int32, int64, uint8, uint16, uint32, "
     "uint64, float16, float32, float64)"),
    ('def @main(%x: Tensor[(-1,), float32]) {\n  %x\n}',
     "1:23: expected a dimension (an int >= 0, a name or ?) but found '-1'"),
    ('def @main(%x, %x) {\n  %x\n}', "1:15: duplicate parameter %x"),
    ('def @main() {\n  ()\n}\ndef @main() {\n  ()\n}', "4:5: global function @main is already defined"),
    ('def @main() {\n  @"f g"()\n}', '2:3: undefined global function @"f g"'),
    ('#[version = "0.2"]\ndef @main() {\n  ()\n}',
     "1:13: unsupported text format version '0.2' (this plait reads '0.1')"),
    ('def main() {\n  ()\n}', "1:5: expected a global function name like @main but found 'main'"),
    ('fn @main() {\n  ()\n}', "1:1: expected 'def' but found 'fn'"),
    ('def @main(%x: Tensor[(2,), float32]) {\n  %x\n}\n#[metadata]\nmeta[constant][0] = const(int8, (), [1])\n'
     'meta[constant][0] = const(int8, (), [1])\n', "6:1: meta[constant][0] is defined twice"),
]


@pytest.mark.parametrize("text,message", ERRORS, ids=[m for _, m in ERRORS])
def test_parse_error_messages(text, message):
    with pytest.raises(ParseError) as e:
        parse_module(text, source_name="model.relay")
    where, msg = message.split(": ", 1)
    assert str(e.value) == f"model.relay:{where}: parse error: {msg}"
    line, col = where.split(":")
    assert (e.value.line, e.value.column, e.value.message) == (int(line), int(col), msg)


def test_deep_nesting_is_a_parse_error_not_a_crash():
    text = "def @main(%x: Tensor[(2,), float32]) {\n  " + "nn.relu(" * 5000 + "%x" + ")" * 5000 + "\n}"
    with pytest.raises(ParseError) as e:
        parse_module(text)
    assert e.value.message == "expression nested too deeply"
    assert e.value.line == 2
