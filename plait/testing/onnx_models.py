"""Reference models written with ``onnx.helper``: the models plait is tested and benchmarked on.

Weights come from a seeded generator, so every call builds the same model. Each builder returns
an ``onnx.ModelProto``; ``MODELS`` maps a short name to its builder.

    python -m plait.testing.onnx_models OUTDIR      # writes OUTDIR/<name>.onnx for every model
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Graph:
    """A tiny accumulator of nodes and initializers with unique names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def weight(self, shape, scale: float | None = None, prefix: str = "w") -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.init(self.rng.standard_normal(shape).astype(np.float32) * np.float32(scale), prefix)

    def init(self, array: np.ndarray, prefix: str = "c") -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op: str, inputs: list[str], n_out: int = 1, name: str | None = None, **attrs) -> str | list[str]:
        name = name or self.name(op)
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def batch_norm(self, x: str, c: int) -> str:
        gamma = self.init((1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_gamma")
        beta = self.init((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_beta")
        mean = self.init((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_mean")
        var = self.init((1.0 + 0.1 * np.abs(self.rng.standard_normal(c))).astype(np.float32), "bn_var")
        return self.node("BatchNormalization", [x, gamma, beta, mean, var], epsilon=1e-5)

    def model(self, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="plait.testing")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def mlp(sizes=(256, 512, 512, 10), seed: int = 0) -> onnx.ModelProto:
    """MLP 256-512-512-10 with ReLU and a final softmax (Gemm with transB=1, as exporters emit)."""
    g = _Graph(seed)
    h = "x"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = g.weight((n, k), prefix=f"fc{i}_weight")
        b = g.init((0.1 * g.rng.standard_normal(n)).astype(np.float32), f"fc{i}_bias")
        h = g.node("Gemm", [h, w, b], name=f"/fc{i}/Gemm", transB=1)
        if i < len(sizes) - 2:
            h = g.node("Relu", [h], name=f"/fc{i}/Relu")
    y = g.node("Softmax", [h], name="/softmax/Softmax", axis=-1)
    g.nodes[-1].output[0] = "y"
    return g.model("mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, sizes[0]])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, sizes[-1]])])


def ds_cnn(channels: int = 64, blocks: int = 4, classes: int = 12, seed: int = 1) -> onnx.ModelProto:
    """Depthwise-separable keyword-spotting CNN (DS-CNN, Hello Edge), input 1x1x49x10 MFCCs."""
    g = _Graph(seed)
    x = g.node("Conv", ["input", g.weight((channels, 1, 10, 4)), g.init(np.zeros(channels, np.float32), "b")],
               name="/conv0/Conv", kernel_shape=[10, 4], strides=[2, 2], pads=[4, 1, 5, 2])
    x = g.node("Relu", [g.batch_norm(x, channels)], name="/conv0/Relu")
    for i in range(blocks):
        x = g.node("Conv", [x, g.weight((channels, 1, 3, 3))], name=f"/block{i}/dw/Conv",
                   kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=channels)
        x = g.node("Relu", [g.batch_norm(x, channels)], name=f"/block{i}/dw/Relu")
        x = g.node("Conv", [x, g.weight((channels, channels, 1, 1))], name=f"/block{i}/pw/Conv", kernel_shape=[1, 1])
        x = g.node("Relu", [g.batch_norm(x, channels)], name=f"/block{i}/pw/Relu")
    x = g.node("GlobalAveragePool", [x], name="/pool/GlobalAveragePool")
    x = g.node("Flatten", [x], name="/Flatten", axis=1)
    w = g.weight((classes, channels), prefix="fc_weight")
    g.node("Gemm", [x, w, g.init(np.zeros(classes, np.float32), "fc_bias")], name="/fc/Gemm", transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model("ds_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 49, 10])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])])


def resnet_block(channels: int = 64, size: int = 56, seed: int = 2) -> onnx.ModelProto:
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, identity shortcut, add, ReLU."""
    g = _Graph(seed)
    c = channels
    x = g.node("Conv", ["x", g.weight((c, c, 3, 3))], name="/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = g.node("Relu", [g.batch_norm(x, c)], name="/relu1/Relu")
    x = g.node("Conv", [x, g.weight((c, c, 3, 3))], name="/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = g.node("Add", [g.batch_norm(x, c), "x"], name="/add/Add")
    g.node("Relu", [x], name="/relu2/Relu")
    g.nodes[-1].output[0] = "y"
    shape = [1, c, size, size]
    return g.model("resnet_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])


def transformer_encoder(d_model: int = 64, heads: int = 4, d_ff: int = 256, seq: int = 32,
                        batch: int | str = 1, seed: int = 3) -> onnx.ModelProto:
    """A post-norm transformer encoder layer as a PyTorch export writes it: multi-head
    self-attention (with a Shape/Gather/Concat subgraph computing the reshape target), residual,
    LayerNormalization, feed-forward with erf-GELU, residual, LayerNormalization.
    ``batch`` may be a name, making the batch dimension symbolic."""
    g = _Graph(seed)
    dh = d_model // heads

    def linear(x: str, k: int, n: int, name: str) -> str:
        y = g.node("MatMul", [x, g.weight((k, n), prefix=f"{name}_w")], name=f"{name}/MatMul")
        return g.node("Add", [y, g.init((0.02 * g.rng.standard_normal(n)).astype(np.float32), f"{name}_b")],
                      name=f"{name}/Add")

    # dynamic-looking reshape target [B, S, heads, dh] built from Shape, as exporters do
    shp = g.node("Shape", ["x"], name="/attn/Shape")
    b = g.node("Gather", [shp, g.init(np.array([0], np.int64), "idx0")], name="/attn/Gather_b", axis=0)
    s = g.node("Gather", [shp, g.init(np.array([1], np.int64), "idx1")], name="/attn/Gather_s", axis=0)
    target = g.node("Concat", [b, s, g.init(np.array([heads, dh], np.int64), "hd")], name="/attn/Concat", axis=0)

    def split_heads(t: str, name: str) -> str:
        r = g.node("Reshape", [t, target], name=f"{name}/Reshape")
        return g.node("Transpose", [r], name=f"{name}/Transpose", perm=[0, 2, 1, 3])

    q = split_heads(linear("x", d_model, d_model, "/attn/q"), "/attn/q")
    k = split_heads(linear("x", d_model, d_model, "/attn/k"), "/attn/k")
    v = split_heads(linear("x", d_model, d_model, "/attn/v"), "/attn/v")
    kt = g.node("Transpose", [k], name="/attn/k/TransposeT", perm=[0, 1, 3, 2])
    scores = g.node("MatMul", [q, kt], name="/attn/scores/MatMul")
    scores = g.node("Div", [scores, g.init(np.array(np.sqrt(dh), np.float32), "scale")], name="/attn/scores/Div")
    probs = g.node("Softmax", [scores], name="/attn/Softmax", axis=-1)
    ctx = g.node("MatMul", [probs, v], name="/attn/ctx/MatMul")
    ctx = g.node("Transpose", [ctx], name="/attn/ctx/Transpose", perm=[0, 2, 1, 3])
    ctx = g.node("Reshape", [ctx, g.init(np.array([0, 0, d_model], np.int64), "merged")], name="/attn/ctx/Reshape")
    attn = linear(ctx, d_model, d_model, "/attn/out")
    h = g.node("Add", ["x", attn], name="/res1/Add")

    def layer_norm(t: str, name: str) -> str:
        gamma = g.init((1.0 + 0.1 * g.rng.standard_normal(d_model)).astype(np.float32), f"{name}_gamma")
        beta = g.init((0.1 * g.rng.standard_normal(d_model)).astype(np.float32), f"{name}_beta")
        return g.node("LayerNormalization", [t, gamma, beta], name=f"{name}/LayerNormalization", axis=-1, epsilon=1e-5)

    h = layer_norm(h, "/ln1")
    f = linear(h, d_model, d_ff, "/ff1")
    # GELU(x) = 0.5 * x * (1 + erf(x / sqrt(2)))
    e = g.node("Erf", [g.node("Div", [f, g.init(np.array(np.sqrt(2.0), np.float32), "sqrt2")], name="/gelu/Div")],
               name="/gelu/Erf")
    e = g.node("Add", [e, g.init(np.array(1.0, np.float32), "one")], name="/gelu/Add")
    f = g.node("Mul", [g.node("Mul", [f, e], name="/gelu/Mul"), g.init(np.array(0.5, np.float32), "half")],
               name="/gelu/Mul_1")
    f = linear(f, d_ff, d_model, "/ff2")
    h = g.node("Add", [h, f], name="/res2/Add")
    layer_norm(h, "/ln2")
    g.nodes[-1].output[0] = "y"
    shape = [batch, seq, d_model]
    return g.model("transformer_encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])


def _conv(g: _Graph, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1, group: int = 1,
          bias: bool = True) -> str:
    """A Conv with 'same' padding (k // 2) and, when ``bias``, a seeded bias."""
    ins = [x, g.weight((cout, cin // group, k, k), prefix=f"{name}_w")]
    if bias:
        ins.append(g.init((0.05 * g.rng.standard_normal(cout)).astype(np.float32), f"{name}_b"))
    p = k // 2
    return g.node("Conv", ins, name=f"{name}/Conv", kernel_shape=[k, k], strides=[stride, stride],
                  pads=[p, p, p, p], group=group)


def _relu6(g: _Graph, x: str, name: str) -> str:
    return g.node("Clip", [x, g.init(np.array(0.0, np.float32), "zero"), g.init(np.array(6.0, np.float32), "six")],
                  name=f"{name}/Clip")


def mobilenet_v2(size: int = 96, classes: int = 2, seed: int = 4) -> onnx.ModelProto:
    """MobileNetV2-style depthwise-separable network at 96x96 (visual wake words shape, width 0.35):
    a 3x3 stride-2 stem, inverted residual blocks (1x1 expand, 3x3 depthwise, both with Clip(0, 6),
    1x1 linear projection, residual add when the shape is kept) in stride-2 stages, a 1x1 head,
    global average pool and a classifier."""
    g = _Graph(seed)
    x = _relu6(g, _conv(g, "input", 3, 16, 3, "/stem", stride=2), "/stem")
    cin = 16
    # (expansion t, output channels c, repeats n, first stride s), as in the paper's table
    for i, (t, c, n, s) in enumerate(((1, 8, 1, 1), (6, 16, 2, 2), (6, 24, 2, 2), (6, 32, 2, 2))):
        for j in range(n):
            name, hid = f"/block{i}_{j}", cin * t
            h = x if t == 1 else _relu6(g, _conv(g, x, cin, hid, 1, f"{name}/expand"), f"{name}/expand")
            h = _relu6(g, _conv(g, h, hid, hid, 3, f"{name}/dw", stride=s if j == 0 else 1, group=hid), f"{name}/dw")
            h = _conv(g, h, hid, c, 1, f"{name}/project")
            x = g.node("Add", [x, h], name=f"{name}/Add") if j > 0 else h
            cin = c
    x = _relu6(g, _conv(g, x, cin, 128, 1, "/head"), "/head")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], name="/pool/GlobalAveragePool")], name="/Flatten")
    g.node("Gemm", [x, g.weight((classes, 128), prefix="fc_w"), g.init(np.zeros(classes, np.float32), "fc_b")],
           name="/fc/Gemm", transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model("mobilenet_v2", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])])


def resnet8(size: int = 32, classes: int = 10, seed: int = 5) -> onnx.ModelProto:
    """ResNet-8 of MLPerf Tiny image classification (CIFAR-10, 32x32): a 3x3 conv to 16 channels, three
    residual stages of 16, 32, 64 channels (the last two stride 2 with a 1x1 stride-2 shortcut), BatchNorm
    and ReLU after each conv, 8x8 average pool, a dense classifier and softmax."""
    g = _Graph(seed)
    x = g.node("Relu", [g.batch_norm(_conv(g, "input", 3, 16, 3, "/conv0", bias=False), 16)], name="/conv0/Relu")
    cin = 16
    for i, c in enumerate((16, 32, 64)):
        s = 1 if i == 0 else 2
        name = f"/stage{i}"
        h = g.node("Relu", [g.batch_norm(_conv(g, x, cin, c, 3, f"{name}/conv1", stride=s, bias=False), c)],
                   name=f"{name}/conv1/Relu")
        h = g.batch_norm(_conv(g, h, c, c, 3, f"{name}/conv2", bias=False), c)
        short = x if s == 1 else _conv(g, x, cin, c, 1, f"{name}/shortcut", stride=s)
        x = g.node("Relu", [g.node("Add", [short, h], name=f"{name}/Add")], name=f"{name}/Relu")
        cin = c
    x = g.node("AveragePool", [x], name="/pool/AveragePool", kernel_shape=[size // 4, size // 4])
    x = g.node("Flatten", [x], name="/Flatten")
    x = g.node("Gemm", [x, g.weight((classes, 64), prefix="fc_w"), g.init(np.zeros(classes, np.float32), "fc_b")],
               name="/fc/Gemm", transB=1)
    g.node("Softmax", [x], name="/softmax/Softmax", axis=-1)
    g.nodes[-1].output[0] = "y"
    return g.model("resnet8", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])])


def unet(size: int = 64, classes: int = 2, seed: int = 6) -> onnx.ModelProto:
    """A small U-Net for segmentation: two down levels (two 3x3 conv + ReLU, 2x2 max pool), a bottleneck,
    two up levels (ConvTranspose 2x2 stride 2, Concat with the skip, two 3x3 conv + ReLU) and a 1x1 head;
    deep supervision adds the bottleneck's and the first up level's 1x1 predictions, upsampled with
    Resize nearest (x4) and linear (x2)."""
    g = _Graph(seed)

    def double(x: str, cin: int, cout: int, name: str) -> str:
        x = g.node("Relu", [_conv(g, x, cin, cout, 3, f"{name}/conv1")], name=f"{name}/conv1/Relu")
        return g.node("Relu", [_conv(g, x, cout, cout, 3, f"{name}/conv2")], name=f"{name}/conv2/Relu")

    def up(x: str, cin: int, cout: int, name: str) -> str:
        w = g.weight((cin, cout, 2, 2), prefix=f"{name}_w")
        b = g.init((0.05 * g.rng.standard_normal(cout)).astype(np.float32), f"{name}_b")
        return g.node("ConvTranspose", [x, w, b], name=f"{name}/ConvTranspose", kernel_shape=[2, 2], strides=[2, 2])

    def resize(x: str, scale: float, mode: str, name: str) -> str:
        scales = g.init(np.array([1, 1, scale, scale], np.float32), "scales")
        return g.node("Resize", [x, "", scales], name=f"{name}/Resize", mode=mode)

    e1 = double("input", 3, 16, "/enc1")
    e2 = double(g.node("MaxPool", [e1], name="/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2]), 16, 32, "/enc2")
    b = double(g.node("MaxPool", [e2], name="/pool2/MaxPool", kernel_shape=[2, 2], strides=[2, 2]), 32, 64, "/bottom")
    d1 = double(g.node("Concat", [up(b, 64, 32, "/up1"), e2], name="/up1/Concat", axis=1), 64, 32, "/dec1")
    d2 = double(g.node("Concat", [up(d1, 32, 16, "/up2"), e1], name="/up2/Concat", axis=1), 32, 16, "/dec2")
    y = _conv(g, d2, 16, classes, 1, "/head")
    aux_b = resize(_conv(g, b, 64, classes, 1, "/aux_bottom"), 4.0, "nearest", "/aux_bottom")
    aux_d = resize(_conv(g, d1, 32, classes, 1, "/aux_dec1"), 2.0, "linear", "/aux_dec1")
    y = g.node("Add", [g.node("Add", [y, aux_b], name="/aux/Add"), aux_d], name="/aux/Add_1")
    g.nodes[-1].output[0] = "y"
    return g.model("unet", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes, size, size])])


def autoencoder(dims: int = 640, hidden: int = 128, code: int = 8, seed: int = 7) -> onnx.ModelProto:
    """MLPerf Tiny anomaly detection (ToyADMOS): dense 640 -> 128 x4 -> 8 -> 128 x4 -> 640, each hidden
    layer followed by BatchNorm and ReLU."""
    g = _Graph(seed)
    sizes = [dims] + [hidden] * 4 + [code] + [hidden] * 4 + [dims]
    x = "x"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = g.weight((n, k), prefix=f"fc{i}_w")
        x = g.node("Gemm", [x, w, g.init((0.05 * g.rng.standard_normal(n)).astype(np.float32), f"fc{i}_b")],
                   name=f"/fc{i}/Gemm", transB=1)
        if i < len(sizes) - 2:
            x = g.node("Relu", [g.batch_norm(x, n)], name=f"/fc{i}/Relu")
    g.nodes[-1].output[0] = "y"
    return g.model("autoencoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, dims])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, dims])])


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": mlp,
    "ds_cnn": ds_cnn,
    "resnet_block": resnet_block,
    "transformer_encoder": transformer_encoder,
    "mobilenet_v2": mobilenet_v2,
    "resnet8": resnet8,
    "unet": unet,
    "autoencoder": autoencoder,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m plait.testing.onnx_models OUTDIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        onnx.save(build(), str(out / f"{name}.onnx"))
        print(out / f"{name}.onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
