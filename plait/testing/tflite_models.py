"""The MLPerf Tiny architectures as TFLite models built in code (random weights, seeded), float32
and int8, for tests and benchmarks that must not depend on the reference files being present.

- :func:`ds_cnn` (keyword spotting: CONV_2D 10x4 stride 2, four depthwise-separable blocks, an
  average pool over the plane, RESHAPE, FULLY_CONNECTED, SOFTMAX; input 1x49x10x1),
- :func:`resnet8` (CIFAR-10 ResNet-8: three residual stages with ADD, input 1x32x32x3),
- :func:`mobilenet_v1` (visual wake words, MobileNetV1 width 0.25; ``size`` 96 as the reference, smaller
  for fast tests),
- :func:`autoencoder` (anomaly detection: ten FULLY_CONNECTED layers 640-128-128-128-128-8-128-128-128-128-640).

Each returns the bytes of a ``.tflite`` file (:class:`plait.frontend.tflite_write.TFLiteWriter`). The
int8 models are quantized as the TFLite converter quantizes: per-tensor activations, per-channel
convolution weights (dimension 0, depthwise dimension 3), per-tensor fully connected weights, int32
biases at ``input_scale * weight_scale``, softmax output at 1/256 and -128; scales are chosen so that
activations use a good part of the int8 range (no test compares saturated outputs only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait.frontend.tflite_write import TFLiteWriter

RELU = 1
SAME, VALID = 0, 1


def _conv_ref(x: np.ndarray, w_oihw: np.ndarray, stride: int, pads: tuple, groups: int) -> np.ndarray:
    from plait.ir.attrs import Attrs
    from plait.op import get_op

    op = get_op("nn.conv2d")
    attrs = Attrs(strides=(stride, stride), padding=pads, dilation=(1, 1), groups=groups)
    y = op.ref([np.transpose(x, (0, 3, 1, 2)), w_oihw], attrs)
    return np.transpose(y, (0, 2, 3, 1))


def _same(size: int, k: int, s: int) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class _Net:
    """A chain builder over TFLiteWriter. For an int8 model it also runs a float sample (a batch of
    random inputs) through the layers as it builds them, and quantizes each activation from the range
    the sample reaches there (post-training quantization, as the TFLite converter does)."""

    def __init__(self, name: str, shape: tuple[int, ...], quant: bool, seed: int):
        self.w = TFLiteWriter(name)
        self.rng = np.random.default_rng(seed)
        self.quant = quant
        self.dtype = "int8" if quant else "float32"
        self.n = 0
        sample = self.rng.uniform(-1.0, 1.0, (8,) + tuple(shape[1:])).astype(np.float64)
        self.scale, zp = 2.0 / 255, -1
        self.x = self.w.tensor("input", shape, self.dtype, quant=(self.scale, zp) if quant else None)
        self.val = (np.clip(np.round(sample / self.scale) + zp, -128, 127) - zp) * self.scale
        self.input = self.x
        self.shape = shape

    def _name(self, what: str) -> str:
        self.n += 1
        return f"{what}_{self.n}"

    def _out(self, shape: tuple[int, ...], y: np.ndarray, relu: bool) -> tuple[int, float]:
        """The output tensor of a layer whose float sample is ``y``; its int8 scale from y's range."""
        if not self.quant:
            return self.w.tensor(self._name("act"), shape, self.dtype), 1.0
        if relu:
            scale, zp = max(float(y.max()), 1e-3) / 255, -128
        else:
            scale, zp = max(float(np.abs(y).max()), 1e-3) / 127, 0
        t = self.w.tensor(self._name("act"), shape, self.dtype, quant=(scale, zp))
        q = np.clip(np.round(y / scale) + zp, -128, 127)
        self.val = (q - zp) * scale
        return t, scale

    def _weights(self, shape: tuple[int, ...], axis: int, taps: int, per_channel: bool = True) -> tuple[int, np.ndarray]:
        """A weight constant and its float values (dequantized for an int8 model)."""
        v = self.rng.standard_normal(shape) / math.sqrt(taps)
        if not self.quant:
            v = v.astype(np.float32)
            return self.w.const(self._name("w"), v), v.astype(np.float64)
        red = tuple(k for k in range(len(shape)) if k != axis)
        amax = np.abs(v).max(axis=red) if per_channel else np.array([np.abs(v).max()])
        scales = (amax / 127).astype(np.float32)
        bshape = [1] * len(shape)
        bshape[axis] = -1
        s = scales.reshape(bshape) if per_channel else scales.reshape((1,) * len(shape))
        q = np.clip(np.round(v / s), -127, 127).astype(np.int8)
        n = scales.size
        t = self.w.const(self._name("w"), q, quant=(scales, np.zeros(n, np.int64), axis if per_channel else 0))
        return t, q.astype(np.float64) * s.astype(np.float64), scales

    def _bias(self, n: int, w_scales: Any) -> tuple[int, np.ndarray]:
        b = self.rng.standard_normal(n) * 0.1
        if not self.quant:
            b = b.astype(np.float32)
            return self.w.const(self._name("b"), b), b.astype(np.float64)
        bs = (np.float32(self.scale) * np.asarray(w_scales, np.float32)) * np.ones(n, np.float32)
        q = np.round(b / bs).astype(np.int32)
        return self.w.const(self._name("b"), q, quant=(bs, np.zeros(n, np.int64), 0)), q * bs.astype(np.float64)

    def conv(self, o: int, kh: int, kw: int, stride: int = 1, depthwise: bool = False, act: int = RELU,
             padding: int = SAME, x: int | None = None, shape: tuple | None = None, val: Any = None) -> int:
        x = self.x if x is None else x
        val = self.val if val is None else val
        n, h, wd, c = self.shape if shape is None else shape
        if depthwise:
            wt, wf, *ws = self._weights((1, kh, kw, c), 3, kh * kw)
            o, oihw, groups = c, np.transpose(wf, (3, 0, 1, 2)), c
        else:
            wt, wf, *ws = self._weights((o, kh, kw, c), 0, kh * kw * c)
            oihw, groups = np.transpose(wf, (0, 3, 1, 2)), 1
        b, bf = self._bias(o, ws[0] if ws else None)
        ph, pw = (_same(h, kh, stride), _same(wd, kw, stride)) if padding == SAME else ((0, 0), (0, 0))
        y = _conv_ref(val, oihw, stride, (ph[0], pw[0], ph[1], pw[1]), groups) + bf
        if act == RELU:
            y = np.maximum(y, 0)
        oshape = (n,) + y.shape[1:3] + (o,)
        out, scale = self._out(oshape, y, act == RELU)
        opts = dict(Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=act)
        if depthwise:
            self.w.op("DEPTHWISE_CONV_2D", [x, wt, b], [out], DepthMultiplier=1, **opts)
        else:
            self.w.op("CONV_2D", [x, wt, b], [out], **opts)
        self.x, self.shape, self.scale = out, oshape, scale
        if not self.quant:
            self.val = y
        return out

    def add(self, a: int, a_val: np.ndarray, b: int, b_val: np.ndarray) -> int:
        y = np.maximum(a_val + b_val, 0)
        out, scale = self._out(self.shape, y, True)
        self.w.op("ADD", [a, b], [out], FusedActivationFunction=RELU)
        self.x, self.scale = out, scale
        if not self.quant:
            self.val = y
        return out

    def _same_quant(self, shape: tuple[int, ...]) -> int:
        t = self.w.tensor(self._name("act"), shape, self.dtype)
        self.w.tensors[t].quant = self.w.tensors[self.x].quant
        return t

    def avg_pool(self, kh: int, kw: int, stride: int) -> int:
        n, h, wd, c = self.shape
        oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
        y = self._same_quant((n, oh, ow, c))  # a quantized pool keeps its input's quantization
        self.w.op("AVERAGE_POOL_2D", [self.x], [y], Padding=VALID, StrideW=stride, StrideH=stride,
                  FilterWidth=kw, FilterHeight=kh, FusedActivationFunction=0)
        v = self.val[:, :oh * stride, :ow * stride]
        self.val = np.stack([v[:, i * stride:i * stride + kh, j * stride:j * stride + kw].mean(axis=(1, 2))
                             for i in range(oh) for j in range(ow)], 1).reshape(v.shape[0], oh, ow, c)
        self.x, self.shape = y, (n, oh, ow, c)
        return y

    def flatten(self) -> int:
        k = int(np.prod(self.shape[1:]))
        s = self.w.const(self._name("shape"), np.array([self.shape[0], k], np.int32))
        y = self._same_quant((self.shape[0], k))
        self.w.op("RESHAPE", [self.x, s], [y])
        self.x, self.shape = y, (self.shape[0], k)
        self.val = self.val.reshape(self.val.shape[0], k)
        return y

    def dense(self, o: int, act: int = RELU) -> int:
        n, k = self.shape
        wt, wf, *ws = self._weights((o, k), 0, k, per_channel=False)
        b, bf = self._bias(o, ws[0] if ws else None)
        y = self.val @ wf.T + bf
        if act == RELU:
            y = np.maximum(y, 0)
        out, scale = self._out((n, o), y, act == RELU)
        self.w.op("FULLY_CONNECTED", [self.x, wt, b], [out], FusedActivationFunction=act)
        self.x, self.shape, self.scale = out, (n, o), scale
        if not self.quant:
            self.val = y
        return out

    def softmax(self) -> int:
        q = (1 / 256, -128) if self.quant else None
        y = self.w.tensor(self._name("act"), self.shape, self.dtype, quant=q)
        self.w.op("SOFTMAX", [self.x], [y], Beta=1.0)
        self.x = y
        return y

    def finish(self) -> bytes:
        return self.w.finish([self.input], [self.x])


def ds_cnn(quant: bool = True, seed: int = 0) -> bytes:
    net = _Net("ds_cnn", (1, 49, 10, 1), quant, seed)
    net.conv(64, 10, 4, stride=2)
    for _ in range(4):
        net.conv(0, 3, 3, depthwise=True)
        net.conv(64, 1, 1)
    net.avg_pool(25, 5, 1)
    net.flatten()
    net.dense(12, act=0)
    net.softmax()
    return net.finish()


def resnet8(quant: bool = True, seed: int = 0) -> bytes:
    net = _Net("resnet8", (1, 32, 32, 3), quant, seed)
    x = net.conv(16, 3, 3)
    for stage, (ch, stride) in enumerate(((16, 1), (32, 2), (64, 2))):
        shape, scale, xv = net.shape, net.scale, net.val
        net.conv(ch, 3, 3, stride=stride)
        y = net.conv(ch, 3, 3, act=0)
        yv, yshape = net.val, net.shape
        if stage:
            net.scale = scale
            x = net.conv(ch, 1, 1, stride=stride, act=0, x=x, shape=shape, val=xv)
            xv = net.val
        net.shape = yshape
        x = net.add(x, xv, y, yv)
    net.avg_pool(8, 8, 8)
    net.flatten()
    net.dense(10, act=0)
    net.softmax()
    return net.finish()


def mobilenet_v1(quant: bool = True, seed: int = 0, size: int = 96) -> bytes:
    net = _Net("mobilenet_v1", (1, size, size, 3), quant, seed)
    net.conv(8, 3, 3, stride=2)
    for ch, stride in ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1),
                       (128, 1), (128, 1), (256, 2), (256, 1)):
        net.conv(0, 3, 3, stride=stride, depthwise=True)
        net.conv(ch, 1, 1)
    h = net.shape[1]
    net.avg_pool(h, h, 1)
    net.flatten()
    net.dense(2, act=0)
    net.softmax()
    return net.finish()


def autoencoder(quant: bool = True, seed: int = 0) -> bytes:
    net = _Net("autoencoder", (1, 640), quant, seed)
    for k, o in enumerate((128, 128, 128, 128, 8, 128, 128, 128, 128, 640)):
        net.dense(o, act=0 if k == 9 else RELU)
    return net.finish()


MODELS = {"ds_cnn": ds_cnn, "resnet8": resnet8, "mobilenet_v1": mobilenet_v1, "autoencoder": autoencoder}
