"""``plait run DIR``: run an artifact written by ``plait compile -o DIR`` with the executor that wrote it
(the one whose marker file, e.g. ``graph.json`` or ``vm.json``, the directory holds).

The contract is that of running a model: ``--inputs`` (keyed by the artifact's input names), ``--fill``
and ``--seed`` for the inputs not given, ``--output`` (keyed by its output names), ``--max-memory``.
The artifact is checked as :meth:`plait.executor.graph.artifact.GraphArtifact.load` (``VMExecutable.load``) checks it (every error
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
    from plait.cli.common import refuse_missing
    from plait.executor import executors
    from plait.executor.base import RunOptions
    from plait.relay.input_files import load_inputs
    from plait.relay.io import fill_inputs

    path = args.model
    flags = build_only_flags(args)
    if flags:
        raise UsageError(f"{' and '.join(flags)} cannot be used with '{path}': an exported artifact is already "
                         "built (for the target it was compiled for); give a model file to build it again")
    limit = memory_limit(args)
    owners = [e for e in executors() if e.marker and os.path.exists(os.path.join(path, e.marker))]
    if not os.path.isfile(os.path.join(path, MANIFEST)) and not owners:
        raise PlaitError(f"'{path}' is a directory but not an exported artifact (no {MANIFEST}); run a model file, "
                         "or a directory written by plait compile -o")
    if args.output is not None:
        check_output_file(args.output)
    # the executor whose marker file is there; without one the default executor's checks say what is missing
    executor = owners[0] if owners else executors()[0]
    if args.profile:
        try:
            refuse_missing(executor, "profiles", "--profile")
        except UsageError:
            have = " or ".join(e.title for e in executors() if e.capabilities.profiles)
            raise UsageError(f"--profile needs a {have} artifact; '{path}' is a {executor.title} artifact") from None
    art = executor.load(path, memory_limit=limit)
    check_runnable(art, path)
    types = executor.input_types(art)
    module: Any = executor.runner(art, RunOptions(memory_limit=limit, args=args))
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
