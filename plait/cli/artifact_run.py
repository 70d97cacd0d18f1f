"""``plait run DIR``: run an artifact written by ``plait compile -o DIR``: a graph artifact with the graph
executor, a VM artifact (``vm.json``, ``plait compile --executor vm``) with the VM.

The contract is that of running a model: ``--inputs`` (keyed by the artifact's input names), ``--fill``
and ``--seed`` for the inputs not given, ``--output`` (keyed by its output names), ``--max-memory``.
The artifact is checked as :meth:`plait.executor.artifact.GraphArtifact.load` (``VMExecutable.load``) checks it (every error
one line). Flags that choose how to build (``--target``, the placement flags, ``--cache-dir``) are a
usage error: an artifact is already built. **An artifact is code**: loading it runs its library.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from plait.cli.common import UsageError, memory_limit
from plait.errors import PlaitError

MANIFEST = "manifest.json"
GRAPH = "graph.json"
VM = "vm.json"


def build_only_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that only make sense when building a model."""
    return [flag for flag, given in (("--target", args.target is not None), ("--objective", args.objective != "latency"),
                                     ("--weight", args.weight != "0.5"), ("--place", args.place is not None),
                                     ("--cache-dir", args.cache_dir is not None),
                                     ("--executor", getattr(args, "executor", None) is not None),
                                     ("--on", getattr(args, "on", "host") != "host"),
                                     ("--qemu-timeout", getattr(args, "qemu_timeout", None) is not None)) if given]


def run_artifact(args: argparse.Namespace) -> int:
    """Load the artifact in ``args.model`` and run it; returns the exit code."""
    from plait.cli.notes import note_inputs
    from plait.cli.outputs import check_output_file, print_outputs
    from plait.cli.timing import run_timed
    from plait.executor.artifact import GraphArtifact
    from plait.executor.graph import GraphModule
    from plait.relay.input_files import load_inputs
    from plait.relay.io import fill_inputs

    path = args.model
    flags = build_only_flags(args)
    if flags:
        raise UsageError(f"{' and '.join(flags)} cannot be used with '{path}': an exported artifact is already "
                         "built (for the target it was compiled for); give a model file to build it again")
    limit = memory_limit(args)
    if not os.path.isfile(os.path.join(path, MANIFEST)) and not os.path.exists(os.path.join(path, GRAPH)):
        raise PlaitError(f"'{path}' is a directory but not an exported artifact (no {MANIFEST}); run a model file, "
                         "or a directory written by plait compile -o")
    if args.output is not None:
        check_output_file(args.output)
    if os.path.isfile(os.path.join(path, VM)):
        from plait.executor.vm import VirtualMachine
        from plait.executor.vm_exec import VMExecutable

        if args.profile:
            raise UsageError(f"--profile needs a graph artifact; '{path}' is a VM artifact")
        exe = VMExecutable.load(path, memory_limit=limit)
        check_runnable(exe, path)
        types = vm_input_types(exe)
        module: Any = VirtualMachine(exe, memory_limit=limit)
    else:
        art = GraphArtifact.load(path, memory_limit=limit)
        check_runnable(art, path)
        types = input_types(art.graph)
        module = GraphModule(art, memory_limit=limit)
    given = load_inputs(args.inputs, list(types), limit) if args.inputs else {}
    inputs = fill_inputs(types, given, seed=args.seed, memory_limit=limit, fill=args.fill)
    note_inputs(types, given, args.fill, args.seed)
    outs, report_timing = run_timed(args, lambda: module(**inputs), module)  # --repeat/--profile/--json
    return print_outputs(args, module.output_names, outs, report_timing)


def check_runnable(art, path: str) -> None:
    """An artifact built for another device (a Cortex-M core: its library is C source, not a host
    library) cannot run here; say so, and how to simulate it, before any input is made."""
    from plait.runtime.module import CSourceModule

    if any(isinstance(m, CSourceModule) for m in art.lib.walk()):
        raise PlaitError(f"'{path}' was compiled for another device (target '{art.target}'; its library is C source "
                         "for that device), which this machine cannot run; to simulate it here, run the model with "
                         f"plait run MODEL --target '{art.target}'")


def vm_input_types(exe: Any) -> dict:
    """A VM artifact's inputs in order: name -> TensorType (from its registers, checked on load)."""
    from plait.ir.types import TensorType

    regs = {i.func: exe.registers[i.dst[0]] for i in exe.instructions if i.op == "input"}
    return {n: TensorType(tuple(regs[n]["shape"]), regs[n]["dtype"]) for n in exe.input_names}


def input_types(graph: dict) -> dict:
    """The artifact's inputs in order: name -> TensorType (from the graph's entries, checked on load)."""
    from plait.ir.types import TensorType

    nodes, entries = graph["nodes"], graph["entries"]
    out = {}
    for i in graph["inputs"]:
        e = entries[nodes[i]["outputs"][0]]
        out[nodes[i]["name"]] = TensorType(tuple(e["shape"]), e["dtype"])
    return out
