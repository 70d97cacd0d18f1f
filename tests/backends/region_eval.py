"""Test helpers for relay_to_tir hooks: build a partitioned module by hand (main calling one region
function placed on a piece) and run a rewritten region function with compiled PrimFuncs."""

from __future__ import annotations

import numpy as np

from plait.ir.types import TensorType, TupleType
from plait.relay import infer_type
from plait.relay.expr import Call, Constant, Function, GlobalVar, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order
from plait.tir import PrimFunc


def partitioned(region_body_fn, arg_types, piece: str, region: str | None = None, extra=None) -> IRModule:
    """``main(x0, x1...) = @<region>(x0, x1...)`` where the region function's body is
    ``region_body_fn(params)`` and its attrs say it runs on ``piece``."""
    region = region or f"{piece}_0"
    params = tuple(Var(f"x{k}", t) for k, t in enumerate(arg_types))
    f = Function(params, region_body_fn(params), None, {"piece": piece, "region": 1, "global_symbol": region})
    mp = tuple(Var(f"m{k}", t) for k, t in enumerate(arg_types))
    funcs = {"main": Function(mp, Call(GlobalVar(region), mp)), region: f, **(extra or {})}
    return infer_type(IRModule(funcs))


def tensor(shape, dtype="float32") -> TensorType:
    return TensorType(tuple(shape), dtype)


def prim_funcs(mod: IRModule) -> dict[str, PrimFunc]:
    return {k: f for k, f in mod.items() if isinstance(f, PrimFunc)}


def run_region(mod: IRModule, gname: str, lib, inputs):
    """Evaluate the rewritten region function ``gname`` of ``mod``: its PrimFunc calls run from ``lib``."""
    fn = mod[gname]
    env = dict(zip(fn.params, inputs))
    for node in post_order(fn.body):
        if node in env:
            continue
        if isinstance(node, Constant):
            env[node] = np.asarray(node.data)
        elif isinstance(node, Tuple):
            env[node] = tuple(env[f] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            env[node] = env[node.tuple_value][node.index]
        elif isinstance(node, GlobalVar):
            continue
        elif isinstance(node, Call):
            assert isinstance(node.op, GlobalVar), f"region still calls {node.op_name}"
            pf = mod[node.op.name]
            assert isinstance(pf, PrimFunc)
            t = node.checked_type
            leaves = t.fields if isinstance(t, TupleType) else (t,)
            outs = [np.zeros(tuple(x.shape), x.dtype) for x in leaves]
            args = [np.ascontiguousarray(env[a]) for a in node.args]
            lib[pf.name](*args, *outs)
            env[node] = tuple(outs) if isinstance(t, TupleType) else outs[0]
        else:
            raise AssertionError(f"unexpected {node!r} in a rewritten region")
    return env[fn.body]
