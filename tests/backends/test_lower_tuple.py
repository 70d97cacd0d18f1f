"""A Primitive function whose result is a 1-tuple lowers to a PrimFunc typed as a 1-tuple."""

import numpy as np

import plait
from plait.executor.graph.module import GraphModule
from plait.relay import Function, IRModule, TupleGetItem, call, run, var


def test_one_tuple_result_builds_and_runs(tmp_path):
    x = var("x", (4, 3))
    parts = call("split", call("add", x, x), sections=(4,), axis=0)  # a 1-tuple
    mod = IRModule.from_expr(Function((x,), call("nn.relu", TupleGetItem(parts, 0))))
    art = plait.build(mod, "c", config={"cc.cache_dir": str(tmp_path)})
    xv = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(GraphModule(art)(x=xv)[0], run(mod, {"x": xv}))
