"""What a fuzz case is, what each of its legs reports, and which outcomes are failures.

A case is ``(id, category, description, build, check)``: ``build(dir, env)`` writes the case's files (a
model, an inputs file, a tampered artifact) and returns what ``check`` needs; ``check(prepared, env,
rec)`` runs every leg (the API, the CLI in process, sometimes the CLI in a subprocess) and records
each leg's outcome through ``rec`` as it goes, so that a leg that kills the process is still named.

A leg ends in one outcome:

    OK        equal       a result equal to the reference
              reference   the result that is the reference (the numpy interpreter)
              error       a PlaitError (API) / exit 1 or 2 with one 'plait: error:' line (CLI)
              unverified  a result that cannot be compared (no reference, or a tampering that makes
                          another valid program)
    FAILURE   traceback   any other exception, or a traceback on the CLI's stderr
              signal      the process died of a signal (segfault, abort, bus error, SIGFPE, ...)
              hang        the case did not finish within its time limit
              crash       the process exited without finishing the case and without a signal
              differs     a result different from the reference (values, dtype, shape, count)
              unchecked   a result where the reference refuses the same input (silently accepted)
              accepted    a result for a model the issue says must be refused (empty graph, duplicate
                          output names, unknown versions, weights contradicting attributes, negative dims)
              bad-stderr  a CLI error that is not one 'plait: error:' line
              long-message  an error message longer than a screen
              exit-code   an exit code other than 0, 1, 2
              harness     the harness itself failed (a bug here, or the reference crashed)
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

OK_OUTCOMES = ("equal", "reference", "error", "unverified")
FAILURE_KINDS = ("traceback", "signal", "hang", "crash", "differs", "unchecked", "accepted", "bad-stderr", "long-message",
                 "exit-code", "harness")
CATEGORIES = ("models", "inputs", "artifacts", "tflite")


@dataclass
class Leg:
    """One way of running a case (``api-interp``, ``api-c``, ``cli-c``, ...) and how it ended."""

    name: str
    outcome: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome not in OK_OUTCOMES


@dataclass
class Env:
    """What every case's check needs from the run: where to work, the compile cache, the targets."""

    work: Path
    cache_dir: Path
    bases: Path
    targets: tuple[str, ...] = ("c",)
    subprocess: bool = False  # also run the CLI leg in a real `python3 -m plait.cli` subprocess
    subprocess_timeout: float = 60.0
    root: Path = Path(__file__).resolve().parents[2]  # the repository (cwd of CLI subprocesses)


@dataclass
class Case:
    """A generated case; ``id`` is ``category:seed:index`` and regenerates it."""

    id: str
    category: str
    description: str
    build: Callable[[Path, "Env"], Any]
    check: Callable[[Any, Env, "Recorder"], None]


@dataclass
class CaseResult:
    """A finished case: its legs, and its overall outcome (the first failure, else equal or error)."""

    id: str
    description: str
    legs: list[Leg] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Leg]:
        return [leg for leg in self.legs if leg.failed]

    @property
    def outcome(self) -> str:
        if self.failures:
            return self.failures[0].outcome
        if any(leg.outcome in ("equal", "reference", "unverified") for leg in self.legs):
            return "equal"
        return "error"

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "description": self.description, "seconds": round(self.seconds, 3),
                           "legs": [asdict(leg) for leg in self.legs]})

    @classmethod
    def from_json(cls, text: str) -> "CaseResult":
        d = json.loads(text)
        return cls(d["id"], d["description"], [Leg(**leg) for leg in d["legs"]], d.get("seconds", 0.0))


def parse_id(case_id: str) -> tuple[str, int, int]:
    """``"models:0:17"`` -> ("models", 0, 17)."""
    category, seed, index = case_id.split(":")
    if category not in (*CATEGORIES, "selftest"):
        raise ValueError(f"unknown category '{category}' (expected one of {', '.join(CATEGORIES)})")
    return category, int(seed), int(index)


class Recorder:
    """Collects a case's legs; with a ``path``, appends each event to that file at once (one JSON line,
    one ``write`` call), so that the fork server still knows which leg was running if the case dies."""

    def __init__(self, path: Path | None = None):
        self.legs: list[Leg] = []
        self.current: str | None = None
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path is not None else None

    def _write(self, event: dict[str, Any]) -> None:
        if self._fd is not None:
            os.write(self._fd, (json.dumps(event) + "\n").encode())

    def describe(self, description: str) -> None:
        """What the case turned out to be (a tampering is chosen from the files it finds)."""
        self._write({"description": description})

    def start(self, name: str) -> None:
        """A leg begins (if the process dies now, the leg is ``name``)."""
        self.current = name
        self._write({"start": name})

    def add(self, leg: Leg) -> Leg:
        self.legs.append(leg)
        self.current = None
        self._write({"leg": asdict(leg)})
        return leg


def read_events(path: Path) -> tuple[list[Leg], str | None, str | None]:
    """The legs a (possibly killed) case recorded, the leg that was running when it stopped, and the
    description it recorded (if any)."""
    legs: list[Leg] = []
    current = description = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return legs, None, None
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "description" in event:
            description = event["description"]
        elif "start" in event:
            current = event["start"]
        elif "leg" in event:
            legs.append(Leg(**event["leg"]))
            current = None
    return legs, current, description
