"""``plait run --repeat N --profile --json``: time the whole model and, compiled, each call.

Without these flags ``plait run`` runs the model once and prints nothing more. With any of them:

- compiled (``--target``): the run whose outputs are printed is the warm-up (untimed), then ``N``
  timed runs of the executor (``--executor graph``, ``aot``, ``vm``; ``--on qemu``: whole QEMU runs),
  end to end (inputs in, outputs out: ``gm(**inputs)``); ``--profile`` (graph executor) then times
  each call over ``N`` more runs (:meth:`GraphModule.profile`).
- reference interpreter: ``N`` timed runs (nothing to warm up), the outputs of the first are printed;
  ``--profile`` is refused (a usage error: the interpreter has no per-call times).

Text (after the outputs)::

    time: min 0.0120 ms, median 0.0131 ms, max 0.0204 ms over 10 runs
    profile (median of 10 runs per call, in execution order):
    call                        op                          piece      ms   share
    fused_nn_dense_add_nn_relu  fused_nn_dense_add_nn_relu  c      0.0040   40.0%
    ...
    total                                                          0.0100  100.0%

With ``--json`` the same as one JSON object on one line, the last line of stdout (see :func:`as_json`).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

from plait.cli.common import UsageError, int_at_least
from plait.cli.messages import shorten

#: The ``"format"`` of the JSON document; bumped when a key changes meaning.
JSON_FORMAT = "plait.run.timing/1"


def timing_args(p: argparse.ArgumentParser) -> None:
    """--repeat, --profile and --json (``plait run``)."""
    p.add_argument("--repeat", type=int_at_least(1), default=None, metavar="N",
                   help="time N runs of the model (after one warm-up run when compiled) and print "
                        "'time: min X ms, median Y ms, max Z ms over N runs' (default 1 with --profile or --json)")
    p.add_argument("--profile", action="store_true",
                   help="with --target: also time each call of the compiled graph (median over N runs) and print "
                        "a table: call, op, piece, ms, share of the total, in execution order")
    p.add_argument("--json", action="store_true",
                   help="print the timing (and profile) as one line of JSON instead of text, after the outputs")


def wanted(args: argparse.Namespace) -> bool:
    """Whether ``plait run`` times anything (any of --repeat, --profile, --json given)."""
    return args.repeat is not None or args.profile or args.json


def check_timing_flags(args: argparse.Namespace, compiled: bool) -> None:
    """Refuse what the timing flags cannot do (call it before running anything): --profile needs a
    compiled graph."""
    if getattr(args, "profile", False) and not compiled:
        raise UsageError("--profile needs --target: it times each call of the compiled graph; the reference "
                         "interpreter has no per-call times (--repeat times it as a whole)")


def run_timed(args: argparse.Namespace, run_model: Callable[[], Any], gm: Any = None) -> tuple[Any, Callable[[], None]]:
    """Run the model as ``plait run`` asked: return the outputs of its first run and a function that
    prints the timing (a no-op without --repeat/--profile/--json), to call after the outputs are shown.

    ``run_model()`` runs the whole model and returns its outputs; ``gm`` is the
    :class:`~plait.executor.graph.module.GraphModule` of a compiled run (None: the reference interpreter)."""
    if not wanted(args):
        return run_model(), lambda: None
    check_timing_flags(args, compiled=gm is not None)
    n = args.repeat or 1
    compiled = gm is not None
    outs = run_model() if compiled else None  # compiled: the warm-up run, whose outputs are shown
    times: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        got = run_model()
        times.append((time.perf_counter() - t0) * 1e3)
        if outs is None:
            outs = got
    profile = gm.profile(repeat=n) if args.profile else None
    doc = as_json(times, warmup=1 if compiled else 0,
                  executor=getattr(gm, "executor", "graph") if compiled else "interpreter",
                  profile=profile)
    return outs, lambda: print(json.dumps(doc, sort_keys=True) if args.json else format_text(doc))


def as_json(times_ms: list[float], warmup: int, executor: str, profile: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The timing document (``--json``)::

        {"format": "plait.run.timing/1", "executor": "graph" | "aot" | "interpreter", "runs": N, "warmup": 0 | 1,
         "min_ms": float, "median_ms": float, "max_ms": float, "times_ms": [float] * N,
         "profile": null | {"runs": N, "order": "execution", "total_ms": float,
                            "calls": [{"call": str, "op": str, "piece": str, "ms": float, "share": float}]}}

    ``share`` is the percentage of ``total_ms`` (the sum of the calls' medians); the shares sum to 100."""
    doc: dict[str, Any] = {"format": JSON_FORMAT, "executor": executor, "runs": len(times_ms), "warmup": warmup,
                           "min_ms": min(times_ms), "median_ms": _median(times_ms), "max_ms": max(times_ms),
                           "times_ms": list(times_ms), "profile": None}
    if profile is not None:
        total = sum(c["ms"] for c in profile)
        doc["profile"] = {
            "runs": len(times_ms), "order": "execution", "total_ms": total,
            "calls": [{"call": c["name"], "op": c["func"], "piece": c.get("piece", ""), "ms": c["ms"],
                       "share": 100.0 * c["ms"] / total if total > 0 else 100.0 / len(profile)}
                      for c in profile],
        }
    return doc


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def format_text(doc: dict[str, Any]) -> str:
    """The text of a timing document: the time line, then the profile table (if any)."""
    lines = [f"time: min {doc['min_ms']:.4f} ms, median {doc['median_ms']:.4f} ms, max {doc['max_ms']:.4f} ms "
             f"over {doc['runs']} run{'s' if doc['runs'] != 1 else ''}"]
    prof = doc["profile"]
    if prof is not None:
        rows = [(shorten(c["call"], 60), shorten(c["op"], 60), shorten(c["piece"], 40), f"{c['ms']:.4f}",
                 f"{c['share']:.1f}%") for c in prof["calls"]]
        rows.append(("total", "", "", f"{prof['total_ms']:.4f}", "100.0%"))
        head = ("call", "op", "piece", "ms", "share")
        w = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
        lines.append(f"profile (median of {prof['runs']} run{'s' if prof['runs'] != 1 else ''} per call, "
                     "in execution order):")
        for r in [head, *rows]:
            lines.append(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]:>{w[3]}}  {r[4]:>{w[4]}}".rstrip())
    return "\n".join(lines)
