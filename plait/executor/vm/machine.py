"""The VM executor's runtime: :class:`VirtualMachine` interprets a :class:`VMExecutable`'s bytecode.

    exe = plait.build(mod, target="c", executor="vm")
    print(exe.text())                    # the bytecode (instruction set: plait.executor.vm.executable)
    vm = VirtualMachine(exe)
    y, = vm(x=np.ones((1, 256), np.float32))

Creating a VM checks the byte total against the memory limit, then runs the *setup* section once
(``input``, ``const``, ``alloc_storage``, ``alloc_tensor``, ``view`` of planned registers: every static
register becomes a numpy view of its bytes) and binds every top-level ``call`` whose registers are all
planned to its runtime function with its pointers, found as the Graph executor finds it (the raw
function of a compiled module; a Python function of a :class:`~plait.runtime.PyModule` with numpy
views). A run resets the arena (:class:`Arena`) and interprets the run section: the static calls are a
tight loop over prebound calls; ``if`` and ``loop`` run their blocks, whose registers are allocated at
run time (``alloc_tensor_dyn``) and whose calls take their buffers when they run. A loop's iteration
runs its body block, keeps its state and scan elements (copies) and releases the arena to where it
was before the iteration. A ``call`` of a function with run-time shapes (``exe.shaped``: size variables,
a data-dependent output) binds its size variables from its inputs' shapes, takes its outputs and
symbolic workspaces from the arena and passes the size variables after the buffers
(:func:`plait.executor.vm.shapes.shaped_call`).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

import numpy as np

from plait.executor.errors import ExecutorError
from plait.executor.graph.module import BUFFER_ALIGN, _find_function, _view, aligned_buffer
from plait.executor.inputs import bind_inputs
from plait.executor.vm.insn import Instruction, walk
from plait.executor.vm.shapes import scan_shape, shaped_call, view_shape
from plait.ir.status import describe as describe_status
from plait.ir.types import DTYPES
from plait.limits import check_bytes
from plait.lowering.shape_func import ShapeError
from plait.tir.expr import Var
from plait.memory.plan import entry_bytes
from plait.runtime.module import RuntimeError_

_CALL, _COPY, _DYN, _RET = 0, 1, 2, 3


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` when it is C-contiguous, else a contiguous copy (keeping a 0-d array 0-d, unlike
    ``np.ascontiguousarray``)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


class Arena:
    """Per-run memory for the registers made at run time: aligned bump allocation in chunks;
    :meth:`reset` at each run (the chunks merge into one of their total size), :meth:`mark` /
    :meth:`release` around a loop iteration."""

    def __init__(self, align: int = BUFFER_ALIGN):
        self.align = align
        self.chunks: list[np.ndarray] = [aligned_buffer(1 << 16, align)]
        self.k, self.top = 0, 0

    def alloc(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A tensor of ``shape`` and ``dtype`` (contents undefined) aligned to the arena's alignment."""
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        size = -(-n // self.align) * self.align
        if self.top + size > len(self.chunks[self.k]):
            self.k += 1
            if self.k == len(self.chunks):
                self.chunks.append(aligned_buffer(max(size, 2 * len(self.chunks[-1])), self.align))
            elif len(self.chunks[self.k]) < size:
                self.chunks[self.k] = aligned_buffer(size, self.align)
            self.top = 0
        buf = self.chunks[self.k][self.top:self.top + n]
        self.top += size
        return buf.view(dtype).reshape(shape)

    def mark(self) -> tuple[int, int]:
        return self.k, self.top

    def release(self, mark: tuple[int, int]) -> None:
        self.k, self.top = mark

    def reset(self) -> None:
        if len(self.chunks) > 1:
            self.chunks = [aligned_buffer(sum(len(c) for c in self.chunks), self.align)]
        self.k, self.top = 0, 0


class VirtualMachine:
    """Runs a :class:`VMExecutable`. ``vm(*args, **inputs) -> list[np.ndarray]`` (inputs by position
    or name; copies of the outputs), like :class:`~plait.executor.graph.module.GraphModule`; one run at a
    time per instance (``vm.lock``)."""

    executor = "vm"

    def __init__(self, exe: Any, *, memory_limit: int | str | None = None):
        # a VMExecutable (plait.executor.vm.executable, which imports this module for VMExecutable.module)
        if not (isinstance(getattr(exe, "instructions", None), (list, tuple)) and hasattr(exe, "registers")):
            raise ExecutorError(f"VirtualMachine needs a VMExecutable (from plait.build(..., executor='vm')), "
                                f"got {type(exe).__name__}")
        self.exe = exe
        self.lock = threading.RLock()
        regs = exe.registers
        dyn = {i for i, g in enumerate(regs) if g.get("dyn")}
        own = sum(p["bytes"] for p in exe.pools) + sum(
            entry_bytes(regs[i.dst[0]]) for i in exe.instructions if i.op in ("input", "const") and i.dst[0] not in dyn)
        check_bytes(own, "the VM's buffers", memory_limit)
        pools = [aligned_buffer(p["bytes"], max(BUFFER_ALIGN, p["align"])) for p in exe.pools]
        storage: dict[int, np.ndarray] = {}
        r: list[Any] = [None] * len(regs)
        self._dtypes = [DTYPES[g["dtype"]] for g in regs]
        self._inputs: dict[str, int] = {}
        self._funcs: dict[str, tuple[Callable, bool]] = {}
        for ins in walk(exe.instructions):
            if ins.op == "call" and ins.func not in self._funcs:
                n, scalars = len(ins.src) + len(ins.dst) + len(ins.ws), 0
                f = exe.shaped.get(ins.func)
                if f is not None:  # its outputs and symbolic workspaces, then its size variables
                    scalars = sum(1 for p in f.params if isinstance(p, Var))
                    n = len(f.params) - scalars
                self._funcs[ins.func] = _find_function(exe.lib, ins.func, n, f"instruction '{exe.line(ins)}'",
                                                       scalars)
        code: list[tuple[int, Any, tuple, Instruction]] = []
        for ins in exe.instructions:
            op = ins.op
            if op == "input":
                self._inputs[ins.func] = ins.dst[0]
                if ins.dst[0] not in dyn:
                    r[ins.dst[0]] = _view(aligned_buffer(entry_bytes(regs[ins.dst[0]])), regs[ins.dst[0]])
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
            elif op == "view" and ins.dst[0] not in dyn:
                r[ins.dst[0]] = _view(r[ins.src[0]].reshape(-1).view(np.uint8), regs[ins.dst[0]])
            elif op == "call" and not any(i in dyn for i in (*ins.src, *ins.dst, *ins.ws)):
                fn, raw = self._funcs[ins.func]
                bufs = [r[i] for i in (*ins.src, *ins.dst, *ins.ws)]
                args = tuple(ctypes.c_void_p(b.ctypes.data) for b in bufs) if raw else tuple(bufs)
                code.append((_CALL, fn, args, ins))
            elif op == "copy" and ins.dst[0] not in dyn and ins.src[0] not in dyn:
                code.append((_COPY, r[ins.dst[0]], (r[ins.src[0]],), ins))
            elif op == "ret":
                code.append((_RET, None, ins.src, ins))
            else:  # control flow and dynamic registers: interpreted at run time
                code.append((_DYN, None, (), ins))
        self._code = code
        self._dyn = dyn
        self._r, self._pools = r, pools  # the raw calls hold only pointers: keep the buffers alive
        self.arena = Arena()
        self.input_names: list[str] = list(exe.input_names)
        self.output_names: list[str] = list(exe.output_names)
        self._shapes = {n: tuple(regs[i]["shape"]) for n, i in self._inputs.items()}

    def set_input(self, name: str, value: Any) -> None:
        """Copy ``value`` into input ``name``; its dtype must match, its shape fit the input's type."""
        i = self._inputs[name]
        a = np.asarray(value)
        if a.dtype.newbyteorder("=") != self._dtypes[i]:
            raise ExecutorError(f"input '{name}': expected dtype {self._dtypes[i]}, got {a.dtype}")
        if i in self._dyn:
            self._r[i] = np.array(a, dtype=self._dtypes[i], order="C")
            return
        view = self._r[i]
        if a.shape != view.shape:
            raise ExecutorError(f"input '{name}': expected shape {tuple(view.shape)}, got {a.shape}")
        np.copyto(view, a)

    def run(self) -> list[np.ndarray]:
        """Interpret the run section on the current inputs; returns copies of the outputs."""
        with self.lock:
            self.arena.reset()
            r = self._r
            for op, fn, args, ins in self._code:
                if op == _CALL:
                    status = fn(*args)
                    if status:
                        self._failed(ins, status)
                elif op == _COPY:
                    np.copyto(fn, args[0])
                elif op == _DYN:
                    self._step(ins, r)
                else:
                    return [np.array(r[i]) for i in args]
        raise ExecutorError("the VM program has no 'ret'")  # pragma: no cover

    def _failed(self, ins: Instruction, status: Any) -> None:
        raise RuntimeError_(f"VM instruction '{self.exe.line(ins)}': runtime function '{ins.func}' "
                            f"{describe_status(status)}")

    # -- the interpreter of blocks ----------------------------------------------------------------
    def _block(self, code: tuple[Instruction, ...], r: list[Any]) -> tuple[int, ...]:
        """Run a block; the registers it yields."""
        for ins in code:
            if ins.op == "yield":
                return ins.src
            self._step(ins, r)
        return ()  # pragma: no cover - codegen ends every block with 'yield'

    def _step(self, ins: Instruction, r: list[Any]) -> None:
        op = ins.op
        if op == "alloc_tensor_dyn":
            d = ins.dst[0]
            r[d] = self.arena.alloc(tuple(self.exe.registers[d]["shape"]), self._dtypes[d])
        elif op == "call" and ins.func in self.exe.shaped:
            fn, raw = self._funcs[ins.func]
            srcs = [_contiguous(r[i]) for i in ins.src]
            try:
                status, outs = shaped_call(self.exe.shaped[ins.func], fn, raw, srcs, [r[i] for i in ins.ws],
                                           self.arena.alloc)
            except ShapeError as exc:  # the inputs' shapes do not fit the function's (before it is called)
                raise RuntimeError_(f"VM instruction '{self.exe.line(ins)}': {exc}") from None
            if status:
                self._failed(ins, status)
            self._results(ins.dst, outs, r)
        elif op == "call":
            fn, raw = self._funcs[ins.func]
            bufs = [r[i] for i in (*ins.src, *ins.dst, *ins.ws)]
            status = fn(*(ctypes.c_void_p(b.ctypes.data) for b in bufs)) if raw else fn(*bufs)
            if status:
                self._failed(ins, status)
        elif op == "copy":
            np.copyto(r[ins.dst[0]], r[ins.src[0]])
        elif op == "view":
            src = _contiguous(r[ins.src[0]])
            regs = self.exe.registers
            r[ins.dst[0]] = src.reshape(view_shape(regs[ins.dst[0]]["shape"], regs[ins.src[0]]["shape"], src.shape,
                                                   f"instruction '{self.exe.line(ins)}'"))
        elif op == "if":
            taken = ins.blocks[0] if bool(r[ins.src[0]].reshape(-1)[0]) else ins.blocks[1]
            self._results(ins.dst, [r[i] for i in self._block(taken, r)], r)
        elif op == "loop":
            self._loop(ins, r)
        else:  # pragma: no cover - the loader checks the ops
            raise ExecutorError(f"unknown VM instruction '{op}'")

    def _results(self, dst: tuple[int, ...], values: list[np.ndarray], r: list[Any]) -> None:
        """Give ``values`` to the output registers ``dst``: copied into planned ones, else taken as they are."""
        for d, v in zip(dst, values):
            if d in self._dyn:
                r[d] = v
            else:
                np.copyto(r[d], v)

    def _loop(self, ins: Instruction, r: list[Any]) -> None:
        t, c = ins.src[0], ins.src[1]
        trip = int(r[t].reshape(-1)[0]) if t >= 0 else None
        cond = bool(r[c].reshape(-1)[0]) if c >= 0 else True
        state = [np.array(r[i]) for i in ins.src[2:]]
        n, k = len(state), ins.attrs["num_scan"]
        it, cin, params = ins.ws[0], ins.ws[1], ins.ws[2:]
        scans: list[list[np.ndarray]] = [[] for _ in range(k)]
        body = ins.blocks[0]
        arena = self.arena
        i = 0
        while cond and (trip is None or i < trip):
            mark = arena.mark()
            r[it], r[cin] = np.array(i, np.int64), np.array(cond)
            for p, v in zip(params, state):
                r[p] = v
            ys = self._block(body, r)
            if c >= 0:
                cond = bool(r[ys[0]].reshape(-1)[0])
            state = [np.array(r[y]) for y in ys[1:1 + n]]
            for j in range(k):
                scans[j].append(np.array(r[ys[1 + n + j]]))
            arena.release(mark)
            i += 1
        outs: list[np.ndarray] = list(state)
        regs = self.exe.registers
        for j, d in enumerate(ins.dst[n:]):
            shape = scan_shape(regs[d]["shape"][1:], i)
            buf = arena.alloc(shape, self._dtypes[d])
            if scans[j]:
                np.stack(scans[j], out=buf)
            outs.append(buf)
        self._results(ins.dst, outs, r)

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Set every input (by position or by name), run, return copies of all outputs."""
        given = bind_inputs(self.input_names, args, inputs, ExecutorError, self._shapes)
        with self.lock:
            for k, v in given.items():
                self.set_input(k, v)
            return self.run()

    def __repr__(self) -> str:
        return (f"VirtualMachine({sum(1 for i in walk(self.exe.instructions) if i.op == 'call')} calls, inputs: "
                f"{', '.join(self.input_names)}; outputs: {', '.join(self.output_names)})")


__all__ = ["Arena", "VirtualMachine"]
