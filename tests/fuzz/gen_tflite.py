"""Category ``tflite``: hostile TFLite flatbuffers (and valid ones) through the API and the CLI.

A valid base is a small random model written with plait's ``TFLiteWriter`` (float32 or int8: a
convolution, a depthwise convolution, a pool, a fully connected layer, a softmax, elementwise,
activation, MEAN and data-movement operators, with random shapes, options and quantization). Kind ``valid`` runs it as it
is (the numpy interpreter is the reference; the compiled C must equal it). The hostile kinds change
the writer's tables before the file is written (shapes, indices, buffers, dtypes, quantization,
options, names, the graph's order, operators plait does not read) or the bytes after it (truncated,
bit flips, words overwritten with hostile offsets and lengths, identifier and version): each must end
in a result equal to the reference or in a PlaitError naming what and where.

Case ``tflite:SEED:I`` uses kind ``KINDS[I % len(KINDS)]``, seeded by the id.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .case import Case, Env, Recorder
from .flows import model_legs

ACTS = (0, 1, 2, 3)  # NONE, RELU, RELU_N1_TO_1, RELU6


@dataclass
class Base:
    """A model under construction: the writer, its graph inputs and outputs, and what it holds."""

    w: Any
    inputs: list[int]
    outputs: list[int]
    what: str
    quant: bool


def _q(r: random.Random, quant: bool) -> tuple[float, int] | None:
    return (r.uniform(0.005, 0.2), r.randint(-128, 127)) if quant else None


def _act(r: random.Random, w: Any, name: str, shape: tuple, quant: bool) -> int:
    return w.tensor(name, shape, "int8" if quant else "float32", quant=_q(r, quant))


def _conv(r: random.Random, nr: np.random.Generator, w: Any, x: int, quant: bool, depthwise: bool) -> int:
    n, h, wd, c = w.tensors[x].shape
    k, s = r.choice([1, 2, 3]), r.choice([1, 2])
    pad = r.randint(0, 1)  # SAME, VALID
    if pad == 1 and (h < k or wd < k):
        pad = 0
    o = c * r.choice([1, 2]) if depthwise else r.randint(1, 6)
    oh, ow = ((h + s - 1) // s, (wd + s - 1) // s) if pad == 0 else ((h - k) // s + 1, (wd - k) // s + 1)
    wshape = (1, k, k, o) if depthwise else (o, k, k, c)
    if quant:
        xs = float(w.tensors[x].quant[0][0])
        scales = nr.uniform(0.002, 0.03, o)
        wt = w.const("w", nr.integers(-127, 128, wshape).astype(np.int8),
                     quant=(scales, np.zeros(o, np.int64), 3 if depthwise else 0))
        b = w.const("b", nr.integers(-2000, 2000, o).astype(np.int32),
                    quant=((xs * scales).astype(np.float32), np.zeros(o, np.int64), 0))
    else:
        wt = w.const("w", (nr.standard_normal(wshape) * 0.3).astype(np.float32))
        b = w.const("b", nr.standard_normal(o).astype(np.float32))
    y = _act(r, w, "conv_out", (n, oh, ow, o), quant)
    opts = dict(Padding=pad, StrideW=s, StrideH=s, FusedActivationFunction=r.choice(ACTS))
    if depthwise:
        w.op("DEPTHWISE_CONV_2D", [x, wt, b], [y], DepthMultiplier=o // c, **opts)
    else:
        w.op("CONV_2D", [x, wt, b], [y], **opts)
    return y


def _pool(r: random.Random, w: Any, x: int, quant: bool) -> int:
    n, h, wd, c = w.tensors[x].shape
    k = r.randint(1, min(3, h, wd))
    y = w.tensor("pool_out", (n, h - k + 1, wd - k + 1, c), "int8" if quant else "float32",
                 quant=w.tensors[x].quant if quant else None)
    w.op(r.choice(["AVERAGE_POOL_2D", "MAX_POOL_2D"]), [x], [y], Padding=1, StrideW=1, StrideH=1,
         FilterWidth=k, FilterHeight=k, FusedActivationFunction=0)
    return y


def _head(r: random.Random, nr: np.random.Generator, w: Any, x: int, quant: bool) -> int:
    """RESHAPE to [N, features], FULLY_CONNECTED, SOFTMAX (or LOGISTIC for float)."""
    shape = w.tensors[x].shape
    feats = int(np.prod(shape[1:]))
    flat = w.tensor("flat", (shape[0], feats), w.tensors[x].dtype, quant=w.tensors[x].quant)
    w.op("RESHAPE", [x, w.const("shape", np.array([shape[0], feats], np.int32))], [flat], NewShape=[shape[0], feats])
    units = r.randint(1, 8)
    if quant:
        xs = float(w.tensors[x].quant[0][0])
        ws = r.uniform(0.002, 0.03)
        wt = w.const("fc_w", nr.integers(-127, 128, (units, feats)).astype(np.int8), quant=(ws, 0))
        b = w.const("fc_b", nr.integers(-2000, 2000, units).astype(np.int32), quant=(xs * ws, 0))
    else:
        wt = w.const("fc_w", (nr.standard_normal((units, feats)) * 0.2).astype(np.float32))
        b = w.const("fc_b", nr.standard_normal(units).astype(np.float32))
    fc = _act(r, w, "fc_out", (shape[0], units), quant)
    w.op("FULLY_CONNECTED", [flat, wt, b], [fc], FusedActivationFunction=r.choice(ACTS))
    y = w.tensor("probs", (shape[0], units), "int8" if quant else "float32", quant=(1 / 256, -128) if quant else None)
    if quant or r.random() < 0.5:
        w.op("SOFTMAX", [fc], [y], Beta=1.0)
    else:
        w.op("LOGISTIC", [fc], [y])
    return y


def _elementwise(r: random.Random, nr: np.random.Generator, w: Any, x: int, quant: bool) -> int:
    shape = w.tensors[x].shape
    other_shape = r.choice([shape, shape[-1:], (1,) * len(shape)])
    if quant:
        other = w.const("c", nr.integers(-128, 128, other_shape).astype(np.int8), quant=_q(r, True))
    else:
        other = w.const("c", nr.standard_normal(other_shape).astype(np.float32))
    y = _act(r, w, "elt_out", shape, quant)
    kind = r.choice(["ADD", "SUB", "MUL"])
    w.op(kind, [x, other], [y], FusedActivationFunction=r.choice(ACTS[:2]))
    return y


def _movement(r: random.Random, nr: np.random.Generator, w: Any, x: int, quant: bool) -> int:
    t = w.tensors[x]
    n, h, wd, c = t.shape
    kind = r.choice(["TRANSPOSE", "PAD", "CONCATENATION"])
    if kind == "TRANSPOSE":
        y = w.tensor("moved", (n, wd, h, c), t.dtype, quant=t.quant)
        w.op(kind, [x, w.const("perm", np.array([0, 2, 1, 3], np.int32))], [y])
    elif kind == "PAD":
        p = nr.integers(0, 3, (4, 2)).astype(np.int32)
        p[0] = p[3] = 0
        y = w.tensor("moved", (n, h + int(p[1].sum()), wd + int(p[2].sum()), c), t.dtype, quant=t.quant)
        w.op(kind, [x, w.const("pads", p)], [y])
    else:
        y = w.tensor("moved", (n, h, wd, 2 * c), t.dtype, quant=t.quant)
        w.op(kind, [x, x], [y], Axis=3, FusedActivationFunction=0)
    return y


_ACT_OUT = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}  # the output quantization TFLite requires


def _activation(r: random.Random, w: Any, x: int, quant: bool) -> int:
    """A standalone activation (quantized: the importer's tables) or, one time in three, a MEAN over H, W."""
    t = w.tensors[x]
    if r.random() < 0.33:
        y = w.tensor("mean_out", (t.shape[0], 1, 1, t.shape[3]), t.dtype, quant=_q(r, quant))
        w.op("MEAN", [x, w.const("axes", np.array([1, 2], np.int32))], [y], KeepDims=True)
        return y
    kind = r.choice(["RELU", "RELU6", "LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "ELU"])
    q = (_ACT_OUT.get(kind) or _q(r, True)) if quant else None
    y = w.tensor("act_out", t.shape, t.dtype, quant=q)
    w.op(kind, [x], [y], **({"Alpha": r.uniform(-0.5, 0.5)} if kind == "LEAKY_RELU" else {}))
    return y


def valid_base(r: random.Random, nr: np.random.Generator) -> Base:
    from plait.frontend.tflite_write import TFLiteWriter

    quant = r.random() < 0.5
    w = TFLiteWriter("fuzz")
    x = _act(r, w, "input", (1, r.randint(3, 9), r.randint(3, 9), r.randint(1, 4)), quant)
    y, what = x, []
    for _ in range(r.randint(1, 3)):
        step = r.choice(["conv", "dw", "pool", "elt", "move", "act"])
        what.append(step)
        if step == "act":
            y = _activation(r, w, y, quant)
        elif step in ("conv", "dw"):
            y = _conv(r, nr, w, y, quant, step == "dw")
        elif step == "pool":
            y = _pool(r, w, y, quant)
        elif step == "elt":
            y = _elementwise(r, nr, w, y, quant)
        else:
            y = _movement(r, nr, w, y, quant)
    if r.random() < 0.6:
        y = _head(r, nr, w, y, quant)
        what.append("head")
    return Base(w, [x], [y], f"{'int8' if quant else 'float32'} {'+'.join(what)}", quant)


def _finish(b: Base, signature: str | None = "serving_default") -> bytes:
    return b.w.finish(b.inputs, b.outputs, signature=signature)


# ---- hostile kinds: each returns (description, bytes) ---------------------------------------------

HOSTILE_DIMS = (-1, 0, -(1 << 31), (1 << 31) - 1, 1 << 20, 65536)


def _any_tensor(r: random.Random, nr: np.random.Generator) -> tuple[Base, int, Any]:
    """A valid base and one of its tensors (index, table entry), picked at random."""
    b = valid_base(r, nr)
    i = r.randrange(len(b.w.tensors))
    return b, i, b.w.tensors[i]


def shapes(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b, i, t = _any_tensor(r, nr)
    how = r.choice(["dim", "rank", "empty", "product"])
    if how == "dim" and t.shape:
        k = r.randrange(len(t.shape))
        shape = t.shape[:k] + (r.choice(HOSTILE_DIMS),) + t.shape[k + 1:]
    elif how == "rank":
        shape = (1,) * r.choice([9, 12, 40])
    elif how == "empty":
        shape = ()
    else:
        shape = (1 << 16, 1 << 16, 1 << 12)
    b.w.tensors[i] = replace(t, shape=shape)
    return f"{b.what}: tensor {i} '{t.name}' shape {list(shape)[:6]}", _finish(b)


def indices(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    n = len(b.w.tensors)
    bad = r.choice([n, n + 7, -2, -(1 << 31), (1 << 31) - 1, -1])
    where = r.choice(["op-input", "op-output", "graph-input", "graph-output"])
    if where.startswith("op"):
        k = r.randrange(len(b.w.ops))
        o = b.w.ops[k]
        field = "inputs" if where == "op-input" else "outputs"
        vals = list(getattr(o, field))
        vals[r.randrange(len(vals))] = bad
        b.w.ops[k] = replace(o, **{field: tuple(vals)})
    elif where == "graph-input":
        b.inputs = [bad]
    else:
        b.outputs = [bad]
    return f"{b.what}: {where} index {bad}", _finish(b, signature=None if where.startswith("graph") else "serving_default")


def buffers(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    consts = [i for i, t in enumerate(b.w.tensors) if t.data is not None]
    i = r.choice(consts)
    t = b.w.tensors[i]
    how = r.choice(["short", "long", "empty", "dtype"])
    flat = t.data.reshape(-1)
    data = {"short": flat[:-1], "long": np.concatenate([flat, flat[:3]]), "empty": flat[:0],
            "dtype": flat.astype(np.float64 if flat.dtype != np.float64 else np.int8)}[how]
    b.w.tensors[i] = replace(t, data=np.ascontiguousarray(data))
    return f"{b.what}: constant {i} '{t.name}' {how} buffer", _finish(b)


def dtypes(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b, i, t = _any_tensor(r, nr)
    dtype = r.choice(["int16", "float16", "uint8", "int64", "bool", "uint32", "float64", "int32"])
    data = None if t.data is None else np.zeros(t.data.shape, dtype)
    b.w.tensors[i] = replace(t, dtype=dtype, data=data)
    return f"{b.what}: tensor {i} '{t.name}' as {dtype}", _finish(b)


def quantization(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b, i, t = _any_tensor(r, nr)
    how = r.choice(["zero-scale", "nan-scale", "negative-scale", "huge-scale", "zp-range", "axis", "count", "drop"])
    s, z, axis = t.quant if t.quant is not None else (np.array([0.1], np.float32), np.array([0], np.int64), 0)
    if how == "zero-scale":
        s = np.zeros_like(s)
    elif how == "nan-scale":
        s = np.full_like(s, np.nan)
    elif how == "negative-scale":
        s = -s
    elif how == "huge-scale":
        s = np.full_like(s, 3e38)
    elif how == "zp-range":
        z = np.full_like(z, r.choice([300, -1000, 1 << 40]))
    elif how == "axis":
        axis = r.choice([7, -3, 1 << 20])
    elif how == "count":
        s, z = np.resize(s, s.size + 2), np.resize(z, z.size + 2)
    quant = None if how == "drop" else (s, z, axis)
    b.w.tensors[i] = replace(t, quant=quant)
    return f"{b.what}: tensor {i} '{t.name}' quantization {how}", _finish(b)


def options(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    k = r.randrange(len(b.w.ops))
    o = b.w.ops[k]
    if not o.options:
        return f"{b.what}: operator {k} {o.name} as CUSTOM 'FuzzOp'", _custom(b, k)
    field = r.choice(sorted(o.options))
    value = o.options[field]
    bad: Any = [] if isinstance(value, list) else r.choice([-1, 0, 7, 255, 1 << 30, -(1 << 31)])
    if isinstance(value, float):
        bad = r.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
    b.w.ops[k] = replace(o, options={**o.options, field: bad})
    return f"{b.what}: operator {k} {o.name} {field}={bad}", _finish(b)


def _custom(b: Base, k: int) -> bytes:
    b.w.ops[k] = replace(b.w.ops[k], name="CUSTOM", custom="FuzzOp", options={})
    return _finish(b)


UNREAD = ("WHILE", "IF", "CALL_ONCE", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "EMBEDDING_LOOKUP", "TOPK_V2", "WHERE",
          "NON_MAX_SUPPRESSION_V4", "SPACE_TO_BATCH_ND", "REVERSE_V2", "CUMSUM", "SCATTER_ND", "CUSTOM")


def operators(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    k = r.randrange(len(b.w.ops))
    name = r.choice(UNREAD)
    if name == "CUSTOM":
        return f"{b.what}: operator {k} as CUSTOM 'FuzzOp'", _custom(b, k)
    old = b.w.ops[k].name
    b.w.ops[k] = replace(b.w.ops[k], name=name, options={})
    return f"{b.what}: operator {k} {old} -> {name}", _finish(b)


def graph_order(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    how = r.choice(["reversed", "written-twice", "cycle", "unwritten-output", "no-ops", "input-is-output",
                    "duplicate-input"])
    ops = b.w.ops
    if how == "reversed" and len(ops) > 1:
        ops.reverse()
    elif how == "written-twice":
        k = r.randrange(len(ops))
        ops.append(replace(ops[k]))
    elif how == "cycle":
        o = ops[0]
        ops[0] = replace(o, inputs=(ops[-1].outputs[0],) + o.inputs[1:])
    elif how == "unwritten-output":
        b.outputs = [b.w.tensor("dangling", (1, 2), "float32")]
    elif how == "no-ops":
        ops.clear()
    elif how == "input-is-output":
        b.outputs = list(b.inputs)
    else:
        b.inputs = b.inputs * 2
    return f"{b.what}: graph {how}", _finish(b, signature=None if how in ("unwritten-output", "duplicate-input")
                                               else "serving_default")


NAMES = ("", "x\ny", 'a"b\'c', "int", "main", "__attribute__", "../../etc/passwd", "é∂ƒ", "a" * 100_000, "%s%n{}",
         "0leading", "a b", "\x00nul")


def names(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    name = r.choice(NAMES)
    targets = r.choice(["input", "output", "all", "duplicate"])
    for i, t in enumerate(b.w.tensors):
        if targets == "all" or (targets == "input" and i in b.inputs) or (targets == "output" and i in b.outputs) \
                or targets == "duplicate":
            b.w.tensors[i] = replace(t, name=name if targets != "duplicate" else "same")
    return f"{b.what}: {targets} tensor names {name[:20]!r}", _finish(b)


def truncated(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    buf = _finish(b)
    n = r.choice([0, 3, 7, 8, 16, r.randrange(len(buf)), len(buf) - 1, len(buf) // 2])
    return f"{b.what}: truncated to {n} of {len(buf)} bytes", buf[:n]


def bit_flips(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    buf = bytearray(_finish(b))
    k = r.choice([1, 2, 8, 64])
    for _ in range(k):
        i = r.randrange(len(buf))
        buf[i] ^= 1 << r.randrange(8)
    return f"{b.what}: {k} bits flipped", bytes(buf)


def words(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    """A 32-bit word of the table area (offsets, lengths, indices) replaced with a hostile value."""
    b = valid_base(r, nr)
    buf = bytearray(_finish(b))
    k = r.randint(1, 4)
    for _ in range(k):
        i = r.randrange(0, len(buf) - 4) & ~3
        v = r.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, len(buf), len(buf) + 4, len(buf) * 1000, i, 4])
        struct.pack_into("<I", buf, i, v)
    return f"{b.what}: {k} words overwritten", bytes(buf)


def header(r: random.Random, nr: np.random.Generator) -> tuple[str, bytes]:
    b = valid_base(r, nr)
    buf = bytearray(_finish(b))
    how = r.choice(["identifier", "version", "root", "garbage"])
    if how == "identifier":
        buf[4:8] = r.choice([b"TFL2", b"\0\0\0\0", b"ONNX"])
    elif how == "version":
        import tflite

        model = tflite.Model.GetRootAs(bytes(buf), 0)
        pos = model._tab.Offset(4)  # noqa: SLF001 - the version field's slot, to patch it in place
        if pos:
            struct.pack_into("<I", buf, model._tab.Pos + pos, r.choice([0, 2, 4, 99, 0xFFFFFFFF]))  # noqa: SLF001
    elif how == "root":
        struct.pack_into("<I", buf, 0, r.choice([0, 4, len(buf), 0xFFFFFFF0]))
    elif how == "garbage":
        buf = bytearray(b"\x00\x00\x00\x00TFL3" + bytes(nr.integers(0, 256, r.randint(0, 300)).astype(np.uint8)))
    return f"{b.what}: {how}", bytes(buf)


KINDS: list[tuple[str, Callable[[random.Random, np.random.Generator], tuple[str, bytes]]]] = [
    ("valid", lambda r, nr: ((b := valid_base(r, nr)).what, _finish(b))), ("shapes", shapes), ("indices", indices),
    ("buffers", buffers), ("dtypes", dtypes), ("quantization", quantization), ("options", options),
    ("operators", operators), ("graph", graph_order), ("names", names), ("truncated", truncated),
    ("bit-flips", bit_flips), ("words", words), ("header", header),
]


# ---- the case ---------------------------------------------------------------------------------------


@dataclass
class Prepared:
    dir: Path
    model: Path


def build(buf: bytes, d: Path, env: Env) -> Prepared:
    model = d / "model.tflite"
    model.write_bytes(buf)
    return Prepared(d, model)


def _api_inputs(mod: Any) -> dict[str, np.ndarray]:
    from plait.relay.io import make_inputs

    return make_inputs(mod, {}, seed=0)


def _load(path: Path) -> Any:
    import plait

    return plait.load_tflite(str(path))


def check(p: Prepared, env: Env, rec: Recorder) -> None:
    model_legs(p.model, env, rec, api_inputs=_api_inputs, inputs_file=None, ort_ref=False, out_dir=p.dir, load=_load)


def case(seed: int, index: int) -> Case:
    kind, gen = KINDS[index % len(KINDS)]
    try:
        description, buf = gen(random.Random(f"tflite:{seed}:{index}"), np.random.default_rng([seed, index, 3]))
    except Exception as exc:  # noqa: BLE001 - the writer refused what the kind asked for: a valid model instead
        r, nr = random.Random(f"tflite:{seed}:{index}:v"), np.random.default_rng([seed, index, 4])
        description, buf = f"valid (the writer refused {kind}: {type(exc).__name__})", _finish(valid_base(r, nr))
    return Case(f"tflite:{seed}:{index}", "tflite", f"[{kind}] {description}", partial(build, buf), check)
