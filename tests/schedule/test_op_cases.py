"""The default schedules of every operator's TE compute (the shared case table of tests/te) compute
what the unscheduled function computes: TIR interpreter, parallel/vectorized loops run backwards."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from plait import tir
from plait.schedule.rules import default_schedule

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "te"))
from computes_cases import CASES, case_ids  # noqa: E402
from computes_util import lower  # noqa: E402

HOST = "c -simd-bits=256 -clock-mhz=2445"  # host facts pinned: the same answers on AVX2 and AVX-512 machines


def _tolerance(dtype: str) -> dict:
    # rfactor reassociates float sums; everything else is exact
    return {"float16": dict(rtol=1e-2, atol=1e-2), "float64": dict(rtol=1e-12, atol=1e-12)}.get(
        dtype, dict(rtol=2e-5, atol=2e-5))


@pytest.mark.parametrize("case", range(len(CASES)), ids=case_ids())
def test_default_schedules_preserve_results(case):
    op_name, arrays, attrs = CASES[case]
    func, fields = lower(op_name, arrays, **attrs)
    outs = [np.zeros(f.shape, f.dtype) for f in fields]
    tir.evaluate(func, *arrays, *outs)
    for target in (HOST, "cortex-m0"):
        g = default_schedule(func, target)
        got = [np.zeros(f.shape, f.dtype) for f in fields]
        tir.evaluate(g, *[np.array(a) for a in arrays], *got, reverse_parallel=True)
        for w, x in zip(outs, got):
            if w.dtype.kind == "f":
                np.testing.assert_allclose(x, w, equal_nan=True, **_tolerance(w.dtype.name))
            else:
                np.testing.assert_array_equal(x, w)
