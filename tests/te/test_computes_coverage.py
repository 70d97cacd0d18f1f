"""Every registered operator has a TE compute; one table of small cases per operator is run through
the TIR interpreter and, compiled into one library, through the C backend (both vs the references)."""

from __future__ import annotations

import numpy as np
import pytest
from computes_cases import CASES, case_ids
from computes_util import assert_same, lower, reference, run

from plait import te, tir
from plait.backends.c.backend import build_c, c_function_names
from plait.errors import PlaitError
from plait.ir import TensorType
from plait.op import get_op, list_ops
from plait.op._compute import ComputeError, out_tensor_type, static_shape

# Operators without a TE compute, each with the reason (they lower through Op.prim_func instead).
NO_COMPUTE: dict[str, str] = {
    "nonzero": "a data-dependent output shape: its TIR is written directly (tests/op/test_nonzero.py)",
}


def test_every_operator_has_a_compute():
    missing = sorted(op for op in list_ops() if get_op(op).compute is None and op not in NO_COMPUTE)
    assert missing == []
    assert all(get_op(op).compute is None for op in NO_COMPUTE)


def test_the_cases_cover_every_operator():
    assert sorted({op for op, _, _ in CASES}) == sorted(set(list_ops()) - set(NO_COMPUTE))


@pytest.mark.parametrize("case", range(len(CASES)), ids=case_ids())
def test_case_interpreter(case):
    op, inputs, attrs = CASES[case]
    assert_same(run(op, inputs, **attrs), reference(op, inputs, **attrs))


GROUP = 24  # cases per C library: xdist workers build only the groups of the cases they run
_LIBS: dict[int, tuple] = {}


def _library(case: int) -> tuple:
    """(library, C names, result types) of the group of cases holding ``case`` (built once, cached by content)."""
    g = case // GROUP
    if g not in _LIBS:
        funcs, fields = [], []
        for k in range(g * GROUP, min((g + 1) * GROUP, len(CASES))):
            op, inputs, attrs = CASES[k]
            func, fs = lower(op, inputs, **attrs)
            funcs.append(func.with_attrs(global_symbol=f"case{k}"))
            fields.append(fs)
        _LIBS[g] = (build_c(funcs), c_function_names(funcs), fields)
    return _LIBS[g]


@pytest.mark.parametrize("case", range(len(CASES)), ids=case_ids())
def test_case_c(case):
    lib, cnames, fields = _library(case)
    op, inputs, attrs = CASES[case]
    k = case % GROUP
    outs = [np.zeros(f.shape, f.dtype) for f in fields[k]]
    lib[cnames[k]](*[np.ascontiguousarray(x) for x in inputs], *outs)
    # C's libm and FMA contraction (-ffp-contract=fast) may differ from numpy by a few ulps
    assert_same(outs, reference(op, inputs, **attrs), rtol=1e-4, atol=1e-5)


def test_symbolic_shapes_lower_and_static_only_ops_say_so():
    op = get_op("add")
    x = te.placeholder(("n", 3), "float32", "x")
    y = get_op("add").compute([x, x], op.make_attrs({}), TensorType(("n", 3)))
    assert y.shape == (te.size_var("n"), 3)
    w = te.placeholder((2, 3), "float32", "w")
    d = get_op("nn.dense").compute([x, w], get_op("nn.dense").make_attrs({}), TensorType(("n", 2)))
    f = te.create_prim_func([x, w, y, d], "sym")
    xs, ws = np.arange(12, dtype=np.float32).reshape(4, 3), np.ones((2, 3), np.float32)
    ys, ds = np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32)
    tir.evaluate(f, xs, ws, ys, ds, 4)
    assert np.array_equal(ys, xs + xs) and np.array_equal(ds, xs @ ws.T)
    z = get_op("add").compute([x, x], op.make_attrs({}), TensorType(("?", 3)))  # elementwise: from the inputs
    assert z.shape == (te.size_var("n"), 3)
    d2 = get_op("nn.dense").compute([x, w], get_op("nn.dense").make_attrs({}), TensorType(("?", 2)))
    assert d2.shape == (te.size_var("n"), 2)  # a product: its rows from the data
    with pytest.raises(ComputeError, match=r"^nn.dense: result shape \(\?, 2\) has an unknown dimension '\?' that "
                                           r"the inputs' shapes do not give$"):  # a compute that derives no shape
        out_tensor_type(TensorType(("?", 2)), "nn.dense")
    with pytest.raises(ComputeError, match=r"^nn.conv2d: shape \(n, 3\) has a symbolic dimension 'n': this "
                                           r"operator needs static shapes$"):
        static_shape(x.shape, "nn.conv2d")
    assert issubclass(ComputeError, PlaitError)
