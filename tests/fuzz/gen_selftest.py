"""Category ``selftest``: cases that crash, hang or fail on purpose, to check the harness itself
(test_harness.py): a signal, a hang and a traceback must each be pinned to their case and leg."""

from __future__ import annotations

import ctypes
import os
import time
from functools import partial
from pathlib import Path

import numpy as np

from .case import Case, Env, Leg, Recorder
from .oracle import Reference, attempt

KINDS = ["equal", "segfault", "abort", "hang", "traceback", "plait-error", "differs"]


def _boom(kind: str) -> list[np.ndarray]:
    from plait.errors import PlaitError

    if kind == "segfault":
        ctypes.string_at(0)  # reads address 0
    elif kind == "abort":
        os.abort()
    elif kind == "hang":
        time.sleep(3600)
    elif kind == "traceback":
        raise KeyError("deep inside")
    elif kind == "plait-error":
        raise PlaitError("a clean refusal")
    return [np.array([1.0, 2.0], np.float32) + (kind == "differs")]


def check(kind: str, env: Env, rec: Recorder) -> None:
    rec.add(Leg("before", "equal"))
    rec.start("boom")
    r = attempt(partial(_boom, kind))
    rec.add(Reference([np.array([1.0, 2.0], np.float32)]).judge("boom", r.value) if r.ok else
            Leg("boom", r.outcome, r.detail))


def case(seed: int, index: int) -> Case:
    kind = KINDS[index % len(KINDS)]
    return Case(f"selftest:{seed}:{index}", "selftest", f"[{kind}] harness self-test",
                lambda d, env: kind, check)
