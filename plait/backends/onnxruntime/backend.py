"""The ``onnxruntime`` target kind: functions placed on it are exported back to ONNX and run by an
ONNX Runtime session (external code generation through the ``relay_to_runtime`` hook).

    art = plait.build(mod, "host: c; ort: onnxruntime -threads=1", place="*=ort")

Hooks:

- ``relay_to_runtime(func, target)``: :func:`plait.frontend.onnx_export.to_onnx` of the region
  function, then an :class:`~plait.backends.onnxruntime.module.OrtModule` (one InferenceSession on the CPU
  execution provider) exporting one function named ``func.attrs["global_symbol"]``;
- ``supports(call)``: the call is exportable, and ONNX Runtime's CPU provider has kernels for the
  node(s) it exports to, with these dtypes. Decided by ORT itself: a one-call model (every argument
  a graph input of the call's argument type) is loaded into a session with graph optimizations off;
  a missing kernel or a rejected model means "no". Answers are cached per (operator, attributes,
  argument types, opset); an answer takes about 2 ms. :func:`explain_support` gives the
  reason.

Options: ``-threads`` (intra-op threads, default 1), ``-opt-level`` (ORT graph optimization level
0..3 = disable/basic/extended/all, default 3), ``-opset`` (ONNX opset of the exported models). The
kind cannot host the executor: pair it with a host piece (``host: c; ort: onnxruntime``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.errors import PlaitError
from plait.frontend.onnx_export import DEFAULT_OPSET, MIN_OPSET, exportable, to_onnx
from plait.ir.op import Op
from plait.ir.types import TensorType, tensor_leaves
from plait.relay.expr import Call, Constant, Function, Var
from plait.backends.onnxruntime.module import OrtModule, import_onnxruntime, session_options
from plait.runtime.formats import ModuleFormat
from plait.target.backend import Backend, option

def _options(target: Any) -> tuple[int, int, int]:
    o = target.options
    threads, opset = o["threads"], o["opset"]
    if threads < 1:
        raise PlaitError(f"target kind 'onnxruntime': -threads must be >= 1, got {threads}")
    if opset < MIN_OPSET:
        raise PlaitError(f"target kind 'onnxruntime': -opset must be >= {MIN_OPSET}, got {opset}")
    return threads, o["opt-level"], opset


def relay_to_runtime(func: Function, target: Any) -> OrtModule:
    """Export ``func`` to ONNX and wrap it in a session; the module's function is the global symbol."""
    import_onnxruntime()
    threads, opt_level, opset = _options(target)
    symbol = func.attrs.get("global_symbol") if func.attrs else None
    if not symbol:
        raise PlaitError("target kind 'onnxruntime': the function has no 'global_symbol' attribute")
    model = to_onnx(func, name=str(symbol), opset=opset)
    return OrtModule(str(symbol), model.SerializeToString(), threads=threads, opt_level=opt_level)


# ---- capability ----------------------------------------------------------------------------------

_CACHE: dict[tuple, tuple[bool, str]] = {}


def _signature(call: Call, opset: int) -> tuple:
    return (call.op.name, call.attrs, tuple(a.checked_type for a in call.args), opset)  # type: ignore[union-attr]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _probe(call: Call, opset: int) -> tuple[bool, str]:
    """Load the one-call model into a session: (True, "") if ORT has kernels for it."""
    ort = import_onnxruntime()
    params = [Var(f"in{i}", a.checked_type) for i, a in enumerate(call.args)]
    one = Call(call.op, tuple(params), call.attrs, {"name": call.op_name})
    func = Function(tuple(params), one)
    try:
        model = to_onnx(func, name="probe", opset=opset)
    except PlaitError as exc:
        return False, str(exc)
    try:
        ort.InferenceSession(model.SerializeToString(), session_options(ort, 1, 0, 4),
                             providers=["CPUExecutionProvider"])
    except Exception as exc:
        return False, f"onnxruntime: {_first_line(exc)}"
    return True, ""


# plait's integer products that ONNX Runtime computes with its u8 x s8 matrix kernels (MatMulInteger)
_U8S8_PRODUCTS = ("qnn.dense", "qnn.matmul")


def _machine_dependent(call: Call, opt_level: int) -> str:
    """Why ONNX Runtime's result of ``call`` would depend on the CPU it runs on, else "". Its u8 x s8
    MatMulInteger adds pairs of products in 16 bits, saturating, on x86-64 without VNNI (AVX2, AVX-512 without
    VNNI); only a constant int8 weight, folded and prepacked by its optimizer (``-opt-level`` >= 1) with the
    exact-sums option the sessions set (:func:`~plait.backends.onnxruntime.module.exact_session`), is exact there.
    Such calls stay off the kind, so a region gives the same integers on every machine."""
    if call.op.name not in _U8S8_PRODUCTS:  # type: ignore[union-attr]
        return ""
    dtypes = [getattr(a.checked_type, "dtype", None) for a in call.args[:2]]
    if sorted(map(str, dtypes)) != ["int8", "uint8"]:
        return ""
    if dtypes[1] == "int8" and isinstance(call.args[1], Constant) and opt_level >= 1:
        return ""
    return ("a uint8 x int8 product whose int8 operand is not a constant weight (or -opt-level=0): ONNX "
            "Runtime adds its pairs of products in 16 bits, saturating, on x86-64 without VNNI")


def _has_tensor_types(call: Call) -> bool:
    return all(e.has_type and tensor_leaves(e.checked_type) is not None for e in (*call.args, call))


def explain_support(call: Call, target: Any = None) -> tuple[bool, str]:
    """(can the onnxruntime kind run ``call``, why not)."""
    opset = _options(target)[2] if target is not None else DEFAULT_OPSET
    if not isinstance(call.op, Op):
        return False, f"'{call.op_name}' is not an operator call"
    if not _has_tensor_types(call):
        from plait.relay.infer import infer_expr

        try:
            infer_expr(call)
        except PlaitError as exc:
            return False, f"the call does not type-check: {exc}"
    inexact = _machine_dependent(call, target.options["opt-level"] if target is not None else 3)
    if inexact:
        return False, inexact
    key = _signature(call, opset)
    if key not in _CACHE:
        ok, reason = exportable(call, opset)
        _CACHE[key] = _probe(call, opset) if ok else (False, f"no ONNX export: {reason}")
    return _CACHE[key]


def supports(call: Call, target: Any) -> tuple[bool, str]:
    """(can ONNX Runtime run ``call``, why not): placement and ``plait explain`` show the reason."""
    ok, why = explain_support(call, target)
    return ok, why or "exportable, and ONNX Runtime's CPU provider has a kernel"


# ---- cost ----------------------------------------------------------------------------------------

_COSTS: dict[tuple, float | None] = {}
MEASURE_MIN_S, MEASURE_MIN_RUNS, MEASURE_MAX_RUNS = 2e-3, 5, 200


def _inputs_for(types: list[TensorType], rng: Any) -> list[Any] | None:
    import numpy as np

    out = []
    for t in types:
        if not t.is_static:
            return None
        dt = np.dtype(t.dtype)
        if dt.kind == "f":
            out.append(rng.uniform(0.5, 1.5, t.shape).astype(dt))  # log, sqrt, division: all defined
        elif dt.kind == "b":
            out.append(np.ones(t.shape, dt))
        else:
            out.append(np.ones(t.shape, dt))  # index 1 and divisor 1 (a 0 index/divisor could be invalid)
    return out


def _time(fn: Any, args: list) -> float:
    """Median seconds of ``fn(*args)`` over at least MEASURE_MIN_RUNS runs and MEASURE_MIN_S."""
    import time

    fn(*args)
    fn(*args)
    times: list[float] = []
    while len(times) < MEASURE_MAX_RUNS and (len(times) < MEASURE_MIN_RUNS or sum(times) < MEASURE_MIN_S):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def _session_fn(func: Function, threads: int, opt_level: int, opset: int) -> Any:
    model = to_onnx(func, name="cost", opset=opset)
    return OrtModule("cost", model.SerializeToString(), threads=threads, opt_level=opt_level, log_severity=4)["cost"]


def _measure(call: Call, threads: int, opt_level: int, opset: int) -> float | None:
    """Median seconds of the one-call model on ONNX Runtime, the ~10 us of a session call included:
    each region placed on the kind pays it once, so small calls cost what moving them to ORT does."""
    import numpy as np

    from plait.frontend.onnx_export import call_function

    func = call_function(call)
    arg_types = [p.checked_type for p in func.params]
    out_types = tensor_leaves(call.checked_type)
    if not all(isinstance(t, TensorType) for t in arg_types) or out_types is None:
        return None
    rng = np.random.default_rng(0)
    ins = _inputs_for(arg_types, rng)  # type: ignore[arg-type]
    outs = _inputs_for(out_types, rng)
    if ins is None or outs is None:
        return None
    try:
        return _time(_session_fn(func, threads, opt_level, opset), [*ins, *outs])
    except PlaitError:
        return None  # e.g. index 1 out of range for a dimension of 1: no measurement, no estimate


def cost(call: Any, target: Any) -> float | None:
    """With ``-measure-cost``: the call's measured seconds on ONNX Runtime (cached per signature and
    session options); otherwise None (the placement cost model estimates it)."""
    if not isinstance(call, Call) or not target.options["measure-cost"]:
        return None
    if not explain_support(call, target)[0]:
        return None
    threads, opt_level, opset = _options(target)
    key = (*_signature(call, opset), threads, opt_level)
    if key not in _COSTS:
        _COSTS[key] = _measure(call, threads, opt_level, opset)
    return _COSTS[key]




@dataclass(frozen=True)
class OrtOptions:
    """Options of the ``onnxruntime`` kind."""

    threads: int = option(1, "intra-op threads of each session")
    opt_level: int = option(3, "graph optimization level: 0 disable, 1 basic, 2 extended, 3 all", choices=(0, 1, 2, 3))
    opset: int = option(DEFAULT_OPSET, f"ONNX opset of the exported models (>= {MIN_OPSET})")
    measure_cost: bool = option(False, "the 'cost' hook times each call on ONNX Runtime (placement by "
                                       "measurement; timings vary from run to run)")


def _save_onnx(m: OrtModule, path: Any) -> list[str]:
    m.save(path)
    return []


def _load_onnx(data: bytes, path: Any, entry: Any, sigs: Any) -> OrtModule:
    """An ONNX Runtime region again: a session on its ONNX model."""
    return OrtModule(entry["symbol"], data, threads=entry["threads"], opt_level=entry["opt_level"])


#: an OrtModule in an artifact: its ONNX model (``lib_<k>.onnx``) and what makes the session again
ONNX_FORMAT = ModuleFormat(".onnx", OrtModule, save=_save_onnx, load=_load_onnx,
                           fields=lambda m: {"symbol": m.symbol, "threads": m.threads, "opt_level": m.opt_level})


class OnnxRuntimeBackend(Backend):
    """Regions exported to ONNX and run by an ONNX Runtime session (external code generation)."""

    name = "onnxruntime"
    Options = OrtOptions
    device_type = "cpu"
    can_host = False
    doc = "ONNX Runtime (CPU execution provider): functions placed here are exported to ONNX and run by a session"
    default_keys = ("onnxruntime", "cpu")
    module_formats = (ONNX_FORMAT,)

    def relay_to_runtime(self, func: Function, target: Any) -> OrtModule:
        return relay_to_runtime(func, target)

    def supports(self, call: Call, target: Any) -> tuple[bool, str]:
        return supports(call, target)

    def cost(self, call: Any, target: Any) -> float | None:
        return cost(call, target)


__all__ = ["OnnxRuntimeBackend", "OrtModule", "cost", "explain_support", "relay_to_runtime", "supports"]
