"""Running an AOT artifact on this machine: its C compiled with the host compiler, called through ctypes.

    m = AotModule(art)            # compiles every file of src/ (cached by content), links a shared library
    y, = m(x=x)                   # or m.set_input("x", x); m.run(); m.get_output(0)

Each source file is compiled to an object with the flags of its piece for this machine
(``host_flags`` of the piece's C toolchain, :meth:`plait.target.Backend.c_toolchain`: what the Graph build uses, plus ``-fPIC``), so the
operators compute exactly what the Graph executor's library computes; the objects are linked into one
shared library whose ``plait_<name>_run`` (static pools) is called. Headers are inlined into the text
given to the compiler, so the compile cache (``cc.cache_dir``) is keyed by everything compiled.
Inputs and outputs live in 64-byte aligned buffers, like the Graph executor's.
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any

import numpy as np

from plait.errors import PlaitError
from plait.executor.aot.artifact import AotArtifact
from plait.executor.graph.module import aligned_buffer
from plait.ir.types import DTYPES
from plait.runtime.cc import compile_source

_INCLUDE = re.compile(r'^#include "([^"]+)"$', re.M)


class AotRunError(PlaitError):
    """Running an AOT artifact on this machine failed (bad input, a non-zero status)."""


def _inline(text: str, files: dict[str, str]) -> str:
    """``text`` with the artifact's own ``#include "..."`` replaced by the header's text."""
    def sub(m: re.Match) -> str:
        for d in ("include", "src"):
            if f"{d}/{m.group(1)}" in files:
                return _inline(files[f"{d}/{m.group(1)}"], files)
        return m.group(0)

    return _INCLUDE.sub(sub, text)


def build_library(art: AotArtifact) -> str:
    """Compile the artifact's sources for this machine and link them; the shared library's path."""
    from plait.runtime.cc import LINK_SOURCE

    objects = []
    for s in art.metadata["sources"]:
        text = _inline(art.files[s["file"]], art.files)
        path = compile_source(text, name=f"{art.name}: {s['file']}", flags=[*s["host_flags"], "-fPIC"], shared=False,
                              cache_dir=art.cache_dir)
        objects.append(str(path.resolve()))
    link = [f for f in art.metadata["link_flags"] if f != "-lm"]
    flags = art.metadata["sources"][0]["host_flags"]
    return str(compile_source(LINK_SOURCE, name=art.name, flags=flags, cache_dir=art.cache_dir,
                              link_flags=[*objects, *link]))


class AotModule:
    """Runs an :class:`AotArtifact` on this machine (every piece simulated here; copies are memcpy).

    ``m(*inputs, **inputs) -> list[np.ndarray]`` like ``GraphModule``; ``set_input``, ``run``,
    ``get_output``, ``input_names``, ``output_names``. The static pools make one library instance
    non-re-entrant: calls hold ``m.lock``.
    """

    executor = "aot"

    def __init__(self, art: AotArtifact):
        self.art = art
        md = art.metadata
        self.lock = threading.RLock()
        self._lib = ctypes.CDLL(build_library(art))
        self._run = getattr(self._lib, f"plait_{art.name}_run")
        self._run.restype = ctypes.c_int32
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._inputs = [self._buffer(i) for i in md["inputs"]]
        self._outputs = [self._buffer(o) for o in md["outputs"]]
        self._in_struct = (ctypes.c_void_p * max(1, len(self._inputs)))(*[b.ctypes.data for b in self._inputs])
        self._out_struct = (ctypes.c_void_p * max(1, len(self._outputs)))(*[b.ctypes.data for b in self._outputs])
        self.input_names = [i["name"] for i in md["inputs"]]
        self.output_names = [o["name"] for o in md["outputs"]]

    @staticmethod
    def _buffer(info: dict[str, Any]) -> np.ndarray:
        return aligned_buffer(max(info["bytes"], 1))[:info["bytes"]].view(DTYPES[info["dtype"]]).reshape(info["shape"])

    def _index(self, key: str | int) -> int:
        if isinstance(key, int) and 0 <= key < len(self._inputs):
            return key
        if key in self.input_names:
            return self.input_names.index(key)
        raise AotRunError(f"the model has no input {key!r} (inputs: {', '.join(self.input_names) or 'none'})")

    def set_input(self, key: str | int, value: Any) -> None:
        """Copy ``value`` into the input buffer (exact dtype and shape)."""
        k = self._index(key)
        buf, name = self._inputs[k], self.input_names[k]
        a = np.asarray(value)
        if a.dtype != buf.dtype:
            raise AotRunError(f"input '{name}': expected dtype {buf.dtype}, got {a.dtype}")
        if a.shape != buf.shape:
            raise AotRunError(f"input '{name}': expected shape {list(buf.shape)}, got {list(a.shape)}")
        with self.lock:
            np.copyto(buf, a)

    def run(self) -> None:
        """Call ``plait_<name>_run``; a non-zero status is an AotRunError."""
        with self.lock:
            status = self._run(ctypes.addressof(self._in_struct), ctypes.addressof(self._out_struct))
        if status != 0:
            raise AotRunError(f"plait_{self.art.name}_run returned error status {status}")

    def get_output(self, index: int, copy: bool = True) -> np.ndarray:
        if not 0 <= index < len(self._outputs):
            raise AotRunError(f"output index {index} out of range (the model has {len(self._outputs)} outputs)")
        return self._outputs[index].copy() if copy else self._outputs[index]

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Set every input (positionally or by name), run, return copies of the outputs."""
        from plait.executor.inputs import bind_inputs

        given = bind_inputs(self.input_names, args, inputs, AotRunError)
        with self.lock:
            for k, v in given.items():
                self.set_input(k, v)
            self.run()
            return [o.copy() for o in self._outputs]

    def __repr__(self) -> str:
        return f"AotModule({self.art.name!r}, inputs={self.input_names}, outputs={self.output_names})"


__all__ = ["AotModule", "AotRunError", "build_library"]
