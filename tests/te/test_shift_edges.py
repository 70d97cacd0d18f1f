"""Shift amounts C leaves undefined (negative, >= bit width) compile to numpy's answers."""

import numpy as np
import pytest

import plait
from plait.executor.graph.module import GraphModule
from plait.relay import Function, IRModule, call, run, var


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "int64"])
@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
def test_out_of_range_shift_amounts(dtype, op, tmp_path):
    info = np.iinfo(dtype)
    a, b = var("a", (6,), dtype), var("b", (6,), dtype)
    mod = IRModule.from_expr(Function((a, b), call(op, a, b)))
    gm = GraphModule(plait.build(mod, "c", config={"cc.cache_dir": str(tmp_path)}))
    av = np.array([5, -5 if info.min < 0 else 250, 7, 1, 3, 2], dtype)
    bv = np.array([-1 if info.min < 0 else info.max, info.bits, info.bits + 1, info.bits - 1, 0, 2], dtype)
    expected = run(mod, {"a": av, "b": bv})
    np.testing.assert_array_equal(gm(a=av, b=bv)[0], expected)
