"""Default schedules: rule selection through the target, the loop structures the host rules make, and
semantics on the TE computes of many operators (TIR interpreter, scheduled vs unscheduled)."""

from __future__ import annotations

import numpy as np
import pytest

from plait import te, tir
from plait.errors import RegistryError
from plait.ir import TensorType, TupleType
from plait.op import get_op
from plait.schedule import RULE_SETS, RuleSet, default_schedule, machine_for, register_rules, rules_for
from plait.schedule.rules import cpu_machine, tile_sizes
from plait.target import CompositeTarget, Target, TargetError
from plait.target.testing import register_test_backend
from plait.target.testing import isolated_registry
from tests.schedule import fixtures as fx
from tests.schedule.test_reduction import allocs

HOST = "c -simd-bits=256 -clock-mhz=2445"  # host facts pinned: the same answers on AVX2 and AVX-512 machines


def lower(op_name: str, shapes: list[tuple], dtype: str = "float32", **attrs) -> tir.PrimFunc:
    """The unscheduled PrimFunc of one operator (TE compute + create_prim_func)."""
    op = get_op(op_name)
    a = op.make_attrs(attrs)
    types = tuple(TensorType(s, dtype) for s in shapes)
    out_type = op.rel(types, a)
    phs = [te.placeholder(s, dtype, f"in{k}") for k, s in enumerate(shapes)]
    outs = get_op(op_name).compute(phs, a, out_type)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    assert not isinstance(out_type, TupleType) or len(outs) == len(out_type.fields)
    return te.create_prim_func(phs + outs, op_name.replace(".", "_"))


def close(f, g, seed=0, rtol=1e-5, atol=1e-5):
    args = fx.inputs_for(f, seed)
    want = fx.run(f, args)
    got = fx.run(g, args, reverse_parallel=True)
    for w, x in zip(want, got):
        np.testing.assert_allclose(x, w, rtol=rtol, atol=atol)


def loop_kinds(f) -> dict[str, tuple[str, int]]:
    return {n.loop_var.name: (n.kind, n.extent.value) for n in tir.functor.pre_order(f.body) if isinstance(n, tir.For)}


# ---- rule selection --------------------------------------------------------------------------------


def test_rules_come_from_the_target_kind_and_facts():
    assert rules_for(HOST).name == "cpu" and rules_for(Target("c -opt-level=3")).name == "cpu"
    for t in ("cortex-m0", "cortex-m7f", "c -mcpu=cortex-m4 -keys=arm_cpu"):
        assert rules_for(t).name == "microcontroller"
    assert rules_for("llvm").name == "cpu"  # a kind without the attribute
    assert machine_for(HOST).lanes("float32") == 8  # host-c tag: AVX2, 256 bits
    assert machine_for("x86-64-avx512").lanes("float32") == 16 and machine_for("x86-64-avx512").vector_registers == 32
    assert machine_for("cortex-m7f").lanes("float32") == 1  # 32-bit integer SIMD only
    assert machine_for("cortex-m0").fpu == "none" and not machine_for("cortex-m0").has_fpu("float32")
    assert machine_for("cortex-m7f").has_fpu("float32") and not machine_for("cortex-m7f").has_fpu("float64")
    assert rules_for(CompositeTarget("m0: cortex-m0").pieces[0]).name == "microcontroller"  # a piece: its target
    for fn, args in ((rules_for, ()), (machine_for, ()), (default_schedule, (fx.softmax(),))):
        with pytest.raises(TargetError) as exc:
            fn(*args, None)
        assert str(exc.value) == f"{fn.__name__}: no target given (pass a Target, a target string or a Piece)"


def test_a_kind_can_name_its_own_rule_set():
    calls = []

    def only_unroll(func, root, machine):
        calls.append(root)
        return func

    with isolated_registry():
        register_test_backend("toy", schedule_rules=lambda target: "toy-rules")
        with pytest.raises(RegistryError, match="unknown schedule rule set 'toy-rules'"):
            rules_for("toy")
        register_rules(RuleSet("toy-rules", cpu_machine, only_unroll))
        try:
            f = fx.softmax()
            trace: list[str] = []
            assert default_schedule(f, "toy", trace) is f
            assert calls == ["max_i", "exp_i", "sum_i", "div_i"] and trace == [f"{c}: toy-rules" for c in calls]
        finally:
            RULE_SETS._items.pop("toy-rules")


def test_tile_sizes():
    # enough accumulators to hide the FMA latency (8), then one vector per tile row, then work per load
    assert tile_sizes(56, 64, 8, 8) == (8, 8)  # ResNet conv: 8 output channels x one vector of 8 columns
    assert tile_sizes(256, 128, 8, 8) == (8, 8)
    assert tile_sizes(5, 64, 8, 8) == (5, 8)  # a short row: one (partial) vector, 8 channels
    assert tile_sizes(56, 1, 8, 8) == (56, 1)  # no reuse axis: the whole row
    assert tile_sizes(24, 1, 16, 16) == (24, 1)  # a depthwise row of 1.5 AVX-512 vectors
    assert tile_sizes(64, 64, 16, 16) == (16, 16)  # AVX-512: 16 accumulators of one vector
    assert tile_sizes(64, 64, 16, 16, max_ub=8) == (16, 8)  # ... at most 8 broadcasts (reuse_block_limit)
    assert tile_sizes(24, 16, 16, 16, max_ub=8) == (24, 8)  # rows of 1.5 vectors: 2 vectors x 8 channels
    assert tile_sizes(56, 64, 16, 16, max_ub=8) == (8, 8)  # rows of 3.5 vectors: 8-wide vectors instead


def test_reuse_block_limit_keeps_the_weights_of_a_tile_in_l1():
    from plait.schedule.rules import MAX_REUSE_BLOCK, _reuse_axis, _stage, _vector_axis, reuse_block_limit

    for cin, want in ((8, MAX_REUSE_BLOCK), (256, 3)):  # 256 * 9 * 4 bytes per output channel: 3 fit in 32 KiB
        f = lower("nn.conv2d", [(1, cin, 8, 16), (16, cin, 3, 3)])
        root = next(n.loop_var.name for n in tir.functor.pre_order(f.body) if isinstance(n, tir.For))
        st = _stage(f, root)
        v = _vector_axis(st, 16)
        assert reuse_block_limit(st, _reuse_axis(st, v), v) == want


# ---- loop structure on the host ------------------------------------------------------------------


def test_host_conv_is_padded_tiled_and_vectorized():
    f = lower("nn.conv2d", [(1, 16, 10, 16), (16, 16, 3, 3)], padding=(1, 1, 1, 1))
    trace: list[str] = []
    g = default_schedule(f, HOST, trace)
    assert trace == ["T_nn_conv2d_n: cpu"]
    k = loop_kinds(g)
    c = "T_nn_conv2d_"
    assert [n for n in k if k[n][0] == "vectorized"] == ["in0_pad_3", "in0_copy_3", c + "z_1_init", c + "z_1",
                                                          c + "z_1_epi"]
    # the register tile: 8 output channels x 8 columns (one vector), below the reduce loops
    assert list(k)[-8:] == [c + x for x in ("z_1_init", "rc", "ry", "rx", "oc_1", "z_1", "oc_1_epi", "z_1_epi")]
    assert k[c + "oc_1"] == ("serial", 8) and k[c + "z_1"] == ("vectorized", 8) and k[c + "z_0"] == ("serial", 2)
    assert allocs(g)["in0_pad"] == ((1, 16, 12, 18), "global.workspace")
    assert allocs(g)[c[:-1] + "_local"] == ((8, 8, 1, 1, 1, 1), "local")  # accumulated in registers
    text = tir.print_prim_func(tir.simplify(g))
    assert "select" not in text.split("in0_copy_3")[-1]  # padding moved out of the inner loops
    close(f, g)


AVX512 = "c -simd-bits=512 -clock-mhz=2445"  # host facts pinned: AVX-512 answers on any machine


def test_row_block_takes_rows_for_vectors_narrower_than_the_lanes_only():
    from plait.schedule.rules import row_block

    assert row_block(8, 16, 8, [1, 2, 4]) == 2  # 8-wide vectors with 16 lanes: 2 rows of 8 channels
    assert row_block(8, 16, 4, [1, 2, 4]) == 2  # 4 channels would want 4 rows: at most 2 by default
    assert row_block(8, 16, 8, [1, 7]) == 1  # 7 rows: no block of 2 divides them
    assert row_block(16, 16, 4, [1, 2, 4]) == 1  # whole 16-wide vectors: one row
    assert row_block(8, 8, 8, [1, 2, 4]) == 1  # AVX2: 8-wide vectors are whole vectors
    assert row_block(8, 16, 16, [1, 2]) == 1  # already 16 accumulators


@pytest.mark.parametrize("target,rows", [(AVX512, 2), (HOST, 1), ("c -simd-bits=0", 0)])
def test_conv_rows_of_narrow_vectors_get_a_tile_of_two_output_rows(target, rows):
    # the ResNet block's 3x3 conv (rows of 56: 3.5 AVX-512 vectors, tiled in 8-wide vectors) and
    # ResNet-8's at 8x8 (rows of half a vector): 8 output channels x 2 rows x 8 columns = 16
    # accumulators on AVX-512; AVX2 keeps 8 x 8; no SIMD: no tile
    for width in (56, 8):
        _two_rows_on_avx512(target, rows, width)


def _two_rows_on_avx512(target, rows, width):
    f = lower("nn.conv2d", [(1, 8, 6, width), (16, 8, 3, 3)], padding=(1, 1, 1, 1))
    g = default_schedule(f, target)
    k = loop_kinds(g)
    c = "T_nn_conv2d_"
    z = "z_1" if width > 8 else "z"  # a row of 8 is one tile wide: not split
    if rows == 0:  # a scalar reduction (its 3-tap loop unrolled), the spatial loops as they were
        assert [k[c + x] for x in ("oc", "y", "z", "rx")] == [("serial", 16), ("serial", 6), ("serial", width),
                                                              ("unrolled", 3)]
    elif rows == 1:
        assert c + "y_1" not in k and list(k)[-5:] == [c + x for x in ("rx", "oc_1", z, "oc_1_epi", z + "_epi")]
    else:
        assert list(k)[-7:] == [c + x for x in ("rx", "y_1", "oc_1", z, "y_1_epi", "oc_1_epi", z + "_epi")]
        assert k[c + "y_1"] == ("serial", 2) and k[c + "oc_1"] == ("serial", 8) and k[c + z] == ("vectorized", 8)
        assert allocs(g)[c[:-1] + "_local"] == ((2, 8, 8, 1, 1, 1, 1), "local")
    close(f, g)


@pytest.mark.parametrize("shapes,attrs,blocks", [
    ([(1, 3, 6, 40), (5, 3, 3, 3)], dict(padding=(1, 1, 1, 1)), (1, 2, 3)),  # 5 channels: not a multiple of 8
    ([(2, 4, 12, 79), (8, 4, 3, 3)], dict(strides=(2, 2), padding=(1, 1, 1, 1)), (1, 2)),  # strided, odd width
    ([(1, 8, 5, 40), (8, 8, 3, 3)], dict(padding=(1, 1, 1, 1)), (1,)),  # 5 rows: no block divides them
    ([(1, 8, 6, 40), (8, 4, 3, 3)], dict(padding=(1, 1, 1, 1), groups=2), None),  # grouped: no reuse axis
    ([(1, 6, 8, 24), (16, 6, 1, 1)], {}, None),  # pointwise: rows fused into one
    ([(1, 2, 10, 44), (4, 2, 3, 3)], dict(padding=(2, 2, 2, 2), dilation=(2, 2)), (1, 2)),
])
@pytest.mark.parametrize("target", [AVX512, HOST])
def test_every_row_block_preserves_results(shapes, attrs, blocks, target):
    # the row_block knob's choices (blocks of the output rows that fit the accumulators) on AVX-512,
    # each compared with the unscheduled function
    from plait.schedule import knobs

    f = lower("nn.conv2d", shapes, **attrs)
    with knobs.using({}) as space:
        default_schedule(f, target)
    knob = space.knobs.get("T_nn_conv2d_n.row_block")
    if target == AVX512:
        assert (knob.choices if knob else None) == blocks
    for rb in knob.choices if knob else (1,):
        with knobs.using({knob.name: rb} if knob else {}):
            g = default_schedule(f, target)
        close(f, g)


@pytest.mark.parametrize("target,lanes", [(HOST, 8), ("x86-64-avx512", 16)])
def test_pointwise_conv_rows_shorter_than_half_a_vector_are_fused(target, lanes):
    # DS-CNN / MobileNet pointwise convs over 25x5 and 6x6 pixels: rows of 5 and 6 are below half of
    # 16 lanes, yet fusing them with the row loop gives 125- and 36-long contiguous rows to vectorize
    for shape in ((1, 16, 25, 5), (1, 16, 6, 6)):
        f = lower("nn.conv2d", [shape, (8, 16, 1, 1)])
        g = default_schedule(f, target)
        vec = [n for n, (kind, _) in loop_kinds(g).items() if kind == "vectorized"]
        assert vec and all("_y_" in n and "_z" in n for n in vec), (shape, vec)
        close(f, g)
    if lanes == 16:  # rows of 24 (1.5 AVX-512 vectors) fuse into rows of whole vectors (576) even where
        # the tile score prefers 2 vectors x 8 channels: LLVM runs partial-vector tiles 10x slower
        g = default_schedule(lower("nn.conv2d", [(1, 16, 24, 24), (96, 16, 1, 1)]), target)
        assert any(n.endswith("_fused_1") and k == ("vectorized", lanes) for n, k in loop_kinds(g).items())


def test_host_dense_uses_lane_partial_sums():
    f = lower("nn.dense", [(1, 64), (24, 64)])
    g = default_schedule(f, HOST)
    rf = [v for n, v in allocs(g).items() if n.endswith("_rf")]
    assert rf == [((1, 4, 8), "local")]  # 4 rows of the weight x 8 lanes
    assert [v for v in loop_kinds(g).values() if v[0] == "vectorized"] == [("vectorized", 8)]
    close(f, g)


def test_microcontroller_rules_keep_code_small():
    f = lower("nn.conv2d", [(1, 4, 6, 6), (4, 4, 3, 3)], padding=(1, 1, 1, 1))
    g = default_schedule(f, "cortex-m0")
    k = loop_kinds(g)
    assert not any(kind == "vectorized" for kind, _ in k.values())
    assert [n for n, (kind, _) in k.items() if kind == "unrolled"] == [n for n in k if n.endswith("_rx")]
    assert set(allocs(g)) == set(allocs(f))  # no padded copy: RAM is scarce
    close(f, g, rtol=0, atol=0)


# ---- semantics over many operators ------------------------------------------------------------------

CASES = [
    ("nn.conv2d", [(1, 3, 9, 10), (8, 3, 3, 3)], dict(padding=(1, 1, 1, 1))),
    ("nn.conv2d", [(2, 3, 9, 7), (5, 3, 3, 3)], dict(strides=(2, 2), padding=(1, 1, 1, 1))),
    ("nn.conv2d", [(1, 8, 6, 9), (8, 1, 3, 3)], dict(padding=(1, 1, 1, 1), groups=8)),
    ("nn.conv2d", [(1, 4, 5, 12), (6, 4, 1, 1)], {}),
    ("nn.conv2d", [(1, 2, 13, 13), (3, 2, 3, 3)], dict(padding=(2, 2, 2, 2), dilation=(2, 2))),
    ("nn.conv2d", [(1, 6, 5, 5), (4, 6, 1, 1)], {}),
    ("nn.conv2d", [(1, 4, 8, 10), (6, 4, 1, 1)], dict(strides=(2, 2))),
    ("nn.conv2d", [(1, 3, 11, 12), (4, 3, 3, 3)], dict(strides=(3, 3), padding=(1, 1, 1, 1))),
    ("nn.conv2d_transpose", [(1, 6, 4, 8), (6, 4, 2, 2)], dict(strides=(2, 2))),
    ("nn.conv2d_transpose", [(1, 3, 5, 4), (3, 2, 3, 3)], dict(strides=(2, 2), padding=(1, 1, 1, 1))),
    ("nn.dense", [(3, 32), (12, 32)], {}),
    ("nn.dense", [(1, 20), (6, 20)], {}),
    ("nn.matmul", [(5, 7), (7, 16)], {}),
    ("nn.matmul", [(2, 4, 8), (2, 8, 12)], {}),
    ("nn.max_pool2d", [(1, 3, 9, 16)], dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ("nn.avg_pool2d", [(1, 2, 8, 8)], dict(pool_size=(2, 2), strides=(2, 2))),
    ("nn.global_avg_pool2d", [(1, 4, 8, 16)], {}),
    ("nn.softmax", [(3, 32)], {}),
    ("nn.softmax", [(2, 5, 9)], dict(axis=1)),
    ("nn.log_softmax", [(2, 24)], {}),
    ("nn.layer_norm", [(4, 32), (32,), (32,)], {}),
    ("sum", [(3, 4, 16)], dict(axis=(2,))),
    ("max", [(3, 16, 4)], dict(axis=(1,))),
    ("mean", [(2, 3, 16)], dict(axis=(1, 2), keepdims=True)),
    ("add", [(2, 3, 16), (3, 1)], {}),
    ("transpose", [(2, 3, 16)], dict(axes=(2, 0, 1))),
    ("nn.relu", [(4, 10)], {}),
    ("concatenate", [(2, 8), (3, 8)], dict(axis=0)) if False else ("exp", [(5, 11)], {}),
]


@pytest.mark.parametrize("target", [HOST, "x86-64-avx512", "cortex-m7f"])
@pytest.mark.parametrize("op_name,shapes,attrs", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_default_schedule_preserves_results(op_name, shapes, attrs, target):
    f = lower(op_name, shapes, **attrs)
    trace: list[str] = []
    g = default_schedule(f, target, trace)
    tir.verify(g)
    assert all(line.endswith(": cpu") or line.endswith(": microcontroller") for line in trace), trace
    close(f, g)
