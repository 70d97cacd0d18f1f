"""Compile work grows linearly with the model: measured by counting, never by timing.

Each test builds a model of n and of 2n nodes (plait.testing.chain_models) and compares a count of
work: Python lines executed by the whole pipeline up to the C source and the executor graph (the C
compiler aside), statements the TIR verifier visits, functions copied into IRModules, names probed.
Linear work doubles (a little less: fixed costs); one quadratic step makes it about 4x.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import pytest

from plait.backends.c.backend import codegen_c
from plait.lowering.lower import UniqueNames
from plait.driver import _composite, lowered_module
from plait.pipeline.codegen import piece_module
from plait.executor.graph_codegen import graph_codegen
from plait.ir.transform import PassContext
from plait.relay.module import IRModule
from plait.testing.chain_models import CHAIN_MODELS, count_calls
from plait.tir.verify import _Verifier

LINEAR = 2.2  # the most a doubling of the model may multiply the work by


def compile_to_c(mod: IRModule) -> tuple[str, dict]:
    """What ``plait.build(mod, "c")`` does before running the C compiler: the C source and the graph."""
    ct = _composite("c")
    ctx = PassContext(config={})
    mod = lowered_module(mod, ct, ctx).mod
    piece = ct.pieces[0]
    sub = piece_module(mod, piece)
    source = codegen_c([sub[k] for k in sorted(sub)], piece.target).source
    return source, graph_codegen(mod)[0]


def lines_executed(fn: Callable[[], Any]) -> int:
    """Python lines executed by ``fn()`` (every frame, every line event)."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return local

    def start(frame: Any, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    sys.settrace(start)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


def ratio(work: Callable[[int], int], n: int) -> float:
    work(max(2, n // 8))  # first use of each operator, registry and cache: not part of the count
    return work(2 * n) / work(n)


@pytest.mark.parametrize("model,n", [("matmul_relu", 100), ("residual", 90), ("relu_chain", 100),
                                     ("matmul_relu_distinct", 40)])
def test_the_pipeline_executes_linear_many_lines(model, n):
    # relu_chain: one fused function of n / 2 stages (the verifier and the schedule primitives used
    # to walk the whole function per stage); matmul_relu_distinct: n / 2 different kernels
    def work(size: int) -> int:
        mod = CHAIN_MODELS[model](size)
        assert count_calls(mod) in (size, size - 1, size - 2)
        return lines_executed(lambda: compile_to_c(mod))

    assert ratio(work, n) < LINEAR


def test_the_verifier_visits_linear_many_statements(monkeypatch):
    visited = 0
    stmt = _Verifier.stmt

    def counting(self: Any, s: Any, work: list) -> None:
        nonlocal visited
        visited += 1
        stmt(self, s, work)

    monkeypatch.setattr(_Verifier, "stmt", counting)

    def work(size: int) -> int:
        nonlocal visited
        visited = 0
        compile_to_c(CHAIN_MODELS["relu_chain"](size))  # one function of size / 2 stages
        return visited

    assert ratio(work, 120) < LINEAR


def test_modules_are_updated_without_copying_every_function_per_update(monkeypatch):
    copied = 0
    init, trusted = IRModule.__init__, IRModule._trusted.__func__

    def counting_init(self: IRModule, functions: Any = None, attrs: Any = None) -> None:
        nonlocal copied
        init(self, functions, attrs)
        copied += len(self)

    def counting_trusted(cls: type, funcs: dict, attrs: Any) -> IRModule:
        nonlocal copied
        copied += len(funcs)
        return trusted(cls, funcs, attrs)

    monkeypatch.setattr(IRModule, "__init__", counting_init)
    monkeypatch.setattr(IRModule, "_trusted", classmethod(counting_trusted))

    def work(size: int) -> int:
        nonlocal copied
        copied = 0
        compile_to_c(CHAIN_MODELS["matmul_relu_distinct"](size))  # size / 2 PrimFuncs in the module
        return copied

    assert ratio(work, 120) < LINEAR


class CountingSet(set):
    probes = 0

    def __contains__(self, x: object) -> bool:
        CountingSet.probes += 1
        return super().__contains__(x)


def test_unique_names_probe_linear_many_names():
    def work(size: int) -> int:
        names = UniqueNames()
        names.used = CountingSet()
        CountingSet.probes = 0
        got = [names.unique("fused_nn_matmul") for _ in range(size)]
        assert got[:3] == ["fused_nn_matmul", "fused_nn_matmul_1", "fused_nn_matmul_2"] and len(set(got)) == size
        return CountingSet.probes

    assert ratio(work, 500) < LINEAR


def test_partition_into_many_regions_executes_linear_many_lines():
    from plait.ir.op import Op
    from plait.placement.partition import partition, regions_of
    from plait.relay import Call, infer_type, post_order
    from plait.target import CompositeTarget

    ct = CompositeTarget("a: c; b: c -mcpu=cortex-m7f")

    def work(size: int) -> int:
        mod = infer_type(CHAIN_MODELS["matmul_relu"](size))
        calls = [n for n in post_order(mod.main.body) if isinstance(n, Call) and isinstance(n.op, Op)]
        pieces = {c: "b" if c.op.name == "nn.matmul" else "a" for c in calls}  # a new region per call
        out: list[IRModule] = []
        count = lines_executed(lambda: out.append(partition(mod, pieces, ct)))
        assert len(regions_of(out[0])) == size // 2 * 2
        return count

    assert ratio(work, 200) < LINEAR
