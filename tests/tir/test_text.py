"""TIR printer and parser: exact round trips on fixtures, literals, names, ill-typed trees, errors."""

import math

import pytest

from plait import tir
from plait.errors import ParseError
from plait.tir import (
    Add, Buffer, Call, Cast, Evaluate, FloatImm, For, IntImm, PrimFunc, Var, print_prim_func, seq,
)

from .fixtures import FIXTURES, matmul

HEADER = "@prim_func\ndef f(A: Buffer((4,), float32)):\n"


def round_trip(f: PrimFunc) -> str:
    text = print_prim_func(f)
    g = tir.parse_prim_func(text)
    tir.assert_structural_equal(f, g)
    assert print_prim_func(g) == text
    assert print_prim_func(f) == text  # deterministic
    return text


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_round_trip(name):
    f = FIXTURES[name]()
    tir.verify(f)
    text = round_trip(f)
    tir.verify(tir.parse_prim_func(text))


def test_matmul_text_is_readable_python_like():
    assert print_prim_func(matmul()) == (
        '@prim_func(global_symbol="matmul", num_inputs=2, piece="c")\n'
        "def matmul(A: Buffer((4, 5), float32), B: Buffer((5, 6), float32), C: Buffer((4, 6), float32)):\n"
        "    for i in parallel(0, 4):\n"
        "        for j in vectorized(0, 6):\n"
        "            C[i, j] = 0.0\n"
        "            for k in serial(0, 5):\n"
        "                C[i, j] = C[i, j] + A[i, k] * B[k, j]\n"
    )


def test_scoping_forms_flat_when_last_in_block_else_with():
    f = FIXTURES["lets_and_selects"]()
    text = print_prim_func(f)
    assert "        with let(t: int32 = X[i] * 2i32):\n" in text
    assert "        u: int32 = truncdiv(X[i], 4i32) + truncmod(X[i], 3i32)\n" in text
    g = FIXTURES["softmax_workspace"]()
    text = print_prim_func(g)
    assert '    exps = allocate((8,), float32, scope="global.workspace")\n' in text
    s = g.body.body.stmts[1]  # the local allocation, last in its block: flat
    wrapped = PrimFunc(g.params, seq(s, Evaluate(0)), g.attrs)
    assert '    with allocate((1,), float32, scope="local") as acc:\n' in print_prim_func(wrapped)


def test_names_are_sanitized_and_unique_where_visible():
    text = round_trip(FIXTURES["weird_names"]())
    assert 'def "weird \\"fn\\" */"(in_put___x: Buffer((2,), float32), for_: Buffer((2,), float32)):' in text
    assert "    i = allocate((2,), float32, scope=\"local\")\n    for i_1 in serial(0, 2):" in text
    # sibling loops with distinct variables of one name both print as `i`
    i1, i2, A = Var("i"), Var("i"), Buffer("A", (2,))
    f = PrimFunc((A,), seq(For(i1, 0, 2, "serial", A.store(i1, 1.0)), For(i2, 0, 2, "serial", A.store(i2, 2.0))))
    assert print_prim_func(f).count("for i in serial(0, 2):") == 2
    round_trip(f)


LITERALS = [
    IntImm(-9223372036854775808), IntImm(9223372036854775807), IntImm(18446744073709551615, "uint64"),
    IntImm(-128, "int8"), IntImm(255, "uint8"), IntImm(1, "bool"), IntImm(0, "bool"), IntImm(-7, "int32"),
    FloatImm(0.1), FloatImm(3.4028234663852886e38), FloatImm(1e-45), FloatImm(-0.0), FloatImm(0.1, "float64"),
    FloatImm(1e300, "float64"), FloatImm(-0.0, "float64"), FloatImm(65504.0, "float16"), FloatImm(0.1, "float16"),
    FloatImm(math.inf), FloatImm(-math.inf, "float64"), FloatImm(math.nan, "float16"), FloatImm(2.0, "float64"),
]


@pytest.mark.parametrize("lit", LITERALS, ids=lambda e: f"{e.dtype}:{e.value}")
def test_literal_round_trip(lit):
    B = Buffer("B", (1,), lit.dtype)
    f = PrimFunc((B,), B.store(0, lit))
    text = round_trip(f)
    g = tir.parse_prim_func(text)
    v = g.body.value
    assert type(v) is type(lit) and v.dtype == lit.dtype
    assert (math.isnan(v.value) and math.isnan(lit.value)) or (
        v.value == lit.value and math.copysign(1, v.value) == math.copysign(1, lit.value))


def test_literal_spelling():
    e = tir.Var("x", "float64") * FloatImm(-0.5, "float64") + FloatImm(math.inf, "float64")
    assert str(e) == "x * -0.5f64 + inff64"
    assert str(IntImm(3) - IntImm(-3)) == "3 - -3"
    assert str(FloatImm(1e20)) == "1e+20" and str(FloatImm(-math.nan)) == "nan"


def test_precedence_parenthesizes_only_when_needed():
    x, y, z = Var("x"), Var("y"), Var("z")
    cases = [
        ((x + y) * z, "(x + y) * z"), (x + y * z, "x + y * z"), (x - (y - z), "x - (y - z)"),
        ((x - y) - z, "x - y - z"), (x // (y * z), "x // (y * z)"), (tir.eq(x < y, y < z), "(x < y) == (y < z)"),
        (tir.logical_not(tir.logical_or(x < y, y < z)), "not (x < y or y < z)"),
        (tir.logical_and(tir.logical_or(x < y, y < z), x > z), "(x < y or y < z) and x > z"),
        ((x << 2) + 1, "(x << 2) + 1"), (x << 2 + y, "x << 2 + y"), (~(x & y) | z, "~(x & y) | z"),
        (-(x + y), "0 - (x + y)"), (tir.min(x, y) % 3, "min(x, y) % 3"),
    ]
    for e, text in cases:
        assert str(e) == text
        A = Buffer("A", (1,), e.dtype)
        round_trip(PrimFunc((A, x, y, z), A.store(0, e)))


def test_ill_typed_trees_print_and_parse_faithfully():
    i32, i64 = Var("a", "int32"), Var("b")
    A = Buffer("A", (4,))
    j = Var("j", "int32")
    body = seq(
        A.store(0, Cast("float32", Add(i32, i64))),
        Evaluate(Call("float64", "exp", (FloatImm(1.0),), "intrin")),  # wrong result dtype
        Evaluate(Call("float32", "sigmoid", (FloatImm(1.0),), "intrin")),  # unknown intrinsic
        Evaluate(Call("float32", "exp", (), "intrin")),
        For(j, IntImm(0), IntImm(4), "serial", Evaluate(0)),  # int64 bounds, int32 variable
    )
    f = PrimFunc((i32, i64, A), body)
    text = round_trip(f)
    assert 'call_intrin(float64, "exp", 1.0)' in text and 'call_intrin(float32, "sigmoid", 1.0)' in text
    assert "for j: int32 in serial(0, 4):" in text
    with pytest.raises(tir.TIRVerifyError):
        tir.verify(tir.parse_prim_func(text))


def test_hand_written_text_with_comments_and_continuations():
    text = (
        "# a comment\n\n"
        "@prim_func(global_symbol=\"axpy\")\n"
        "def axpy(n: int64, x: Buffer((n,), float32), y: Buffer((n,), float32)):\n"
        "    for i in serial(0, n):  # loop\n"
        "        y[i] = (y[i] +\n"
        "                -x[i] * 2.0)\n"
        "        if not i < 3:\n"
        "            pass\n"
    )
    f = tir.parse_prim_func(text)
    tir.verify(f)
    assert print_prim_func(f) == (
        '@prim_func(global_symbol="axpy")\n'
        "def axpy(n: int64, x: Buffer((n,), float32), y: Buffer((n,), float32)):\n"
        "    for i in serial(0, n):\n"
        "        y[i] = y[i] + x[i] * -1.0 * 2.0\n"
        "        if not i < 3:\n"
        "            pass\n"
    )


def test_several_functions_and_names():
    m, s = matmul(), FIXTURES["softmax_workspace"]()
    text = tir.print_prim_funcs({"mm": m, "fused/softmax": s})
    assert "\ndef mm(" in text and '\ndef "fused/softmax"(' in text
    funcs = tir.parse_prim_funcs(text)
    assert [n for n, _ in funcs] == ["mm", "fused/softmax"]
    tir.assert_structural_equal(funcs[1][1], s)
    with pytest.raises(ParseError) as e:
        tir.parse_prim_func(text)
    assert str(e.value) == "<tir>:1:1: parse error: expected exactly one function, found 2"


PARSE_ERRORS = [
    ("    A[0] = B[0]\n", "3:12: parse error: undefined name 'B'"),
    ("    A[0] = sigmoid(A[1])\n", "3:12: parse error: unknown function 'sigmoid'"),
    ("    A[0] = 1.0\n      A[1] = 1.0\n", "4:7: parse error: unexpected indentation"),
    ("    for i in serial(0, 4):\n    A[0] = 1.0\n", "4:5: parse error: expected an indented block after line 3"),
    ("    A[0] = 1.0\n    else:\n        pass\n", "4:5: parse error: 'else' without a matching 'if'"),
    ("    for i in serial(0, 4):\n        if 0 < i < 3:\n            pass\n",
     "4:18: parse error: comparisons cannot be chained: use parentheses"),
    ("    A[0] = 1.0\n    x: int64 = 3\n",
     "4:5: parse error: 'x' is bound on the last line of its block: nothing uses it (add 'pass')"),
    ("\tpass\n", "3:1: parse error: unexpected character a tab (indent with spaces)"),
    ("    A[0] = (A[1] + 1.0\n", "3:12: parse error: '(' is never closed"),
    ("    A[0] = min(A[1], A[2]]\n", "3:26: parse error: unmatched ']'"),
    ("    A[0] = A\n", "3:12: parse error: 'A' is a buffer: index it as A[...]"),
    ("    for i in spiral(0, 4):\n        pass\n",
     "3:14: parse error: unknown loop kind 'spiral' (expected serial, parallel, vectorized, unrolled)"),
    ("    A[0] = select(True, A[1])\n", "3:12: parse error: 'select' takes 3 argument(s), got 2"),
    ("    A[0] = 300i8\n", "3:12: parse error: 300 does not fit in int8 [-128, 127]"),
    ("    A[0] = 3.5i8\n", "3:12: parse error: '3.5i8': an integer literal cannot have a fraction or an exponent"),
    ("    A[0] = 3x\n", "3:12: parse error: invalid number literal starting with '3'"),
    ("    A[0] =\n", "3:11: parse error: expected an expression, got end of line"),
    ("    A = 3\n", "3:9: parse error: only allocate(...) can be assigned to a name "
                    "(write 'A: <dtype> = ...' for a let binding)"),
    ("    A[0] = cast(float33, 1)\n", "3:17: parse error: unknown dtype 'float33'"),
    ("    A[0] + 1.0 = 2.0\n",
     "3:16: parse error: only a buffer element can be assigned (write 'x: <dtype> = ...' for a let)"),
    ("    A[0] = -True\n", "3:12: parse error: '-' needs numeric operands, got bool"),
]


@pytest.mark.parametrize("body,message", PARSE_ERRORS)
def test_parse_errors_name_line_and_column(body, message):
    with pytest.raises(ParseError) as e:
        tir.parse_prim_func(HEADER + body, source_name="k.tir")
    assert str(e.value) == "k.tir:" + message
    assert (e.value.line, e.value.column) == tuple(int(x) for x in message.split(":")[:2])


def test_print_of_nodes():
    A = Buffer("A", (4, "n" and 4), "float16", "global.workspace")
    assert str(A) == 'A: Buffer((4, 4), float16, scope="global.workspace")'
    i = Var("i")
    assert str(A[i, 0]) == "A[i, 0]" and repr(A[i, 0]) == "BufferLoad(A[i, 0])"
    assert str(For(i, 0, 2, "unrolled", A.store((i, 0), FloatImm(1.0, "float16")))) == (
        "for i in unrolled(0, 2):\n    A[i, 0] = 1.0f16")
    x, x2 = Var("x"), Var("x")
    assert str(x + x2) == "x + x_1"  # distinct free variables of one name stay distinct
