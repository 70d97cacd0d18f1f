"""Reading a TFLite flatbuffer into plain Python values, checked: :func:`read_model`.

Everything the importer needs from the file is read here, once, through the generated reader
classes of the ``tflite`` package (schema 3), and checked as it is read: the file identifier and
schema version, every vector length against the size of the file (a damaged length cannot make a
loop of a billion steps), tensor and buffer indices, shapes (no negative or absurd dims), the bytes
of every constant (its buffer must hold exactly its shape's bytes, inside the file), quantization
parameters, operator codes and options. A damaged file fails here with a :class:`FrontendError`
naming what and where ("subgraph 0, operator 3 (CONV_2D): ..."), never with a traceback from inside
the flatbuffer code, which trusts its offsets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.errors import FrontendError

SCHEMA_VERSION = 3
IDENTIFIER = b"TFL3"
MAX_DIM = 1 << 31
MAX_RANK = 8

# TFLite TensorType -> plait dtype (None: a type plait has no dtype for)
TENSOR_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("FLOAT32", "float32"), 1: ("FLOAT16", "float16"), 2: ("INT32", "int32"), 3: ("UINT8", "uint8"),
    4: ("INT64", "int64"), 5: ("STRING", None), 6: ("BOOL", "bool"), 7: ("INT16", "int16"),
    8: ("COMPLEX64", None), 9: ("INT8", "int8"), 10: ("FLOAT64", "float64"), 11: ("COMPLEX128", None),
    12: ("UINT64", "uint64"), 13: ("RESOURCE", None), 14: ("VARIANT", None), 15: ("UINT32", "uint32"),
    16: ("UINT16", "uint16"), 17: ("INT4", None), 18: ("BFLOAT16", None),
}
TYPE_CODES = {name: code for code, (name, _) in TENSOR_TYPES.items()}


@dataclass(frozen=True)
class QParams:
    """A tensor's affine quantization: ``scale`` (float32) and ``zero_point`` (int64), one value or one
    per index of ``axis``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1


@dataclass(frozen=True)
class TTensor:
    index: int
    name: str
    type_name: str          # TFLite's name of the element type (INT8, ...)
    dtype: str | None       # plait's, None when plait has none
    shape: tuple[int, ...]
    data: np.ndarray | None  # the constant's values (shaped), None for a variable tensor
    quant: QParams | None
    dynamic: bool = False   # shape_signature has a -1

    def label(self) -> str:
        return f"tensor {self.index} '{self.name}'"


@dataclass(frozen=True)
class TOp:
    index: int
    opcode: str             # BuiltinOperator name, or "CUSTOM"
    custom_code: str
    version: int
    inputs: tuple[int, ...]  # -1: an omitted optional input
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        name = f"CUSTOM '{self.custom_code}'" if self.opcode == "CUSTOM" else self.opcode
        return f"operator {self.index} ({name})"


@dataclass(frozen=True)
class TSubgraph:
    index: int
    name: str
    tensors: tuple[TTensor, ...]
    ops: tuple[TOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class TSignature:
    key: str
    subgraph: int
    inputs: tuple[tuple[str, int], ...]   # (name, tensor index)
    outputs: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class TModel:
    version: int
    description: str
    subgraphs: tuple[TSubgraph, ...]
    signatures: tuple[TSignature, ...]


def is_tflite(head: bytes) -> bool:
    """Whether bytes (the start of a file) look like a TFLite flatbuffer: its file identifier."""
    return len(head) >= 8 and head[4:8] == IDENTIFIER


class _Reader:
    def __init__(self, buf: bytes, where: str):
        self.buf = buf
        self.size = len(buf)
        self.where = where

    def fail(self, what: str) -> FrontendError:
        return FrontendError(f"malformed TFLite model{self.where}: {what}")

    def length(self, obj: Any, name: str, elem: int, what: str) -> int:
        """``obj.<name>Length()`` checked to fit in the file (``elem`` bytes per element)."""
        n = getattr(obj, name + "Length")()
        if n < 0 or n * elem > self.size:
            raise self.fail(f"{what}: a vector of {n} elements is longer than the file ({self.size} bytes)")
        return n

    def ints(self, obj: Any, name: str, what: str) -> tuple[int, ...]:
        n = self.length(obj, name, 4, what)
        if n == 0:
            return ()
        arr = getattr(obj, name + "AsNumpy")()
        return tuple(int(v) for v in np.asarray(arr).reshape(-1)[:n])

    def string(self, raw: Any) -> str:
        if raw is None:
            return ""
        if len(raw) > self.size:
            raise self.fail("a string is longer than the file")
        return bytes(raw).decode("utf-8", errors="replace")


def read_model(buf: bytes) -> TModel:
    """Read and check a whole TFLite model (see the module's docstring)."""
    buf = bytes(buf)
    if len(buf) < 8:
        raise FrontendError(f"not a TFLite model: the file has {len(buf)} bytes")
    if not is_tflite(buf):
        raise FrontendError("not a TFLite model: the file identifier (bytes 4-8) is not 'TFL3'")
    r = _Reader(buf, "")
    try:
        return _read(r)
    except FrontendError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, MemoryError, RecursionError) as exc:
        raise r.fail(f"the flatbuffer is damaged ({type(exc).__name__}: {exc}){r.where}") from None


def _read(r: _Reader) -> TModel:
    import tflite

    m = tflite.Model.GetRootAs(r.buf, 0)
    version = m.Version()
    if version != SCHEMA_VERSION:
        raise FrontendError(f"unknown TFLite schema version {version} (plait reads version {SCHEMA_VERSION})")
    codes = _opcodes(r, m, tflite)
    buffers = _buffers(r, m)
    n = r.length(m, "Subgraphs", 4, "the subgraphs")
    if n == 0:
        raise r.fail("the model has no subgraph")
    subgraphs = []
    for k in range(n):
        r.where = f" (subgraph {k})"
        subgraphs.append(_subgraph(r, m.Subgraphs(k), k, codes, buffers, tflite))
    r.where = ""
    sigs = _signatures(r, m, subgraphs)
    return TModel(version, r.string(m.Description()), tuple(subgraphs), sigs)


def _opcodes(r: _Reader, m: Any, tflite: Any) -> list[tuple[str, str, int]]:
    out = []
    for k in range(r.length(m, "OperatorCodes", 4, "the operator codes")):
        oc = m.OperatorCodes(k)
        code = max(oc.DeprecatedBuiltinCode(), oc.BuiltinCode())
        name = tflite.opcode2name(code) if code in tflite.BUILTIN_OPCODE2NAME else f"#{code}"
        custom = r.string(oc.CustomCode()) if name == "CUSTOM" else ""
        out.append((name, custom, oc.Version()))
    return out


def _buffers(r: _Reader, m: Any) -> list[Any]:
    """Each buffer's bytes (a memoryview into the file; None for an empty one)."""
    out: list[Any] = []
    view = memoryview(r.buf)
    for k in range(r.length(m, "Buffers", 4, "the buffers")):
        b = m.Buffers(k)
        off, size = b.Offset(), b.Size()
        if off > 1:  # the data is outside the flatbuffer, at an offset of the file
            if off + size > r.size:
                raise r.fail(f"buffer {k}: its {size} bytes at offset {off} end past the end of the file "
                             f"({r.size} bytes)")
            out.append(view[off:off + size])
            continue
        n = r.length(b, "Data", 1, f"buffer {k}")
        if n == 0:
            out.append(None)
            continue
        start = b._tab.Vector(b._tab.Offset(4))
        if start < 0 or start + n > r.size:
            raise r.fail(f"buffer {k}: its {n} bytes end past the end of the file ({r.size} bytes)")
        out.append(view[start:start + n])
    return out


def _quant(r: _Reader, t: Any, what: str, shape: tuple[int, ...]) -> QParams | None:
    q = t.Quantization()
    if q is None:
        return None
    ns = r.length(q, "Scale", 4, f"{what}: quantization scales")
    if ns == 0:
        return None
    nz = r.length(q, "ZeroPoint", 8, f"{what}: quantization zero points")
    scale = np.asarray(q.ScaleAsNumpy(), np.float32).reshape(-1)[:ns].copy()
    zp = np.asarray(q.ZeroPointAsNumpy(), np.int64).reshape(-1)[:nz].copy() if nz else np.zeros(ns, np.int64)
    if zp.size != scale.size:
        raise r.fail(f"{what}: {scale.size} quantization scales but {zp.size} zero points")
    axis = q.QuantizedDimension()
    if scale.size > 1 and not (0 <= axis < len(shape) and shape[axis] == scale.size):
        raise r.fail(f"{what}: {scale.size} per-channel scales along dimension {axis} of shape {list(shape)}")
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise r.fail(f"{what}: a quantization scale is not a finite value >= 0 ({scale[:4].tolist()})")
    return QParams(scale, zp, axis if scale.size > 1 else 0)


def _tensor(r: _Reader, t: Any, k: int, buffers: list[Any]) -> TTensor:
    name = r.string(t.Name())
    what = f"tensor {k} '{name}'"
    code = t.Type()
    type_name, dtype = TENSOR_TYPES.get(code, (f"#{code}", None))
    shape = r.ints(t, "Shape", what + ": shape")
    if len(shape) > MAX_RANK:
        raise r.fail(f"{what}: rank {len(shape)} (at most {MAX_RANK})")
    for d in shape:
        if d < 0 or d >= MAX_DIM:
            raise r.fail(f"{what}: shape {list(shape)} has a dimension {d} outside [0, 2**31)")
    sig = r.ints(t, "ShapeSignature", what + ": shape signature")
    dynamic = any(d < 0 for d in sig)
    bidx = t.Buffer()
    if not 0 <= bidx < len(buffers):
        raise r.fail(f"{what}: buffer index {bidx} is out of range (the model has {len(buffers)} buffers)")
    data = None
    raw = buffers[bidx]
    if raw is not None:
        if dtype is None:
            raise r.fail(f"{what}: a constant of type {type_name}, which plait does not read")
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        itemsize = np.dtype(dtype).itemsize
        if n * itemsize != len(raw):
            raise r.fail(f"{what}: buffer {bidx} holds {len(raw)} bytes, its shape {list(shape)} of "
                         f"{type_name} needs {n * itemsize}")
        data = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"), count=n).astype(dtype).reshape(shape)
    return TTensor(k, name, type_name, dtype, shape, data, _quant(r, t, what, shape), dynamic)


def _options(r: _Reader, op: Any, tflite: Any, what: str) -> dict[str, Any]:
    """The builtin options table of an operator as ``{field: value}`` (scalar fields, and int vectors)."""
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return {}
    names = {v: n for n, v in vars(tflite.BuiltinOptions).items() if isinstance(v, int)}
    cls = getattr(tflite, names.get(kind, ""), None)
    tab = op.BuiltinOptions()
    if cls is None or tab is None:
        raise r.fail(f"{what}: unknown builtin options type {kind}")
    opts = cls()
    opts.Init(tab.Bytes, tab.Pos)
    out: dict[str, Any] = {"_type": names[kind]}
    for attr in dir(cls):
        if not attr[:1].isupper() or attr.startswith(("Init", "GetRootAs")) or attr.endswith(
                ("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")):
            continue
        if hasattr(cls, attr + "Length"):
            out[attr] = r.ints(opts, attr, f"{what}: option {attr}")
        else:
            try:
                out[attr] = getattr(opts, attr)()
            except TypeError:  # a table or struct field (none of the operators plait reads has one)
                continue
    return out


def _subgraph(r: _Reader, g: Any, k: int, codes: list, buffers: list, tflite: Any) -> TSubgraph:
    nt = r.length(g, "Tensors", 4, "the tensors")
    tensors = tuple(_tensor(r, g.Tensors(i), i, buffers) for i in range(nt))

    def check(indices: tuple[int, ...], what: str, optional: bool = False) -> tuple[int, ...]:
        for i in indices:
            if not (0 <= i < nt or (optional and i == -1)):
                raise r.fail(f"{what}: tensor index {i} is out of range (the subgraph has {nt} tensors)")
        return indices

    ops = []
    for i in range(r.length(g, "Operators", 4, "the operators")):
        op = g.Operators(i)
        ci = op.OpcodeIndex()
        if not 0 <= ci < len(codes):
            raise r.fail(f"operator {i}: opcode index {ci} is out of range (the model has {len(codes)} codes)")
        name, custom, version = codes[ci]
        what = f"operator {i} ({name})"
        ins = check(r.ints(op, "Inputs", what + ": inputs"), what + ": inputs", optional=True)
        outs = check(r.ints(op, "Outputs", what + ": outputs"), what + ": outputs")
        opts = _options(r, op, tflite, what) if name != "CUSTOM" else {}
        ops.append(TOp(i, name, custom, version, ins, outs, opts))
    inputs = check(r.ints(g, "Inputs", "the subgraph's inputs"), "the subgraph's inputs")
    outputs = check(r.ints(g, "Outputs", "the subgraph's outputs"), "the subgraph's outputs")
    return TSubgraph(k, r.string(g.Name()), tensors, tuple(ops), inputs, outputs)


def _signatures(r: _Reader, m: Any, subgraphs: list[TSubgraph]) -> tuple[TSignature, ...]:
    out = []
    for k in range(r.length(m, "SignatureDefs", 4, "the signatures")):
        s = m.SignatureDefs(k)
        key = r.string(s.SignatureKey()) or f"signature_{k}"
        sg = s.SubgraphIndex()
        if not 0 <= sg < len(subgraphs):
            raise r.fail(f"signature '{key}': subgraph index {sg} is out of range ({len(subgraphs)} subgraphs)")
        nt = len(subgraphs[sg].tensors)

        def maps(n: int, get: Any, what: str) -> tuple[tuple[str, int], ...]:
            items = []
            for j in range(n):
                tm = get(j)
                i = tm.TensorIndex()
                if not 0 <= i < nt:
                    raise r.fail(f"signature '{key}': {what} {j}: tensor index {i} is out of range")
                items.append((r.string(tm.Name()), i))
            return tuple(items)

        ins = maps(r.length(s, "Inputs", 4, f"signature '{key}'"), s.Inputs, "input")
        outs = maps(r.length(s, "Outputs", 4, f"signature '{key}'"), s.Outputs, "output")
        out.append(TSignature(key, sg, ins, outs))
    return tuple(out)
