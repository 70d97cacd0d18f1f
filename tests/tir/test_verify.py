"""The TIR verifier: every rule, with exact messages."""

import pytest

from plait import tir
from plait.ir.transform import Pass, PassContext
from plait.relay import IRModule
from plait.tir import (
    Add, Allocate, And, AddressOf, BitwiseNot, Buffer, BufferStore, Call, Cast, Div, Evaluate, FloatImm, FloorDiv,
    For, IfThenElse, IntImm, Let, LetStmt, LT, Not, PrimFunc, Select, Var, seq,
)
from plait.tir.transform import Simplify, VerifyTIR

from .fixtures import FIXTURES

A, B = Buffer("A", (4, 4)), Buffer("B", (4,), "int32")
T = Buffer("T", (4,), "float32", "global.workspace")
i, j, k = Var("i"), Var("j"), Var("k")
q32, qf = Var("q", "int32"), Var("q", "float32")


def store(value, *idx):
    return A.store(idx or (0, 0), value)


CASES = {
    "undefined var": (For(i, 0, 4, "serial", store(1.0, i, k)), "undefined variable 'k' in `A[i, k] = 1.0`"),
    "let scope ends": (seq(LetStmt(k, IntImm(1), Evaluate(0)), store(1.0, k, 0)),
                       "undefined variable 'k' in `A[k, 0] = 1.0`"),
    "loop var in own bounds": (For(i, 0, i, "serial", Evaluate(0)), "undefined variable 'i' in `for i_1 in serial(0, i):`"),
    "undeclared buffer": (Buffer("Z", (4,)).store(0, 1.0), "buffer 'Z' is neither a parameter nor allocated in `Z[0] = 1.0`"),
    "outside allocation": (seq(Allocate(T, T.store(0, 1.0)), store(T[0])),
                           "buffer 'T' is used outside its allocation in `A[0, 0] = T[0]`"),
    "index count": (store(1.0, 0), "buffer 'A' has 2 dimension(s) but is indexed with 1 in `A[0] = 1.0`"),
    "index dtype": (store(1.0, FloatImm(0.0), 0),
                    "index 0 of buffer 'A' must be an integer, got float32 in `A[0.0, 0] = 1.0`"),
    "operand dtypes": (B.store(0, Cast("int32", Add(B[0], Cast("int64", B[1])))),
                       "operands of '+' have different dtypes int32 and int64 in `B[0] + cast(int64, B[1])`"),
    "store dtype": (BufferStore(B, FloatImm(1.0), (0,)), "store of a float32 value to buffer 'B' (int32) in `B[0] = 1.0`"),
    "if condition": (IfThenElse(B[0], store(1.0)), "if condition must be bool, got int32 in `if B[0]:`"),
    "select condition": (store(Select(B[0], A[0, 0], A[0, 1])),
                         "select condition must be bool, got int32 in `select(B[0], A[0, 0], A[0, 1])`"),
    "select branches": (store(Select(IntImm(1, "bool"), A[0, 0], FloatImm(1.0, "float64"))),
                        "select branches have different dtypes float32 and float64 in `select(True, A[0, 0], 1.0f64)`"),
    "loop bounds dtype": (For(q32, IntImm(0), IntImm(4), "serial", Evaluate(0)),
                          "loop 'q': min and extent must be int32 like the loop variable, got int64 and int64"),
    "float loop": (For(qf, FloatImm(0.0), FloatImm(4.0), "serial", Evaluate(0)),
                   "loop variable 'q' must be an integer, got float32"),
    "loop var twice": (seq(For(i, 0, 4, "serial", Evaluate(0)), For(i, 0, 4, "serial", Evaluate(0))),
                       "loop variable 'i' is bound more than once"),
    "let var twice": (LetStmt(k, IntImm(1), Evaluate(Let(k, IntImm(2), k))), "let variable 'k' is bound more than once"),
    "unknown intrinsic": (store(Call("float32", "sigmoid", (A[0, 0],))),
                          "unknown intrinsic 'sigmoid' in `call_intrin(float32, \"sigmoid\", A[0, 0])`"),
    "intrinsic arity": (store(Call("float32", "exp", (A[0, 0], A[0, 0]))),
                        "intrinsic 'exp' takes 1 argument(s), got 2 in `exp(A[0, 0], A[0, 0])`"),
    "intrinsic on ints": (B.store(0, Call("int32", "exp", (B[0],))),
                          "intrinsic 'exp' needs float arguments of one dtype, got int32 in `exp(B[0])`"),
    "intrinsic result": (Evaluate(Call("float32", "isnan", (A[0, 0],))),
                         "intrinsic 'isnan' returns bool, not float32 in `call_intrin(float32, \"isnan\", A[0, 0])`"),
    "parallel in vectorized": (For(i, 0, 4, "vectorized", For(j, 0, 4, "parallel", store(1.0, i, j))),
                               "parallel loop 'j' is inside vectorized loop 'i'"),
    "int true division": (B.store(0, Div(B[0], B[1])), "'/' needs float operands, got int32 in `B[0] / B[1]`"),
    "float floordiv": (store(FloorDiv(A[0, 0], A[0, 1])),
                       "'//' needs integer operands, got float32 in `A[0, 0] // A[0, 1]`"),
    "int and": (B.store(0, Cast("int32", And(B[0], B[1]))), "'and' needs bool operands, got int32 in `B[0] and B[1]`"),
    "bool compare": (Evaluate(LT(IntImm(1, "bool"), IntImm(0, "bool"))),
                     "'<' needs numeric operands, got bool in `True < False`"),
    "int not": (Evaluate(Not(B[0])), "'not' needs a bool operand, got int32 in `not B[0]`"),
    "float bitwise not": (Evaluate(BitwiseNot(A[0, 0])), "'~' needs an integer operand, got float32 in `~A[0, 0]`"),
    "void value": (Evaluate(Call("int32", "g", (Call("void", "f", (), "extern"),), "extern")),
                   "void call 'f' used as a value in `call_extern(int32, \"g\", call_extern(void, \"f\"))`"),
    "let dtype": (LetStmt(Var("x", "int32"), IntImm(3), Evaluate(0)), "let variable 'x' is int32 but its value is int64"),
    "let expr dtype": (Evaluate(Let(Var("x", "int32"), IntImm(3), IntImm(0))),
                       "let variable 'x' is int32 but its value is int64"),
    "let body scope": (Evaluate(Let(Var("x"), IntImm(3), Var("y"))), "undefined variable 'y' in `let(x: int64 = 3, y)`"),
    "unknown scope": (Allocate(Buffer("S", (4,), "float32", "shared"), Evaluate(0)),
                      "buffer 'S' has unknown scope 'shared' (expected global, global.workspace, local)"),
    "float shape": (Allocate(Buffer("S", (FloatImm(2.0),), "float32", "local"), Evaluate(0)),
                    "the shape of allocated buffer 'S' must be integers, got float32 in `2.0`"),
    "allocate a param": (Allocate(A, Evaluate(0)), "buffer 'A' is a parameter and is also allocated"),
    "allocated twice": (seq(Allocate(T, Evaluate(0)), Allocate(T, Evaluate(0))), "buffer 'T' is allocated more than once"),
    "cast a handle": (Evaluate(Cast("int32", AddressOf(A, (0, 0)))),
                      "cannot cast a handle value in `cast(int32, address_of(A[0, 0]))`"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verifier_rule(case):
    body, message = CASES[case]
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(PrimFunc((A, B), body, {"global_symbol": "f"}))
    assert str(e.value) == f"PrimFunc 'f': {message}"
    assert isinstance(e.value, tir.TIRError)


@pytest.mark.parametrize("params,attrs,message", [
    ((A, A), {}, "parameter 1 ('A') appears more than once"),
    ((T,), {}, "parameter buffer 'T' must have scope 'global', got 'global.workspace'"),
    ((Buffer("Q", (Var("n"),)),), {}, "undefined variable 'n' in the shape of parameter buffer 'Q'"),
    ((A,), {"global_symbol": "g", "piece": 3}, "attribute 'piece' must be a str, got 3"),
    ((A,), {"num_inputs": 2}, "attribute 'num_inputs' must be an int in [0, 1], got 2"),
])
def test_verifier_function_rules(params, attrs, message):
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(PrimFunc(params, Evaluate(0), attrs), name="h")
    assert str(e.value) == f"PrimFunc 'h': {message}"


def test_all_problems_are_listed_in_order():
    body = seq(store(1.0, 0), BufferStore(B, FloatImm(1.5), (0,)), store(1.0, k, 0))
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(PrimFunc((A, B), body, {"global_symbol": "f"}))
    assert str(e.value) == ("PrimFunc 'f': buffer 'A' has 2 dimension(s) but is indexed with 1 in `A[0] = 1.0` "
                            "(and 2 more problems)")
    assert e.value.problems[1:] == [
        "PrimFunc 'f': store of a float32 value to buffer 'B' (int32) in `B[0] = 1.5`",
        "PrimFunc 'f': undefined variable 'k' in `A[k, 0] = 1.0`",
    ]


def test_shared_subexpression_is_checked_in_each_scope():
    e = A[i, 0] + 1.0  # one node object used inside and outside the loop that binds i
    body = seq(For(i, 0, 4, "serial", store(e, i, 0)), store(e))
    with pytest.raises(tir.TIRVerifyError) as exc:
        tir.verify(PrimFunc((A,), body, {"global_symbol": "f"}))
    assert str(exc.value) == "PrimFunc 'f': undefined variable 'i' in `A[0, 0] = A[i, 0] + 1.0`"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixtures_verify(name):
    tir.verify(FIXTURES[name]())


def test_verify_module_and_instrument():
    good = FIXTURES["matmul"]()
    bad = PrimFunc((A,), store(1.0, 0), {"global_symbol": "bad"})
    mod = IRModule({"mm": good, "broken": bad})
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(mod)
    assert str(e.value) == "PrimFunc 'broken': buffer 'A' has 2 dimension(s) but is indexed with 1 in `A[0] = 1.0`"
    tir.verify(IRModule({"mm": good}))

    class Break(Pass):
        name = "break_it"

        def run(self, m, ctx):
            return m.with_function("x", bad)

    ctx = PassContext(instruments=[VerifyTIR()])
    assert ctx.run(Simplify(), IRModule({"mm": good}))["mm"] is good  # nothing to simplify: unchanged
    with pytest.raises(tir.TIRVerifyError) as e:
        ctx.run(Break(), IRModule({"mm": good}))
    assert str(e.value).startswith("after pass 'break_it': PrimFunc 'x': buffer 'A' has 2 dimension(s)")
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(42)
    assert str(e.value) == "verify: expected a PrimFunc or an IRModule, got int"


# ---- memoization (a verified PrimFunc is not checked again; checked expressions keep what they use) ----


def test_an_expression_checked_in_one_function_is_still_scoped_in_another():
    e = A[i, 0] + 1.0
    tir.verify(PrimFunc((A,), For(i, 0, 4, "serial", store(e, i, 0)), {"global_symbol": "ok"}))
    with pytest.raises(tir.TIRVerifyError) as exc:  # the same node, now outside the loop binding i
        tir.verify(PrimFunc((A,), store(e), {"global_symbol": "f"}))
    assert str(exc.value) == "PrimFunc 'f': undefined variable 'i' in `A[0, 0] = A[i, 0] + 1.0`"
    bad = Add(A[0, 0], Cast("float64", A[0, 1]))  # a node with a problem is reported every time
    for _ in range(2):
        with pytest.raises(tir.TIRVerifyError, match="operands of '\\+' have different dtypes float32 and float64"):
            tir.verify(PrimFunc((A,), Evaluate(bad), {"global_symbol": "g"}))


def test_a_let_is_checked_per_function():
    let = Let(k, IntImm(1), Cast("float32", k))
    tir.verify(PrimFunc((A,), store(let), {"global_symbol": "once"}))
    with pytest.raises(tir.TIRVerifyError) as exc:  # the let (and what contains it) is not memoized
        tir.verify(PrimFunc((A,), LetStmt(k, IntImm(2), store(let + 1.0)), {"global_symbol": "twice"}))
    assert str(exc.value) == "PrimFunc 'twice': let variable 'k' is bound more than once"


def test_a_function_that_verified_is_not_walked_again(monkeypatch):
    from plait.tir.verify import _Verifier

    runs = []
    run = _Verifier.run
    monkeypatch.setattr(_Verifier, "run", lambda self: runs.append(self.name) or run(self))
    good, bad = FIXTURES["matmul"](), PrimFunc((A,), store(1.0, 0), {"global_symbol": "bad"})
    for _ in range(3):
        tir.verify(good)
        with pytest.raises(tir.TIRVerifyError):
            tir.verify(bad)
    assert runs == ["matmul", "bad", "bad", "bad"]
