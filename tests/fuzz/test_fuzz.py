"""Hostile models, input files and tampered artifacts through the CLI and the API (issue 10).

Every case must end in a result equal to the reference (the numpy interpreter, or ONNX Runtime) or in
a PlaitError (the CLI: exit 1 or 2 and one 'plait: error:' line); never in a traceback, a signal, a
hang, or a silently different result. Each category runs COUNT cases of a fixed seed in fork-server
children (LONG_COUNT more, of another seed, as a ``long`` test) (a crash pins one case and never reaches pytest) with a private compile cache. A failure
names every failing case with its reproduction command; a big run: ``python3 -m tests.fuzz.run``.
"""

import pytest

from .case import CATEGORIES
from .cases import case_ids
from .pool import run_ids
from .report import REPRO, failure_report, table

SEED = 0
COUNT = 120  # cases per category (every generator kind 5 to 15 times)
LONG_COUNT = 1000
TIMEOUT = 60.0  # seconds per case before it is a hang
SUBPROCESS_EVERY = 50  # cases whose CLI leg also runs as a real `python3 -m plait.cli` process


@pytest.mark.parametrize("category, seed, count", [
    *(pytest.param(c, SEED, COUNT, id=c) for c in CATEGORIES),
    *(pytest.param(c, SEED + 1, LONG_COUNT, marks=pytest.mark.long, id=f"{c}-long") for c in CATEGORIES)])
def test_fuzz(category, seed, count, tmp_path):
    results = run_ids(case_ids(category, seed, count), tmp_path, jobs=2, timeout=TIMEOUT,
                      subprocess_every=SUBPROCESS_EVERY)
    assert [r.id for r in results] == case_ids(category, seed, count)
    assert all(r.legs for r in results)  # every case ran at least one leg
    failing = [r for r in results if r.failures]
    listing = "\n".join(f"{r.id} {r.failures[0].outcome} in {r.failures[0].name}: {r.failures[0].detail[:200]}\n"
                        f"    {r.description[:150]}\n    repro: {REPRO.format(id=r.id)}" for r in failing)
    if failing:
        pytest.fail(f"{len(failing)} of {len(results)} {category} cases failed (seed {seed}; work directory "
                    f"{tmp_path})\n{table(results)}\n\nby cause:\n{failure_report(results)}\n\nevery failing case:\n"
                    f"{listing}", pytrace=False)
