"""Model cases about values: valid models (checked against ONNX Runtime), NaN/inf constants, integer
division by zero and overflow, float->int casts of NaN/inf/huge values, out-of-range indices (constant
and as inputs), huge allocations asked for by the model.

Every generator takes ``(rng, nrng)`` (a ``random.Random`` and a numpy Generator, both seeded by the
case id) and returns a :class:`Spec`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .bases import BASES, finish

T = TensorProto
INT_TYPES = {T.INT8: np.int8, T.INT16: np.int16, T.INT32: np.int32, T.INT64: np.int64, T.UINT8: np.uint8,
             T.UINT16: np.uint16, T.UINT32: np.uint32, T.UINT64: np.uint64}
FLOAT_TYPES = {T.FLOAT16: np.float16, T.FLOAT: np.float32, T.DOUBLE: np.float64}
HUGE = 2**40  # elements: beyond any machine's memory limit, so a correct plait refuses before allocating


@dataclass
class Spec:
    """A generated model case: the model (or raw bytes), its inputs (None: the CLI's random inputs),
    whether ONNX Runtime's result is a valid reference, whether plait must refuse it, what it is."""

    description: str
    model: onnx.ModelProto | bytes
    inputs: dict[str, np.ndarray] | None = None
    ort_ref: bool = False
    must_refuse: str = ""  # why plait must refuse the model (issue 10 lists it as accepted though wrong)


def vi(name: str, dtype: int, shape: list | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def one_op(op: str, inputs: list[tuple[str, int, list]], out_dtype: int, inits: list | None = None,
           n_out: int = 1, **attrs) -> onnx.ModelProto:
    """A model of one node: graph inputs ``(name, dtype, shape)``, plus initializers (also node inputs)."""
    inits = inits or []
    names = [n for n, _, _ in inputs] + [t.name for t in inits]
    outs = ["y"] if n_out == 1 else [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"/{op.lower()}", **attrs)
    return finish([node], op.lower(), [vi(n, d, s) for n, d, s in inputs], [vi(o, out_dtype, None) for o in outs],
                  inits)


def const(array: np.ndarray, name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


# ---- valid models ---------------------------------------------------------------------------------


def valid_base(rng: random.Random, nrng: np.random.Generator) -> Spec:
    name = rng.choice(sorted(BASES))
    base = BASES[name](rng.randrange(3))
    return Spec(f"valid {name}", base.model, base.inputs(nrng), ort_ref=True)


UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Sqrt", "Log", "Floor", "Ceil", "Round", "Erf", "Softplus",
         "Reciprocal", "Sign", "Sin", "Cos", "Softsign", "HardSwish"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]


def valid_chain(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """A random chain of float elementwise ops (some with broadcast constants), maybe a final reduction."""
    dtype = rng.choice([T.FLOAT, T.FLOAT, T.DOUBLE])
    np_dt = FLOAT_TYPES[dtype]
    nodes, inits, cur, ops = [], [], "x", []
    for i in range(rng.randint(1, 6)):
        out = f"t{i}"
        if rng.random() < 0.5:
            op = rng.choice(UNARY)
            nodes.append(helper.make_node(op, [cur], [out], name=f"/{op}_{i}"))
        else:
            op = rng.choice(BINARY)
            shape = rng.choice([[3], [2, 1], [], [2, 3]])
            c = const(nrng.standard_normal(shape).astype(np_dt), f"c{i}")
            inits.append(c)
            args = [cur, c.name] if rng.random() < 0.7 else [c.name, cur]
            nodes.append(helper.make_node(op, args, [out], name=f"/{op}_{i}"))
        ops.append(op)
        cur = out
    if rng.random() < 0.4:
        op = rng.choice(["ReduceMax", "ReduceMin", "Softmax"])
        attrs = {"axis": rng.choice([0, 1, -1])} if op == "Softmax" else {"axes": [rng.choice([0, 1, -1])],
                                                                          "keepdims": rng.randint(0, 1)}
        nodes.append(helper.make_node(op, [cur], ["r"], name=f"/{op}", **attrs))
        ops.append(op)
        cur = "r"
    nodes[-1].output[0] = "y"
    model = finish(nodes, "chain", [vi("x", dtype, [2, 3])], [vi("y", dtype, None)], inits)
    x = (nrng.standard_normal((2, 3)) * 2).astype(np_dt)
    return Spec(f"valid chain {' > '.join(ops)} ({np.dtype(np_dt).name})", model, {"x": x}, ort_ref=True)


def _shape_step(rng: random.Random, shape: list[int], i: int) -> tuple[onnx.NodeProto, list, list[int], str]:
    """One valid shape op on a tensor of ``shape``: (node, initializers, new shape, what)."""
    src, out, n = f"s{i}", f"s{i + 1}", len(shape)
    kind = rng.choice(["Transpose", "Reshape", "Slice", "Unsqueeze", "Flatten", "Concat", "Expand", "Tile"])
    if kind == "Transpose":
        perm = list(range(n))
        rng.shuffle(perm)
        return helper.make_node(kind, [src], [out], perm=perm), [], [shape[p] for p in perm], f"Transpose{perm}"
    if kind == "Reshape":
        total = int(np.prod(shape))
        new = [total] if rng.random() < 0.3 else [d for d in (2, total // 2) if total % 2 == 0] or [total]
        target = list(new)
        if rng.random() < 0.5:
            target[rng.randrange(len(target))] = -1
        c = const(np.array(target, np.int64), f"shape{i}")
        return helper.make_node(kind, [src, c.name], [out]), [c], new, f"Reshape{target}"
    if kind == "Slice":
        axis = rng.randrange(n)
        start, end = rng.randint(-shape[axis] - 2, shape[axis]), rng.choice([shape[axis] + 5, 2**62, -1, 1])
        step = rng.choice([1, 1, 2, -1])
        cs = [const(np.array([v], np.int64), f"sl{i}_{k}") for k, v in enumerate([start, end, axis, step])]
        sliced = len(range(*slice(start, end, step).indices(shape[axis])))
        new = shape[:axis] + [sliced] + shape[axis + 1:]
        return (helper.make_node(kind, [src, *(c.name for c in cs)], [out]), cs, new,
                f"Slice(axis {axis}, {start}:{end}:{step})")
    if kind == "Unsqueeze":
        axis = rng.randint(-n - 1, n)
        c = const(np.array([axis], np.int64), f"ax{i}")
        pos = axis if axis >= 0 else axis + n + 1
        return helper.make_node(kind, [src, c.name], [out]), [c], shape[:pos] + [1] + shape[pos:], f"Unsqueeze({axis})"
    if kind == "Flatten":
        axis = rng.randint(0, n)
        a, b = int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))
        return helper.make_node(kind, [src], [out], axis=axis), [], [a, b], f"Flatten({axis})"
    if kind == "Concat":
        axis = rng.randrange(n)
        return (helper.make_node(kind, [src, src], [out], axis=axis), [],
                shape[:axis] + [2 * shape[axis]] + shape[axis + 1:], f"Concat(self, axis {axis})")
    if kind == "Expand":
        new = [2] + [d for d in shape]
        c = const(np.array([2] + [1] * n, np.int64), f"ex{i}")
        return helper.make_node(kind, [src, c.name], [out]), [c], new, "Expand(2, ...)"
    reps = [rng.choice([1, 2]) for _ in shape]
    c = const(np.array(reps, np.int64), f"rep{i}")
    return helper.make_node("Tile", [src, c.name], [out]), [c], [d * r for d, r in zip(shape, reps)], f"Tile{reps}"


def valid_shapes(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """A random chain of valid shape ops (Transpose, Reshape, Slice with clamped ends, Unsqueeze, ...)."""
    shape = [2, 3, 2]
    nodes, inits, what = [], [], []
    for i in range(rng.randint(1, 4)):
        if int(np.prod(shape)) > 200 or len(shape) > 5:
            break
        node, cs, shape, w = _shape_step(rng, shape, i)
        nodes.append(node)
        inits += cs
        what.append(w)
    nodes[-1].output[0] = "y"
    model = finish(nodes, "shapes", [vi("s0", T.FLOAT, [2, 3, 2])], [vi("y", T.FLOAT, None)], inits)
    return Spec(f"valid shape ops {' > '.join(what)}", model,
                {"s0": nrng.standard_normal((2, 3, 2)).astype(np.float32)}, ort_ref=True)


# ---- special float values -----------------------------------------------------------------------

# huge but not near float32's max: sums of products stay finite in any order (an overflow that depends
# on the summation order would make a correct compiled result differ from the interpreter's)
SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 1e-45, -0.0]


def nan_constants(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """A base model whose weights (or inputs) hold NaN, +-inf, huge or denormal values: defined results."""
    name = rng.choice(["mlp", "conv"])
    base = BASES[name](0)
    m = onnx.ModelProto()
    m.CopyFrom(base.model)
    init = rng.choice(list(m.graph.initializer))
    w = numpy_helper.to_array(init).copy()
    value = rng.choice(SPECIAL)
    flat = w.reshape(-1)
    for _ in range(rng.randint(1, 3)):
        flat[rng.randrange(flat.size)] = value
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    inputs = base.inputs(nrng)
    if rng.random() < 0.3:
        x = next(iter(inputs))
        inputs[x].reshape(-1)[0] = rng.choice(SPECIAL)
    return Spec(f"{name} with {value} in {init.name}", m, inputs, ort_ref=True)


def float_special_ops(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Float division by zero, sqrt/log of negatives, NaN/inf through elementwise ops: defined results."""
    op = rng.choice(["Div", "Sqrt", "Log", "Pow", "Reciprocal", "Max", "Min", "Exp", "Mod", "Sub"])
    dt = rng.choice([T.FLOAT, T.DOUBLE])
    vals = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e30, -2.5, 1e-40], FLOAT_TYPES[dt])
    a = nrng.permutation(vals)
    b = nrng.permutation(vals)
    if op in ("Sqrt", "Log", "Reciprocal", "Exp"):
        return Spec(f"float {op} of special values", one_op(op, [("a", dt, [10])], dt), {"a": a}, ort_ref=True)
    attrs = {"fmod": 1} if op == "Mod" else {}
    model = one_op(op, [("a", dt, [10]), ("b", dt, [10])], dt, **attrs)
    return Spec(f"float {op} of special values", model, {"a": a, "b": b}, ort_ref=True)


# ---- integers: division, overflow, casts ------------------------------------------------------------


def _int_values(nrng: np.random.Generator, np_dt: type, n: int, zeros: bool) -> np.ndarray:
    info = np.iinfo(np_dt)
    pool = [info.min, info.max, 0, 1, -1, 7, -7, 2, -3] if info.min < 0 else [info.max, 0, 1, 7, 3, 2, 255]
    a = np.array([pool[i] for i in nrng.integers(0, len(pool), n)], dtype=np.int64 if info.min < 0 else np.uint64)
    a = a.astype(np_dt)
    if not zeros:
        a[a == 0] = 1
    return a


def int_division(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Integer Div/Mod with zero divisors, MIN / -1 and negative operands (inputs or constants)."""
    dt = rng.choice(list(INT_TYPES))
    np_dt = INT_TYPES[dt]
    op, attrs = rng.choice([("Div", {}), ("Mod", {"fmod": 0}), ("Mod", {"fmod": 1})])
    zeros = rng.random() < 0.6
    a, b = _int_values(nrng, np_dt, 8, True), _int_values(nrng, np_dt, 8, zeros)
    if zeros:
        b[rng.randrange(8)] = 0
    info = np.iinfo(np_dt)
    overflow = info.min < 0 and bool(np.any((a == info.min) & (b == -1)))
    if rng.random() < 0.3:  # the divisor as a constant
        model = one_op(op, [("a", dt, [8])], dt, inits=[const(b, "b")], **attrs)
        inputs = {"a": a}
    else:
        model = one_op(op, [("a", dt, [8]), ("b", dt, [8])], dt, **attrs)
        inputs = {"a": a, "b": b}
    what = f"{np.dtype(np_dt).name} {op}{attrs.get('fmod', '') and ' fmod'}"
    what += " by zero" if zeros else (" MIN/-1" if overflow else "")
    return Spec(what, model, inputs, ort_ref=not zeros and not overflow)


def int_overflow(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Wrap-around in Add/Sub/Mul/Neg/Abs/Pow, and BitShift by the width or more."""
    op = rng.choice(["Add", "Sub", "Mul", "Neg", "Abs", "BitShift", "Sum", "CumSum"])
    if op == "BitShift":
        dt = rng.choice([T.UINT8, T.UINT16, T.UINT32, T.UINT64])
        np_dt = INT_TYPES[dt]
        bits = np.dtype(np_dt).itemsize * 8
        a = _int_values(nrng, np_dt, 6, True)
        s = np.array([0, 1, bits - 1, bits, bits + 1, np.iinfo(np_dt).max], np_dt)
        direction = rng.choice(["LEFT", "RIGHT"])
        model = one_op(op, [("a", dt, [6]), ("s", dt, [6])], dt, direction=direction)
        return Spec(f"{np.dtype(np_dt).name} BitShift {direction} by >= width", model, {"a": a, "s": s})
    dt = rng.choice([T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT32])
    np_dt = INT_TYPES[dt]
    a, b = _int_values(nrng, np_dt, 6, True), _int_values(nrng, np_dt, 6, True)
    if op in ("Neg", "Abs"):
        if np.iinfo(np_dt).min == 0:
            dt, np_dt = T.INT32, np.int32
            a = _int_values(nrng, np_dt, 6, True)
        return Spec(f"{np.dtype(np_dt).name} {op} of MIN", one_op(op, [("a", dt, [6])], dt), {"a": a})
    if op == "CumSum":
        model = one_op(op, [("a", dt, [6])], dt, inits=[const(np.array(0, np.int64), "axis")])
        return Spec(f"{np.dtype(np_dt).name} CumSum overflow", model, {"a": a})
    return Spec(f"{np.dtype(np_dt).name} {op} overflow", one_op(op, [("a", dt, [6]), ("b", dt, [6])], dt),
                {"a": a, "b": b})


CAST_VALUES = [np.nan, np.inf, -np.inf, 1e20, -1e20, -1.5, -0.5, 0.7, 127.5, 128.0, 255.9, 256.0, -129.0, 32768.0,
               65536.0, 2.0**31, -(2.0**31) - 1, 2.0**32, 2.0**63, -(2.0**63), 2.0**64, 3.0, -0.0]


def casts(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Cast float->int/bool of NaN, inf and out-of-range values, and int->narrower int; ONNX Runtime
    is a reference only when every value is in range."""
    to = rng.choice([*INT_TYPES, T.BOOL, T.FLOAT16, T.FLOAT])
    to_np = INT_TYPES.get(to, {T.BOOL: np.bool_, T.FLOAT16: np.float16, T.FLOAT: np.float32}.get(to))
    if rng.random() < 0.75:
        src = rng.choice(list(FLOAT_TYPES))
        vals = np.array(nrng.choice(CAST_VALUES, 8), np.float64)
    else:
        src = rng.choice([T.INT64, T.INT32, T.UINT64, T.INT16])
        info = np.iinfo(INT_TYPES[src])
        vals = np.array(nrng.choice([info.min, info.max, 0, 1, -1, 128, 255, 256, 65535, 2**31], 8)).astype(
            INT_TYPES[src])
    x = vals.astype(FLOAT_TYPES.get(src, INT_TYPES.get(src)))
    if to in INT_TYPES:
        info = np.iinfo(to_np)
        f = x.astype(np.float64)
        in_range = bool(np.all(np.isfinite(f)) and np.all((np.trunc(f) >= info.min) & (np.trunc(f) <= info.max)))
    else:
        in_range = to != T.FLOAT16 or bool(np.all(np.abs(x.astype(np.float64)) < 65504))
    model = one_op("Cast", [("x", src, [8])], to, to=to)
    return Spec(f"Cast {onnx.TensorProto.DataType.Name(src).lower()} -> {np.dtype(to_np).name}"
                f"{'' if in_range else ' out of range'}", model, {"x": x}, ort_ref=in_range)


# ---- indices -------------------------------------------------------------------------------------------


def _index_model(rng: random.Random, nrng: np.random.Generator, as_input: bool) -> Spec:
    op = rng.choice(["Gather", "Gather", "GatherElements", "ScatterElements", "GatherND", "OneHot"])
    axis = rng.choice([0, 1, -1])
    dim = [3, 4][axis] if axis >= 0 else 4
    bad = rng.choice([dim, dim + 4, -dim - 1, 2**31, -(2**31), 2**63 - 1, -(2**63)])
    idx = nrng.integers(0, 3, (2,)).astype(np.int64)
    idx[rng.randrange(2)] = bad
    x = nrng.standard_normal((3, 4)).astype(np.float32)
    if op == "GatherND":
        idx = np.array([[0, 1], [2, bad]], np.int64)
    elif op in ("GatherElements", "ScatterElements"):
        idx = np.zeros((3, 4), np.int64) if axis == 0 else np.zeros((3, 4), np.int64)
        idx[rng.randrange(3), rng.randrange(4)] = bad
    elif op == "OneHot":
        idx = np.array([0, bad], np.int64)
    ins = [("x", T.FLOAT, [3, 4])]
    extra_inits = []
    if op == "ScatterElements":
        extra_inits = [const(np.ones((3, 4), np.float32), "upd")]
    if op == "OneHot":
        ins = []
        extra_inits = [const(np.array(5, np.int64), "depth"), const(np.array([0.0, 1.0], np.float32), "vals")]
    attrs = {} if op in ("GatherND", "OneHot") else {"axis": axis}
    idx_name = "idx"
    if as_input:
        ins = [*ins, (idx_name, T.INT64, list(idx.shape))]
        inits = extra_inits
    else:
        inits = [const(idx, idx_name), *extra_inits]
    model = one_op(op, ins, T.FLOAT, inits=inits, **attrs)
    if op == "ScatterElements":  # inputs: data, indices, updates
        node = model.graph.node[0]
        del node.input[:]
        node.input.extend(["x", idx_name, "upd"])
    if op == "OneHot":
        node = model.graph.node[0]
        del node.input[:]
        node.input.extend([idx_name, "depth", "vals"])
    inputs = {n: v for n, v in (("x", x), (idx_name, idx)) if n in {i for i, _, _ in ins}}
    valid = op == "OneHot"  # ONNX: an out-of-range OneHot index gives an all-off row
    where = "input" if as_input else "constant"
    return Spec(f"{op} with out-of-range {where} index {bad} (axis {axis})", model, inputs, ort_ref=valid)


def const_indices(rng: random.Random, nrng: np.random.Generator) -> Spec:
    return _index_model(rng, nrng, as_input=False)


def input_indices(rng: random.Random, nrng: np.random.Generator) -> Spec:
    return _index_model(rng, nrng, as_input=True)


def bad_shape_values(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Reshape/Slice/Expand/Tile/Split with shape values that are wrong (constant or as an input)."""
    op = rng.choice(["Reshape", "Slice", "Expand", "Tile", "Split", "Squeeze", "Unsqueeze"])
    values = {"Reshape": [[-1, -1], [7], [-2, 6], [0, 0, 0, 5], [2**62, 2**62]],
              "Slice": [[0, 0, 0, 0], [0, 5, 0, 0]],
              "Expand": [[3, 5], [-1, 4], [0, 2**62]], "Tile": [[-1, 1], [2**62, 2**62], [1]],
              "Split": [[5, 5], [-1, 7], [0, 0]], "Squeeze": [[0], [5], [-3]], "Unsqueeze": [[9], [0, 0], [-4]]}[op]
    v = np.array(rng.choice(values), np.int64)
    x = nrng.standard_normal((3, 4)).astype(np.float32)
    as_input = rng.random() < 0.4
    if op == "Slice":  # starts, ends, axes, steps: a zero step, or an axis out of range
        args = [np.array([0], np.int64), np.array([3], np.int64), np.array([v[1]], np.int64), np.array([v[0]], np.int64)]
        inits = [const(a, f"s{i}") for i, a in enumerate(args)]
        return Spec(f"Slice with axis {v[1]} step {v[0]}", one_op(op, [("x", T.FLOAT, [3, 4])], T.FLOAT, inits=inits),
                    {"x": x})
    if as_input:
        model = one_op(op, [("x", T.FLOAT, [3, 4]), ("v", T.INT64, [len(v)])], T.FLOAT,
                       n_out=2 if op == "Split" else 1)
        return Spec(f"{op} with input {v.tolist()}", model, {"x": x, "v": v})
    model = one_op(op, [("x", T.FLOAT, [3, 4])], T.FLOAT, inits=[const(v, "v")], n_out=2 if op == "Split" else 1)
    return Spec(f"{op} with constant {v.tolist()}", model, {"x": x})


def huge_allocation(rng: random.Random, nrng: np.random.Generator) -> Spec:
    """Ops whose output the model sizes to 2^40 elements or more: refuse, never try to allocate."""
    kind = rng.choice(["Expand", "Tile", "ConstantOfShape", "Range", "Pad", "Resize", "input"])
    x = nrng.standard_normal((1, 4)).astype(np.float32)
    if kind == "Expand":
        m = one_op("Expand", [("x", T.FLOAT, [1, 4])], T.FLOAT, inits=[const(np.array([2**38, 4], np.int64), "s")])
    elif kind == "Tile":
        m = one_op("Tile", [("x", T.FLOAT, [1, 4])], T.FLOAT, inits=[const(np.array([2**20, 2**20], np.int64), "r")])
    elif kind == "ConstantOfShape":
        m = finish([helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
                   "cos", [vi("x", T.FLOAT, [1, 4])], [vi("y", T.FLOAT, None)],
                   [const(np.array([HUGE, 4], np.int64), "s")])
    elif kind == "Range":
        m = finish([helper.make_node("Range", ["a", "b", "d"], ["y"])], "range", [vi("x", T.FLOAT, [1, 4])],
                   [vi("y", T.FLOAT, None)], [const(np.array(0, np.float32), "a"),
                                              const(np.array(1e13, np.float32), "b"), const(np.array(1, np.float32), "d")])
        return Spec("Range of 1e13 elements", m, None)
    elif kind == "Pad":
        m = one_op("Pad", [("x", T.FLOAT, [1, 4])], T.FLOAT, inits=[const(np.array([0, 0, 2**20, 2**20], np.int64),
                                                                           "p")])
    elif kind == "Resize":
        m = one_op("Resize", [("x", T.FLOAT, [1, 4])], T.FLOAT, inits=[
            const(np.array([], np.float32), "roi"), const(np.array([2.0**20, 2.0**20], np.float32), "scales")])
    else:
        dims = rng.choice([[2**20, 2**20], [HUGE], [2**31, 2**31, 2**31]])
        m = one_op("Relu", [("x", T.FLOAT, dims)], T.FLOAT)
        return Spec(f"an input of {dims} (random inputs)", m, None)
    return Spec(f"{kind} to 2^40 elements", m, {"x": x})
