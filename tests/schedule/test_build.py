"""Scheduled PrimFuncs compiled by the C backend (gcc -O3 -march=native) give the interpreter's results."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import build_c
from plait.schedule.rules import default_schedule
from tests.schedule import fixtures as fx
from tests.schedule.test_rules import lower

HOST = "c -simd-bits=256 -clock-mhz=2445"  # host facts pinned: the same answers on AVX2 and AVX-512 machines

FUNCS = {
    "conv": lambda: lower("nn.conv2d", [(1, 8, 12, 16), (16, 8, 3, 3)], padding=(1, 1, 1, 1)),
    "conv_stride2": lambda: lower("nn.conv2d", [(1, 3, 15, 17), (8, 3, 3, 3)], strides=(2, 2), padding=(1, 1, 1, 1)),
    "depthwise": lambda: lower("nn.conv2d", [(1, 8, 9, 10), (8, 1, 3, 3)], padding=(1, 1, 1, 1), groups=8),
    "conv_bias_relu": lambda: fx.conv2d(c=4, h=8, w=16, o=8),
    "dense": lambda: lower("nn.dense", [(2, 64), (20, 64)]),
    "matmul": lambda: lower("nn.matmul", [(2, 6, 16), (2, 16, 24)]),
    "softmax": lambda: lower("nn.softmax", [(4, 48)]),
    "max_pool": lambda: lower("nn.max_pool2d", [(1, 4, 12, 16)], pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    "layer_norm": lambda: lower("nn.layer_norm", [(6, 64), (64,), (64,)]),
    "pointwise": lambda: lower("nn.conv2d", [(1, 16, 25, 5), (16, 16, 1, 1)]),
}


@pytest.fixture(scope="module")
def built():
    plain = {k: f().with_attrs(global_symbol=f"{k}_plain") for k, f in FUNCS.items()}
    sched = {k: default_schedule(f, HOST).with_attrs(global_symbol=f"{k}_sched") for k, f in plain.items()}
    lib = build_c(list(plain.values()) + list(sched.values()), HOST)
    return plain, sched, lib


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_compiled_schedule_matches_the_interpreter(built, name):
    plain, sched, lib = built
    f = plain[name]
    args = fx.inputs_for(f, 3)
    want = fx.run(f, args)
    for fn in (f"{name}_plain", f"{name}_sched"):
        arrays = [a.copy() for a in args]
        lib[fn](*arrays)
        for w, x in zip(want, arrays[f.attrs["num_inputs"]:]):
            np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4)
    assert not tir.structural_equal(plain[name].body, sched[name].body)  # the rules did something


def test_short_rows_of_a_1x1_conv_are_fused_into_linear_vector_loops():
    from plait.backends.c.backend import codegen_c

    f = lower("nn.conv2d", [(1, 64, 25, 5), (64, 64, 1, 1)])
    g = tir.simplify(default_schedule(f, HOST))
    loops = [n.loop_var.name for n in tir.functor.pre_order(g.body) if isinstance(n, tir.For)]
    assert "T_nn_conv2d_y_T_nn_conv2d_z_fused_1" in loops and "T_nn_conv2d_ry" not in loops
    src = codegen_c([g]).source
    # the backend prints a fused loop's (x / 5, x % 5) as x: a linear index gcc vectorizes; the row of
    # 125 is tiled in whole vectors of 8, the last tile shifted back (loops.split_overlapping)
    assert " / 5" not in src and " % 5" not in src
    assert "plait_c_min_i64(T_nn_conv2d_y_T_nn_conv2d_z_fused_0 * 8, 117) + T_nn_conv2d_y_T_nn_conv2d_z_fused_1]" in src


def test_compiled_row_tiles_of_half_vectors_match_the_interpreter():
    # AVX-512 facts pinned (the code compiles and runs on any x86 host): rows of 56 in 8-wide vectors,
    # tiles of 8 channels x 2 output rows (5 input channels, 6 rows)
    f = lower("nn.conv2d", [(1, 5, 6, 56), (16, 5, 3, 3)], padding=(1, 1, 1, 1)).with_attrs(global_symbol="rows_plain")
    g = default_schedule(f, "c -simd-bits=512 -clock-mhz=2445").with_attrs(global_symbol="rows_sched")
    assert any(isinstance(n, tir.For) and n.loop_var.name == "T_nn_conv2d_y_1" and n.extent.value == 2
               for n in tir.functor.pre_order(g.body))
    lib = build_c([f, g], HOST)
    args = fx.inputs_for(f, 5)
    want = fx.run(f, args)
    arrays = [a.copy() for a in args]
    lib["rows_sched"](*arrays)
    for w, x in zip(want, arrays[f.attrs["num_inputs"]:]):
        np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-4)
