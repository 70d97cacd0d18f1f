"""Integer matrix products as dot products (plait/op/qnn_nn.py ``_packed_product``): ``qnn.dense`` and
``qnn.matmul`` with a matrix ``b`` and at least :data:`MIN_DOT` summed elements, compiled to C, equal
the numpy reference bit for bit in each packed form (int8 data shifted to uint8 with the zero-point
correction, uint8 data, both int16 minus their zero points, ``b`` transposed at run time); the QDQ
pass makes a product with a constant matrix a ``qnn.dense`` with the matrix transposed at compile
time; an accumulator updated once per element of a block of outputs is bounded per element, so a
long dot product over a block of 128 outputs still reaches gcc as a signed sum (dot-product
instructions); a stride-1 convolution over a few channels is summed over whole padded planes. The host facts are pinned in the target; nothing here depends on the host's ISA."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.executor import GraphModule
from plait.ir.attrs import Attrs
from plait.ir.transform import PassContext
from plait.lowering.lower import lower_function
from plait.backends.c.backend import codegen_c
from plait.relay import Call, IRModule, call, infer_type, run, var
from plait.relay.expr import Constant, Function
from plait.relay.passes import QDQToInteger
from plait.relay.visitor import post_order
from plait.tir.expr import Add, BufferLoad, IntImm, Var
from plait.tir.int_bounds import IntBounds
from plait.tir.op import cast
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, PrimFunc, seq

HOST = "c -simd-bits=512 -clock-mhz=2445"


def _ints(shape, dtype, seed):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# (op, a shape, a dtype, b shape, b dtype, zero points (a, b))
PRODUCTS = [
    ("qnn.dense", (1, 32, 64), "int8", (96, 64), "int8", (3, 0)),        # int8 data shifted to uint8
    ("qnn.dense", (7, 48), "uint8", (10, 48), "int8", (131, 0)),         # uint8 data: its zero point
    ("qnn.dense", (5, 40), "uint8", (9, 40), "uint8", (0, 0)),           # uint8 weight: int16 pairs
    ("qnn.dense", (4, 256), "int8", (24, 256), "int8", (-108, 5)),       # a weight zero point: int16
    ("qnn.dense", (4, 64), "int8", (5, 64), "int8", (127, 0)),           # full range, below
    ("qnn.dense", (1, 64), "int8", (5, 64), "int8", (3, 0)),             # one row: the direct dot loop
    ("qnn.matmul", (1, 9, 64), "int8", (64, 20), "int8", (-7, 0)),       # b transposed per call
    ("qnn.matmul", (5, 33), "uint8", (33, 6), "int8", (128, -2)),
]


def _case(k):
    op, sa, da, sb, db, (za, zb) = PRODUCTS[k]
    a, b = _ints(sa, da, k), _ints(sb, db, 50 + k)
    if k == 4:
        a[:], b[:] = -128, -128
    names = ("a_zero_point", "b_zero_point") if op == "qnn.matmul" else ("input_zero_point", "kernel_zero_point")
    return op, a, b, dict(zip(names, (za, zb)))


@pytest.mark.parametrize("k", range(len(PRODUCTS)))
def test_products_equal_the_reference_bit_for_bit(k):
    op, a, b, attrs = _case(k)
    mod = IRModule.from_expr(call(op, var("a", a.shape, a.dtype.name), var("b", b.shape, b.dtype.name), **attrs))
    got = GraphModule(plait.build(mod, target=HOST))(a=a, b=b)[0]
    want = run(mod, [a, b])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def _c(op, a_shape, b_shape, attrs) -> str:
    a, b = var("a", a_shape, "int8"), var("b", b_shape, "int8")
    fn = Function((a, b), call(op, a, b, **attrs), None, Attrs({"Primitive": 1, "name": "qprod"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    return codegen_c([lower_function(fn, "qprod", HOST)], HOST).source


def test_the_dense_dot_loop_reads_the_weight_rows_as_they_are():
    """The dense kernel sums contiguous runs of the shifted data and of the weight itself (no copy of
    the weight), as a signed sum gcc turns into dot-product instructions; a matmul's b is transposed."""
    src = _c("qnn.dense", (32, 64), (256, 64), {"input_zero_point": 3})
    assert "T_qnn_dense_wpack" not in src and "T_qnn_dense_pack" in src and "T_qnn_dense_wsum" in src
    dot = [ln for ln in src.splitlines() if "_acc[" in ln and "* (int32_t)p1[" in ln]
    assert len(dot) == 1 and "uint32_t" not in dot[0], src
    src = _c("qnn.matmul", (32, 64), (64, 256), {"a_zero_point": 3})
    assert "T_qnn_matmul_wpack" in src


def test_the_qdq_pass_makes_a_product_with_a_constant_matrix_a_dense():
    w = _ints((64, 16), "int8", 1)
    a, b = var("a", (2, 8, 64), "int8"), var("b", (2, 64, 16), "int8")
    body = call("add", call("qnn.matmul", a, Constant(w), a_zero_point=1, b_zero_point=0),
                call("qnn.matmul", a, b, a_zero_point=1, b_zero_point=0))
    mod = QDQToInteger()(infer_type(IRModule.from_expr(Function((a, b), body))), PassContext())
    calls = {n.op.name: n for n in post_order(mod["main"]) if isinstance(n, Call)}
    assert set(calls) == {"qnn.dense", "qnn.matmul", "add"}
    dense = calls["qnn.dense"]
    np.testing.assert_array_equal(dense.args[1].data, w.T)
    assert (dense.attrs["input_zero_point"], dense.attrs["kernel_zero_point"]) == (1, 0)
    x, y = _ints((2, 8, 64), "int8", 2), _ints((2, 64, 16), "int8", 3)
    np.testing.assert_array_equal(run(mod, [x, y]), run(infer_type(IRModule.from_expr(Function((a, b), body))), [x, y]))


def test_accumulator_bounds_count_the_updates_of_one_element():
    """A block of 128 sums of 576 int8 products: 576 updates per element (the block loop indexes the
    store one element per iteration), not 128 * 576 (which would not fit int32)."""
    acc, x = Buffer("acc", (128, 1), "int32", "local"), Buffer("x", (128 * 576,), "int8")
    j, k = Var("j", "int64"), Var("k", "int64")
    zero = IntImm(0, "int64")

    def bound(index, j_extent=128):
        init = For(j, 0, j_extent, "serial", BufferStore(acc, IntImm(0, "int32"), (index, zero)))
        term = cast("int32", BufferLoad(x, (j * 576 + k,))) * cast("int32", BufferLoad(x, (k,)))
        update = BufferStore(acc, Add(BufferLoad(acc, (index, zero)), term), (index, zero))
        body = Allocate(acc, seq(init, For(j, 0, j_extent, "serial", For(k, 0, 576, "serial", update))))
        return IntBounds(PrimFunc((x,), body)).accumulators.get(acc)

    assert bound(j) == (-576 * 128 * 127, 576 * 128 * 128)
    # not one element per iteration of j (not linear; two js per element): every update counted
    assert bound(j // 2) == (-128 * 576 * 128 * 127, 128 * 576 * 128 * 128)
    assert bound(j - j) == (-128 * 576 * 128 * 127, 128 * 576 * 128 * 128)
    assert bound(j * 0 + 5, 1) == (-576 * 128 * 127, 576 * 128 * 128)  # one iteration of j


def test_a_long_dot_product_over_a_block_of_128_outputs_is_a_signed_sum():
    """unet's 64 -> 32 channel 3x3 convolution at 32 x 32: 576-element sums in blocks of 128 outputs
    (was wrapping unsigned arithmetic, which gcc does not turn into ``vpdpbusd``: 4x slower)."""
    x, w = var("x", (1, 64, 32, 32), "int8"), var("w", (32, 64, 3, 3), "int8")
    fn = Function((x, w), call("qnn.conv2d", x, w, input_zero_point=-78, padding=(1, 1, 1, 1)), None,
                  Attrs({"Primitive": 1, "name": "qconv"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    src = codegen_c([lower_function(fn, "qconv", HOST)], HOST).source
    dot = [ln for ln in src.splitlines() if "_dot_acc[" in ln and "_wpack" in ln]
    assert len(dot) == 1 and "uint32_t" not in dot[0], src


# (x shape, x dtype, w shape, w dtype, attrs): stride 1, one group, a window too short for dot products
PLANES = [
    ((1, 2, 9, 8), "int8", (4, 2, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=9)),
    ((2, 2, 7, 20), "uint8", (5, 2, 3, 3), "uint8",
     dict(dilation=(2, 2), padding=(2, 2, 2, 2), input_zero_point=200, kernel_zero_point=3)),
    ((1, 3, 6, 20), "int8", (6, 3, 2, 3), "int8", dict(padding=(0, 1, 1, 1), input_zero_point=-128)),
]


@pytest.mark.parametrize("k", range(len(PLANES)))
def test_a_few_channel_convolution_over_planes_equals_the_reference(k):
    """A few channels, 3 x 3, stride 1 (a window of fewer than MIN_WINDOW taps; unet's 3-channel first
    layer is a 27-tap window when compiled as C, over planes otherwise): summed over whole padded planes, int16
    minus the zero points, one output channel x a block of pixels per vector loop."""
    xs, xd, ws, wd, attrs = PLANES[k]
    x, w = _ints(xs, xd, 20 + k), _ints(ws, wd, 30 + k)
    expr = call("qnn.conv2d", var("x", xs, xd), var("w", ws, wd), **attrs)
    mod = IRModule.from_expr(expr)
    got = GraphModule(plait.build(mod, target=HOST))(x=x, w=w)[0]
    np.testing.assert_array_equal(got, run(mod, [x, w]))
    xv, wv = var("x", xs, xd), var("w", ws, wd)
    f = Function((xv, wv), call("qnn.conv2d", xv, wv, **attrs), None, Attrs({"Primitive": 1, "name": "qconv"}))
    src = codegen_c([lower_function(infer_type(IRModule.from_expr(f))["main"], "qconv", HOST)], HOST).source
    assert "T_qnn_conv2d_planes" in src


def test_an_elementwise_chain_of_one_int8_value_becomes_one_table():
    """A GELU after its Erf table (lookup -> qnn.add 1 -> qnn.mul by x -> qnn.mul 0.5, as the QDQ pass
    leaves transformer_encoder's) is one ``qnn.lookup`` of x with the chain's numbers, compiled too;
    a product of two different values is not a table."""
    x, y = var("x", (4, 64), "int8"), var("y", (4, 64), "int8")
    erf = Constant(_ints((256,), "int8", 7))
    one, half = Constant(np.array(127, np.int8)), Constant(np.array(127, np.int8))
    t = call("qnn.lookup", x, erf)
    t = call("qnn.add", t, one, a_multiplier=0.9777, b_multiplier=0.5105, offset=-61.67)
    t = call("qnn.mul", x, t, multiplier=0.0071864, a_zero_point=-1, b_zero_point=-128, zero_point=-108)
    t = call("qnn.mul", t, half, multiplier=0.0039216, a_zero_point=-108, b_zero_point=-128, zero_point=-108)
    other = call("qnn.mul", call("qnn.lookup", x, erf), y, multiplier=0.01, a_zero_point=0, b_zero_point=0)
    fn = Function((x, y), call("concatenate", t, other, axis=0))
    before = infer_type(IRModule.from_expr(fn))
    after = QDQToInteger()(before, PassContext())
    ops = [n.op.name for n in post_order(after["main"]) if isinstance(n, Call)]
    assert sorted(ops) == ["concatenate", "qnn.lookup", "qnn.lookup", "qnn.mul"]
    xv = np.arange(-128, 128).astype(np.int8).reshape(4, 64)  # every value
    yv = _ints((4, 64), "int8", 8)
    want = run(before, [xv, yv])
    np.testing.assert_array_equal(run(after, [xv, yv]), want)
    np.testing.assert_array_equal(GraphModule(plait.build(before, target=HOST))(x=xv, y=yv)[0], want)


# (x shape, x dtype, w shape, w dtype, attrs): stride 1 over a multiple of 16 channels
STACKED = [
    # 16 channels: runs of 144 read as 160, zero weights and a zero tail past the last column
    ((1, 16, 6, 7), "int8", (4, 16, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=5)),
    ((1, 16, 5, 9), "uint8", (3, 16, 3, 3), "int8", dict(padding=(0, 1, 2, 1), input_zero_point=200)),
    ((1, 32, 6, 7), "int8", (5, 32, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=-7)),
    ((2, 64, 5, 4), "uint8", (3, 64, 3, 2), "int8", dict(padding=(1, 0, 1, 1), input_zero_point=131)),
    ((1, 32, 4, 6), "uint8", (2, 32, 2, 3), "int8", dict(input_zero_point=0)),
    # a weight zero point: int16 rows (no stack)
    ((1, 32, 6, 5), "int8", (4, 32, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=3, kernel_zero_point=-2)),
]


@pytest.mark.parametrize("k", range(len(STACKED)))
def test_stacked_rows_equal_the_reference(k):
    """The ``stacked`` form: the packed rows of each output row's window stacked so that an output's
    window is one contiguous run (one dot product per output); with the bias and requantization."""
    from plait.op import get_op
    from plait.op.qnn_nn import packed_conv

    xs, xd, ws, wd, attrs = STACKED[k]
    stacked = attrs.get("kernel_zero_point", 0) == 0
    assert packed_conv(xs, ws, get_op("qnn.conv2d").make_attrs(attrs)) == ("stacked" if stacked else "rows")
    x, w = _ints(xs, xd, 40 + k), _ints(ws, wd, 50 + k)
    o = ws[0]
    bias = np.random.default_rng(k).integers(-3000, 3000, o).astype(np.int32)
    scale = (np.random.default_rng(k + 1).uniform(0.5, 2.0, o) / (w.size / o * 64)).astype(np.float32)
    xv, wv = var("x", xs, xd), var("w", ws, wd)
    acc = call("qnn.conv2d", xv, wv, **attrs)
    biased = call("add", acc, call("reshape", var("b", (o,), "int32"), newshape=(o, 1, 1)))
    for expr, feeds in [(acc, {"x": x, "w": w}),
                        (call("qnn.requantize", biased, var("s", (o,), "float32"), zero_point=-3, axis=1),
                         {"x": x, "w": w, "b": bias, "s": scale})]:
        mod = IRModule.from_expr(expr)
        got = GraphModule(plait.build(mod, target=HOST))(**feeds)[0]
        np.testing.assert_array_equal(got, run(mod, list(feeds.values())))
    f = Function((xv, wv), acc, None, Attrs({"Primitive": 1, "name": "qconv"}))
    src = codegen_c([lower_function(infer_type(IRModule.from_expr(f))["main"], "qconv", HOST)], HOST).source
    assert ("T_qnn_conv2d_stack" in src) == stacked
