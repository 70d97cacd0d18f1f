"""The offset-assignment algorithms of plait.memory.algorithms: every plan valid, aligned and at least
the lower bound; the ILP's proven optimum no larger than any heuristic; "auto" keeps the smallest;
the same input always gets the same plan; exact error messages."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.errors import PlaitError
from plait.memory import heuristics, ilp
from plait.memory.algorithms import (ALGORITHMS, DEFAULT_ALIGN, LiveBuffer, MemoryPlanError, PoolPlan,
                                     allocate, check_plan, lower_bound, plan_pool)

HEURISTICS = tuple(a for a in ALGORITHMS if a != "ilp")


def pool_size(buffers, offsets, align):
    return max((o + -(-b.size // align) * align for o, b in zip(offsets, buffers)), default=0)


@st.composite
def interval_sets(draw):
    n = draw(st.integers(0, 9))
    out = []
    for i in range(n):
        start = draw(st.integers(0, 6))
        out.append(LiveBuffer(draw(st.sampled_from([0, 1, 7, 16, 24, 32, 40, 64, 100])), start,
                              start + draw(st.integers(0, 4)), draw(st.sampled_from(["", f"v{i}"]))))
    return out


@settings(max_examples=60, deadline=None)
@given(interval_sets(), st.sampled_from([1, 8, 16]))
def test_every_plan_is_valid_aligned_and_at_least_the_lower_bound(buffers, align):
    bound = lower_bound(buffers, align)
    plan = plan_pool(buffers, align)
    for name in ALGORITHMS:
        offsets = allocate(buffers, name, align)
        assert len(offsets) == len(buffers)
        assert all(o % align == 0 and o >= 0 for o in offsets)
        check_plan(buffers, offsets, align)
        size = pool_size(buffers, offsets, align)
        assert size >= bound
        assert plan.sizes[name] == size  # "auto" ran every algorithm (these sets are small enough for the ILP)
    assert plan.size == min(plan.sizes.values()) == pool_size(buffers, plan.offsets, align)
    assert plan.algorithm == min(plan.sizes, key=lambda n: (plan.sizes[n], ALGORITHMS.index(n)))
    assert plan.lower_bound == bound
    check_plan(buffers, plan.offsets, align)
    ilp_plan = plan_pool(buffers, align, "ilp")
    if ilp_plan.optimal:
        assert all(ilp_plan.size <= plan.sizes[name] for name in HEURISTICS)
        assert plan.size == ilp_plan.size and plan.optimal
    assert plan_pool(buffers, align) == plan  # deterministic
    assert allocate(buffers, "hill_climb", align) == allocate(buffers, "hill_climb", align)


def test_lower_bound_is_the_peak_of_live_rounded_bytes():
    buffers = [LiveBuffer(10, 0, 1), LiveBuffer(20, 1, 2), LiveBuffer(0, 1, 1), LiveBuffer(33, 2, 2)]
    assert lower_bound(buffers, 1) == 53          # step 2: 20 + 33
    assert lower_bound(buffers, 16) == 32 + 48    # step 2: 20 -> 32, 33 -> 48
    assert lower_bound(buffers) == lower_bound(buffers, DEFAULT_ALIGN) == 80
    assert lower_bound([], 16) == 0


# Greedy worse than optimal, by hand (align 1):
#   a: 2 bytes at step 1; b: 1 byte, steps 1-2; c: 2 bytes, steps 3-5; d: 1 byte, steps 2-3.
# The optimum is 3: at step 1 a and b are live (3 bytes), so no plan is smaller, and
# a@0, b@2, c@1, d@0 is valid (b/d at step 2: [2,3) vs [0,1); c/d at step 3: [1,3) vs [0,1)).
# Both greedy algorithms take c first (largest, longest range), put it at 0, a at 0 (no conflict),
# b above a at 2; d conflicts with c [0,2) and b [2,3), so it goes at 3: a pool of 4.
GREEDY_TRAP = [LiveBuffer(2, 1, 1, "a"), LiveBuffer(1, 1, 2, "b"), LiveBuffer(2, 3, 5, "c"),
               LiveBuffer(1, 2, 3, "d")]


def test_a_greedy_worse_than_optimal_and_the_ilp_finds_the_optimum():
    assert allocate(GREEDY_TRAP, "tflm_greedy", 1) == (0, 2, 0, 3)
    assert allocate(GREEDY_TRAP, "greedy_by_size", 1) == (0, 2, 0, 3)
    plan = plan_pool(GREEDY_TRAP, 1, "ilp")
    assert (plan.size, plan.lower_bound, plan.optimal) == (3, 3, True)
    check_plan(GREEDY_TRAP, plan.offsets, 1)
    auto = plan_pool(GREEDY_TRAP, 1)
    assert auto.sizes["tflm_greedy"] == auto.sizes["greedy_by_size"] == 4
    assert (auto.size, auto.optimal) == (3, True)


def test_the_usmp_greedy_stacks_above_conflicts_while_tflm_fills_gaps():
    # by size: y @0; x conflicts with y -> @64; z conflicts with x only: USMP's greedy puts it right
    # above x (96), TFLM's into the gap below x (0)
    buffers = [LiveBuffer(32, 0, 1, "x"), LiveBuffer(64, 0, 0, "y"), LiveBuffer(16, 1, 1, "z")]
    assert allocate(buffers, "greedy_by_size", 16) == (64, 0, 96)
    assert allocate(buffers, "tflm_greedy", 16) == (64, 0, 0)
    # by conflicts: x (2 conflicts) @0, then y (1, the larger) @32, z @32
    assert allocate(buffers, "greedy_by_conflicts", 16) == (0, 32, 32)
    plan = plan_pool(buffers, 16)
    assert plan.sizes == {"greedy_by_size": 112, "greedy_by_conflicts": 96, "hill_climb": 96,
                          "tflm_greedy": 96, "ilp": 96}
    assert (plan.algorithm, plan.size, plan.lower_bound, plan.optimal) == ("greedy_by_conflicts", 96, 96, True)


def test_the_ilp_proof_is_not_fooled_by_a_start_solution():
    # Handing HiGHS 1.16 the greedy plan (7 bytes) as an incumbent made it report that plan optimal; the
    # optimum is the lower bound, 6 (step 3: c, d, e): e@0, a@2, b@0, c@2, d@4.
    buffers = [LiveBuffer(3, 1, 2, "a"), LiveBuffer(2, 1, 1, "b"), LiveBuffer(2, 3, 3, "c"),
               LiveBuffer(2, 3, 6, "d"), LiveBuffer(2, 2, 4, "e")]
    check_plan(buffers, (2, 0, 2, 4, 0), 1)
    assert plan_pool(buffers, 1, "tflm_greedy").size == 7
    plan = plan_pool(buffers, 1, "ilp")
    assert (plan.size, plan.lower_bound, plan.optimal) == (6, 6, True)


def test_a_named_algorithm_runs_alone():
    plan = plan_pool(GREEDY_TRAP, 1, "tflm_greedy")
    assert plan == PoolPlan((0, 2, 0, 3), 4, "tflm_greedy", 3, {"tflm_greedy": 4}, False)


def test_zero_size_buffers_conflict_with_nothing():
    buffers = [LiveBuffer(0, 0, 9, "empty"), LiveBuffer(32, 0, 9, "full"), LiveBuffer(0, 3, 3)]
    for name in ALGORITHMS:
        assert allocate(buffers, name) == (0, 0, 0)
    assert plan_pool([]) == PoolPlan((), 0, "greedy_by_size", 0, {name: 0 for name in ALGORITHMS}, True)


def test_check_plan_messages():
    buffers = [LiveBuffer(32, 0, 2, "a"), LiveBuffer(16, 2, 3), LiveBuffer(16, 3, 4, "c")]
    check_plan(buffers, (0, 32, 0))
    with pytest.raises(MemoryPlanError) as err:
        check_plan(buffers, (0, 16, 0))
    assert str(err.value) == "buffers 'a' and #1 are both live at step 2 and share bytes [16, 32)"
    with pytest.raises(MemoryPlanError) as err:
        check_plan(buffers, (0, 32, 32))
    assert str(err.value) == "buffers #1 and 'c' are both live at step 3 and share bytes [32, 48)"
    with pytest.raises(MemoryPlanError) as err:
        check_plan(buffers, (0, 40, 0))
    assert str(err.value) == "buffer #1 is at offset 40, not a non-negative multiple of the alignment 16"
    with pytest.raises(MemoryPlanError) as err:
        check_plan(buffers, (0, 32, -16))
    assert str(err.value) == "buffer 'c' is at offset -16, not a non-negative multiple of the alignment 16"
    with pytest.raises(MemoryPlanError) as err:
        check_plan(buffers, (0, 32))
    assert str(err.value) == "the plan has 2 offsets for 3 buffers"
    check_plan(buffers, (0, 40, 0), 8)


@pytest.mark.parametrize("call, message", [
    (lambda: lower_bound([LiveBuffer(-1, 0, 0, "neg")]), "buffer 'neg': size -1 is negative"),
    (lambda: allocate([LiveBuffer(8, 0, 0), LiveBuffer(8, 3, 2)], "ilp"),
     "buffer #1: live range starts at 3 after it ends at 2"),
    (lambda: plan_pool([LiveBuffer(8, 0, 0)], align=24), "the alignment must be a power of two, got 24"),
    (lambda: check_plan([], (), align=0), "the alignment must be a power of two, got 0"),
    (lambda: plan_pool([LiveBuffer(8.0, 0, 0, "f")]), "buffer 'f': size must be an int, got 8.0"),
    (lambda: plan_pool([(8, 0, 0)]), "buffer #0 is a tuple, not a LiveBuffer"),
    (lambda: allocate([], "best_fit"), "unknown memory planning algorithm 'best_fit'; known: greedy_by_size, "
                                       "greedy_by_conflicts, hill_climb, tflm_greedy, ilp"),
    (lambda: plan_pool([], algorithm="first_fit"), "unknown memory planning algorithm 'first_fit'; known: auto, "
                                                   "greedy_by_size, greedy_by_conflicts, hill_climb, tflm_greedy, ilp"),
])
def test_bad_input_messages(call, message):
    with pytest.raises(MemoryPlanError) as err:
        call()
    assert str(err.value) == message
    assert isinstance(err.value, PlaitError)


def test_the_ilp_has_a_pair_limit_and_auto_skips_it_beyond():
    many = [LiveBuffer(16, 0, 1, f"b{i}") for i in range(30)]  # 30 * 29 / 2 = 435 conflicting pairs
    assert 435 > ilp.ILP_MAX_PAIRS
    with pytest.raises(MemoryPlanError) as err:
        allocate(many, "ilp")
    assert str(err.value) == "the ilp algorithm plans at most 400 conflicting buffer pairs; these buffers have 435"
    plan = plan_pool(many)
    assert "ilp" not in plan.sizes and set(plan.sizes) == set(HEURISTICS)
    assert (plan.size, plan.lower_bound, plan.optimal) == (480, 480, True)


def test_conflicting_pairs_are_counted_and_listed_alike():
    rng = random.Random(3)
    buffers = [LiveBuffer(rng.choice([0, 16, 48]), s, s + rng.randrange(5)) for s in
               (rng.randrange(20) for _ in range(60))]
    from plait.memory.algorithms import _pack
    u, s, e = _pack(buffers, 16)
    pairs = ilp.conflicting_pairs(u, s, e)
    expected = [(i, j) for i in range(60) for j in range(i + 1, 60) if buffers[i].size and buffers[j].size
                and buffers[i].start <= buffers[j].end and buffers[j].start <= buffers[i].end]
    assert pairs == expected
    assert ilp.count_conflicting_pairs(u, s, e) == len(expected)
    counts = heuristics.conflict_counts(u, s, e)
    assert counts.tolist() == [sum(1 for p in expected if i in p) for i in range(60)]


def test_the_heuristics_plan_3000_buffers():
    rng = random.Random(0)
    buffers = []
    for i in range(3000):
        start = rng.randrange(6000)
        buffers.append(LiveBuffer(rng.choice([0, 4, 64, 1000, 4096]) * rng.randrange(1, 4), start,
                                  start + rng.randrange(600), f"t{i}"))
    bound = lower_bound(buffers)
    for name in HEURISTICS:
        offsets = allocate(buffers, name)
        check_plan(buffers, offsets)
        assert pool_size(buffers, offsets, DEFAULT_ALIGN) >= bound
    plan = plan_pool(buffers)
    assert "ilp" not in plan.sizes and plan.size == min(plan.sizes.values())


def test_the_hill_climb_budget_is_a_count_of_iterations():
    assert [heuristics.hill_climb_iterations(n) for n in (0, 1, 66, 67, 2500, 3000, 10**6)] == \
        [0, 300, 300, 298, 8, 6, 4]


def test_importing_the_planner_does_not_import_highspy():
    import subprocess
    import sys
    code = "import sys, plait.memory.algorithms; print('highspy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
