"""The ONNX exporter (plait.frontend.onnx_export): every operator exported and run by ONNX Runtime
against plait's reference interpreter; the reference models imported, exported and run by ONNX
Runtime against the original models; names, initializers, symbolic dims, outputs, errors; and the
ONNX conformance model folders round-tripped (onnx_export_roundtrip.py runs every case)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from plait.errors import FrontendError
from plait.frontend.onnx import from_onnx
from plait.frontend.onnx_export import ExportError, export_map, exportable, sanitize, to_onnx
from plait.op import get_op, list_ops
from plait.ir.types import TensorType, TupleType
from plait.relay import IRModule, call, const, flatten_value, run, var
from plait.relay.expr import Function, If, Tuple, TupleGetItem, Var
from plait.testing import onnx_models
from plait.testing.ort_reference import exact_u8s8_operands, reference_session

sys.path.insert(0, str(Path(__file__).parents[1] / "op"))
from declared_cases import declared_cases  # noqa: E402

F32 = np.float32
U8S8_PRODUCTS = ("qnn.dense", "qnn.matmul")  # exported as MatMulInteger (plait/testing/ort_reference.py)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return reference_session(model)


def _run_exported(func: Function, inputs: list[np.ndarray], **kw) -> list[np.ndarray]:
    sess = _session(to_onnx(func, **kw))
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), inputs)})


def _close(got: np.ndarray, want: np.ndarray, tol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.dtype.kind == "f":
        t = 2e-3 if got.dtype == np.float16 else tol
        np.testing.assert_allclose(got, want, rtol=t, atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


# ---- every operator -----------------------------------------------------------------------------

rng = np.random.default_rng(0)


def r(*shape, lo=-2.0, hi=2.0, dtype=F32):
    return rng.uniform(lo, hi, shape).astype(dtype)


def ri(*shape, lo=0, hi=5, dtype=np.int64):
    return rng.integers(lo, hi, shape).astype(dtype)


def rb(*shape):
    return rng.integers(0, 2, shape).astype(bool)


X = r(2, 3, 4)
POS = r(2, 3, 4, lo=0.1, hi=3.0)
IMG = r(1, 4, 6, 6)

# op -> list of (inputs, attrs)
CASES: dict[str, list[tuple[list, dict]]] = {
    **{op: [([r(2, 3, 4), r(3, 1)], {})] for op in ("add", "subtract", "multiply", "maximum", "minimum")},
    "divide": [([r(2, 3), r(2, 3, lo=0.5, hi=2)], {}),
               ([ri(2, 3, lo=-9, hi=9, dtype=np.int32), ri(3, lo=1, hi=4, dtype=np.int32)], {})],
    "power": [([POS, r(2, 3, 4)], {})],
    "mod": [([ri(2, 3, lo=-9, hi=9, dtype=np.int32), ri(2, 3, lo=1, hi=4, dtype=np.int32)], {"fmod": False}),
            ([r(2, 3), r(2, 3, lo=0.5, hi=2)], {"fmod": True}), ([r(2, 3, lo=-9, hi=9), r(3, lo=-3, hi=3)], {})],
    **{op: [([ri(2, 3), ri(2, 3)], {})]
       for op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")},
    **{op: [([rb(2, 3), rb(2, 3)], {})] for op in ("logical_and", "logical_or", "logical_xor")},
    **{op: [([ri(2, 3, hi=255, dtype=np.uint8), ri(2, 3, hi=255, dtype=np.uint8)], {})]
       for op in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    "bitwise_not": [([ri(2, 3, hi=100, dtype=np.int32)], {})],
    "left_shift": [([ri(2, 3, hi=16, dtype=np.uint32), ri(2, 3, hi=8, dtype=np.uint32)], {})],
    "right_shift": [([ri(2, 3, hi=255, dtype=np.uint8), ri(2, 3, hi=8, dtype=np.uint8)], {})],
    "where": [([rb(2, 3), r(2, 3), r(3)], {})],
    **{op: [([X], {})] for op in ("abs", "sigmoid", "tanh", "exp", "erf", "negative", "sign", "floor", "ceil", "round",
                                  "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh", "nn.relu", "nn.hard_swish",
                                  "nn.softplus", "nn.softsign", "nn.mish", "nn.silu")},
    **{op: [([POS], {})] for op in ("log", "sqrt", "rsqrt", "reciprocal")},
    **{op: [([r(2, 3, lo=-0.9, hi=0.9)], {})] for op in ("asin", "acos", "atanh")},
    "acosh": [([r(2, 3, lo=1.1, hi=3)], {})],
    "logical_not": [([rb(2, 3)], {})],
    "isnan": [([np.array([1.0, np.nan, np.inf], F32)], {})],
    "isinf": [([np.array([1.0, -np.inf, np.inf], F32)], {"detect_negative": False})],
    "nn.leaky_relu": [([X], {"alpha": 0.2})],
    "nn.elu": [([X], {"alpha": 0.5})],
    "nn.selu": [([X], {})],
    "nn.celu": [([X], {"alpha": 1.5})],
    "nn.gelu": [([X], {}), ([X], {"approximate": "tanh"})],
    "nn.hard_sigmoid": [([X], {"alpha": 0.3, "beta": 0.4})],
    "nn.thresholded_relu": [([X], {"alpha": 0.5})],
    "nn.prelu": [([r(2, 3, 4, 4), r(3, 1, 1)], {})],
    "clip": [([X], {"a_min": -0.5, "a_max": 0.7}), ([X], {"a_max": 0.1}),
             ([ri(2, 3, hi=9, dtype=np.int32)], {"a_min": 2.0})],
    "cast": [([X], {"dtype": "int32"}), ([ri(3), ], {"dtype": "float16"})],
    **{op: [([POS], {"axis": (1,), "keepdims": True}), ([POS], {"axis": None, "keepdims": False}),
            ([POS], {"axis": (0, 2), "keepdims": False})]
       for op in ("sum", "mean", "max", "min", "prod", "sum_square", "l1_norm", "l2_norm", "log_sum", "log_sum_exp")},
    "argmax": [([X], {"axis": 1, "keepdims": False})],
    "argmin": [([X], {"axis": -1, "select_last_index": True})],
    "nn.softmax": [([X], {"axis": 1})],
    "nn.log_softmax": [([X], {"axis": -1})],
    "cumsum": [([X], {"axis": 1, "exclusive": True, "reverse": True})],
    "nn.conv2d": [([IMG, r(6, 2, 3, 3)],
                   {"strides": (2, 1), "padding": (1, 0, 2, 1), "groups": 2, "dilation": (1, 2)})],
    "nn.conv2d_transpose": [([IMG, r(4, 3, 3, 3)],
                             {"strides": (2, 2), "padding": (1, 1, 0, 0), "output_padding": (1, 0)})],
    "nn.matmul": [([r(2, 3, 4), r(4, 5)], {})],
    "nn.dense": [([r(3, 4), r(5, 4)], {}), ([r(2, 3, 4), r(5, 4)], {})],
    "nn.max_pool2d": [([IMG], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True})],
    "nn.avg_pool2d": [([IMG], {"pool_size": (2, 3), "padding": (0, 1, 0, 1), "count_include_pad": True}),
                      ([IMG], {"pool_size": (2, 2), "dilation": (2, 2)})],
    "nn.global_avg_pool2d": [([IMG], {})],
    "nn.global_max_pool2d": [([IMG], {})],
    "nn.batch_norm": [([IMG, r(4), r(4), r(4), r(4, lo=0.5, hi=2)], {"epsilon": 1e-3})],
    "nn.layer_norm": [([X, r(4), r(4)], {}), ([X, r(3, 4)], {"axis": 1, "epsilon": 1e-3})],
    "nn.instance_norm": [([IMG, r(4), r(4)], {})],
    "nn.lrn": [([IMG], {"size": 3, "alpha": 1e-3, "beta": 0.7, "bias": 2.0})],
    "reshape": [([X], {"newshape": (0, -1)}), ([X], {"newshape": (4, 6)})],
    "transpose": [([X], {"axes": (2, 0, 1)}), ([X], {})],
    "flatten": [([X], {"axis": 2})],
    "squeeze": [([r(2, 1, 3, 1)], {"axes": (1,)}), ([r(2, 1, 3, 1)], {})],
    "expand_dims": [([X], {"axes": (0, 4)})],
    "broadcast_to": [([r(3, 1)], {"shape": (2, 3, 4)})],
    "tile": [([r(2, 3)], {"reps": (2, 1)})],
    "concatenate": [([r(2, 3), r(1, 3), r(4, 3)], {"axis": 0})],
    "split": [([X], {"sections": (1, 2), "axis": 1}), ([X], {"sections": (4,), "axis": 2})],
    "strided_slice": [([X], {"begin": (1, -1), "end": (3, -5), "strides": (1, -2), "axes": (1, 2)}),
                      ([X], {"begin": (1,), "end": (2,)})],
    "take": [([X, ri(2, 2, lo=-3, hi=3)], {"axis": 1})],
    "gather_elements": [([X, ri(2, 3, 2, hi=4)], {"axis": 2})],
    "gather_nd": [([X, ri(2, 1, hi=2)], {"batch_dims": 0})],
    "nn.pad": [([X], {"pad_width": (0, 1, 2, 1, 0, 1), "pad_value": 1.5}),
               ([X], {"pad_width": (0, 1, 2, 0, 1, 1), "pad_mode": "reflect"}),
               ([X], {"pad_width": (0, 1, 2, 0, 1, 1), "pad_mode": "edge"}),
               ([X], {"pad_width": (0, 1, 2, 0, 1, 1), "pad_mode": "wrap"})],
    "image.resize2d": [([IMG], {"size": (12, 9), "method": "linear"}),
                       ([IMG], {"size": (3, 4), "method": "nearest", "nearest_mode": "floor",
                                "coordinate_transformation_mode": "asymmetric"}),
                       ([IMG], {"size": (9, 9), "method": "cubic", "scales": (1.5, 1.5), "cubic_alpha": -0.5}),
                       ([IMG], {"size": (4, 5), "method": "linear",
                                "coordinate_transformation_mode": "tf_crop_and_resize",
                                "roi": (0.1, 0.2, 0.9, 0.8), "extrapolation_value": 0.5})],
    "depth_to_space": [([r(1, 8, 2, 3)], {"block_size": 2, "mode": "CRD"}), ([r(1, 8, 2, 3)], {"block_size": 2})],
    "space_to_depth": [([IMG], {"block_size": 2})],
    "one_hot": [([ri(2, 3, lo=-3, hi=4)], {"depth": 4, "axis": 1, "on_value": 5.0, "off_value": -1.0})],
    "trilu": [([X], {"upper": False, "k": 1})],
    "range": [([], {"start": 1.0, "limit": 7.0, "delta": 2.0, "dtype": "float32"})],
    "device_copy": [([X], {"src": "a", "dst": "b"})],
}
for _op, _cases in declared_cases().items():  # from per-operator test modules (tests/op)
    CASES.setdefault(_op, []).extend(_cases)


def _op_cases():
    for op, cases in sorted(CASES.items()):
        for k, (inputs, attrs) in enumerate(cases):
            yield pytest.param(op, inputs, attrs, id=f"{op}-{k}")


def test_every_operator_has_an_exporter_and_a_case():
    assert [op for op in list_ops() if export_map(get_op(op)) is None] == []
    assert set(CASES) == set(list_ops())


@pytest.mark.parametrize("op,inputs,attrs", list(_op_cases()))
def test_operator_round_trip(op, inputs, attrs):
    """One call exported, run by ONNX Runtime; the numbers are plait's reference interpreter's."""
    params = [var(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(inputs)]
    body = call(op, *params, meta={"name": f"/{op}/node"}, **attrs)
    mod = IRModule.from_expr(Function(tuple(params), body))
    with np.errstate(all="ignore"):
        want = flatten_value(run(mod, inputs))
    assert exportable(mod["main"].body) == (True, "")
    if op in U8S8_PRODUCTS:  # ONNX Runtime's u8 x s8 MatMulInteger of two graph inputs saturates without VNNI
        inputs = exact_u8s8_operands(inputs)
        with np.errstate(all="ignore"):
            want = flatten_value(run(mod, inputs))
    got = _run_exported(mod["main"], inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _close(g, w)


# ---- the reference models -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "ds_cnn", "resnet_block", "transformer_encoder"])
def test_reference_model_round_trip(name):
    model = onnx_models.MODELS[name]()
    mod = from_onnx(model)
    exported = to_onnx(mod["main"], name=name, output_names=mod.attrs["output_names"])
    onnx.checker.check_model(exported, full_check=True)
    assert [o.name for o in exported.graph.output] == list(mod.attrs["output_names"])
    original = _session(model)
    feeds = {}
    for i in original.get_inputs():
        feeds[i.name] = np.random.default_rng(1).standard_normal(i.shape).astype(F32)
    want = original.run(None, feeds)
    got = _session(exported).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # every call's node name carries over (made unique)
    names = [n.name for n in exported.graph.node]
    assert len(set(names)) == len(names)
    onnx_names = {n.name for n in model.graph.node}
    assert any(n in onnx_names for n in names)


# ---- graph structure ----------------------------------------------------------------------------


def test_names_sanitized_unique_and_constants_become_initializers():
    x = var("in put", (2, 3))
    w = const(np.ones((3, 3), F32))
    a = call("nn.relu", x, meta={"name": "my node!"})
    b = call("nn.matmul", a, w, meta={"name": "my node!"})
    c = call("add", b, const(np.float32(1.0)), meta={"name": "my node?"})
    model = to_onnx(Function((x,), c), name="my model")
    assert [i.name for i in model.graph.input] == ["in_put"]
    assert [n.name for n in model.graph.node] == ["my_node_", "my_node__1", "my_node__2"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sorted(a.shape for a in inits.values()) == [(), (3, 3)]  # a 0-d constant stays 0-d
    assert model.graph.name == "my_model"
    assert sanitize("a b/c:d-e.f") == "a_b/c:d-e.f" and sanitize("") == "_"
    xv = np.random.default_rng(0).standard_normal((2, 3)).astype(F32)
    (y,) = _run_exported(Function((x,), c), [xv])
    np.testing.assert_allclose(y, np.maximum(xv, 0) @ np.ones((3, 3), F32) + 1, rtol=1e-6)


def test_symbolic_dims_become_dim_params():
    x = var("x", ("batch", 4))
    f = Function((x,), call("nn.relu", call("reshape", x, newshape=(-1, 2, 2))))
    model = to_onnx(f)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 4
    xv = np.arange(12, dtype=F32).reshape(3, 4) - 6
    (y,) = _run_exported(f, [xv])
    np.testing.assert_array_equal(y, np.maximum(xv, 0).reshape(3, 2, 2))


def test_tuple_results_params_outputs_and_output_names():
    x = var("x", (4, 3))
    t = Var("t", TupleType((TensorType((2,)), TensorType((3,)))))  # one graph input per leaf
    parts = call("split", x, sections=(1, 3), axis=0)
    body = Tuple((TupleGetItem(parts, 1), x, TupleGetItem(parts, 1), TupleGetItem(t, 1), const(np.arange(3))))
    f = Function((x, t), body)
    model = to_onnx(f)
    assert [i.name for i in model.graph.input] == ["x", "t_0", "t_1"]
    outs = [o.name for o in model.graph.output]
    assert len(set(outs)) == 5  # a param, a repeated value and a constant get their own Identity
    xv = np.arange(12, dtype=F32).reshape(4, 3)
    t0, t1 = np.zeros(2, F32), np.array([7, 8, 9], F32)
    sess = _session(model)
    got = sess.run(None, {"x": xv, "t_0": t0, "t_1": t1})
    for g, w in zip(got, [xv[1:], xv, xv[1:], t1, np.arange(3)]):
        np.testing.assert_array_equal(g, w)
    named = to_onnx(f, output_names=["a", "b", "c", "d", "e"])
    assert [o.name for o in named.graph.output] == ["a", "b", "c", "d", "e"]
    assert _session(named).run(["c"], {"x": xv, "t_0": t0, "t_1": t1})[0].shape == (3, 3)


# ---- what cannot be exported --------------------------------------------------------------------


def test_unexportable_calls_give_reasons():
    xf, xi = var("x", (2, 3)), var("i", (2, 3), "int8")
    assert exportable(call("mod", xf, xf)) == (True, "")  # composed: see test_float_mod_with_the_divisors_sign
    assert exportable(call("left_shift", xi, xi)) == (True, "")  # through uint8: see test_shifts_of_every_integer_type
    img = var("img", (1, 4, 2, 2))
    ok, why = exportable(call("space_to_depth", img, block_size=2, mode="CRD"))
    assert not ok and "ONNX SpaceToDepth is DCR only" in why
    ok, why = exportable(call("nn.batch_norm", img, *[var(f"p{i}", (2,)) for i in range(4)], axis=3))
    assert not ok and "ONNX BatchNormalization normalizes axis 1" in why
    ok, why = exportable(call("nn.celu", var("h", (2,), "float16")))
    assert not ok and "does not type-check in ONNX" in why and "tensor(float16)" in why
    ok, why = exportable(call("nn.gelu", xf), opset=18)
    assert (ok, why) == (False, "call of 'nn.gelu': Gelu needs ONNX opset >= 20 (exporting opset 18)")


def test_export_errors_name_the_call():
    x = var("x", (2, 3))
    img = var("img", (1, 4, 2, 2))
    bad = call("space_to_depth", img, block_size=2, mode="CRD", meta={"name": "m1"})
    with pytest.raises(ExportError, match=r"^to_onnx: call 'm1' \(space_to_depth\): space_to_depth mode 'CRD' \(ONNX "
                                          r"SpaceToDepth is DCR only\)$"):
        to_onnx(Function((img,), call("negative", bad)))
    cond = var("c", (), "bool")
    branch = If(cond, x, call("negative", x))
    with pytest.raises(ExportError, match="cannot export a If expression"):
        to_onnx(Function((cond, x), branch))
    with pytest.raises(ExportError, match=r"opset 5 not supported \(use 13 to \d+\)"):
        to_onnx(Function((x,), x), opset=5)
    with pytest.raises(ExportError, match="expects a Relay Function"):
        to_onnx(x)
    assert issubclass(ExportError, FrontendError)


# ---- ONNX conformance round trip ----------------------------------------------------------------


def test_conformance_model_folders_round_trip():
    """The conformance model folders (pytorch-converted, pytorch-operator, simple): import, export,
    ONNX Runtime; none fails. Collecting the node cases alone takes ~30 s, so they run from the
    script: ``python tests/frontend/onnx_export_roundtrip.py`` (all 2024 cases: 1589 passed,
    0 failed, 5 not exported, 7 without an ORT kernel, 423 not imported)."""
    from onnx_export_roundtrip import roundtrip  # (puts tests/conformance on sys.path)
    from onnx_conformance import data_dir_cases

    results = [(c.name, *roundtrip(c)) for c in data_dir_cases()]
    assert [r for r in results if r[1] == "failed"] == []
    assert sum(r[1] == "passed" for r in results) >= 100


def test_constant_bias_adds_become_the_conv_and_gemm_bias():
    mod = from_onnx(onnx_models.mlp())
    model = to_onnx(mod["main"])
    assert [n.op_type for n in model.graph.node] == ["Gemm", "Relu", "Gemm", "Relu", "Gemm", "Softmax"]
    assert all(len(n.input) == 3 for n in model.graph.node if n.op_type == "Gemm")
    assert len(model.graph.initializer) == 6  # 3 weights + 3 biases: the (N,) constants were not kept twice
    # a convolution whose output is also used elsewhere keeps its separate add
    x, w = var("x", (1, 2, 5, 5)), const(np.ones((3, 2, 3, 3), F32))
    b = const(np.arange(3, dtype=F32).reshape(3, 1, 1))
    conv = call("nn.conv2d", x, w)
    fused = to_onnx(Function((x,), call("add", conv, b)))
    assert [(n.op_type, len(n.input)) for n in fused.graph.node] == [("Conv", 3)]
    kept = to_onnx(Function((x,), Tuple((call("add", conv, b), conv))))
    assert [n.op_type for n in kept.graph.node][:2] == ["Conv", "Add"]
    xv = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(F32)
    ref = flatten_value(run(IRModule.from_expr(Function((x,), Tuple((call("add", conv, b), conv)))), [xv]))
    for model in (fused, kept):
        got = _session(model).run(None, {"x": xv})
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_mod_with_the_divisors_sign(dtype):
    """numpy's mod (Python %) composed from ONNX Mod(fmod=1): exact, signed zeros, inf and NaN included."""
    vals = np.array([-7.5, -3, -1, -0.0, 0.0, 1, 3, 7.5, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 5e-3, 123.25], dtype)
    a, b = (v.ravel() for v in np.meshgrid(vals, vals))
    x, y = var("a", a.shape, dtype), var("b", b.shape, dtype)
    (got,) = _run_exported(Function((x, y), call("mod", x, y)), [a, b])
    with np.errstate(all="ignore"):
        want = np.mod(a, b)
    np.testing.assert_array_equal(got, want)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))  # -0.0 where numpy has it


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_shifts_of_every_integer_type(dtype):
    """numpy's shifts, every amount (negative and past the bit width too), signed types through the
    unsigned ones; ONNX Runtime has no int16 Where, so an int16 right shift is refused by ORT."""
    dt = np.dtype(dtype)
    info, bits = np.iinfo(dt), dt.itemsize * 8
    xs = np.array([info.min, info.min // 3 + 1, 0, 1, 77, info.max // 3, info.max], dt)
    amounts = np.array(([-3, -1] if dt.kind == "i" else []) + [0, 1, 3, bits - 1, bits, bits + 5], dt)
    a, b = (v.ravel() for v in np.meshgrid(xs, amounts))
    for op in ("left_shift", "right_shift"):
        x, y = var("a", a.shape, dtype), var("b", b.shape, dtype)
        f = Function((x, y), call(op, x, y))
        with np.errstate(all="ignore"):
            want = run(IRModule.from_expr(f), [a, b])
        if (dtype, op) == ("int16", "right_shift"):
            with pytest.raises(Exception, match="Could not find an implementation for Where"):
                _run_exported(f, [a, b])
            continue
        (got,) = _run_exported(f, [a, b])
        np.testing.assert_array_equal(got, want, err_msg=op)
