"""AssertStmt, TIR's run-time check: text, verifier, interpreter, simplifier, structural equality."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.errors import ParseError
from plait.ir import status
from plait.tir import AssertStmt, Buffer, For, PrimFunc, Var, seq

from .fixtures import checked_gather


def test_text_round_trip_and_spelling():
    f = checked_gather(n=2, size=3)
    text = tir.print_prim_func(f)
    assert "    assert cast(int64, idx[c]) >= -3 and cast(int64, idx[c]) < 3, 1\n" in text
    g = tir.parse_prim_func(text)
    tir.assert_structural_equal(f, g)
    assert tir.print_prim_func(g) == text


@pytest.mark.parametrize("line,message", [
    ("assert A[0] > 0.0, 0", "status code 0 is out of range [1, 2147483647]"),
    ("assert A[0] > 0.0, 2147483648", "status code 2147483648 is out of range [1, 2147483647]"),
    ("assert A[0] > 0.0, x", "expected the status code (an integer), got 'x'"),
    ("assert A[0] > 0.0, 1.5", "expected the status code (an integer), got '1.5'"),
])
def test_parse_errors(line, message):
    with pytest.raises(ParseError) as e:
        tir.parse_prim_func(f"@prim_func\ndef f(A: Buffer((4,), float32)):\n    {line}\n")
    assert message in str(e.value)


def test_constructor_checks_the_status():
    with pytest.raises(tir.TIRError, match=r"^AssertStmt: status must be an int in \[1, 2147483647\], got 0$"):
        AssertStmt(tir.const(True), 0)
    with pytest.raises(tir.TIRError, match=r"got True$"):
        AssertStmt(tir.const(True), True)


def test_verifier_refuses_a_non_bool_condition_and_an_assert_in_a_vectorized_loop():
    A = Buffer("A", (4,))
    i = Var("i")
    bad_cond = PrimFunc((A,), AssertStmt(A[0], 1), {"global_symbol": "f"})
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(bad_cond)
    assert "assert condition must be bool, got float32" in str(e.value)
    vec = PrimFunc((A,), For(i, 0, 4, "vectorized", AssertStmt(A[i] > 0.0, 1)), {"global_symbol": "g"})
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(vec)
    assert ("assert inside vectorized loop 'i' (a check may stop the function, which a vectorized or "
            "parallel loop cannot)") in str(e.value)


def test_interpreter_stops_at_a_failed_check():
    f = checked_gather(n=4, size=5)
    data = np.arange(5, dtype=np.float32)
    out = np.zeros(4, np.float32)
    tir.evaluate(f, data, np.array([0, -1, 4, -5], np.int32), out)
    np.testing.assert_array_equal(out, [0, 4, 4, 0])
    out[:] = 7
    with pytest.raises(tir.TIRCheckError) as e:
        tir.evaluate(f, data, np.array([0, 5, 1, 1], np.int32), out)
    assert e.value.status == status.INDEX_OUT_OF_RANGE
    assert str(e.value) == f"function 'checked_gather': run-time check failed: {status.MESSAGES[1]} (status 1)"
    np.testing.assert_array_equal(out, [7, 7, 7, 7])  # it stopped before the gather loop


def test_structural_equality_and_hash_see_the_status():
    A = Buffer("A", (4,))
    a = PrimFunc((A,), AssertStmt(A[0] > 0.0, 1), {"global_symbol": "f"})
    b = PrimFunc((A,), AssertStmt(A[0] > 0.0, 2), {"global_symbol": "f"})
    assert not tir.structural_equal(a, b)
    assert tir.structural_hash(a) != tir.structural_hash(b)


def test_simplify_drops_checks_that_always_hold_and_keeps_the_others():
    A = Buffer("A", (4,))
    x = Var("x")
    always = AssertStmt(tir.all_(x >= x, tir.const(True)), 1)
    kept = AssertStmt(A[0] > 0.0, 1)
    never = AssertStmt(tir.const(False), 1)
    assert tir.is_no_op(tir.simplify(always))
    assert tir.simplify(kept) is kept
    assert tir.simplify(never) is never
    s = tir.simplify(seq(always, kept))
    assert s is kept
