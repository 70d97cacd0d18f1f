"""TFLite's own runtimes as references, for tests and benchmarks: TensorFlow Lite Micro's interpreter
(``tflite-micro``: int8/int16 models, bit for bit) and LiteRT (``ai-edge-litert``: float, uint8, hybrid
and what TensorFlow Lite Micro does not run), each run on a list of inputs of a one-input model; and the
inputs the MLPerf Tiny models are checked on."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def tflm(buf: bytes, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow Lite Micro's output 0 for each input (one interpreter, invoked once per input)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(buf)
    out = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        out.append(it.get_output(0).copy())
    return out


def litert(buf: bytes, xs: Sequence[np.ndarray], reference_kernels: bool = True) -> list[np.ndarray]:
    """LiteRT's output 0 for each input: its reference kernels (``BUILTIN_REF``), or with
    ``reference_kernels=False`` its default interpreter (XNNPACK delegate: what users run)."""
    from ai_edge_litert import interpreter as lit

    kw: dict[str, Any] = {"experimental_op_resolver_type": lit.OpResolverType.BUILTIN_REF} if reference_kernels else {}
    li = lit.Interpreter(model_content=buf, **kw)
    li.allocate_tensors()
    i, o = li.get_input_details()[0]["index"], li.get_output_details()[0]["index"]
    out = []
    for x in xs:
        li.set_tensor(i, x)
        li.invoke()
        out.append(li.get_tensor(o).copy())
    return out


def ramp_inputs(shape: Sequence[int], dtype: str, n: int) -> list[np.ndarray]:
    """``n`` seeded inputs: noise on a ramp whose slope and offset vary with the seed, in [-1, 1] (float) or
    over the int8 range. Pure uniform noise is the same to a network that pools over its whole plane:
    the keyword and image models' outputs would not depend on the input at all."""
    shape = tuple(int(d) for d in shape)
    out = []
    for seed in range(n):
        r = np.random.default_rng(seed)
        ramp = np.linspace(-1, 1, int(np.prod(shape))).reshape(shape) * r.uniform(-0.8, 0.8) + r.uniform(-0.3, 0.3)
        v = np.clip(ramp + r.uniform(-0.3, 0.3, shape), -1, 1)
        out.append(np.clip(np.round(v * 127.5), -128, 127).astype(np.int8) if dtype == "int8" else v.astype(np.float32))
    return out
