"""The Relay Loop node: type inference (a symbolic scan length unless the trip count is a constant and
there is no condition), the reference interpreter (ONNX Loop semantics), printing and parsing,
structural equality, and the errors."""

import numpy as np
import pytest

from plait.errors import PlaitError, TypeInferenceError
from plait.relay import (Function, IRModule, Loop, Tuple, TupleGetItem, call, const, infer_type, parse_module,
                         print_module, run, structural_equal, structural_hash, var)


def _loop(trip=None, cond=None, num_scan=1, state_out=None):
    x = var("x", (2,))
    i, c, s = var("i", (), "int64"), var("c", (), "bool"), var("s", (2,))
    limit = call("less", call("sum", s), const(np.float32(10)))
    body = Function((i, c, s), Tuple((limit, state_out if state_out is not None else call("add", s, x),
                                      call("multiply", s, s))[:2 + num_scan]))
    return x, Loop(trip, cond, (x,), body, num_scan)


def _module(trip=None, cond=None):
    m, go = var("m", (), "int64"), var("go", (), "bool")
    x, lp = _loop(m if trip == "var" else trip, go if cond else None)
    params = (x, m, go)
    return IRModule({"main": Function(params, Tuple((TupleGetItem(lp, 0), TupleGetItem(lp, 1))))})


def test_types():
    mod = infer_type(_module(trip="var"))
    assert str(mod.main.body.checked_type) == "(Tensor[(2,), float32], Tensor[(?, 2), float32])"
    x, lp = _loop(const(3, "int64"))
    infer_type(IRModule({"main": Function((x,), lp)}))
    assert str(lp.checked_type) == "(Tensor[(2,), float32], Tensor[(3, 2), float32])"
    x, lp = _loop(const(-2, "int64"))
    infer_type(IRModule({"main": Function((x,), lp)}))
    assert str(lp.checked_type.fields[1]) == "Tensor[(0, 2), float32]"


def test_interpreter_follows_onnx_loop_semantics():
    mod = _module(trip="var", cond=True)
    x = np.array([1.0, 2.0], np.float32)
    state, scans = run(mod, {"x": x, "m": np.array(10), "go": np.array(True)})
    # the body's condition is sum(s) < 10 on its input state x, 2x, 3x, 4x: false in the 4th iteration,
    # which still runs (its state 5x is the result); the 5th does not
    np.testing.assert_array_equal(state, 5 * x)
    np.testing.assert_array_equal(scans, np.stack([x * x, 4 * x * x, 9 * x * x, 16 * x * x]))
    state, scans = run(mod, {"x": x, "m": np.array(2), "go": np.array(True)})
    np.testing.assert_array_equal(state, 3 * x)
    state, scans = run(mod, {"x": x, "m": np.array(5), "go": np.array(False)})
    np.testing.assert_array_equal(state, x)
    assert scans.shape == (0, 2) and scans.dtype == np.float32


def test_print_parse_round_trip():
    mod = infer_type(_module(trip="var", cond=True))
    text = print_module(mod)
    assert "loop(%0, (%x,), trip_count=%m, cond=%go, num_scan=1)" in text
    back = parse_module(text)
    assert structural_equal(mod, back) and structural_hash(mod) == structural_hash(back)
    assert print_module(back) == text
    with pytest.raises(PlaitError) as e:
        parse_module(text.replace("(%x,), trip", "(%x), trip"))
    assert str(e.value) == ("<text>:10:8: parse error: a loop's initial state is a tuple: write (x,) for one "
                            "value")
    assert not structural_equal(mod, parse_module(text.replace("num_scan=1", "num_scan=0").replace(
        "(%5, %7, %8)", "(%5, %7)")))


def test_errors():
    i, c, s = var("i", (), "int64"), var("c", (), "bool"), var("s", (2,))
    with pytest.raises(PlaitError) as e:
        Loop(None, None, (s,), Function((i, s), Tuple((c, s))), 0)
    assert str(e.value) == "a loop body takes (iter, cond, *state): 3 parameters for 1 state values, got 2"
    x = var("x", (2,))
    _, lp = _loop(const(3.0, "float32"))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(IRModule({"main": Function((x,), lp)}))
    assert str(e.value) == "in @main: a loop's trip count must be a single int64, got Tensor[(), float32]"
    _, lp = _loop(None, None, state_out=call("sum", var("s", (2,)), axis=(0,)))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(IRModule({"main": Function((lp.init[0],), lp)}))
    assert str(e.value) == ("in @main: loop state 0 has the type Tensor[(2,), float32] initially, Tensor[(2,), "
                            "float32] as a body parameter and Tensor[(1,), float32] as a body result; they must agree")
