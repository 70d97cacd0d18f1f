"""A big C module is compiled as several translation units in parallel and linked into one library:
same results, same manifest, same generated source, cached by content."""

from __future__ import annotations

import numpy as np
import pytest

from plait.backends.c import units as c_units
from plait.backends.c.backend import build_c, c_function_names, codegen_c
from plait.backends.c.units import LINK_SOURCE, split_units
from plait.runtime import DSOModule
from tir.fixtures import FIXTURES

from .conftest import assert_same, run_ref
from .test_c_fixtures import args_for

NAMES = ("matmul", "conv2d", "softmax_workspace", "lets_and_selects", "zero_dim")


def test_split_units_keeps_the_head_and_the_order_of_the_functions():
    head, bodies = ["/* head */\n", "#define X 1\n"], ["int32_t a(void) { return 0; }\n", "b" * 30, "c" * 30, "d"]
    assert split_units(head, bodies, unit_chars=10**6) == ["\n".join([*head, *bodies])]  # one unit: the source
    units = split_units(head, bodies, unit_chars=40)
    assert units == ["\n".join([*head, bodies[0]]), "\n".join([*head, bodies[1]]), "\n".join([*head, *bodies[2:]])]
    assert split_units(head, ["x" * 100], unit_chars=10) == ["\n".join([*head, "x" * 100])]  # never empty
    assert split_units(head, []) == []


@pytest.fixture
def tiny_units(monkeypatch):
    monkeypatch.setattr(c_units, "UNIT_CHARS", 1)  # every function a unit of its own


def test_a_module_split_in_units_runs_like_the_interpreter(tiny_units, tmp_path):
    funcs = [FIXTURES[n]().with_attrs(global_symbol=n) for n in NAMES]
    lib = build_c(funcs, "c", cache_dir=tmp_path)
    assert isinstance(lib, DSOModule)
    entries = sorted(p.suffix for p in tmp_path.iterdir() if p.suffix in (".o", ".so"))  # not hashes, locks
    assert entries == [".o"] * len(NAMES) + [".so"]
    assert lib.function_names() == sorted(c_function_names(funcs))
    for f, cname in zip(funcs, c_function_names(funcs)):
        args = args_for(f)
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        lib[cname](*got)
        assert_same(got, run_ref(f, args), rtol=1e-5, atol=1e-5)


def test_units_are_cached_by_content(tiny_units, tmp_path):
    def module(m):
        return [FIXTURES["matmul"]().with_attrs(global_symbol="a"), FIXTURES["conv2d"]().with_attrs(global_symbol="b"),
                FIXTURES["matmul"](m=m).with_attrs(global_symbol="c")]

    first = build_c(module(5), "c", cache_dir=tmp_path)
    entries = sorted(p.name for p in tmp_path.iterdir())
    assert build_c(module(5), "c", cache_dir=tmp_path).path == first.path
    assert sorted(p.name for p in tmp_path.iterdir()) == entries  # nothing compiled again
    other = build_c(module(3), "c", cache_dir=tmp_path)
    assert other.path != first.path  # one unit changed: one new object, a new library
    assert len([p for p in tmp_path.iterdir() if p.suffix == ".o"]) == 4


def test_the_generated_source_does_not_depend_on_the_units(tiny_units):
    from plait.backends.c.backend import _c_parts

    funcs = [FIXTURES[n]().with_attrs(global_symbol=n) for n in NAMES]
    head, bodies, _, _ = _c_parts(funcs, "c")
    assert codegen_c(funcs, "c").source == "\n".join([*head, *bodies])
    units = split_units(head, bodies)
    assert units == ["\n".join([*head, b]) for b in bodies]
    assert "plait_manifest" not in "".join(units) and "plait_manifest" not in LINK_SOURCE
