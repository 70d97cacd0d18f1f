"""The AOT executor asks each piece's kind for its C (Backend.c_unit, Backend.c_toolchain): a plugin kind
that emits C of its own has it compiled into the AOT directory, with its own flags, and computes what
the Graph executor computes; a kind without C of its own is written by the kind its default_codegen
names; one that writes no C is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait import relay
from plait.errors import PlaitError
from plait.executor import GraphModule
from plait.executor.aot.c_writer import c_writer
from plait.executor.aot.module import AotModule
from plait.relay import IRModule
from plait.target import Backend, CToolchain, CUnit, Target, get_kind, register_backend
from plait.target.testing import isolated_registry

MARK = "/* written by the vecc kind */"


class VecC(Backend):
    """test kind: C with a comment of its own and a -D flag of its own"""

    name = "vecc"
    emits_c = True

    def tir_to_runtime(self, mod, target, ctx):
        return get_kind("c").backend.tir_to_runtime(mod, target, ctx)

    def c_unit(self, funcs, target, name):
        unit = get_kind("c").backend.c_unit(funcs, target, name)
        return CUnit(f"{MARK}\n#ifndef VECC\n#error VECC not defined\n#endif\n{unit.text}", unit.function_names,
                     unit.link_flags)

    def c_toolchain(self, target):
        tools = get_kind("c").backend.c_toolchain(target)
        return CToolchain(tools.cc, (*tools.flags, "-DVECC=1"), (*tools.host_flags, "-DVECC=1"),
                          tools.required_flags)


class Lowered(Backend):
    """test kind: lowered by default, compiled by the c kind"""

    name = "lowered"


def model():
    x = relay.var("x", (2, 3))
    r = relay.call("nn.relu", x, meta={"name": "/relu"})
    y = relay.call("add", r, relay.const(np.full((2, 3), 0.5, np.float32)), meta={"name": "/add"})
    return IRModule({"main": relay.Function((x,), y)}, attrs={"output_names": ["y"]})


@pytest.fixture
def kinds():
    with isolated_registry():
        register_backend(VecC)
        register_backend(Lowered)
        yield


def test_a_kind_that_emits_c_writes_its_pieces_aot_sources(kinds, tmp_path):
    config = {"cc.cache_dir": str(tmp_path)}
    target = "cpu: c; vec: vecc"
    aot = plait.build(model(), target, place="/relu=vec", executor="aot", config=config)
    ops = {k: v for k, v in aot.files.items() if k.endswith("_ops.c")}
    assert [k for k, v in ops.items() if MARK in v] == ["src/plait_model_vec_ops.c"]
    sources = {s["file"]: s for s in aot.metadata["sources"]}
    assert "-DVECC=1" in sources["src/plait_model_vec_ops.c"]["flags"]
    assert "-DVECC=1" not in sources["src/plait_model_cpu_ops.c"]["flags"]
    assert "-DVECC=1" in aot.files["Makefile"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    graph = plait.build(model(), target, place="/relu=vec", config=config)
    (want,) = GraphModule(graph)(x=x)
    (got,) = AotModule(aot)(x=x)  # compiles the directory's sources with their flags: VECC must be defined
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.maximum(x, 0) + 0.5)


def test_a_kind_compiled_by_the_c_kind_is_written_by_it(kinds):
    assert type(c_writer(Target("lowered"))) is type(get_kind("c").backend)
    assert type(c_writer(Target("vecc"))) is VecC


def test_the_base_backend_writes_no_c():
    class NoC(Backend):
        name = "noc"

    with pytest.raises(PlaitError) as e:
        NoC().c_unit([], None, "m")
    assert str(e.value) == ("target kind 'noc' does not write C for the AOT executor (emits_c is set but c_unit is "
                            "not implemented)")
    with pytest.raises(PlaitError) as e:
        NoC().c_toolchain(None)
    assert str(e.value) == ("target kind 'noc' does not write C for the AOT executor (emits_c is set but "
                            "c_toolchain is not implemented)")
