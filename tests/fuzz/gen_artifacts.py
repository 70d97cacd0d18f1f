"""Category ``artifacts``: exported artifacts with one thing tampered, loaded and run through the API
(``GraphArtifact.load`` + ``GraphModule``) and handed to the CLI (``plait run DIR``).

The base artifacts are built once per run (:func:`build_bases`): a few small models compiled for
``c`` and exported, each with its reference inputs and outputs (the numpy interpreter's, checked
against ONNX Runtime) kept outside the artifact directory. ``mlp_big`` has the same function names
as ``mlp`` with larger shapes: its ``lib.so`` is the classic wrong library that still links.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from .bases import conv, intops, mlp
from .case import Case, Env, Leg, Recorder
from .flows import judge_twice
from .npz import read_npz, write_npz
from .oracle import Reference, attempt, cli_inprocess, compare, judge_cli, ort_outputs
from .tamper import FAMILIES, tamper

TARGETS = ["mlp", "conv", "intops", "mlp_pieces"]  # the artifacts cases tamper with
# name -> (model, target, placement rules): mlp_pieces runs on two pieces (lib.so imports lib_1.so, modules.json)
BASE_MODELS = {"mlp": (lambda: mlp(0), "c", None),
               "mlp_big": (lambda: mlp(0, n_in=16, hidden=12, n_out=8), "c", None),
               "conv": (lambda: conv(0), "c", None),
               "intops": (lambda: intops(0), "c", None),
               "mlp_pieces": (lambda: mlp(0), "a: c; b: c", "Relu=b,*=a")}


def build_bases(bases: Path, cache: Path) -> None:
    """Compile and export every base model into ``bases/<name>/art``, with ``in.npz`` and ``ref.npz``
    (the interpreter's outputs) next to it. Done once: a ``done`` file marks a finished base."""
    import plait
    from plait.relay import run
    from plait.relay.interpreter import flatten_value

    for name, (make, target, place) in BASE_MODELS.items():
        d = bases / name
        if (d / "done").exists():
            continue
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        base = make()
        inputs = base.inputs(np.random.default_rng(7))
        mod = plait.from_onnx(base.model)
        ref = flatten_value(run(mod, inputs))
        ort = ort_outputs(base.model.SerializeToString(), inputs)
        diff = "ONNX Runtime refuses it" if ort is None else compare(ref, ort)
        if diff is not None:
            raise AssertionError(f"base artifact '{name}': the interpreter disagrees with ONNX Runtime: {diff}")
        plait.build(mod, target=target, place=place, config={"cc.cache_dir": str(cache)}).export(d / "art")
        write_npz(d / "in.npz", inputs)
        write_npz(d / "ref.npz", {f"out{i}": v for i, v in enumerate(ref)})
        (d / "done").write_text("ok\n")


@dataclass
class Prepared:
    dir: Path
    art: Path
    base: Path
    description: str
    strict: bool


def build(base_name: str, family: str, case_id: str, d: Path, env: Env) -> Prepared:
    """Copy the base artifact and tamper with one thing (chosen from the files found there)."""
    base = env.bases / base_name
    art = d / "art"
    shutil.copytree(base / "art", art, symlinks=True)
    donors = sorted(p for p in env.bases.glob("*/art/*.so") if p.parent.parent.name != base_name)
    t = tamper(art, family, random.Random(case_id), donors)
    return Prepared(d, art, base, f"[{family}] {base_name}: {t.description}", t.strict)


def _load_and_run(art_dir: Path, inputs: dict[str, np.ndarray]) -> tuple[list, list]:
    from plait.executor.graph.artifact import GraphArtifact
    from plait.executor.graph.module import GraphModule

    gm = GraphModule(GraphArtifact.load(art_dir))
    return gm(**inputs), gm(**inputs)


def check(p: Prepared, env: Env, rec: Recorder) -> None:
    inputs = read_npz(p.base / "in.npz")
    ref = Reference(list(read_npz(p.base / "ref.npz").values()), why="", strict=p.strict)
    rec.start("api")
    r = attempt(lambda: _load_and_run(p.art, inputs))
    rec.add(judge_twice("api", ref, *r.value) if r.ok else Leg("api", r.outcome, r.detail))
    out = p.dir / "cli.npz"
    rec.start("cli")
    rec.add(judge_cli("cli", cli_inprocess(["run", str(p.art), "--inputs", str(p.base / "in.npz"), "--output",
                                            str(out)]), out, ref))


def case(seed: int, index: int) -> Case:
    case_id = f"artifacts:{seed}:{index}"
    family = FAMILIES[index % len(FAMILIES)]
    base_name = TARGETS[(index // len(FAMILIES)) % len(TARGETS)]
    return Case(case_id, "artifacts", f"[{family}] {base_name}", partial(build, base_name, family, case_id), check)
