"""Export and load of a VM executable: ``vm.json`` (the bytecode), ``params.npz`` (the constants), the
library and ``manifest.json``, written and read by the same code as the Graph artifact
(:func:`plait.executor.files.export_files` / :func:`~plait.executor.files.load_files`: file
hashes, module tree, function signatures, params checked before any data is read).

``vm.json`` (``"format": "plait.vm"``, ``"version": 1``)::

    {"format": "plait.vm", "version": 1, "target": "c",
     "input_names": ["x"], "output_names": ["y"],
     "registers": [{"shape": [1, 8], "dtype": "float32"}, {"shape": ["?", 2], "dtype": "float32", "dyn": true}],
     "pools": [{"name": "workspace_c", "bytes": 160, "align": 16}],
     "memory": {...}, "constants": ["p0", ...],
     "shaped": {"fused_nn_relu": "@prim_func(...) def fused_nn_relu(p0: Buffer((N, 8), float32), ..., N: int64): ..."},
     "instructions": [{"op": "input", "dst": [0], "func": "x"}, ...,
                      {"op": "if", "dst": [6], "src": [1], "blocks": [[...], [...]]}, ...]}

Loading checks the bytecode before anything runs (:func:`check_vm`): known ops, register ids in
range, blocks where ``if`` / ``loop`` need them ending with ``yield``, one ``ret`` at the end, storage
inside its pool, tensors inside their storage, and every ``call`` against the manifest's signature of
its function (the number of buffers; the dtype and shape of every planned register). ``shaped`` holds the
interface (TIR text without the body: parameters and attrs) of every function whose calls have run-time
shapes (size variables, a data-dependent output): what its shape functions read when the loaded VM runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from plait.executor.errors import ExecutorError
from plait.executor.graph_check import _short, is_int
from plait.executor.manifest import VM_FILE
from plait.executor.vm.insn import OPS, Instruction, walk
from plait.ir.types import DTYPES
from plait.lowering.shape_func import output_dtypes as shape_outputs
from plait.memory.plan import entry_bytes

VM_FORMAT, VM_VERSION = "plait.vm", 1


def vm_json(exe: Any) -> str:
    """The bytecode of ``exe`` as ``vm.json`` text (deterministic: one instruction per line)."""
    body = {
        "format": VM_FORMAT, "version": VM_VERSION, "target": exe.target,
        "input_names": exe.input_names, "output_names": exe.output_names, "registers": exe.registers,
        "pools": exe.pools, "memory": exe.memory, "constants": sorted(exe.constants),
        "shaped": {k: shape_interface(f) for k, f in sorted(exe.shaped.items())},
    }
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in body.items()]
    ins = ",\n".join("    " + json.dumps(i.to_json(), sort_keys=True) for i in exe.instructions)
    lines += [f'  "instructions": [\n{ins}\n  ]', "}"]
    return "\n".join(lines) + "\n"


def shape_interface(func: Any) -> str:
    """A PrimFunc with run-time shapes as TIR text without its body: its parameters (buffer shapes as
    expressions of the size variables) and attrs are all its shape functions need."""
    import dataclasses

    from plait.tir.expr import const
    from plait.tir.printer import print_prim_func
    from plait.tir.stmt import Evaluate

    return print_prim_func(dataclasses.replace(func, body=Evaluate(const(0, "int32"))))


def _parse_shaped(vm: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``shaped`` functions of a ``vm.json`` (symbol -> PrimFunc interface), parsed and checked."""
    from plait.errors import PlaitError
    from plait.executor.vm.shapes import needs_run_time_shapes
    from plait.tir.parser import parse_prim_func

    raw = vm.get("shaped", {})
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise _fail(where, "malformed 'shaped' (expected function names mapped to TIR text)")
    out = {}
    for name, text in raw.items():
        try:
            func = parse_prim_func(text, f"shaped function '{_short(name)}'")
        except PlaitError as exc:
            raise _fail(where, f"shaped function '{_short(name)}': {exc}") from None
        if func.attrs.get("global_symbol") != name or not needs_run_time_shapes(func):
            raise _fail(where, f"shaped function '{_short(name)}': not the interface of a function with run-time "
                               "shapes of that name")
        out[name] = func
    return out


def export_vm(exe: Any, path: str | Path) -> Path:
    """Write ``exe`` (a :class:`~plait.executor.vm.executable.VMExecutable`) into the directory ``path`` (see the module docstring)."""
    from plait.executor.files import export_files

    return export_files(Path(path), VM_FILE, vm_json(exe), dict(exe.constants), exe.lib, exe.functions)


def load_vm(path: str | Path, memory_limit: int | str | None, make: Callable[..., Any]) -> Any:
    """Read a VM artifact written by :func:`export_vm`, checking everything first (an ExecutorError
    naming the file otherwise); ``make`` (:class:`~plait.executor.vm.executable.VMExecutable`, whose ``load``
    calls this) builds the executable from the fields read."""
    from plait.executor.files import load_files

    _, vm, params, lib, manifest = load_files(path, "VM", VM_FILE, check_vm, memory_limit)
    shaped = _parse_shaped(vm, f"{Path(path) / VM_FILE}")
    return make([Instruction.from_json(i) for i in vm["instructions"]], vm["registers"], params,
                vm["pools"], lib, input_names=list(vm["input_names"]), output_names=list(vm["output_names"]),
                memory=dict(vm["memory"]), functions={k: {a: b for a, b in v.items() if a != "module"}
                                                      for k, v in manifest["functions"].items()},
                target=str(vm["target"]), shaped=shaped)


def _fail(where: str, msg: str) -> ExecutorError:
    return ExecutorError(f"{where}: {msg}")


def _check_registers(vm: dict[str, Any], where: str) -> list[dict[str, Any]]:
    regs = vm.get("registers")
    if not isinstance(regs, list):
        raise _fail(where, "missing or malformed 'registers'")
    for k, r in enumerate(regs):
        if not (isinstance(r, dict) and r.get("dtype") in DTYPES and isinstance(r.get("shape"), list)
                and all((is_int(d) and d >= 0) or isinstance(d, str) for d in r["shape"])
                and isinstance(r.get("dyn", False), bool)):
            raise _fail(where, f"register {k}: malformed (expected a shape and a known dtype)")
        if not r.get("dyn") and not all(is_int(d) for d in r["shape"]):
            raise _fail(where, f"register {k}: a planned register has a symbolic shape {r['shape']}")
    return regs


def check_vm(vm: Any, where: str, functions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check a parsed ``vm.json`` against itself and the manifest's ``functions``; returns it and the
    graph-like dict its params are read against."""
    if not isinstance(vm, dict) or vm.get("format") != VM_FORMAT:
        raise _fail(where, f"not VM bytecode (expected \"format\": \"{VM_FORMAT}\")")
    if vm.get("version") != VM_VERSION:
        raise _fail(where, f"version {_short(vm.get('version'))} is not supported (this plait reads {VM_VERSION})")
    regs = _check_registers(vm, where)
    for key in ("input_names", "output_names", "constants"):
        if not (isinstance(vm.get(key), list) and all(isinstance(n, str) for n in vm[key])):
            raise _fail(where, f"missing or malformed '{key}'")
    pools = vm.get("pools")
    if not (isinstance(pools, list) and all(isinstance(p, dict) and is_int(p.get("bytes")) and p["bytes"] >= 0
                                            and is_int(p.get("align")) and p["align"] > 0 for p in pools)):
        raise _fail(where, "missing or malformed 'pools'")
    if not isinstance(vm.get("memory"), dict) or not isinstance(vm.get("target"), str):
        raise _fail(where, "missing or malformed 'memory' or 'target'")
    raw = vm.get("instructions")
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "missing or malformed 'instructions'")
    try:
        code = [Instruction.from_json(i) for i in raw]
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
        raise _fail(where, "malformed instruction (expected objects with 'op' and lists of register ids)") from None
    shaped = _parse_shaped(vm, where)
    storage: dict[int, int] = {}
    consts: dict[str, int] = {}
    for k, ins in enumerate(walk(code)):
        _check_instruction(ins, k, regs, pools, storage, functions, where, shaped)
        if ins.op == "const":
            consts[ins.func] = ins.dst[0]
    if code[-1].op != "ret" or sum(1 for i in walk(code) if i.op == "ret") != 1:
        raise _fail(where, "the program must end with its one 'ret'")
    if sorted(consts) != sorted(vm["constants"]):
        raise _fail(where, "the 'const' instructions and 'constants' differ")
    inputs = [i.func for i in code if i.op == "input"]
    if inputs != vm["input_names"]:
        raise _fail(where, "the 'input' instructions and 'input_names' differ")
    names = list(consts)
    pgraph = {"nodes": [{"op": "param", "name": n, "outputs": [consts[n]]} for n in names],
              "entries": regs, "params": list(range(len(names)))}
    return vm, pgraph


def _check_instruction(ins: Instruction, k: int, regs: list[dict[str, Any]], pools: list[dict[str, Any]],
                       storage: dict[int, int], functions: dict[str, Any], where: str,
                       shaped: dict[str, Any]) -> None:
    what = f"instruction {k} ({ins.op})"
    if ins.op not in OPS:
        raise _fail(where, f"instruction {k}: unknown op '{_short(ins.op)}'")
    loose = (0, 1) if ins.op == "loop" else ()  # a loop's absent trip count or condition is -1
    for j, r in enumerate(ins.src):
        if not (is_int(r) and (0 <= r < len(regs) or (j in loose and r == -1))):
            raise _fail(where, f"{what}: register {_short(r)} out of range")
    for r in (ins.dst if ins.op != "alloc_storage" else ()) + ins.ws:
        if not (is_int(r) and 0 <= r < len(regs)):
            raise _fail(where, f"{what}: register {_short(r)} out of range")
    nblocks = {"if": 2, "loop": 1}.get(ins.op, 0)
    if len(ins.blocks) != nblocks or any(not b or b[-1].op != "yield" for b in ins.blocks):
        raise _fail(where, f"{what}: expected {nblocks} block(s), each ending with 'yield'")
    a = ins.attrs
    if ins.op == "alloc_storage":
        if not (is_int(a.get("pool")) and 0 <= a["pool"] < len(pools) and is_int(a.get("offset"))
                and is_int(a.get("bytes")) and a["offset"] >= 0 and a["bytes"] >= 0
                and a["offset"] + a["bytes"] <= pools[a["pool"]]["bytes"]):
            raise _fail(where, f"{what}: storage outside its pool")
        storage[ins.dst[0]] = a["bytes"]
    elif ins.op in ("alloc_tensor", "const") and regs[ins.dst[0]].get("dyn"):
        raise _fail(where, f"{what}: register {ins.dst[0]} is dynamic")
    if ins.op == "alloc_tensor":
        sid = a.get("storage")
        if sid not in storage or entry_bytes(regs[ins.dst[0]]) > storage[sid]:
            raise _fail(where, f"{what}: register {ins.dst[0]} does not fit storage {_short(sid)}")
    if ins.op == "call" and ins.func in shaped:
        f = shaped[ins.func]
        n_out = len(shape_outputs(f)) - (1 if f.attrs.get("data_dependent") else 0)
        if (len(ins.src), len(ins.dst)) != (f.attrs.get("num_inputs"), n_out) or not all(regs[r].get("dyn")
                                                                                      for r in ins.dst):
            raise _fail(where, f"{what}: '{_short(ins.func)}' takes {f.attrs.get('num_inputs')} inputs and gives "
                               f"{n_out} results made when it runs; the call has {len(ins.src)} and {len(ins.dst)}")
    elif ins.op == "call":
        sig = functions.get(ins.func)
        if sig is None:
            raise _fail(where, f"{what}: function '{_short(ins.func)}' is not in the manifest")
        ids = (*ins.src, *ins.dst, *ins.ws)
        if len(ids) != len(sig["args"]):
            raise _fail(where, f"{what}: '{_short(ins.func)}' takes {len(sig['args'])} buffers, the call passes "
                               f"{len(ids)}")
        for j, (r, arg) in enumerate(zip(ids, sig["args"])):
            reg = regs[r]
            if not reg.get("dyn") and (reg["dtype"] != arg["dtype"] or list(reg["shape"]) != list(arg["shape"])):
                raise _fail(where, f"{what}: argument {j} of '{_short(ins.func)}' is {arg['dtype']}{arg['shape']}, "
                                   f"but register {r} is {reg['dtype']}{reg['shape']}")


__all__ = ["VM_FORMAT", "VM_VERSION", "check_vm", "export_vm", "load_vm", "vm_json"]
