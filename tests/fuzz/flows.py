"""The legs every model-shaped case runs: the API (import, interpreter, ONNX Runtime, build + graph
executor per target) and the CLI (``plait run`` in process, per target, and sometimes in a subprocess).

    api-interp   plait.load_onnx + inputs + plait.relay.run         -> the reference (or its refusal)
    ort          ONNX Runtime on the same inputs, when the case says its semantics are defined
    api-<t>      plait.build(mod, t) + GraphModule, run twice        -> equal to the reference
    cli-interp   plait run MODEL [--inputs F] --output O.npz         -> equal to the reference
    cli-<t>      the same with --target t
    sub-<t>      cli-<t> through `python3 -m plait.cli` (a sample of the cases)
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .case import Env, Leg, Recorder
from .oracle import Reference, attempt, cli_inprocess, cli_subprocess, compare, judge_cli, ort_outputs


@lru_cache(maxsize=None)
def run_flags() -> frozenset[str]:
    """The option strings ``plait run`` accepts (newer flags such as --cache-dir are used when present)."""
    import argparse

    import plait.cli

    parser = plait.cli.build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return frozenset(o for a in action.choices["run"]._actions for o in a.option_strings)  # noqa: SLF001
    return frozenset()


def cache_flags(env: Env) -> list[str]:
    return ["--cache-dir", str(env.cache_dir)] if "--cache-dir" in run_flags() else []


def build_and_run(mod: Any, target: str, inputs: dict[str, np.ndarray], env: Env) -> tuple[list, list]:
    """Compile ``mod`` for ``target`` and run the graph executor twice on ``inputs`` (a run must not
    change the next one: a tampered plan can overwrite params)."""
    import plait
    from plait.executor.graph.module import GraphModule

    art = plait.build(mod, target=target, config={"cc.cache_dir": str(env.cache_dir)})
    gm = GraphModule(art)
    return gm(**inputs), gm(**inputs)


def judge_twice(name: str, ref: Reference, first: list, second: list) -> Leg:
    leg = ref.judge(name, first)
    if not leg.failed:
        diff = compare(second, first)
        if diff is not None:
            return Leg(name, "differs", f"the second run differs from the first: {diff}")
    return leg


def interpreter_reference(mod: Any, inputs: dict[str, np.ndarray], rec: Recorder, must_refuse: str = "") -> Reference:
    """Run the numpy interpreter (leg ``api-interp``); its result, or its refusal, is the reference.
    ``must_refuse``: why the model is invalid (then any result is 'accepted', a failure)."""
    from plait.relay import run
    from plait.relay.interpreter import flatten_value

    rec.start("api-interp")
    r = attempt(lambda: flatten_value(run(mod, inputs)))
    if must_refuse:
        rec.add(Leg("api-interp", "accepted", f"a result for an invalid model: {must_refuse}") if r.ok else
                Leg("api-interp", r.outcome, r.detail))
        return Reference(None, why=f"the model is invalid: {must_refuse}", strict=True, refused="accepted")
    if r.ok:
        rec.add(Leg("api-interp", "reference"))
        return Reference(r.value)
    rec.add(Leg("api-interp", r.outcome, r.detail))
    if r.outcome == "error":  # the interpreter refuses: every other path must refuse too
        return Reference(None, why=f"refuses: {r.detail}", strict=True)
    return Reference(None, why=f"failed: {r.detail}", strict=False)


def check_with_ort(model: bytes, inputs: dict[str, np.ndarray], ref: Reference, rec: Recorder) -> Reference:
    """Leg ``ort``: ONNX Runtime on the same model and inputs. It checks the interpreter's result where
    both are finite (where NaN/inf go through Softmax or ReduceMax, ONNX leaves the result open and ORT
    differs from numpy), and is the reference when the interpreter has none (refused, or failed)."""
    rec.start("ort")
    got = ort_outputs(model, inputs)
    if got is None:
        rec.add(Leg("ort", "unverified", "ONNX Runtime refuses the model or the inputs"))
        return ref
    if ref.outputs is None:
        rec.add(Leg("ort", "unverified", f"ONNX Runtime runs it; the interpreter {ref.why}"))
        return Reference(got)
    diff = compare(ref.outputs, got, finite_only=True)
    rec.add(Leg("ort", "equal") if diff is None else Leg("ort", "differs", f"interpreter vs ONNX Runtime: {diff}"))
    return ref


def model_legs(model_path: Path, env: Env, rec: Recorder, *, api_inputs: Callable[[Any], dict[str, np.ndarray] | None],
               inputs_file: Path | None, ort_ref: bool, out_dir: Path, must_refuse: str = "",
               load: Callable[[Path], Any] | None = None) -> None:
    """Every leg of a model case. ``api_inputs(mod)`` gives the inputs the API legs use (those the CLI
    reads from ``inputs_file``, or generates when there is none); None when the inputs file cannot be
    read at all (then there are no API legs, and the CLI must refuse). ``must_refuse``: why the model is
    invalid, when the issue says plait must refuse it. ``load``: how the API reads the model (default
    ``plait.load_onnx``; the CLI recognizes the format by content)."""
    import plait

    imported = attempt(lambda: load(model_path) if load else plait.load_onnx(str(model_path)))
    ref = Reference(None, why=f"the model is invalid: {must_refuse}" if must_refuse else "the model does not import",
                    strict=True, refused="accepted" if must_refuse else "unchecked")
    inputs = None
    if not imported.ok:
        for name in ("api-interp", *(f"api-{t}" for t in env.targets)):
            rec.add(Leg(name, imported.outcome, imported.detail))
    else:
        mod = imported.value
        given = attempt(lambda: api_inputs(mod))
        if given.ok and given.value is None:
            ref = Reference(None, why="numpy cannot read the inputs file", strict=True)
        elif not given.ok:
            for name in ("api-interp", *(f"api-{t}" for t in env.targets)):
                rec.add(Leg(name, given.outcome, f"inputs: {given.detail}"))
            ref = Reference(None, why=f"refuses the inputs: {given.detail}", strict=given.outcome == "error")
        else:
            inputs = given.value
            ref = interpreter_reference(mod, inputs, rec, must_refuse)
            if ort_ref and not must_refuse:
                ref = check_with_ort(model_path.read_bytes(), inputs, ref, rec)
            for t in env.targets:
                name = f"api-{t}"
                rec.start(name)
                r = attempt(lambda t=t: build_and_run(mod, t, inputs, env))
                rec.add(judge_twice(name, ref, *r.value) if r.ok else Leg(name, r.outcome, r.detail))
    base = ["run", str(model_path), *(["--inputs", str(inputs_file)] if inputs_file is not None else [])]
    for t in (None, *env.targets):
        name = f"cli-{t or 'interp'}"
        out = out_dir / f"{name}.npz"
        argv = [*base, "--output", str(out), *(["--target", t, *cache_flags(env)] if t else [])]
        rec.start(name)
        rec.add(judge_cli(name, cli_inprocess(argv), out, ref))
    if env.subprocess:
        t = env.targets[0] if env.targets else None
        name = f"sub-{t or 'interp'}"
        out = out_dir / f"{name}.npz"
        argv = [*base, "--output", str(out), *(["--target", t, *cache_flags(env)] if t else [])]
        rec.start(name)
        rec.add(judge_cli(name, cli_subprocess(argv, env), out, ref))
