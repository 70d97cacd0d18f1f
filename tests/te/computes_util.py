"""Run an operator's TE compute (lowered with create_prim_func, run by the TIR interpreter) and
compare it with the operator's numpy reference."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from plait import te, tir
from plait.ir import TensorType, TupleType
from plait.op import get_op

F32_TOL = dict(rtol=1e-5, atol=1e-6)


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def rand(rng: np.random.Generator, shape: tuple, dtype: str = "float32", lo: float = -3, hi: float = 3) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(int(lo), info.min), min(int(hi), info.max), shape, endpoint=True).astype(dt)
    return rng.uniform(lo, hi, shape).astype(dt)


def lower(op_name: str, arrays: list[np.ndarray], **attrs: Any) -> tuple[tir.PrimFunc, list[TensorType]]:
    """The PrimFunc of ``op_name`` on inputs shaped like ``arrays`` and its result types."""
    op = get_op(op_name)
    a = op.make_attrs(attrs)
    types = tuple(TensorType(x.shape, x.dtype.name) for x in arrays)
    out_type = op.rel(types, a)
    phs = [te.placeholder(x.shape, x.dtype.name, f"in{k}") for k, x in enumerate(arrays)]
    outs = get_op(op_name).compute(phs, a, out_type)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    fields = list(out_type.fields) if isinstance(out_type, TupleType) else [out_type]
    assert len(outs) == len(fields)
    for t, f in zip(outs, fields):
        assert tuple(t.shape) == tuple(f.shape) and t.dtype == f.dtype, (t, f)
    func = te.create_prim_func(phs + outs, op_name.replace(".", "_"))
    return func, fields


def run(op_name: str, arrays: list[np.ndarray], **attrs: Any) -> list[np.ndarray]:
    """Run the compute of ``op_name`` in the TIR interpreter; one array per result field."""
    arrays = [np.asarray(x) for x in arrays]
    func, fields = lower(op_name, arrays, **attrs)
    outs = [np.zeros(f.shape, f.dtype) for f in fields]
    tir.evaluate(func, *arrays, *outs)
    return outs


def reference(op_name: str, arrays: list[np.ndarray], **attrs: Any) -> list[np.ndarray]:
    op = get_op(op_name)
    want = op.ref([np.asarray(x) for x in arrays], op.make_attrs(attrs))
    return [np.asarray(w) for w in want] if isinstance(want, tuple) else [np.asarray(want)]


def assert_same(got: list[np.ndarray], want: list[np.ndarray], rtol: float | None = None,
                atol: float | None = None) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype.kind == "f":
            tol = dict(F32_TOL)
            if rtol is not None:
                tol["rtol"] = rtol
            if atol is not None:
                tol["atol"] = atol
            if g.dtype == np.float16:  # at least one float16 ulp
                tol = {k: max(v, 1e-3) for k, v in tol.items()}
            np.testing.assert_allclose(g, w, equal_nan=True, **tol)
        else:
            np.testing.assert_array_equal(g, w)


def check(op_name: str, arrays: list[np.ndarray], rtol: float | None = None, atol: float | None = None,
          **attrs: Any) -> list[np.ndarray]:
    """The compute's result equals the reference's (floats within ``rtol``/``atol``)."""
    got = run(op_name, arrays, **attrs)
    assert_same(got, reference(op_name, arrays, **attrs), rtol, atol)
    return got
