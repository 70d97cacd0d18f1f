"""Model cases about structure: mutations of the base models (dims, attributes, names, cycles,
unknown ops and domains, versions, empty graphs, dtypes) and broken bytes (truncated, garbage,
flipped, non-UTF-8). Each generator takes ``(rng, nrng)`` and returns a :class:`Spec`.
"""

from __future__ import annotations

import random

import numpy as np
import onnx
from onnx import TensorProto, helper

from .bases import BASES, Base
from .model_values import HUGE, Spec, one_op, vi

T = TensorProto


def _base(rng: random.Random, names: list[str] | None = None) -> tuple[Base, onnx.ModelProto]:
    base = BASES[rng.choice(names or sorted(BASES))](rng.randrange(3))
    m = onnx.ModelProto()
    m.CopyFrom(base.model)
    return base, m


def _node(rng: random.Random, m: onnx.ModelProto) -> onnx.NodeProto:
    return m.graph.node[rng.randrange(len(m.graph.node))]


HOSTILE_DIMS = [0, -1, -4, HUGE, 2**62, 2**63 - 1, "N", None, "extra", "drop"]


def input_dims(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """A graph input (or a value_info) with a wrong, negative, huge, symbolic or missing dim."""
    base, m = _base(rng)
    if rng.random() < 0.25 and len(m.graph.node) > 1:  # a value_info that contradicts what the node computes
        node = m.graph.node[rng.randrange(len(m.graph.node) - 1)]
        dtype = rng.choice([T.FLOAT, T.INT32, T.INT64])
        dims = rng.choice([[1], [7, 7], [-3], [HUGE], []])
        m.graph.value_info.append(vi(node.output[0], dtype, dims))
        return Spec(f"{base.name}: value_info of '{node.output[0]}' says {T.DataType.Name(dtype)}{dims}", m,
                    base.inputs(nrng))
    inp = m.graph.input[rng.randrange(len(m.graph.input))]
    dims = inp.type.tensor_type.shape.dim
    k = rng.randrange(len(dims))
    bad = rng.choice(HOSTILE_DIMS)
    if bad == "extra":
        dims.add().dim_value = 2
    elif bad == "drop":
        del dims[k]
    elif bad is None:
        dims[k].Clear()
    elif isinstance(bad, str):
        dims[k].dim_param = bad
    else:
        dims[k].dim_value = bad
    negative = isinstance(bad, int) and bad < 0
    return Spec(f"{base.name}: input '{inp.name}' dim {k} -> {bad}", m, None,
                must_refuse="a negative input dim" if negative else "")


def init_dims(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """An initializer whose dims contradict its data (negative, huge, one too many, zero)."""
    base, m = _base(rng)
    init = m.graph.initializer[rng.randrange(len(m.graph.initializer))]
    bad = rng.choice(["negative", "huge", "extra", "zero", "drop"])
    if bad == "negative" and len(init.dims):
        init.dims[0] = -4
    elif bad == "negative":
        init.dims.append(-4)
    elif bad == "huge":
        init.dims.append(2**40)
    elif bad == "extra":
        init.dims.append(3)
    elif bad == "zero":
        init.dims.append(0)
    elif len(init.dims):
        del init.dims[-1]
    return Spec(f"{base.name}: initializer '{init.name}' dims {bad} -> {list(init.dims)}", m, base.inputs(nrng),
                must_refuse="a negative initializer dim" if any(x < 0 for x in init.dims) else "")


# attribute name -> hostile values (by op)
BAD_ATTRS = {
    "Conv": {"kernel_shape": [[2, 2], [3], [0, 0], [-1, 3], [5, 5, 5], [7, 7]], "strides": [[0, 1], [-1, -1], [2**31, 1]],
             "pads": [[-1, -1, -1, -1], [1, 1], [2**40, 0, 0, 0], [9, 9, 9, 9]], "dilations": [[0, 0], [-2, 1], [9, 9]],
             "group": [2, 0, -1, 3]},
    "MaxPool": {"kernel_shape": [[7, 7], [0, 0], [2], [2**31, 1]], "strides": [[0, 0], [-1, 2]],
                "pads": [[3, 3, 3, 3], [-1, 0, 0, 0]], "ceil_mode": [5], "storage_order": [1]},
    "Gemm": {"transA": [1], "transB": [0], "alpha": [float("nan")], "beta": [float("inf")]},
    "Softmax": {"axis": [3, -3, 2**31, -(2**40)]},
    "Flatten": {"axis": [5, -6, 2**31]},
    "Gather": {"axis": [2, -3, 9]},
    "Concat": {"axis": [2, -3, 5]},
    "Cast": {"to": [0, 999, 8, 16, -1]},
    "Transpose": {"perm": [[0, 0], [1], [2, 0], [0, 1, 2], [-1, 0]]},
    "Relu": {"alpha": [0.1]},
}


def bad_attribute(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """An attribute with a contradicting or out-of-range value, of the wrong type, unknown, missing or given twice."""
    base, m = _base(rng)
    node = _node(rng, m)
    table = BAD_ATTRS.get(node.op_type, {})
    mode = rng.choice(["value", "value", "value", "type", "unknown", "missing", "twice"]) if table else rng.choice(
        ["type", "unknown", "twice"])
    attrs = {a.name: a for a in node.attribute}
    if mode == "value":
        name = rng.choice(sorted(table))
        value = rng.choice(table[name])
        if name in attrs:
            node.attribute.remove(attrs[name])
        node.attribute.append(helper.make_attribute(name, value))
        what = f"{name}={value}"
        if node.op_type == "Conv" and name == "kernel_shape":  # every listed value contradicts the 3x3 weights
            return Spec(f"{base.name}: {node.op_type} '{node.name}' {what}", m, base.inputs(nrng),
                        must_refuse="Conv kernel_shape contradicts its weights")
    elif mode == "type" and attrs:
        name = rng.choice(sorted(attrs))
        node.attribute.remove(attrs[name])
        value = rng.choice([1.5, "text", [1.0, 2.0], b"\xff\xfe", ["a", "b"]])
        node.attribute.append(helper.make_attribute(name, value))
        what = f"{name} of the wrong type ({value!r})"
    elif mode == "missing" and attrs:
        name = rng.choice(sorted(attrs))
        node.attribute.remove(attrs[name])
        what = f"{name} removed"
    elif mode == "twice" and attrs:
        name = rng.choice(sorted(attrs))
        node.attribute.append(attrs[name])
        what = f"{name} given twice"
    else:
        node.attribute.append(helper.make_attribute(rng.choice(["bogus", "axis", "perm", "", "x" * 300]), 3))
        what = f"an unknown attribute '{node.attribute[-1].name[:20]}'"
    return Spec(f"{base.name}: {node.op_type} '{node.name}' {what}", m, base.inputs(nrng))


def names_missing_duplicate(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Undefined inputs, outputs nobody produces, names produced twice, duplicate graph inputs/outputs."""
    base, m = _base(rng)
    g = m.graph
    mode = rng.choice(["undefined input", "unproduced output", "two producers", "duplicate output",
                       "duplicate input", "duplicate initializer", "empty input name", "output is an input",
                       "shadowed input", "no name"])
    node = _node(rng, m)
    valid = False
    if mode == "undefined input":
        node.input[rng.randrange(len(node.input))] = "nowhere"
    elif mode == "unproduced output":
        g.output.append(vi("ghost", T.FLOAT, [1]))
    elif mode == "two producers":
        other = g.node[(list(g.node).index(node) + 1) % len(g.node)]
        other.output[0] = node.output[0]
    elif mode == "duplicate output":
        g.output.append(g.output[0])
    elif mode == "duplicate input":
        g.input.append(g.input[0])
    elif mode == "duplicate initializer":
        g.initializer.append(g.initializer[0])
    elif mode == "empty input name":
        node.input[0] = ""
    elif mode == "output is an input":  # valid ONNX: the graph returns an input unchanged
        g.output.append(vi(g.input[0].name, g.input[0].type.tensor_type.elem_type, None))
        valid = True
    elif mode == "shadowed input":  # a node writes a graph input's name
        node.output[0] = g.input[0].name
    else:
        for n in g.node:
            n.name = ""
        valid = True
    return Spec(f"{base.name}: {mode} ('{node.name}')", m, base.inputs(nrng), ort_ref=valid,
                must_refuse="duplicate graph output names" if mode == "duplicate output" else "")


def cycles(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """A node that reads its own output, or two nodes that read each other's."""
    base, m = _base(rng)
    nodes = m.graph.node
    if rng.random() < 0.4 or len(nodes) < 2:
        n = _node(rng, m)
        n.input[0] = n.output[0]
        return Spec(f"{base.name}: '{n.name}' reads its own output", m, base.inputs(nrng))
    i = rng.randrange(len(nodes) - 1)
    j = rng.randrange(i + 1, len(nodes))
    nodes[i].input[0] = nodes[j].output[0]
    return Spec(f"{base.name}: '{nodes[i].name}' reads the output of the later '{nodes[j].name}' (a cycle)", m,
                base.inputs(nrng))


def unknown_ops(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Unknown op types (odd spellings too), unknown domains, a known op in another domain."""
    base, m = _base(rng)
    node = _node(rng, m)
    mode = rng.choice(["op", "domain", "domain op", "function"])
    if mode == "op":
        node.op_type = rng.choice(["FooBar", "", "relu", "Conv2D", "Relu\n", "Gemm\"; int x;", "Ω", "A" * 5000])
        what = f"op type {node.op_type[:30]!r}"
    elif mode == "domain":
        node.domain = rng.choice(["com.evil", "ai.onnx.ml", "com.microsoft", "\n", "x" * 1000])
        m.opset_import.append(helper.make_opsetid(node.domain, 1))
        what = f"domain {node.domain[:30]!r}"
    elif mode == "domain op":
        node.domain = "com.evil"
        what = "domain 'com.evil' without an opset import"
    else:
        node.op_type, node.domain = "MyFunction", "local"
        m.opset_import.append(helper.make_opsetid("local", 1))
        what = "a call of an undefined local function"
    return Spec(f"{base.name}: '{node.name}' {what}", m, base.inputs(nrng))


def versions(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Opset and IR versions that are unknown, zero, negative, absent or given twice."""
    base, m = _base(rng)
    mode = rng.choice(["opset", "ir", "no opset", "two opsets"])
    if mode == "opset":
        v = rng.choice([999, 0, 1, -1, 2**40, 6, 23])
        m.opset_import[0].version = v
        what = f"opset {v}"
    elif mode == "ir":
        v = rng.choice([999, 0, -1, 1, 3, 2**40])
        m.ir_version = v
        what = f"ir_version {v}"
    elif mode == "no opset":
        del m.opset_import[:]
        what = "no opset import"
    else:
        m.opset_import.append(helper.make_opsetid("", rng.choice([9, 13, 999])))
        what = f"two default-domain opsets {[o.version for o in m.opset_import]}"
    known_opset, known_ir = onnx.defs.onnx_opset_version(), onnx.IR_VERSION
    beyond = mode == "opset" and m.opset_import[0].version > known_opset or mode == "ir" and m.ir_version > known_ir
    return Spec(f"{base.name}: {what}", m, base.inputs(nrng),
                must_refuse="a version beyond what the installed onnx knows" if beyond else "")


def empty_graphs(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Graphs without nodes, outputs or inputs; a graph whose output is an initializer."""
    base, m = _base(rng)
    g = m.graph
    mode = rng.choice(["no nodes", "no outputs", "nothing", "constant output", "no graph"])
    inputs = base.inputs(nrng)
    valid = False
    if mode == "no nodes":
        del g.node[:]
    elif mode == "no outputs":
        del g.output[:]
    elif mode == "nothing":
        del g.node[:]
        del g.output[:]
        del g.input[:]
        del g.initializer[:]
        inputs = {}
    elif mode == "constant output":
        init = g.initializer[0]
        del g.output[:]
        g.output.append(vi(init.name, init.data_type, list(init.dims)))
        valid = True
    else:
        m.ClearField("graph")
    return Spec(f"{base.name}: {mode}", m, inputs, ort_ref=valid,
                must_refuse="a graph without outputs" if mode in ("no outputs", "nothing") else "")


BAD_DTYPES = [0, 8, 14, 15, 16, 17, 19, 21, 22, 999, -1]


def wrong_dtypes(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Inputs of unsupported/unknown element types, ops given types they do not take, declared outputs
    of the wrong type."""
    mode = rng.choice(["input type", "op type", "mixed", "declared output"])
    if mode == "input type":
        base, m = _base(rng)
        t = rng.choice(BAD_DTYPES)
        m.graph.input[0].type.tensor_type.elem_type = t
        return Spec(f"{base.name}: input of element type {t}", m, None)
    if mode == "op type":
        op, dt = rng.choice([("Relu", T.UINT8), ("Sqrt", T.INT32), ("Softmax", T.INT64), ("Exp", T.BOOL),
                             ("MatMul", T.INT8), ("Conv", T.INT32), ("Sigmoid", T.STRING)])
        shape = [1, 1, 3, 3] if op == "Conv" else [2, 2]
        ins = [("a", dt, shape), ("b", dt, shape if op == "Conv" else [2, 2])] if op in ("MatMul", "Conv") else [
            ("a", dt, shape)]
        m = one_op(op, ins, dt)
        np_dt = {T.UINT8: np.uint8, T.INT32: np.int32, T.INT64: np.int64, T.BOOL: np.bool_, T.INT8: np.int8}.get(dt)
        inputs = None if np_dt is None else {n: np.ones(s, np_dt) for n, _, s in ins}
        return Spec(f"{op} on {T.DataType.Name(dt).lower()}", m, inputs)
    if mode == "mixed":
        m = one_op("Add", [("a", T.FLOAT, [3]), ("b", T.INT32, [3])], T.FLOAT)
        return Spec("Add float32 + int32", m, {"a": np.ones(3, np.float32), "b": np.ones(3, np.int32)})
    base, m = _base(rng)
    m.graph.output[0].type.tensor_type.elem_type = rng.choice([T.INT64, T.DOUBLE, T.BOOL, T.UINT8])
    return Spec(f"{base.name}: output declared {T.DataType.Name(m.graph.output[0].type.tensor_type.elem_type)}", m,
                base.inputs(nrng))


def broken_bytes(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """The model file itself is broken: truncated, garbage, flipped bytes, empty, trailing junk, deep nesting."""
    base, m = _base(rng)
    data = m.SerializeToString()
    mode = rng.choice(["truncated", "garbage", "flipped", "empty", "trailing junk", "text", "huge length", "deep"])
    if mode == "truncated":
        data = data[: rng.randrange(1, len(data))]
    elif mode == "garbage":
        data = nrng.integers(0, 256, rng.choice([1, 16, 4096])).astype(np.uint8).tobytes()
    elif mode == "flipped":
        buf = bytearray(data)
        for _ in range(rng.choice([1, 2, 8, 64])):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        data = bytes(buf)
    elif mode == "empty":
        data = b""
    elif mode == "trailing junk":
        data += b"\xff" * rng.choice([1, 7, 100])
    elif mode == "text":
        data = b"ir_version: 8\ngraph { name: 'x' }\n"
    elif mode == "huge length":  # field 7 (graph), length 2^35
        data = b"\x08\x08\x3a\xff\xff\xff\xff\x7f" + data[:50]
    else:  # graph -> node -> attribute -> graph -> ... nested 2000 deep
        inner = b""
        for _ in range(2000):
            inner = b"\x3a" + _varint(len(inner)) + inner
        data = b"\x08\x08" + inner
    return Spec(f"{base.name}: {mode} bytes ({len(data)} bytes)", data, base.inputs(nrng))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


HOSTILE_NAMES = ['in"put', "a\nb", "*/ x /*", "??/", "int", "return", "main", "NULL", "__attribute__", "0digit",
                 "x;}{ abort();", "\\", "ünïcødé", "\u202eevil", "😀", "a b", "a-b", "a_b", "%s%n", "\x7f", "a\tb",
                 "$(rm -rf x)", "../../etc/passwd", "con", "x" * 100_000]


def hostile_names(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Quotes, newlines, comment terminators, C keywords, 100k characters, unicode in node, tensor, graph
    and initializer names (names that collide once sanitized, too). The result is defined: ORT checks it."""
    base, m = _base(rng)
    g = m.graph
    inputs = base.inputs(nrng)
    renames: dict[str, str] = {}
    for _ in range(rng.randint(1, 3)):
        what = rng.choice(["node", "tensor", "graph", "initializer", "input", "output"])
        name = rng.choice(HOSTILE_NAMES)
        if what == "node":
            _node(rng, m).name = name
        elif what == "graph":
            g.name = name
        else:
            pool = {"tensor": [n.output[0] for n in g.node[:-1]], "initializer": [i.name for i in g.initializer],
                    "input": [i.name for i in g.input], "output": [o.name for o in g.output]}[what]
            pool = [p for p in pool if p not in renames and p not in renames.values()]
            if pool and name not in renames.values() and all(name != x for x in _all_names(m)):
                renames[rng.choice(pool)] = name
    _rename(m, renames)
    inputs = {renames.get(k, k): v for k, v in inputs.items()}
    shown = ", ".join(f"{a!r}->{b[:24]!r}" for a, b in renames.items()) or "node/graph names"
    return Spec(f"{base.name}: hostile names {shown}", m, inputs, ort_ref=True)


def _all_names(m: onnx.ModelProto) -> set[str]:
    g = m.graph
    return ({i.name for i in g.input} | {o.name for o in g.output} | {i.name for i in g.initializer}
            | {x for n in g.node for x in (*n.input, *n.output)})


def _rename(m: onnx.ModelProto, renames: dict[str, str]) -> None:
    g = m.graph
    for coll in (g.input, g.output, g.initializer, g.value_info):
        for item in coll:
            item.name = renames.get(item.name, item.name)
    for n in g.node:
        for seq in (n.input, n.output):
            for i, x in enumerate(seq):
                seq[i] = renames.get(x, x)


def non_utf8(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Invalid UTF-8 inside a name of the serialized model (protobuf strings must be UTF-8)."""
    base, m = _base(rng)
    target = rng.choice(["node", "input", "graph", "doc"])
    marker = "QQQQQQQQ"
    if target == "node":
        _node(rng, m).name = marker
    elif target == "input":
        _rename(m, {m.graph.input[0].name: marker})
    elif target == "graph":
        m.graph.name = marker
    else:
        m.doc_string = marker
    bad = rng.choice([b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8", b"\xc0\x80\xc0\x80\xc0\x80\xc0\x80",
                      b"\xed\xa0\x80\xed\xb0\x80ab", b"abc\x80defg"])
    data = m.SerializeToString().replace(marker.encode(), bad)
    return Spec(f"{base.name}: invalid UTF-8 in the {target} name", data, None if target == "input" else
                base.inputs(nrng))
