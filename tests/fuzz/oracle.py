"""The oracle: run one leg of a case (an API call, the CLI in process or in a subprocess) and judge it.

Allowed: a result equal to the reference (the numpy interpreter ``plait.relay.run``, or ONNX Runtime
when it accepts the model), compared with dtype-aware tolerances and NaN/inf positions exactly; or a
``PlaitError`` (the CLI: exit 1 or 2 and one ``plait: error:`` line on stderr). Everything else is a
failure of one of the kinds listed in :mod:`.case`.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from plait.errors import PlaitError

from .case import Env, Leg

#: The longest error line the CLI may print (a screen: 25 lines of 80 characters).
MAX_CLI_MESSAGE = 2000
#: The longest ``str(PlaitError)`` the API may raise (generous; a 100k-character name must not be in it whole).
MAX_API_MESSAGE = 10_000
#: (rtol, atol) by float dtype; integers and bools compare exactly.
#: Print the full traceback of every unexpected exception (``run.py --case`` sets it).
VERBOSE = False
TOLERANCE = {"float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}


def short(text: str, n: int = 240) -> str:
    """One line of at most ``n`` characters (for reports)."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 20] + f"... ({len(text)} chars)"


def where(exc: BaseException) -> str:
    """The innermost frame inside the plait package (else the innermost frame) of an exception's
    traceback, as ``plait/x.py:LINE (function)``."""
    import plait

    package = Path(plait.__file__).resolve().parent
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(package)]
    f = (ours or frames or [None])[-1]
    if f is None:
        return "?"
    path = Path(f.filename).resolve()
    shown = path.relative_to(package.parent).as_posix() if path.is_relative_to(package) else path.name
    return f"{shown}:{f.lineno} ({f.name})"


# ---- API calls --------------------------------------------------------------------------------


@dataclass
class Attempt:
    """What calling a function gave: ``ok`` and its value, or the leg outcome and detail of its exception."""

    ok: bool
    value: Any = None
    outcome: str = ""
    detail: str = ""


def attempt(fn: Callable[[], Any]) -> Attempt:
    """Call ``fn``: a PlaitError is an allowed outcome (unless its message is absurdly long); any other
    exception is a traceback."""
    try:
        return Attempt(True, fn())
    except PlaitError as exc:
        msg = str(exc)
        if len(msg) > MAX_API_MESSAGE:
            return Attempt(False, outcome="long-message", detail=f"{type(exc).__name__} of {len(msg)} chars: "
                                                                   f"{short(msg)}")
        return Attempt(False, outcome="error", detail=f"{type(exc).__name__}: {short(msg)}")
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - every other exception is what we look for
        if VERBOSE:
            traceback.print_exc()
        return Attempt(False, outcome="traceback", detail=f"{type(exc).__name__}: {short(str(exc), 160)} "
                                                          f"at {where(exc)}")


# ---- comparing results ----------------------------------------------------------------------


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def compare(got: Sequence[Any], want: Sequence[Any], finite_only: bool = False) -> str | None:
    """None when ``got`` equals ``want`` output by output; else what differs first. ``finite_only``:
    ignore positions where either side is NaN or infinite (where ONNX leaves the result open)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, the reference has {w.dtype}"
        if g.shape != w.shape:
            return f"output {i}: shape {list(g.shape)}, the reference has {list(w.shape)}"
        if g.dtype.kind in "fc":
            rtol, atol = TOLERANCE.get(str(g.dtype), (1e-6, 1e-9))
            gg, ww = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64), w.astype(
                np.complex128 if g.dtype.kind == "c" else np.float64)
            bad = np.isnan(gg) != np.isnan(ww)
            special = np.isinf(gg) | np.isinf(ww)
            bad |= special & ~np.isnan(gg) & (gg != ww)
            finite = np.isfinite(gg) & np.isfinite(ww)
            bad |= finite & ~np.isclose(gg, ww, rtol=rtol, atol=atol)
            if finite_only:
                bad &= finite
        else:
            bad = g != w
        if np.any(bad):
            at = _first(np.asarray(bad))
            return (f"output {i} ({g.dtype}{list(g.shape)}): {int(np.sum(bad))} of {g.size} values differ; "
                    f"first at {list(at)}: got {g[at]!r}, the reference has {w[at]!r}")
    return None


@dataclass
class Reference:
    """What a result is judged against. ``outputs`` None: there is no reference value (``why`` says why).
    ``strict``: a result that differs from the reference, or a result where there is none, is a failure
    (``refused``: its outcome); otherwise (a tampering that makes another valid program, a reference that
    itself failed) the result is only 'unverified'."""

    outputs: list[np.ndarray] | None
    why: str = ""
    strict: bool = True
    refused: str = "unchecked"

    def judge(self, name: str, got: Sequence[Any]) -> Leg:
        if self.outputs is None:
            return Leg(name, self.refused if self.strict else "unverified", f"a result, but the reference: {self.why}")
        diff = compare(got, self.outputs)
        if diff is None:
            return Leg(name, "equal")
        return Leg(name, "differs" if self.strict else "unverified", diff)


def ort_outputs(model: bytes, inputs: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """ONNX Runtime's outputs, or None when it refuses the model or the inputs."""
    from plait.testing.ort_reference import reference_session

    try:
        sess = reference_session(model, log_severity=4)
        return [np.asarray(v) for v in sess.run(None, inputs)]
    except Exception:  # noqa: BLE001 - ORT refusing is "no reference", not a failure
        return None


# ---- the CLI ------------------------------------------------------------------------------------


@dataclass
class CliRun:
    """How a CLI run ended: exit code (negative: killed by that signal; None: did not return), its output."""

    code: int | None
    out: str
    err: str
    exc: str = ""  # an exception that escaped plait.cli.main (in process)
    timed_out: bool = False


def cli_inprocess(argv: list[str]) -> CliRun:
    """``plait.cli.main(argv)`` with stdout and stderr captured."""
    import plait.cli

    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    exc_text = ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = plait.cli.main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except (Exception, RecursionError) as exc:  # noqa: BLE001
            if VERBOSE:
                traceback.print_exc(file=sys.__stderr__)
            exc_text = f"{type(exc).__name__}: {short(str(exc), 160)} at {where(exc)}"
    return CliRun(code, out.getvalue(), err.getvalue(), exc_text)


def cli_subprocess(argv: list[str], env: Env) -> CliRun:
    """``python3 -m plait.cli argv`` in a subprocess (the worktree's plait: cwd is the repository)."""
    try:
        r = subprocess.run([sys.executable, "-m", "plait.cli", *argv], cwd=env.root, capture_output=True,
                           timeout=env.subprocess_timeout)
    except subprocess.TimeoutExpired as exc:
        return CliRun(None, "", (exc.stderr or b"").decode(errors="replace"), timed_out=True)
    return CliRun(r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"))


def read_outputs(path: Path) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return [data[k] for k in data.files]


def judge_cli(name: str, run: CliRun, out_path: Path, ref: Reference) -> Leg:
    """The leg of a CLI run that was asked to write its outputs to ``out_path``."""
    import signal

    if run.exc:
        return Leg(name, "traceback", f"escaped plait.cli.main: {run.exc}")
    if run.timed_out:
        return Leg(name, "hang", f"the subprocess did not finish; stderr: {short(run.err[-300:])}")
    if run.code is not None and run.code < 0:
        try:
            sig = signal.Signals(-run.code).name
        except ValueError:
            sig = f"signal {-run.code}"
        return Leg(name, "signal", f"{sig}; stderr: {short(run.err[-300:])}")
    if "Traceback (most recent call last)" in run.err:
        last = [ln for ln in run.err.strip().splitlines() if ln.strip()][-1:]
        return Leg(name, "traceback", f"exit {run.code}: {short(last[0] if last else '', 200)}")
    if run.code == 0:
        try:
            got = read_outputs(out_path)
        except Exception as exc:  # noqa: BLE001
            return Leg(name, "differs", f"exit 0 but no readable outputs: {type(exc).__name__}: {short(str(exc))}")
        return ref.judge(name, got)
    if run.code in (1, 2):
        lines = [ln for ln in run.err.splitlines()
                 if ln.strip() and not ln.startswith(("plait: warning:", "plait: note:"))]
        if not lines or not lines[0].startswith("plait: error: "):
            return Leg(name, "bad-stderr", f"exit {run.code}, stderr does not start with 'plait: error:': "
                                           f"{short(run.err[:400])}")
        if len(lines) > 1:
            return Leg(name, "bad-stderr", f"exit {run.code}, the error spans {len(lines)} lines: {short(run.err[:400])}")
        if len(lines[0]) > MAX_CLI_MESSAGE:
            return Leg(name, "long-message", f"exit {run.code}, a {len(lines[0])}-char error: {short(lines[0])}")
        return Leg(name, "error", short(lines[0]))
    return Leg(name, "exit-code", f"exit {run.code}; stderr: {short(run.err[-300:])}")
