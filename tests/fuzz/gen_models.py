"""Category ``models``: hostile ONNX models (and valid ones) run through the API and the CLI.

Case ``models:SEED:I`` uses generator ``KINDS[I % len(KINDS)]`` with random sources seeded by the id,
so any count of cases covers every kind about equally and any case can be rebuilt from its id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import model_graph as g
from . import model_values as v
from .case import Case, Env, Recorder
from .flows import model_legs
from .npz import write_npz

KINDS: list[tuple[str, Callable[[random.Random, np.random.Generator], v.Spec]]] = [
    ("valid", v.valid_base), ("valid-chain", v.valid_chain), ("valid-shapes", v.valid_shapes),
    ("nan-constants", v.nan_constants), ("float-special", v.float_special_ops), ("int-division", v.int_division),
    ("int-overflow", v.int_overflow), ("casts", v.casts), ("const-indices", v.const_indices),
    ("input-indices", v.input_indices), ("bad-shape-values", v.bad_shape_values), ("huge-allocation", v.huge_allocation),
    ("input-dims", g.input_dims), ("init-dims", g.init_dims), ("bad-attribute", g.bad_attribute),
    ("names", g.names_missing_duplicate), ("cycles", g.cycles), ("unknown-ops", g.unknown_ops),
    ("versions", g.versions), ("empty", g.empty_graphs), ("dtypes", g.wrong_dtypes), ("bytes", g.broken_bytes),
    ("hostile-names", g.hostile_names), ("non-utf8", g.non_utf8),
]


@dataclass
class Prepared:
    dir: Path
    model: Path
    inputs: dict[str, np.ndarray] | None  # what the API legs feed (None: plait's random inputs, as the CLI)
    inputs_file: Path | None
    ort_ref: bool
    must_refuse: str


def build(spec: v.Spec, d: Path, env: Env) -> Prepared:
    """Write the model (and its inputs as an .npz, when it can hold their names)."""
    model = d / "model.onnx"
    model.write_bytes(spec.model if isinstance(spec.model, bytes) else spec.model.SerializeToString())
    inputs, inputs_file = spec.inputs, None
    if inputs is not None:
        try:
            write_npz(d / "in.npz", inputs)
            inputs_file = d / "in.npz"
        except Exception:  # noqa: BLE001 - a name a zip cannot hold: both sides use random inputs
            inputs = None
    return Prepared(d, model, inputs, inputs_file, spec.ort_ref, spec.must_refuse)


def _api_inputs(p: Prepared, mod: Any) -> dict[str, np.ndarray]:
    from plait.relay.io import make_inputs

    return dict(p.inputs) if p.inputs is not None else make_inputs(mod, {}, seed=0)


def check(p: Prepared, env: Env, rec: Recorder) -> None:
    model_legs(p.model, env, rec, api_inputs=partial(_api_inputs, p), inputs_file=p.inputs_file, ort_ref=p.ort_ref,
               out_dir=p.dir, must_refuse=p.must_refuse)


def case(seed: int, index: int) -> Case:
    kind, gen = KINDS[index % len(KINDS)]
    spec = gen(random.Random(f"models:{seed}:{index}"), np.random.default_rng([seed, index, 1]))
    return Case(f"models:{seed}:{index}", "models", f"[{kind}] {spec.description}", partial(build, spec), check)
