import numpy as np
import pytest

from plait.frontend.onnx import from_onnx
from plait.ir.transform import PassContext
from plait.relay import Call, IRModule, call, const, infer_type, post_order, run, var
from plait.relay.expr import Function
from plait.relay.passes import FoldBatchNorm
from plait.testing import onnx_models

RNG = np.random.default_rng(0)


def _bn_params(c):
    return [const(RNG.standard_normal(c).astype(np.float32)) for _ in range(3)] + [
        const((1.0 + np.abs(RNG.standard_normal(c))).astype(np.float32))]


def _ops(mod):
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def _check_same(before, after, inputs):
    np.testing.assert_allclose(run(after, inputs), run(before, inputs), rtol=1e-5, atol=1e-5)


def test_conv_bias_bn_folds_into_weights():
    x = var("x", (1, 3, 8, 8))
    w = const(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = const(RNG.standard_normal((4, 1, 1)).astype(np.float32))
    y = call("nn.batch_norm", call("add", call("nn.conv2d", x, w, padding=(1, 1, 1, 1)), b), *_bn_params(4),
             meta={"name": "bn"})
    mod = infer_type(IRModule.from_expr(Function((x,), call("nn.relu", y))))
    out = FoldBatchNorm()(mod)
    assert _ops(out) == ["nn.conv2d", "add", "nn.relu"]
    _check_same(mod, out, {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)})


def test_bn_on_shared_conv_output_becomes_scale_shift():
    x = var("x", (1, 2, 4, 4))
    conv = call("nn.conv2d", x, const(RNG.standard_normal((2, 2, 1, 1)).astype(np.float32)))
    y = call("add", call("nn.batch_norm", conv, *_bn_params(2)), conv)  # conv used twice: weights kept
    mod = infer_type(IRModule.from_expr(Function((x,), y)))
    out = FoldBatchNorm()(mod)
    assert sorted(_ops(out)) == ["add", "add", "multiply", "nn.conv2d"]
    _check_same(mod, out, {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)})


def test_bn_with_runtime_statistics_is_kept():
    x, m = var("x", (1, 2, 3)), var("m", (2,))
    p = _bn_params(2)
    mod = infer_type(IRModule.from_expr(Function((x, m), call("nn.batch_norm", x, p[0], p[1], m, p[3]))))
    assert _ops(FoldBatchNorm()(mod)) == ["nn.batch_norm"]


@pytest.mark.parametrize("name", ["ds_cnn", "resnet_block"])
def test_reference_models_lose_every_batch_norm(name):
    mod = infer_type(from_onnx(onnx_models.MODELS[name]()))
    out = FoldBatchNorm()(mod, PassContext())
    assert "nn.batch_norm" in _ops(mod) and "nn.batch_norm" not in _ops(out)
    assert "multiply" not in _ops(out)  # every one folded into its conv
    x = mod.main.params[0]
    inputs = {x.name_hint: RNG.standard_normal(x.checked_type.shape).astype(np.float32)}
    np.testing.assert_allclose(run(out, inputs), run(mod, inputs), rtol=1e-4, atol=1e-4)
