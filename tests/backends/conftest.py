"""Shared helpers for the C backend tests: a per-session compile cache and run-and-compare."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import build_c, c_function_names
from plait.runtime.module import RuntimeError_

HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None
needs_arm = pytest.mark.skipif(not HAVE_ARM, reason="arm-none-eabi-gcc is not installed (.ci/run installs it)")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cc_cache")


def run_c(funcs, args_per_func, cache_dir, target="c", statuses=None, **kwargs):
    """Build ``funcs`` into one library and call each on (copies of) its arguments; returns the
    argument lists after the calls (outputs written in place). ``statuses``: per function, the status
    it must return (0, or the code of the run-time check that stops it)."""
    lib = build_c(funcs, target, cache_dir=cache_dir, **kwargs)
    return call_each(lib, c_function_names(funcs), args_per_func, statuses)


def call_each(lib, names, args_per_func, statuses=None):
    """Call ``lib[name]`` on copies of its arguments, expecting its status (``statuses``, default 0)."""
    outs = []
    for k, (name, args) in enumerate(zip(names, args_per_func)):
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        want = statuses[k] if statuses else 0
        if want:
            with pytest.raises(RuntimeError_) as e:
                lib[name](*args)
            assert str(e.value).endswith(f"(status {want})"), str(e.value)
        else:
            lib[name](*args)
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
