"""External tensor data: read the files an ONNX model names, only from the model's own directory.

A tensor stored outside the model (``data_location = EXTERNAL``) names a file by a relative
``location`` with an optional ``offset`` and ``length``. :func:`load_external_data` reads each one
into the tensor's ``raw_data``, after checking that

- the location is a relative path that stays inside the model's directory once symbolic links
  are resolved (never ``..``, an absolute path, or a link to elsewhere), and names a regular file;
- offset and length are non-negative integers, and the file holds ``offset + length`` bytes;
- ``length`` (when given) is exactly what the tensor's dims and dtype need, so that a short or
  long entry is refused before anything is read; only that many bytes are read.

Any problem is a :class:`~plait.errors.FrontendError` naming the tensor and the file. The total
read is checked against the memory limit (:func:`plait.limits.check_bytes`) before reading.
"""

from __future__ import annotations

import math
import os
from typing import Iterator

import onnx
from onnx import TensorProto

from plait.errors import FrontendError
from plait.frontend.onnx_node import ONNX_DTYPES
from plait.ir.types import DTYPES
from plait.limits import check_bytes


def iter_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor of the model (initializers, attribute tensors, in subgraphs and functions),
    with a description for messages."""
    yield from _graph_tensors(model.graph, "")
    for f in model.functions:
        for node in f.node:
            yield from _node_tensors(node, f"function '{f.name}': ")


def _graph_tensors(g: onnx.GraphProto, where: str) -> Iterator[tuple[str, TensorProto]]:
    for t in g.initializer:
        yield f"{where}initializer '{t.name}'", t
    for node in g.node:
        yield from _node_tensors(node, where)


def _node_tensors(node: onnx.NodeProto, where: str) -> Iterator[tuple[str, TensorProto]]:
    label = f"{where}node '{node.name or node.op_type}' ({node.op_type})"
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR:
            yield f"{label}: attribute '{a.name}'", a.t
        elif a.type == onnx.AttributeProto.TENSORS:
            for t in a.tensors:
                yield f"{label}: attribute '{a.name}'", t
        elif a.type == onnx.AttributeProto.GRAPH:
            yield from _graph_tensors(a.g, f"{label}: subgraph '{a.name}': ")
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                yield from _graph_tensors(g, f"{label}: subgraph '{a.name}': ")


def is_external(t: TensorProto) -> bool:
    return t.HasField("data_location") and t.data_location == TensorProto.EXTERNAL


def load_external_data(model: onnx.ModelProto, base_dir: str, memory_limit: int | str | None = None) -> None:
    """Read every external tensor of ``model`` from files in ``base_dir`` (in place)."""
    # a tensor of a dtype plait does not read stays external: the importer reports its dtype
    todo = [(what, t, _entry(t, what, base_dir)) for what, t in iter_tensors(model)
            if is_external(t) and t.data_type in ONNX_DTYPES]
    total = sum(length for _, _, (_, _, length) in todo)
    if todo:
        check_bytes(total, "the model's external data", memory_limit)
    for what, t, (path, offset, length) in todo:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        if len(data) != length:  # the file changed under us
            raise FrontendError(f"{what}: external data file '{_location(t)}' ended early")
        t.raw_data = data
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT


def _location(t: TensorProto) -> str:
    return next((e.value for e in t.external_data if e.key == "location"), "")


def _entry(t: TensorProto, what: str, base_dir: str) -> tuple[str, int, int]:
    """(file path, offset, length) of an external tensor, all checked."""
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    if not location:
        raise FrontendError(f"{what}: external data without a location")
    base = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(base, location.replace("\0", "")))
    if "\0" in location or os.path.isabs(location) or os.path.commonpath([base, path]) != base:
        raise FrontendError(f"{what}: external data location '{location}' is outside the model's directory")
    if not os.path.exists(path):
        raise FrontendError(f"{what}: external data file '{location}' does not exist next to the model")
    if not os.path.isfile(path):
        raise FrontendError(f"{what}: external data location '{location}' is not a regular file")
    offset = _int_field(info, "offset", what)
    need = _tensor_bytes(t, what)
    length = _int_field(info, "length", what) if "length" in info else need
    if length != need:
        raise FrontendError(f"{what}: external data length {length} does not match the {need} bytes its dims "
                            f"{list(t.dims)} need")
    size = os.path.getsize(path)
    if offset + length > size:
        raise FrontendError(f"{what}: external data file '{location}' holds {size} bytes, the tensor needs bytes "
                            f"{offset} to {offset + length}")
    return path, offset, length


def _int_field(info: dict[str, str], key: str, what: str) -> int:
    text = info.get(key, "0")
    try:
        value = int(text)
    except ValueError:
        raise FrontendError(f"{what}: external data {key} '{text[:40]}' is not an integer") from None
    if value < 0:
        raise FrontendError(f"{what}: external data {key} {value} is negative")
    return value


def _tensor_bytes(t: TensorProto, what: str) -> int:
    """Bytes the tensor's dims and dtype (one plait reads) need."""
    for k, d in enumerate(t.dims):
        if d < 0:
            raise FrontendError(f"{what}: dimension {k} is {d} (dimensions must be >= 0)")
    return math.prod(int(d) for d in t.dims) * DTYPES[ONNX_DTYPES[t.data_type]].itemsize
