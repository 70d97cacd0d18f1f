"""The TFLite exporter (plait.frontend.tflite_export): bundled models exported and read back give plait's
outputs (int8 bit for bit, float within 1e-5 * max|ref| + 1e-6), the files run in LiteRT and TensorFlow
Lite Micro with the same outputs, region functions of a placed module export, unmappable operators are
refused naming them, and ``plait export --tflite``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import plait
from plait.cli import main
from plait.executor.graph.module import GraphModule
from plait.frontend.onnx_export import to_onnx
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_export import TFLiteExportError, export_region, export_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.pipeline.partitioned import partitioned
from plait.frontend.tflite_read import read_model
from plait.placement.partition import regions_of
from plait.relay import IRModule, flatten_value, run
from plait.relay.expr import Call, GlobalVar
from plait.relay.visitor import post_order
from plait.testing import onnx_models as om
from plait.testing import tflite_models as tm
from plait.testing.ort_reference import reference_session

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
lit = pytest.importorskip("ai_edge_litert.interpreter")

SMALL = {"mobilenet_v1": {"size": 32}}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def inputs(mod, n: int) -> list[list[np.ndarray]]:
    out = []
    for seed in range(n):
        r = np.random.default_rng(seed)
        xs = []
        for p in mod["main"].params:
            t = p.checked_type
            v = np.clip(r.uniform(-1, 1, t.shape) + r.uniform(-0.3, 0.3), -1, 1)
            xs.append(np.clip(np.round(v * 127.5), -128, 127).astype(np.int8) if t.dtype == "int8"
                      else v.astype(np.float32))
        out.append(xs)
    return out


def built(mod, target: str, cache: str) -> GraphModule:
    return GraphModule(plait.build(mod, target, config={"cc.cache_dir": cache}))


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max()) + 1e-6


def litert(buf: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    li = lit.Interpreter(model_content=buf, experimental_op_resolver_type=lit.OpResolverType.BUILTIN_REF)
    li.allocate_tensors()
    for d, x in zip(li.get_input_details(), xs):
        li.set_tensor(d["index"], x)
    li.invoke()
    return [li.get_tensor(d["index"]).copy() for d in li.get_output_details()]


def tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0).copy()


def opcodes(buf: bytes) -> list[str]:
    return [o.opcode for o in read_model(buf).subgraphs[0].ops]


@pytest.mark.parametrize("name", sorted(tm.MODELS))
def test_int8_tflite_models_round_trip_bit_for_bit(name, cache):
    """Exported and read back: the same module's outputs bit for bit (plait's build), TensorFlow Lite
    Micro's on the exported file too, and LiteRT gives the same bits on it as on the original file."""
    buf = tm.MODELS[name](quant=True, **SMALL.get(name, {}))
    mod = from_tflite(buf)
    out = export_tflite(mod)
    assert opcodes(out) == opcodes(buf)  # no transpose left: the same operators as the original
    back = from_tflite(out)
    want, got = built(mod, "c -requantize=fixed", cache), built(back, "c -requantize=fixed", cache)
    for (x,) in inputs(mod, 2):
        (w,), (g,) = want(x), got(x)
        assert w.dtype == np.int8 and len(np.unique(w)) > 1
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(tflm(out, x), w)
        np.testing.assert_array_equal(litert(out, [x])[0], litert(buf, [x])[0])


def _one_quantized_op(op: str, out_quant: tuple, shape=(2, 3, 16), **options) -> bytes:
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=(0.05, 3))
    y = w.tensor("y", shape, "int8", quant=out_quant)
    w.op(op, [x], [y], **options)
    return w.finish([x], [y])


@pytest.mark.parametrize("op, out_quant", [("LOG_SOFTMAX", (16 / 256, 127)), ("L2_NORMALIZATION", (1 / 128, 0)),
                                           ("SOFTMAX", (1 / 256, -128))])
def test_int8_normalizations_round_trip(op, out_quant, cache):
    """The operators plait computes with TFLite's own fixed point export as that builtin, and the file
    runs in TensorFlow Lite Micro with plait's bits."""
    buf = _one_quantized_op(op, out_quant, **({"Beta": 1.0} if op == "SOFTMAX" else {}))
    mod = from_tflite(buf)
    out = export_tflite(mod)
    assert opcodes(out) == [op]
    lib = built(mod, "c", cache)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (2, 3, 16)).astype(np.int8)
        (want,) = lib(x)
        np.testing.assert_array_equal(tflm(out, x), want)
        np.testing.assert_array_equal(tflm(buf, x), want)


def test_int8_scales_are_recovered_exactly():
    """The weights' per-channel float32 scales written are the original file's."""
    buf = tm.resnet8(quant=True)
    a, b = read_model(buf).subgraphs[0], read_model(export_tflite(from_tflite(buf))).subgraphs[0]
    by_name = {b.tensors[o.outputs[0]].name: o for o in b.ops}  # the outputs keep their names
    convs = [(oa, by_name[a.tensors[oa.outputs[0]].name]) for oa in a.ops if oa.opcode == "CONV_2D"]
    assert len(convs) == 9
    for oa, ob in convs:  # filter and bias
        for k in (1, 2):
            x, y = a.tensors[oa.inputs[k]].quant, b.tensors[ob.inputs[k]].quant
            np.testing.assert_array_equal(x.scale, y.scale)
            assert x.axis == y.axis


@pytest.mark.parametrize("name", sorted(tm.MODELS))
def test_float_tflite_models_round_trip(name):
    buf = tm.MODELS[name](quant=False, **SMALL.get(name, {}))
    mod = from_tflite(buf)
    out = export_tflite(mod)
    assert opcodes(out) == opcodes(buf)
    back = from_tflite(out)
    for xs in inputs(mod, 1):
        want = flatten_value(run(mod, xs))[0]
        np.testing.assert_array_equal(flatten_value(run(back, xs))[0], want)
        close(litert(out, xs)[0], want)


ONNX_BUILT = ("mlp", "ds_cnn", "resnet_block", "autoencoder")


@pytest.mark.parametrize("name", ONNX_BUILT + ("mobilenet_v2", "resnet8"))
def test_float_onnx_models_round_trip(name, cache):
    """An ONNX (NCHW) model: TRANSPOSE once at the input, NHWC inside; read back, and in LiteRT, within
    float tolerance of plait's build of the original (of the reference interpreter, for the larger two)."""
    mod = plait.from_onnx(om.MODELS[name]())
    out = export_tflite(mod)
    ops = opcodes(out)
    assert ops.count("TRANSPOSE") <= 2 and "CONV_2D" in ops or "FULLY_CONNECTED" in ops
    back = from_tflite(out)
    (xs,) = inputs(mod, 1)
    want = built(mod, "c", cache)(*xs) if name in ONNX_BUILT else flatten_value(run(mod, xs))
    got = built(back, "c", cache)(*xs) if name in ONNX_BUILT else flatten_value(run(back, xs))
    for g, w, lw in zip(got, want, litert(out, xs)):
        close(g, w)
        close(lw, w)


def test_onnx_layouts_become_nhwc():
    ops = opcodes(export_tflite(plait.from_onnx(om.ds_cnn())))
    # the NCHW input transposed once; the pool over the plane (a [N, C, 1, 1] flatten needs no transpose)
    assert ops == ["TRANSPOSE", "PAD", "CONV_2D"] + ["DEPTHWISE_CONV_2D", "CONV_2D"] * 4 + \
        ["AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED"]


def test_more_float_operators_run_in_litert():
    """Clip, pools (SAME padding), concatenate and softmax along channels, mean, transposes, batch matmul
    and unary operators, on channels-first values and plain ones."""
    from plait.frontend.builder import Builder

    r = np.random.default_rng(0)
    b = Builder("misc")
    x, y = b.input("x", (1, 3, 8, 8)), b.input("y", (2, 5, 6))
    c = b.clip(b.nn.conv2d(x, b.const(r.standard_normal((4, 3, 3, 3)).astype(np.float32)), padding=(1, 1, 1, 1)),
               a_min=-0.5, a_max=2.0)
    p = b.nn.max_pool2d(c, pool_size=(2, 2), strides=(2, 2))
    q = b.nn.avg_pool2d(c, pool_size=(3, 3), strides=(2, 2), padding=(0, 0, 1, 1))
    cat = b.concatenate(p, b.sigmoid(q) * 2.0, axis=1)
    m = b.mean(b.nn.softmax(cat, axis=1), axis=(2, 3), keepdims=True)
    t = b.reshape(b.transpose(cat, axes=(0, 2, 1, 3)), newshape=(1, -1))
    ys = b.tanh(b.exp(b.negative(b.abs(b.nn.matmul(y, b.transpose(y, axes=(0, 2, 1)))))) - 0.1)
    mod = b.finish(m, t, ys, b.nn.leaky_relu(b.maximum(ys, b.const(np.float32(0.2))), alpha=0.1))
    buf = export_tflite(mod)
    assert opcodes(buf) == ["TRANSPOSE", "CONV_2D", "MAXIMUM", "MINIMUM", "MAX_POOL_2D", "AVERAGE_POOL_2D", "LOGISTIC",
                            "MUL", "CONCATENATION", "SOFTMAX", "MEAN", "TRANSPOSE", "TRANSPOSE", "RESHAPE", "TRANSPOSE",
                            "BATCH_MATMUL", "ABS", "NEG", "EXP", "SUB", "TANH", "MAXIMUM", "LEAKY_RELU"]
    xs = [r.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32), r.uniform(-1, 1, (2, 5, 6)).astype(np.float32)]
    for got, want in zip(litert(buf, xs), flatten_value(run(mod, xs))):
        close(got, want)


def test_an_unmappable_operator_is_refused_naming_it(tmp_path):
    mod = plait.from_onnx(om.transformer_encoder())
    with pytest.raises(TFLiteExportError) as exc:
        export_tflite(mod)
    assert str(exc.value) == ("cannot export to TFLite: operator nn.layer_norm (call '/ln1/LayerNormalization') has "
                              "no TFLite mapping (also unmapped: erf)")
    assert isinstance(exc.value, plait.PlaitError)


def test_float_mode_requantize_is_refused():
    """ONNX Runtime's float requantization has no TFLite form (TFLite's is fixed point)."""
    from plait.ir.attrs import Attrs
    from plait.ir.types import TensorType
    from plait.op import get_op
    from plait.relay.expr import Constant, Function, Var
    from plait.relay.infer import infer_expr

    x = Var("x", TensorType((1, 4), "int32"))
    c = Call(get_op("qnn.requantize"), (x, Constant(np.array(0.5, np.float32))),
             Attrs(zero_point=0, out_dtype="int8", mode="float"), Attrs(name="rq"))
    fn = Function((x,), c, infer_expr(c))
    with pytest.raises(TFLiteExportError) as exc:
        export_tflite(fn)
    assert str(exc.value) == ("cannot export to TFLite: operator qnn.requantize (call 'rq'): a float-mode requantize "
                              "(ONNX Runtime's arithmetic; TFLite's is fixed point: build the model with "
                              "-requantize=fixed)")


def test_every_region_of_a_placed_model_exports_and_chains_to_the_same_bits():
    """ds_cnn int8 on two pieces (CONV_2D on b): ten region functions, each exported and read back;
    running them in main's order gives the whole model's bits."""
    mod = from_tflite(tm.ds_cnn(quant=True))
    part = partitioned(mod, "a: c; b: c -mcpu=cortex-m7f", "CONV_2D=b")
    names = regions_of(part)
    assert len(names) == 10
    files = {n: export_region(part, n) for n in names}
    assert opcodes(files["b_0"]) == ["CONV_2D", "TRANSPOSE"]  # main's NHWC input; the NCHW result
    assert opcodes(export_region(part, "b_1", channels_last=True)) == ["CONV_2D"]
    (x,), (x2,) = inputs(mod, 2)
    for sample in (x, x2):
        vals: dict[int, np.ndarray] = {id(mod_p): sample for mod_p in part["main"].params}
        for e in post_order(part["main"].body):
            if isinstance(e, Call):
                arg = vals[id(e.args[0])]
                if isinstance(e.op, GlobalVar):
                    vals[id(e)] = flatten_value(run(from_tflite(files[e.op.name]), [arg]))[0]
                else:  # device_copy
                    vals[id(e)] = arg
        np.testing.assert_array_equal(vals[id(part["main"].body)], flatten_value(run(mod, [sample]))[0])
    # channels_last on b_0, whose parameter is main's NHWC input: the importer's transpose carries the
    # convolution's meta (its output's quantization), yet the transposed input keeps the input's
    b0 = from_tflite(export_region(part, "b_0", channels_last=True))
    want = flatten_value(run(IRModule.from_expr(part["b_0"]), [x]))[0]
    got = flatten_value(run(b0, [x.transpose(0, 2, 3, 1)]))[0]
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))
    with pytest.raises(TFLiteExportError, match=r"no region function 'c_0' \(its regions: a_0, a_1"):
        export_region(part, "c_0")


def test_cli_export_tflite(tmp_path, capsys):
    src = tmp_path / "ds.tflite"
    src.write_bytes(tm.ds_cnn(quant=True))
    out = tmp_path / "out.tflite"
    assert main(["export", str(src), "--tflite", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}: the model as TFLite (43,056 bytes)\n"
    assert out.read_bytes() == export_tflite(from_tflite(src.read_bytes()))
    region = tmp_path / "r.tflite"
    assert main(["export", str(src), "--tflite", "--target", "a: c; b: c -mcpu=cortex-m7f", "--place", "CONV_2D=b",
                 "--region", "b_0", "-o", str(region)]) == 0
    assert opcodes(region.read_bytes()) == ["CONV_2D", "TRANSPOSE"]
    onnx_path = tmp_path / "tr.onnx"
    onnx.save(om.transformer_encoder(), str(onnx_path))
    capsys.readouterr()
    assert main(["export", str(onnx_path), "--tflite", "-o", str(tmp_path / "x.tflite")]) == 1
    assert capsys.readouterr().err == ("plait: error: cannot export to TFLite: operator nn.layer_norm (call "
                                       "'/ln1/LayerNormalization') has no TFLite mapping (also unmapped: erf)\n")
    assert main(["export", str(src), "-o", str(tmp_path / "x.bin")]) == 2
    assert capsys.readouterr().err.endswith(f"plait: error: plait export: choose the format of '{tmp_path / 'x.bin'}': "
                                            "--tflite or --onnx (or an -o file ending in .tflite or .onnx)\n")


def test_cli_export_onnx_by_flag_or_suffix(tmp_path, capsys):
    """-o x.onnx (or --onnx) writes ONNX: the int8 model in integer operators, TensorFlow Lite Micro's bits."""
    buf = tm.ds_cnn(quant=True)
    src = tmp_path / "ds.tflite"
    src.write_bytes(buf)
    by_suffix, by_flag = tmp_path / "ds.onnx", tmp_path / "ds.model"
    assert main(["export", str(src), "-o", str(by_suffix)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {by_suffix}: the model as ONNX (")
    assert main(["export", str(src), "--onnx", "-o", str(by_flag)]) == 0
    assert by_flag.read_bytes() == by_suffix.read_bytes()
    sess = reference_session(onnx.load(str(by_suffix)))
    assert [o.name for o in sess.get_outputs()] == list(from_tflite(buf).attrs["output_names"])
    for (x,) in inputs(from_tflite(buf), 2):
        np.testing.assert_array_equal(sess.run(None, {sess.get_inputs()[0].name: x})[0], tflm(buf, x))
    region = tmp_path / "b_0.onnx"
    assert main(["export", str(src), "--target", "a: c; b: c -mcpu=cortex-m7f", "--place", "CONV_2D=b",
                 "--region", "b_0", "-o", str(region)]) == 0
    assert [n.op_type for n in onnx.load(str(region)).graph.node if n.op_type == "Conv"] == []  # integer, no float Conv
    capsys.readouterr()
    assert main(["export", str(src), "--target", "a: c; b: c", "--region", "c_9", "-o", str(region)]) == 1
    assert capsys.readouterr().err.startswith("plait: error: the module has no region function 'c_9' (its regions: ")


@pytest.mark.parametrize("name", sorted(tm.MODELS))
def test_int8_tflite_models_export_to_onnx_with_tflms_bits(name):
    """An int8 TFLite model exported to ONNX (fixed-point requantization, TFLite's softmax and average
    pool as standard integer operators): ONNX Runtime's outputs are TensorFlow Lite Micro's, bit for bit."""
    buf = tm.MODELS[name](quant=True, **SMALL.get(name, {}))
    mod = from_tflite(buf)
    sess = reference_session(to_onnx(mod["main"], output_names=mod.attrs["output_names"]))
    for (x,) in inputs(mod, 2):
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
        want = tflm(buf, x)
        assert got.dtype == np.int8 and len(np.unique(want)) > 1
        np.testing.assert_array_equal(got, want)
