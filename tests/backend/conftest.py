"""Shared helpers for the C backend tests: a per-session compile cache and run-and-compare."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from plait import tir
from plait.backend.c import build_c, c_function_names

HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None
needs_arm = pytest.mark.skipif(not HAVE_ARM, reason="arm-none-eabi-gcc is not installed (.ci/run installs it)")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cc_cache")


def run_c(funcs, args_per_func, cache_dir, target="c", **kwargs):
    """Build ``funcs`` into one library and call each on (copies of) its arguments; returns the
    argument lists after the calls (outputs written in place)."""
    lib = build_c(funcs, target, cache_dir=cache_dir, **kwargs)
    outs = []
    for f, cname, args in zip(funcs, c_function_names(funcs), args_per_func):
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        lib[cname](*args)
        outs.append(args)
    return outs


def run_ref(func, args, **kwargs):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.evaluate(func, *args, **kwargs)
    return args


def assert_same(got, want, rtol=0.0, atol=0.0):
    """Arrays equal (NaNs equal), or close within rtol/atol for floats."""
    for g, w in zip(got, want):
        if not isinstance(w, np.ndarray):
            continue
        assert g.dtype == w.dtype
        if w.dtype.kind == "f" and (rtol or atol):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
