"""The Python model builder: operator sugar, names, type errors at the call site, results."""

from __future__ import annotations

import numpy as np
import pytest

from plait.errors import PlaitError, RegistryError, TypeInferenceError
from plait.frontend import Builder
from plait.ir import TensorType
from plait.ir.types import TupleType
from plait.relay import Call, post_order, run


def test_mlp_matches_numpy():
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    b = Builder("mlp")
    x = b.input("x", (2, 8))
    h = b.nn.relu(b.nn.dense(x, b.const(w1), name="fc1") + b.const(b1))
    y = b.nn.softmax((h @ b.const(w2)) * 0.5 - 1.0, axis=-1, name="probs")
    mod = b.finish(y)
    assert mod.attrs["name"] == "mlp"
    assert mod.attrs["input_names"] == ("x",) and mod.attrs["output_names"] == ("output_0",)
    assert mod.main.ret_type == TensorType((2, 4))
    names = [n.meta["name"] for n in post_order(mod.main.body) if isinstance(n, Call)]
    assert names == ["fc1", "add_0", "relu_0", "matmul_0", "multiply_0", "subtract_0", "probs"]
    xv = rng.standard_normal((2, 8)).astype(np.float32)
    logits = (np.maximum(xv @ w1.T + b1, 0) @ w2) * 0.5 - 1.0
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(run(mod, {"x": xv}), e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_reflected_operators_and_constants_take_the_value_dtype():
    b = Builder()
    x = b.input("x", (3,), "int32")
    y = 10 - x * 2 + np.int32(1)
    z = -(1 / b.cast(x, dtype="float32"))
    mod = b.finish(y, z, output_names=["y", "z"])
    assert mod.main.ret_type == TupleType((TensorType((3,), "int32"), TensorType((3,), "float32")))
    yv, zv = run(mod, {"x": np.array([1, 2, 4], np.int32)})
    np.testing.assert_array_equal(yv, [9, 7, 3])
    np.testing.assert_allclose(zv, [-1, -0.5, -0.25])


def test_tuple_results_and_symbolic_inputs():
    b = Builder()
    x = b.input("x", ("n", 6))
    left, right = b.split(x, sections=(2, 4), axis=1)
    assert left.shape == ("n", 2) and right.shape == ("n", 4)
    mod = b.finish(b.concatenate(right, left, axis=1))
    xv = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(run(mod, {"x": xv}), np.concatenate([xv[:, 2:], xv[:, :2]], axis=1))


def test_type_errors_are_reported_at_the_call():
    b = Builder("bad")
    x = b.input("x", (1, 8))
    with pytest.raises(TypeInferenceError) as e:
        b.nn.dense(x, b.const(np.ones((3, 3), np.float32)), name="fc")
    assert str(e.value) == ("type mismatch in builder 'bad': call 'fc' (operator 'nn.dense') with argument types "
                            "(Tensor[(1, 8), float32], Tensor[(3, 3), float32]): "
                            "dense: weight dim 1 (data dim -1): expected 8, got 3")


def test_unknown_operators_and_misuse():
    b = Builder("m")
    with pytest.raises(RegistryError) as e:
        b.nn.dens
    assert str(e.value).startswith("unknown operator 'nn.dens'; did you mean 'nn.dense'")
    x = b.input("x", (2,))
    with pytest.raises(PlaitError) as e:
        b.input("x", (3,))
    assert str(e.value) == "builder 'm': input 'x' is already defined"
    with pytest.raises(PlaitError) as e:
        Builder("other").finish(x)
    assert str(e.value) == "builder 'other': a value of another builder was used"
    with pytest.raises(PlaitError) as e:
        b.finish()
    assert str(e.value) == "builder 'm': finish() needs at least one output"
