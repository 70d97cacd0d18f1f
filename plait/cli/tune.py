"""``plait tune MODEL --target T -o tuning.json``: search each function's schedule knobs, write tuning records."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from plait.cli.common import MODEL_HELP, int_at_least, signature_flag
from plait.cli.messages import QUIET, say, verbosity
from plait.cli.shapes import load_with_shapes, parse_input_shapes


def tune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--target", required=True,
                   help='the target, e.g. "c" or "host: c; blas: blas" (every piece is tuned)')
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the tuning records to write (JSON)")
    p.add_argument("--trials", type=int_at_least(1), default=32, metavar="N",
                   help="candidate schedules per function (default 32): all of them when there are at most N, "
                        "else N drawn at random (the default schedule always included)")
    p.add_argument("--seed", type=int_at_least(0), default=0, metavar="S", help="the random draw's seed (default 0)")
    p.add_argument("--jobs", type=int_at_least(1), default=1, metavar="N",
                   help="local worker processes compiling (and estimating) candidates in parallel (default 1)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the jobs as Ray tasks on the cluster at ADDRESS ('auto': the running one); each worker "
                        "times its candidates on its own machine (pip install 'plait[ray]')")
    p.add_argument("--measure", choices=("wall", "analytic"), default="wall",
                   help="wall: compile and time every candidate on this machine (default); analytic: the schedule "
                        "cost model's estimate (deterministic, no compiler)")
    signature_flag(p)
    p.add_argument("--input-shapes", action="append", metavar="SHAPES",
                   help='fix symbolic dims of the inputs: "x:1,3,224,224 y:1,10"')
    p.add_argument("--cache-dir", metavar="DIR", help="the C compile cache")


class _Bar:
    """A rich progress bar over the functions (on a terminal, not with -q)."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.task: Any = None

    def start(self, jobs: list[Any]) -> None:
        say(f"tuning {len(jobs)} functions")
        if not sys.stderr.isatty() or verbosity() <= QUIET:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("tuning", total=len(jobs))

    def result(self, job: Any, res: Any, info: Any) -> None:
        b = res.best()
        d = res.seconds[0]
        gain = f" ({d / res.seconds[b]:.2f}x the default)" if d and res.seconds[b] else ""
        line = (f"  {job.name:<44} {job.target:<16} {len(res.configs):>4} candidates  "
                f"best {res.seconds[b] * 1e6:9.2f} us{gain}")
        if self.progress is not None:
            self.progress.console.print(line)
            self.progress.update(self.task, advance=1, description=job.name)
        else:
            say(line)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def cmd_tune(args: argparse.Namespace) -> int:
    from plait.tune import tune

    mod = load_with_shapes(args.model, parse_input_shapes(args.input_shapes), args.signature)
    bar = _Bar()
    try:
        db, info = tune(mod, args.target, trials=args.trials, seed=args.seed, measure=args.measure, jobs=args.jobs,
                        ray=args.ray, cache_dir=args.cache_dir, on_start=bar.start, on_result=bar.result)
    finally:
        bar.stop()
    db.save(args.output)
    n = len(db.tuning())
    calls = f" and {len(db)} measured calls" if len(db) else ""  # of pieces whose kind lowers calls itself
    if info.interrupted:
        say(f"interrupted: wrote the {n} records{calls} measured so far (of {len(info.jobs)} functions) to "
            f"{args.output}")
        return 130
    say(f"wrote {n} tuning records{calls} to {args.output}")
    return 0
