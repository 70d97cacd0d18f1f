"""split, fuse, reorder and loop kinds: results verify and compute the same as before (TIR interpreter)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

from plait import tir
from plait.schedule import Schedule, ScheduleError, fuse, reorder, split, vectorize
from plait.schedule.analysis import get_loop
from tests.schedule import fixtures as fx


def same(f, g, seed=0, exact=True):
    args = fx.inputs_for(f, seed)
    want = fx.run(f, args)
    for rev in (False, True):  # parallel/vectorized loops also run backwards: independence is checked
        got = fx.run(g, args, reverse_parallel=rev)
        for w, x in zip(want, got):
            if exact:
                np.testing.assert_array_equal(x, w)
            else:
                np.testing.assert_allclose(x, w, rtol=1e-5, atol=1e-5)


def err(fn, *args) -> str:
    with pytest.raises(ScheduleError) as e:
        fn(*args)
    return str(e.value)


def kinds(f):
    return {lp.loop_var.name: (lp.kind, lp.extent.value) for lp in tir.functor.pre_order(f.body)
            if isinstance(lp, tir.For)}


def test_split_divisible_names_and_annotations():
    f = fx.matmul(m=6, n=16, k=5)
    g = split(f, "mm_j", [None, 4])
    k = kinds(g)
    assert k["mm_j_0"] == ("serial", 4) and k["mm_j_1"] == ("serial", 4) and "mm_j" not in k
    assert not any(isinstance(n, tir.IfThenElse) for n in tir.functor.pre_order(g.body))
    root = get_loop(g, "mm_i", "t")
    assert root.annotations["stage"] == "mm"
    same(f, g)


def test_split_root_keeps_stage_annotation_on_outer_loop():
    f = fx.matmul()
    g = split(f, "mm_i", [2, None], ["a", "b"])
    assert get_loop(g, "a", "t").annotations["stage"] == "mm"
    assert not get_loop(g, "b", "t").annotations
    same(f, g)


def test_split_non_divisible_guards_the_body():
    f = fx.matmul(m=6, n=10, k=5)
    g = split(f, "mm_j", [None, 4])
    assert kinds(g)["mm_j_0"] == ("serial", 3)
    assert sum(isinstance(n, tir.IfThenElse) for n in tir.functor.pre_order(g.body)) == 1
    same(f, g)


def test_split_three_ways_and_vectorized_kind_moves_inside():
    f = vectorize(fx.elementwise((2, 3, 24)), "add_i2")
    g = split(f, "add_i2", [2, None, 4])
    k = kinds(g)
    assert k["add_i2_0"] == ("serial", 2) and k["add_i2_1"] == ("serial", 3) and k["add_i2_2"] == ("vectorized", 4)
    same(f, g)


def test_split_errors():
    f = fx.matmul(m=6, n=16, k=5)
    assert err(split, f, "nope", [2, None]).startswith(
        "split('nope'): no loop 'nope' in PrimFunc 'fused_matmul' (loops: 'mm_i', 'mm_j', 'mm_k')")
    assert err(split, f, "mm_j", [2, 3]) == \
        "split('mm_j'): factors [2, 3] cover 6 iterations, fewer than the extent 16 of loop 'mm_j'"
    assert err(split, f, "mm_j", [None, None]) == "split('mm_j'): at most one factor may be None, got [None, None]"
    assert err(split, f, "mm_j", [0, None]) == "split('mm_j'): factors must be positive ints or None, got [0, None]"
    assert err(split, f, "mm_j", [4]) == "split('mm_j'): give at least two factors, got [4]"
    assert err(split, f, "mm_j", [None, 4], ["mm_i", "x"]) == \
        "split('mm_j'): a loop called 'mm_i' already exists in PrimFunc 'fused_matmul'"


def test_duplicate_loop_names_are_reported():
    g = fx.two_stages()
    ci = get_loop(g, "c_i", "t")
    renamed = tir.substitute(g, {ci.loop_var: tir.Var("p_i")})
    assert err(split, renamed, "p_i", [None, 2]) == \
        "split('p_i'): 2 loops are called 'p_i' in PrimFunc 'two'; loop names must be unique to address loops"


def test_fuse():
    f = fx.elementwise((2, 3, 10))
    g = fuse(f, "add_i0", "add_i1")
    assert kinds(g)["add_i0_add_i1_fused"] == ("serial", 6)
    assert get_loop(g, "add_i0_add_i1_fused", "t").annotations["stage"] == "add"
    same(f, g)
    h = fuse(g, "add_i0_add_i1_fused", "add_i2", "all")
    assert kinds(h)["all"] == ("serial", 60)
    same(f, h)
    assert err(fuse, f, "add_i0", "add_i2") == "fuse('add_i0', 'add_i2'): loop 'add_i2' must be the whole body of loop 'add_i0'"


def test_reorder_spatial_loops_is_exact():
    f = fx.conv2d(c=2, h=5, w=6, o=3)
    g = reorder(f, "conv_ow", "conv_oc")
    names = [lp.loop_var.name for lp in tir.functor.pre_order(g.body) if isinstance(lp, tir.For)]
    assert names[:4] == ["conv_n", "conv_ow", "conv_oh", "conv_oc"]
    assert get_loop(g, "conv_n", "t").annotations["stage"] == "conv"
    same(f, g)


def test_reorder_moves_stage_annotation_to_the_outermost_position():
    f = fx.matmul()
    g = reorder(f, "mm_j", "mm_i")
    assert get_loop(g, "mm_j", "t").annotations["stage"] == "mm"
    assert not get_loop(g, "mm_i", "t").annotations
    same(f, g)


def test_reorder_refuses_to_change_a_reduction_order():
    f = fx.conv2d()
    assert err(reorder, f, "conv_kw", "conv_ic") == (
        "reorder('conv_kw', 'conv_ic'): iterations of loops 'conv_ic', 'conv_kh', 'conv_kw' depend on each other "
        "through buffer 'conv_acc'; their order must stay conv_ic > conv_kh > conv_kw")
    assert err(reorder, f, "conv_ow", "conv_ic") == (
        "reorder('conv_ow', 'conv_ic'): loop 'conv_ic' is not in the perfect nest under loop 'conv_ow' (conv_ow)")


def test_reorder_keeps_loop_kinds_and_verifies():
    from tests.tir.fixtures import matmul  # parallel i, vectorized j, C accumulated in place

    f = matmul()
    assert err(reorder, f, "j", "i") == ("reorder('j', 'i'): the result does not verify: PrimFunc 'matmul': "
                                         "parallel loop 'i' is inside vectorized loop 'j'")
    s = Schedule(f)
    s.serial("i")
    s.reorder("j", "i")
    same(f, s.func)


def test_vectorize_and_parallel_check_independence():
    f = fx.conv2d()
    g = vectorize(f, "conv_ow")
    same(f, g)
    assert err(vectorize, f, "conv_kh") == \
        "vectorize('conv_kh'): iterations of loop 'conv_kh' depend on each other through buffer 'conv_acc'"
    s = Schedule(f)
    s.parallel("conv_oc")
    s.unroll("conv_kw")
    assert kinds(s.func)["conv_oc"][0] == "parallel" and kinds(s.func)["conv_kw"][0] == "unrolled"
    assert s.trace == ["parallel('conv_oc')", "unroll('conv_kw')"]
    same(f, s.func)
    s.vectorize("conv_ow")
    with pytest.raises(ScheduleError, match="the result does not verify: .*parallel loop 'conv_oc' is inside "
                                            "vectorized loop 'conv_n'"):
        s.vectorize("conv_n")
    assert kinds(s.func)["conv_n"][0] == "serial"  # a failing primitive leaves the schedule unchanged


def test_softmax_stages_are_independent_nests():
    f = fx.softmax()
    s = Schedule(f)
    s.vectorize("exp_j")
    s.vectorize("div_j")
    s.split("div_j", [None, 4])
    s.reorder("div_j_0", "div_i")
    same(f, s.func)
    assert err(vectorize, f, "sum_k") == "vectorize('sum_k'): iterations of loop 'sum_k' depend on each other through buffer 'sum_acc'"


@settings(max_examples=25, deadline=None)
@given(hs.integers(1, 6), hs.integers(1, 8), hs.permutations(range(4)), hs.booleans())
def test_random_splits_and_orders_of_a_conv(f1, f2, perm, vec):
    """Split two spatial loops by random factors, permute the four outer loops: same results."""
    f = fx.conv2d(c=2, h=5, w=7, o=4)
    s = Schedule(f)
    a = s.split("conv_oc", [None, f1])
    b = s.split("conv_ow", [f2, None])
    loops = ["conv_n", a[0], "conv_oh", b[0]]
    s.reorder(*[loops[k] for k in perm], a[1], b[1])
    if vec:
        s.vectorize(b[1])
    tir.verify(s.func)
    same(f, s.func)


@settings(max_examples=20, deadline=None)
@given(hs.permutations(["mm_i", "mm_j"]), hs.integers(1, 7), hs.integers(1, 5))
def test_random_matmul_tiles(order, fi, fk):
    f = fx.matmul(m=6, n=16, k=5)
    s = Schedule(f)
    io, ii = s.split("mm_i", [None, fi])
    ko, ki = s.split("mm_k", [None, fk])  # reduction loops can be split (order kept)
    s.reorder(*(io if o == "mm_i" else "mm_j" for o in order), ii)
    same(f, s.func)
    if 1 < fk < 5:  # both parts of the reduction loop run more than once: their order is fixed
        with pytest.raises(ScheduleError):
            s.reorder(ki, ko)


def test_all_permutations_of_elementwise_loops():
    f = fx.elementwise((2, 3, 4))
    for p in itertools.permutations(["add_i0", "add_i1", "add_i2"]):
        same(f, reorder(f, *p))


def test_a_fused_loop_is_contiguous_and_independent():
    from plait.schedule.analysis import flat_linear
    from plait.schedule.stage import contiguous

    f = fx.elementwise((2, 3, 10))
    g = fuse(f, "add_i1", "add_i2")
    store = [n for n in tir.functor.pre_order(g.body) if isinstance(n, tir.BufferStore)][0]
    v = get_loop(g, "add_i1_add_i2_fused", "t").loop_var
    i0 = get_loop(g, "add_i0", "t").loop_var
    assert flat_linear(store.indices, (2, 3, 10)) == ({i0: 30, v: 1}, 0)  # (v / 10) * 10 + v % 10 == v
    assert flat_linear(store.indices, (2, 3, 11)) is None
    assert contiguous(store.indices, v, shape=(2, 3, 10)) and not contiguous(store.indices, v)
    h = vectorize(g, "add_i1_add_i2_fused")  # each iteration writes its own element
    same(f, h)


def test_remove_unit_loop():
    from plait.schedule import remove_unit_loop

    f = fx.conv2d(c=2, h=5, w=5, o=3, k=1, pad=0)
    g = remove_unit_loop(remove_unit_loop(f, "conv_kh"), "conv_kw")
    assert "conv_kh" not in kinds(g) and "conv_kw" not in kinds(g)
    assert "data[conv_n, conv_ic, conv_oh, conv_ow]" in tir.print_prim_func(g)
    same(f, g)
    assert err(remove_unit_loop, f, "conv_ic") == "remove_unit_loop('conv_ic'): loop 'conv_ic' has extent 2, not 1"
    assert err(remove_unit_loop, f, "conv_n") == "remove_unit_loop('conv_n'): loop 'conv_n' carries the stage annotations"


def test_split_overlapping_shifts_the_last_block_back():
    # an elementwise row of 10 in blocks of 4: 0-3, 4-7, 6-9 (6 and 7 written twice, the same values)
    from plait.schedule import split_overlapping

    f = fx.elementwise((2, 3, 10))
    g = split_overlapping(vectorize(f, "add_i2"), "add_i2", 4)
    k = kinds(g)
    assert k["add_i2_0"] == ("serial", 3) and k["add_i2_1"] == ("vectorized", 4)
    assert not any(isinstance(n, tir.IfThenElse) for n in tir.functor.pre_order(g.body))
    assert "min(add_i2_0 * 4, 6)" in tir.print_prim_func(g)
    same(f, g)


def test_split_overlapping_of_a_reduction_with_a_local_accumulator():
    # a matmul row of 10 accumulated in a local buffer allocated per output: a block may run twice
    f = fx.matmul(m=6, n=10, k=5)
    sch = Schedule(f)
    o, i = sch.split_overlapping("mm_j", 4)
    assert (o, i) == ("mm_j_0", "mm_j_1") and kinds(sch.func)[o] == ("serial", 3)
    sch.reorder("mm_j_0", "mm_i", "mm_j_1")
    same(f, sch.func)


def test_split_overlapping_errors():
    from plait.schedule import split_overlapping
    from tests.schedule.test_rules import lower

    f = lower("nn.dense", [(3, 8), (10, 8)])  # out[i, j] += ...: running an iteration twice would add twice
    assert err(split_overlapping, f, "T_nn_dense_ax1", 4) == (
        "split_overlapping('T_nn_dense_ax1', 4): iterations of loop 'T_nn_dense_ax1' may not run twice: buffer "
        "'T_nn_dense' is read and written in its body")
    for factor in (5, 1, 10, 12):
        assert err(split_overlapping, f, "T_nn_dense_ax1", factor) == (
            f"split_overlapping('T_nn_dense_ax1', {factor}): expected a factor between 2 and the extent 10 that "
            "does not divide it")
