"""Casts and integer results do not depend on the CPU: the edge programs (tests/backends/edge_programs.py:
casts of NaN, infinities and out-of-range floats, every integer operator at its edges, quantize-like
chains) built for every x86-64 micro-architecture level this machine can run (``-march=x86-64``,
``x86-64-v2``, ``x86-64-v3``, ``x86-64-v4``, ``native``) give bit-identical results, equal to the TIR
interpreter's. gcc picks different instructions per level (SSE2 only, AVX2, AVX-512's saturating
``vcvttps2udq``): once a float -> unsigned cast of a negative value gave 4294967295 with AVX-512 and
4294967294 without. x86-64 and x86-64-v2 run on every x86-64 machine CI uses (v3 too on AMD Zen 3
and on Intel with AVX-512); v4 runs only where the CPU has AVX-512, so that level alone is skipped
elsewhere. Lowered operators compare their integer outputs exactly and float outputs within
rounding (FMA contraction and vector reductions may change the last bits between levels).
"""

from __future__ import annotations

import platform

import numpy as np
import pytest

from .conftest import run_c
from .edge_programs import X86_LEVELS, assert_outputs_equal, element_programs, interpret, level_runs_here, \
    operator_programs

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 levels")

PROGRAMS = list(element_programs())


@pytest.fixture(scope="module")
def expected():
    return [interpret(p) for p in PROGRAMS]


@pytest.fixture(scope="module")
def results():
    return {}  # level -> outputs, filled by the tests (compared with each other at the end)


@pytest.mark.parametrize("level", [*X86_LEVELS, "native"])
def test_casts_and_integer_results_are_the_same_on_every_level(level, expected, results, cache_dir):
    if level != "native" and not level_runs_here(level):
        pytest.skip(f"this CPU cannot run {level} code (no {level} instructions)")
    target = "c -march=" + level
    got = run_c([p.func for p in PROGRAMS], [[*p.inputs, *p.outputs()] for p in PROGRAMS], cache_dir, target=target)
    outs = [args[len(p.inputs):] for p, args in zip(PROGRAMS, got)]
    for p, o, w in zip(PROGRAMS, outs, expected):
        assert_outputs_equal(o, w, True, f"{p.name} built with -march={level}")
    results[level] = outs
    base = results.get("x86-64")
    if base is not None:  # and bit for bit the baseline level's
        for p, o, b in zip(PROGRAMS, outs, base):
            for k, (x, y) in enumerate(zip(o, b)):
                assert x.tobytes() == y.tobytes() or x.dtype.kind == "f", f"{p.name} output {k}: {level} vs x86-64"


def test_at_least_two_levels_run_here():
    assert level_runs_here("x86-64") and level_runs_here("x86-64-v2")


@pytest.mark.parametrize("level", ["x86-64", "native"])
def test_lowered_operators_on_hostile_inputs(level, cache_dir):
    programs = operator_programs("c -march=" + level)
    got = run_c([p.func for p in programs], [[*p.inputs, *p.outputs()] for p in programs], cache_dir,
                target="c -march=" + level, statuses=[p.status for p in programs])
    for p, args in zip(programs, got):
        if not p.status:  # (a program stopped at its index check has unspecified outputs)
            assert_outputs_equal(args[len(p.inputs):], interpret(p), False, f"{p.name} with -march={level}")
        for k, x in enumerate(p.inputs):
            np.testing.assert_array_equal(args[k], x)
