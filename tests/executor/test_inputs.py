"""bind_inputs: how AotModule and QemuModule take a run's inputs (positionally, then by name)."""

import pytest

from plait.executor.aot.module import AotRunError
from plait.executor.inputs import bind_inputs


def test_positional_then_named_inputs_bind_to_the_model_names():
    assert bind_inputs(["a", "b"], (1,), {"b": 2}, AotRunError) == {"a": 1, "b": 2}
    assert bind_inputs([], (), {}, AotRunError) == {}


@pytest.mark.parametrize("args, named, message", [
    ((1, 2, 3), {}, "expected at most 2 inputs, got 3"),
    ((1,), {"a": 2}, "input 'a' given twice"),
    ((), {"c": 1}, "the model has no input 'c' (inputs: a, b)"),
    ((1,), {}, "missing input(s): b"),
])
def test_bad_inputs_are_named(args, named, message):
    with pytest.raises(AotRunError) as e:
        bind_inputs(["a", "b"], args, named, AotRunError)
    assert str(e.value) == message
