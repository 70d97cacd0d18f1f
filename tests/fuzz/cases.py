"""Every case by id: ``make_case("models:0:17")`` rebuilds case 17 of seed 0 of the models category,
and ``run_case`` runs one in this process (the fork server runs each in a fresh child)."""

from __future__ import annotations

import time
from pathlib import Path

from .case import CATEGORIES, Case, CaseResult, Env, Recorder, parse_id


def make_case(case_id: str) -> Case:
    category, seed, index = parse_id(case_id)
    if category == "models":
        from .gen_models import case
    elif category == "inputs":
        from .gen_inputs import case
    elif category == "tflite":
        from .gen_tflite import case
    elif category == "selftest":
        from .gen_selftest import case
    else:
        from .gen_artifacts import case
    return case(seed, index)


def case_ids(category: str, seed: int, count: int, start: int = 0) -> list[str]:
    """``count`` ids of a category (``all``: that many of each)."""
    cats = CATEGORIES if category == "all" else (category,)
    return [f"{c}:{seed}:{i}" for c in cats for i in range(start, start + count)]


def run_case(case_id: str, env: Env, case_dir: Path, events: Path | None = None) -> CaseResult:
    """Build and check one case in this process; ``events`` (a file) records each leg as it ends."""
    t0 = time.perf_counter()
    rec = Recorder(events)
    case = make_case(case_id)
    case_dir.mkdir(parents=True, exist_ok=True)
    prepared = case.build(case_dir, env)
    description = getattr(prepared, "description", None) or case.description
    rec.describe(description)
    case.check(prepared, env, rec)
    return CaseResult(case_id, description, rec.legs, time.perf_counter() - t0)
