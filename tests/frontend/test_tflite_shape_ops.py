"""The TFLite shape and data-movement operators (plait/frontend/tflite_ops_shape.py, tflite_ops_index.py,
and RESHAPE/SQUEEZE/EXPAND_DIMS/QUANTIZE/DEQUANTIZE of tflite_ops.py), one single-op model each, in every
dtype TFLite runs them in: int8 and int16 against TensorFlow Lite Micro, float32, uint8, int32 and int64
(and what TFLM lacks: STRIDED_SLICE's ellipsis and new axes, offset) against LiteRT's reference kernels.
Everything is bit-exact except float RESIZE_BILINEAR (within 1e-5 of the reference's largest value)."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import UnsupportedError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
lit = pytest.importorskip("ai_edge_litert.interpreter")

QUANT = {"int8": (0.05, 3), "uint8": (0.05, 128), "int16": (0.001, 0)}
ALL = ("float32", "int8", "uint8", "int16", "int32")
CHECKED: set[tuple[str, str, str]] = set()  # (operator, dtype, reference): the coverage the report counts


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return {"cc.cache_dir": str(tmp_path_factory.mktemp("cc"))}


def data(shape, dtype: str, seed: int = 0) -> np.ndarray:
    r = np.random.default_rng(seed)
    if dtype == "float32":
        return r.standard_normal(shape).astype(np.float32)
    if dtype == "bool":
        return r.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(1 << 20)), min(int(info.max), 1 << 20)
    return r.integers(lo, hi, shape, endpoint=True).astype(dtype)


def tensor(w: TFLiteWriter, name: str, shape, dtype: str) -> int:
    return w.tensor(name, shape, dtype, quant=QUANT.get(dtype))


def reference(buf: bytes, xs: list[np.ndarray], which: str, n: int) -> list[np.ndarray]:
    if which == "tflm":
        it = tflm_runtime.Interpreter.from_bytes(buf)
        for k, x in enumerate(xs):
            it.set_input(x, k)
        it.invoke()
        return [it.get_output(k).copy() for k in range(n)]
    li = lit.Interpreter(model_content=buf, experimental_op_resolver_type=lit.OpResolverType.BUILTIN_REF)
    li.allocate_tensors()
    for d, x in zip(li.get_input_details(), xs):
        li.set_tensor(d["index"], x)
    li.invoke()
    outs = sorted(li.get_output_details(), key=lambda d: d["index"])
    return [li.get_tensor(d["index"]).copy() for d in outs]


def ref_of(dtype: str) -> str:
    return "tflm" if dtype in ("int8", "int16") else "litert"


def check(buf: bytes, xs: list[np.ndarray], ref: str, config, op: str, dtype: str,
          close: bool = False) -> list[np.ndarray]:
    got = plait.executor.GraphModule(plait.build(from_tflite(buf), "c", config=config))(*xs)
    want = reference(buf, xs, ref, len(got))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if close:
            tol = 1e-5 * float(np.abs(w).max()) + 1e-6
            assert float(np.abs(g.astype(np.float64) - w).max()) <= tol
        else:
            np.testing.assert_array_equal(g, w)
    CHECKED.add((op, dtype, ref))
    return want


def single(op: str, ins: list[tuple[tuple, str]], outs: list[tuple[tuple, str]],
           consts: list[np.ndarray | None] = (), quant_out: list | None = None, **options) -> bytes:
    """A one-operator model: variable inputs ``ins``, then constant inputs ``consts`` (None: omitted),
    outputs ``outs``."""
    w = TFLiteWriter()
    xs = [tensor(w, f"x{k}", s, d) for k, (s, d) in enumerate(ins)]
    cs = [-1 if c is None else w.const(f"c{k}", c, quant=QUANT.get(c.dtype.name)) for k, c in enumerate(consts)]
    ys = [tensor(w, f"y{k}", s, d) for k, (s, d) in enumerate(outs)]
    w.op(op, [*xs, *cs], ys, **options)
    return w.finish(xs, ys)


# ---- joining and splitting ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
def test_concatenation(dtype, config):
    buf = single("CONCATENATION", [((1, 4, 4, 3), dtype), ((1, 4, 4, 2), dtype)], [((1, 4, 4, 5), dtype)], Axis=-1)
    check(buf, [data((1, 4, 4, 3), dtype, 1), data((1, 4, 4, 2), dtype, 2)], ref_of(dtype), config,
          "CONCATENATION", dtype)


def test_concatenation_of_three_along_axis_1(config):
    shapes = [(2, 1, 3), (2, 4, 3), (2, 2, 3)]
    buf = single("CONCATENATION", [(s, "int8") for s in shapes], [((2, 7, 3), "int8")], Axis=1)
    check(buf, [data(s, "int8", k) for k, s in enumerate(shapes)], "tflm", config, "CONCATENATION", "int8")


def test_concatenation_with_differing_scales_is_refused():
    w = TFLiteWriter()
    a = w.tensor("a", (1, 2), "int8", quant=(0.05, 3))
    b = w.tensor("b", (1, 2), "int8", quant=(0.1, 3))
    y = w.tensor("y", (1, 4), "int8", quant=(0.05, 3))
    w.op("CONCATENATION", [a, b], [y], Axis=1)
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([a, b], [y]))
    assert str(exc.value) == (
        "model uses 1 unsupported operator(s):\n  operator 0 (CONCATENATION): tensor 1 'b' has scale "
        "0.10000000149011612 and zero point 3, tensor 0 'a' 0.05000000074505806 and 3: a quantized "
        "CONCATENATION that requantizes is not supported (TFLite Micro requires equal quantization)")


@pytest.mark.parametrize("dtype", ALL)
def test_split_and_split_v(dtype, config):
    x = data((2, 6, 3), dtype)
    # SPLIT's inputs are (axis, value): write it by hand
    w = TFLiteWriter()
    ax = w.const("axis", np.array(1, np.int32))
    xi = tensor(w, "x", (2, 6, 3), dtype)
    ys = [tensor(w, f"y{k}", (2, 2, 3), dtype) for k in range(3)]
    w.op("SPLIT", [ax, xi], ys, NumSplits=3)
    buf = w.finish([xi], ys)
    check(buf, [x], ref_of(dtype), config, "SPLIT", dtype)
    buf = single("SPLIT_V", [((2, 6, 3), dtype)], [((2, 1, 3), dtype), ((2, 3, 3), dtype), ((2, 2, 3), dtype)],
                 [np.array([1, -1, 2], np.int32), np.array([-2], np.int32)], NumSplits=3)
    check(buf, [x], ref_of(dtype), config, "SPLIT_V", dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_pack_and_unpack(dtype, config):
    buf = single("PACK", [((2, 3), dtype)] * 3, [((2, 3, 3), dtype)], ValuesCount=3, Axis=1)
    check(buf, [data((2, 3), dtype, k) for k in range(3)], ref_of(dtype), config, "PACK", dtype)
    buf = single("UNPACK", [((2, 3, 4), dtype)], [((2, 4), dtype)] * 3, Num=3, Axis=-2)
    check(buf, [data((2, 3, 4), dtype)], ref_of(dtype), config, "UNPACK", dtype)


# ---- padding ------------------------------------------------------------------------------------

PADS = np.array([[0, 0], [1, 2], [2, 0], [0, 1]], np.int32)


@pytest.mark.parametrize("dtype", ALL)
def test_pad_and_padv2(dtype, config):
    x = data((1, 3, 4, 2), dtype)
    buf = single("PAD", [((1, 3, 4, 2), dtype)], [((1, 6, 6, 3), dtype)], [PADS])
    check(buf, [x], ref_of(dtype), config, "PAD", dtype)
    value = np.array([7], dtype) if dtype != "float32" else np.array([-1.5], np.float32)
    pads = PADS.astype(np.int64 if ref_of(dtype) == "litert" else np.int32)  # (TFLM reads int32 paddings)
    buf = single("PADV2", [((1, 3, 4, 2), dtype)], [((1, 6, 6, 3), dtype)], [pads, value])
    check(buf, [x], ref_of(dtype), config, "PADV2", dtype)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("mode", (0, 1))
def test_mirror_pad(dtype, mode, config):
    pads = np.array([[0, 0], [2, 1], [1, 3 if mode else 2], [0, 0]], np.int32)
    out = (1, 3 + 3, 4 + (4 if mode else 3), 2)
    buf = single("MIRROR_PAD", [((1, 3, 4, 2), dtype)], [(out, dtype)], [pads], Mode=mode)
    check(buf, [data((1, 3, 4, 2), dtype)], "tflm" if dtype == "int8" else "litert", config, "MIRROR_PAD", dtype)


def test_pad_needs_constant_paddings():
    w = TFLiteWriter()
    x = w.tensor("x", (1, 2), "float32")
    p = w.tensor("p", (2, 2), "int32")
    y = w.tensor("y", (1, 4), "float32")
    w.op("PAD", [x, p], [y])
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([x, p], [y]))
    assert str(exc.value).endswith("operator 0 (PAD): the paddings (input 1) must be a constant")


def _refused(buf: bytes) -> str:
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(buf)
    return str(exc.value).split("\n", 1)[1]


def test_inputs_that_must_be_constants_and_unsupported_dtypes_are_refused():
    w = TFLiteWriter()
    x = w.tensor("x", (4, 5), "float32")
    b = w.tensor("b", (2,), "int32")
    y = w.tensor("y", (2, 5), "float32")
    w.op("STRIDED_SLICE", [x, b, w.const("e", np.array([2, 5], np.int32)), w.const("s", np.array([1, 1], np.int32))],
         [y])
    assert _refused(w.finish([x, b], [y])) == "  operator 0 (STRIDED_SLICE): begin (input 1) must be a constant"
    buf = single("RESIZE_BILINEAR", [((1, 2, 2, 1), "int32")], [((1, 4, 4, 1), "int32")], [np.array([4, 4], np.int32)])
    assert _refused(buf) == ("  operator 0 (RESIZE_BILINEAR): RESIZE_BILINEAR of INT32 (tensor 0 'x0') is not "
                             "supported")
    buf = single("GATHER", [((2, 3, 4), "float32")], [((2, 3, 2), "float32")], [np.array([[0, 1], [2, 0]], np.int32)],
                 Axis=1, BatchDims=2)
    assert _refused(buf) == ("  operator 0 (GATHER): batch_dims 2 does not fit axis 1 and the shapes [2, 3, 4] "
                             "and [2, 2]")


# ---- transposing and slicing --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
def test_transpose(dtype, config):
    buf = single("TRANSPOSE", [((1, 4, 5, 3), dtype)], [((3, 1, 5, 4), dtype)], [np.array([3, 0, 2, 1], np.int32)])
    check(buf, [data((1, 4, 5, 3), dtype)], ref_of(dtype), config, "TRANSPOSE", dtype)


# (begin, end, strides, options, output shape) on a [4, 5, 6] input
SLICES = {
    "masks": ([1, -1, 0], [4, 0, 5], [1, -2, 2], dict(BeginMask=0, EndMask=4), (3, 2, 3)),
    "begin_mask_negative_stride": ([0, 0, -2], [0, 0, 0], [-1, 1, -1], dict(BeginMask=3, EndMask=2), (3, 5, 4)),
    "shrink": ([2, 1, -1], [3, 4, 0], [1, 1, 1], dict(ShrinkAxisMask=5), (3,)),
    "ellipsis_new_axis": ([0, 0, 1], [0, 0, 3], [1, 1, 1], dict(EllipsisMask=1, NewAxisMask=2), (4, 5, 1, 2)),
    "offset": ([1, 0, 2], [2, 5, 3], [1, 2, 1], dict(Offset=True), (2, 3, 3)),
    "ellipsis_middle_shrink": ([1, 0, 0, 2], [3, 0, 0, 3], [1, 1, 1, 1],
                               dict(EllipsisMask=2, NewAxisMask=4, ShrinkAxisMask=8), (2, 5, 1)),
}


@pytest.mark.parametrize("case, dtype", [(c, d) for c in sorted(SLICES) for d in ALL
                                         if c == "masks" or d in ("float32", "int8")])  # masks: every dtype
def test_strided_slice(case, dtype, config):
    begin, end, strides, opts, out = SLICES[case]
    consts = [np.array(begin, np.int32), np.array(end, np.int32), np.array(strides, np.int32)]
    buf = single("STRIDED_SLICE", [((4, 5, 6), dtype)], [(out, dtype)], consts, **opts)
    ref = "litert" if case in ("ellipsis_new_axis", "offset", "ellipsis_middle_shrink") else ref_of(dtype)
    check(buf, [data((4, 5, 6), dtype)], ref, config, "STRIDED_SLICE", dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_slice(dtype, config):
    buf = single("SLICE", [((2, 5, 6, 3), dtype)], [((2, 2, 3, 2), dtype)],
                 [np.array([0, 1, 2, 1], np.int32), np.array([-1, 2, 3, -1], np.int32)])
    check(buf, [data((2, 5, 6, 3), dtype)], ref_of(dtype), config, "SLICE", dtype)


# ---- gather -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
def test_gather(dtype, config):
    idx = np.array([[3, 0], [1, 1], [2, 3]], np.int32)
    buf = single("GATHER", [((2, 4, 3), dtype)], [((2, 3, 2, 3), dtype)], [idx], Axis=1)
    ref = "tflm" if dtype == "int8" else "litert"  # (TFLM's GATHER runs float32, int8 and int32)
    check(buf, [data((2, 4, 3), dtype)], ref, config, "GATHER", dtype)


def test_gather_with_variable_indices_and_batch_dims(config):
    w = TFLiteWriter()
    x = w.tensor("x", (2, 3, 4, 5), "float32")
    i = w.tensor("i", (2, 3), "int32")
    y = w.tensor("y", (2, 3, 3, 5), "float32")
    w.op("GATHER", [x, i], [y], Axis=2, BatchDims=1)
    buf = w.finish([x, i], [y])
    idx = np.array([[0, 3, 1], [2, 2, 0]], np.int32)
    check(buf, [data((2, 3, 4, 5), "float32"), idx], "litert", config, "GATHER", "float32")


# ---- resizing -----------------------------------------------------------------------------------

RESIZES = [((4, 5), (7, 9), False, False), ((4, 5), (7, 9), True, False), ((4, 5), (7, 9), False, True),
           ((6, 7), (3, 4), False, True), ((6, 7), (3, 4), True, False),
           ((3, 4), (6, 8), False, False)]  # weights of 512 / 1024: int8 ties, rounded away from zero


def _resize(op: str, dtype: str, case: int) -> bytes:
    (h, w), (oh, ow), align, half = RESIZES[case]
    return single(op, [((2, h, w, 3), dtype)], [((2, oh, ow, 3), dtype)], [np.array([oh, ow], np.int32)],
                  AlignCorners=align, HalfPixelCenters=half)


@pytest.mark.parametrize("dtype, case", [(d, c) for d in ("float32", "int8", "uint8", "int16") for c in range(5)
                                         if d in ("float32", "int8") or c in (0, 2)])  # every option on f32, i8
def test_resize_nearest_neighbor(dtype, case, config):
    (h, w), *_ = RESIZES[case]
    check(_resize("RESIZE_NEAREST_NEIGHBOR", dtype, case), [data((2, h, w, 3), dtype)], ref_of(dtype), config,
          "RESIZE_NEAREST_NEIGHBOR", dtype)


@pytest.mark.parametrize("case", range(len(RESIZES)))
@pytest.mark.parametrize("dtype", ("float32", "int8", "uint8", "int16"))
def test_resize_bilinear(dtype, case, config):
    """Bit-exact in every dtype (float32 too: each float32 operation is rounded as the kernel's)."""
    (h, w), *_ = RESIZES[case]
    ref = "tflm" if dtype == "int8" else "litert"  # (TFLM's RESIZE_BILINEAR runs float32 and int8 only)
    check(_resize("RESIZE_BILINEAR", dtype, case), [data((2, h, w, 3), dtype)], ref, config,
          "RESIZE_BILINEAR", dtype)


# ---- making tensors, casts, arg min/max ---------------------------------------------------------


def test_shape_fill_zeros_like(config):
    buf = single("SHAPE", [((2, 3, 4), "int8")], [((3,), "int32")], OutType=2)
    check(buf, [data((2, 3, 4), "int8")], "tflm", config, "SHAPE", "int8")
    buf = single("SHAPE", [((2, 3, 4), "float32")], [((3,), "int64")], OutType=4)
    check(buf, [data((2, 3, 4), "float32")], "litert", config, "SHAPE", "float32")
    for dtype in ("float32", "int8", "int32"):
        w = TFLiteWriter()
        d = w.const("dims", np.array([2, 3], np.int32))
        v = tensor(w, "v", (), dtype)
        y = tensor(w, "y", (2, 3), dtype)
        w.op("FILL", [d, v], [y])
        check(w.finish([v], [y]), [data((), dtype)], "tflm" if dtype != "float32" else "litert", config, "FILL",
              dtype)
        buf = single("ZEROS_LIKE", [((2, 3), dtype)], [((2, 3), dtype)])
        check(buf, [data((2, 3), dtype)], "tflm", config, "ZEROS_LIKE", dtype)


CASTS = [("float32", "int32"), ("int32", "float32"), ("int8", "int32"), ("int32", "int8"), ("uint8", "float32"),
         ("int16", "int32"), ("float32", "bool"), ("int32", "int64")]


@pytest.mark.parametrize("src,dst", CASTS)
def test_cast(src, dst, config):
    x = data((3, 4), src) * (np.float32(40) if src == "float32" else 1)
    w = TFLiteWriter()
    xi = w.tensor("x", (3, 4), src)
    yi = w.tensor("y", (3, 4), dst)
    w.op("CAST", [xi], [yi])
    buf = w.finish([xi], [yi])
    ref = "tflm" if src in ("int8", "int16") else "litert"
    check(buf, [x], ref, config, "CAST", f"{src}->{dst}")


@pytest.mark.parametrize("op", ("ARG_MAX", "ARG_MIN"))
@pytest.mark.parametrize("dtype", ("float32", "int8", "uint8", "int32"))
def test_arg_max_min(op, dtype, config):
    x = data((2, 5, 4), dtype)
    x[0, :, 0] = x[0, 0, 0]  # ties: the first index wins
    ref = "tflm" if dtype == "int8" else "litert"
    out = "int64" if ref == "litert" and op == "ARG_MIN" else "int32"  # (TFLM writes int32 only)
    buf = single(op, [((2, 5, 4), dtype)], [((2, 4), out)], [np.array([1], np.int32)],
                 OutputType={"int32": 2, "int64": 4}[out])
    check(buf, [x], ref, config, op, dtype)


# ---- the converters of tflite_ops.py ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
def test_reshape_squeeze_expand_dims(dtype, config):
    x = data((2, 1, 6), dtype)
    buf = single("RESHAPE", [((2, 1, 6), dtype)], [((3, 4), dtype)], [np.array([3, -1], np.int32)])
    check(buf, [x], ref_of(dtype), config, "RESHAPE", dtype)
    buf = single("SQUEEZE", [((2, 1, 6), dtype)], [((2, 6), dtype)], SqueezeDims=[1])
    check(buf, [x], ref_of(dtype), config, "SQUEEZE", dtype)
    buf = single("EXPAND_DIMS", [((2, 1, 6), dtype)], [((2, 1, 6, 1), dtype)], [np.array([-1], np.int32)])
    check(buf, [x], ref_of(dtype), config, "EXPAND_DIMS", dtype)


@pytest.mark.parametrize("dtype", ("int8", "uint8", "int16"))
def test_quantize_dequantize(dtype, config):
    x = data((4, 8), "float32") * np.float32(2)
    buf = single("QUANTIZE", [((4, 8), "float32")], [((4, 8), dtype)])
    check(buf, [x], ref_of(dtype), config, "QUANTIZE", f"float32->{dtype}")
    buf = single("DEQUANTIZE", [((4, 8), dtype)], [((4, 8), "float32")])
    check(buf, [data((4, 8), dtype)], ref_of(dtype), config, "DEQUANTIZE", f"{dtype}->float32")


@pytest.mark.parametrize("src,dst", (("int8", "int8"), ("int16", "int8"), ("int8", "int16")))
def test_quantize_requantizes(src, dst, config):
    w = TFLiteWriter()
    x = w.tensor("x", (4, 8), src, quant=QUANT[src])
    y = w.tensor("y", (4, 8), dst, quant=(0.08, -5) if dst == "int8" else (0.0007, 0))
    w.op("QUANTIZE", [x], [y])
    check(w.finish([x], [y]), [data((4, 8), src)], "tflm", config, "QUANTIZE", f"{src}->{dst}")


# ---- layouts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ("CONCATENATION", "TRANSPOSE", "RESIZE_BILINEAR", "PAD"))
def test_after_a_convolution(op, config):
    """A channels-first value (a convolution's result) through the operator, int8 against TFLM."""
    w = TFLiteWriter()
    x = w.tensor("x", (1, 5, 6, 2), "int8", quant=(0.05, 3))
    k = w.const("k", data((4, 1, 1, 2), "int8", 5), quant=(0.02, 0))
    b = w.const("b", np.arange(4, dtype=np.int32) * 10)
    c = w.tensor("c", (1, 5, 6, 4), "int8", quant=(0.1, -2))
    w.op("CONV_2D", [x, k, b], [c], Padding=1, StrideW=1, StrideH=1)
    if op == "CONCATENATION":
        y = w.tensor("y", (1, 5, 6, 8), "int8", quant=(0.1, -2))
        w.op(op, [c, c], [y], Axis=3)
    elif op == "TRANSPOSE":
        y = w.tensor("y", (1, 4, 6, 5), "int8", quant=(0.1, -2))
        w.op(op, [c, w.const("perm", np.array([0, 3, 2, 1], np.int32))], [y])
    elif op == "RESIZE_BILINEAR":
        y = w.tensor("y", (1, 9, 11, 4), "int8", quant=(0.1, -2))
        w.op(op, [c, w.const("size", np.array([9, 11], np.int32))], [y], HalfPixelCenters=True)
    else:
        y = w.tensor("y", (1, 8, 8, 5), "int8", quant=(0.1, -2))
        w.op(op, [c, w.const("pads", PADS)], [y])
    buf = w.finish([x], [y])
    check(buf, [data((1, 5, 6, 2), "int8")], "tflm", config, op, "int8 (channels-first input)")
