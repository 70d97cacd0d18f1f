"""The VM executor's runtime: :class:`VirtualMachine` interprets a :class:`VMExecutable`'s bytecode.

    exe = plait.build(mod, target="c", executor="vm")
    print(exe.text())                    # the bytecode (plait.executor.vm_codegen)
    vm = VirtualMachine(exe)
    y, = vm(x=np.ones((1, 256), np.float32))

Creating a VM checks the byte total against the memory limit, then runs the *setup* section once
(``input``, ``const``, ``alloc_storage``, ``alloc_tensor``, ``view``: every register becomes a numpy
view of its bytes: an input buffer, a constant, or a slice of a pool at its planned offset) and
binds every ``call`` of the *run* section to its runtime function, found as the Graph executor finds
it (the raw function of a compiled module, called with pointers; a Python function of a
:class:`~plait.runtime.PyModule` with numpy views). A run is the interpreter loop over the run
section: ``call`` (a non-zero status is an error naming the node), ``copy`` (``np.copyto``: the host
simulation of a DMA), ``ret`` (copies of the registers it names).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from plait.executor.errors import ExecutorError
from plait.executor.graph import BUFFER_ALIGN, _find_function, _view, aligned_buffer
from plait.executor.inputs import bind_inputs
from plait.executor.vm_codegen import VMExecutable
from plait.ir.status import describe as describe_status
from plait.limits import check_bytes
from plait.memory.plan import entry_bytes
from plait.runtime.module import RuntimeError_

_CALL, _COPY, _RET = 0, 1, 2


class VirtualMachine:
    """Runs a :class:`VMExecutable`. ``vm(*args, **inputs) -> list[np.ndarray]`` (inputs by position
    or name; copies of the outputs), like :class:`~plait.executor.graph.GraphModule`; one run at a
    time per instance (``vm.lock``)."""

    executor = "vm"

    def __init__(self, exe: VMExecutable, *, memory_limit: int | str | None = None):
        if not isinstance(exe, VMExecutable):
            raise ExecutorError(f"VirtualMachine needs a VMExecutable (from plait.build(..., executor='vm')), "
                                f"got {type(exe).__name__}")
        self.exe = exe
        self.lock = threading.RLock()
        regs = exe.registers
        own = sum(p["bytes"] for p in exe.pools) + sum(
            entry_bytes(regs[i.dst[0]]) for i in exe.instructions if i.op in ("input", "const"))
        check_bytes(own, "the VM's buffers", memory_limit)
        pools = [aligned_buffer(p["bytes"], max(BUFFER_ALIGN, p["align"])) for p in exe.pools]
        storage: dict[int, np.ndarray] = {}
        r: list[np.ndarray | None] = [None] * len(regs)
        self._inputs: dict[str, np.ndarray] = {}
        code: list[tuple[int, Any, tuple, Any]] = []
        for ins in exe.instructions:
            op = ins.op
            if op == "input":
                r[ins.dst[0]] = _view(aligned_buffer(entry_bytes(regs[ins.dst[0]])), regs[ins.dst[0]])
                self._inputs[ins.func] = r[ins.dst[0]]
            elif op == "const":
                buf = _view(aligned_buffer(entry_bytes(regs[ins.dst[0]])), regs[ins.dst[0]])
                np.copyto(buf, exe.constants[ins.func])
                buf.setflags(write=False)
                r[ins.dst[0]] = buf
            elif op == "alloc_storage":
                a = ins.attrs
                storage[ins.dst[0]] = pools[a["pool"]][a["offset"]:a["offset"] + a["bytes"]]
            elif op == "alloc_tensor":
                r[ins.dst[0]] = _view(storage[ins.attrs["storage"]], regs[ins.dst[0]])
            elif op == "view":
                src = r[ins.src[0]]
                r[ins.dst[0]] = _view(src.reshape(-1).view(np.uint8), regs[ins.dst[0]])
            elif op == "call":
                ids = (*ins.src, *ins.dst, *ins.ws)
                fn, raw = _find_function(exe.lib, ins.func, len(ids), f"instruction '{exe.line(ins)}'")
                bufs = [r[i] for i in ids]
                args = tuple(ctypes.c_void_p(b.ctypes.data) for b in bufs) if raw else tuple(bufs)
                code.append((_CALL, fn, args, ins))
            elif op == "copy":
                code.append((_COPY, r[ins.dst[0]], (r[ins.src[0]],), ins))
            elif op == "ret":
                code.append((_RET, None, tuple(r[i] for i in ins.src), ins))
            else:  # pragma: no cover - codegen emits only the ops above
                raise ExecutorError(f"unknown VM instruction '{op}'")
        self._code = code
        self._registers, self._pools = r, pools  # the raw calls hold only pointers: keep the buffers alive
        self.input_names: list[str] = list(exe.input_names)
        self.output_names: list[str] = list(exe.output_names)

    def set_input(self, name: str, value: Any) -> None:
        """Copy ``value`` into input ``name``; dtype and shape must match exactly."""
        view = self._inputs[name]
        a = np.asarray(value)
        if a.dtype.newbyteorder("=") != view.dtype:
            raise ExecutorError(f"input '{name}': expected dtype {view.dtype}, got {a.dtype}")
        if a.shape != view.shape:
            raise ExecutorError(f"input '{name}': expected shape {tuple(view.shape)}, got {a.shape}")
        np.copyto(view, a)

    def run(self) -> list[np.ndarray]:
        """Interpret the run section on the current inputs; returns copies of the outputs."""
        with self.lock:
            for op, fn, args, ins in self._code:
                if op == _CALL:
                    status = fn(*args)
                    if status:
                        raise RuntimeError_(f"VM instruction '{self.exe.line(ins)}': runtime function "
                                            f"'{ins.func}' {describe_status(status)}")
                elif op == _COPY:
                    np.copyto(fn, args[0])
                else:
                    return [a.copy() for a in args]
        raise ExecutorError("the VM program has no 'ret'")  # pragma: no cover

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Set every input (by position or by name), run, return copies of all outputs."""
        given = bind_inputs(self.input_names, args, inputs, ExecutorError)
        with self.lock:
            for k, v in given.items():
                self.set_input(k, v)
            return self.run()

    def __repr__(self) -> str:
        return (f"VirtualMachine({sum(1 for c in self._code if c[0] == _CALL)} calls, inputs: "
                f"{', '.join(self.input_names)}; outputs: {', '.join(self.output_names)})")


__all__ = ["VirtualMachine"]
