"""Every registered operator has a TE compute; one table of small cases per operator is run through
the TIR interpreter and, compiled into one library, through the C backend (both vs the references)."""

from __future__ import annotations

import numpy as np
import pytest
from computes_cases import CASES, case_ids
from computes_util import assert_same, lower, reference, run

from plait import te
from plait.backends.c.backend import build_c, c_function_names
from plait.errors import PlaitError
from plait.ir import TensorType
from plait.op import get_op, list_ops
from plait.op._compute import ComputeError

# Operators without a compute, each with the reason. Empty: every operator lowers.
NO_COMPUTE: dict[str, str] = {}


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


def test_symbolic_shapes_are_a_clear_error():
    op = get_op("add")
    x = te.placeholder(("n", 3), "float32", "x")
    with pytest.raises(ComputeError, match=r"^add: result shape \(n, 3\) has a symbolic dimension 'n': "
                                           r"lowering needs static shapes$"):
        get_op("add").compute([x, x], op.make_attrs({}), TensorType(("n", 3)))
    with pytest.raises(ComputeError, match=r"^nn.dense: input 'x' shape \(n, 3\) has a symbolic dimension 'n'"):
        get_op("nn.dense").compute([x, te.placeholder((2, 3))], op.make_attrs({}), TensorType((4, 2)))
    assert issubclass(ComputeError, PlaitError)
