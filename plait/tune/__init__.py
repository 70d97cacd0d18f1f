"""``plait tune``: search each workload's schedule knobs by measuring candidates; tuning records.

    from plait.tune import tune
    db, info = tune(mod, "c", trials=32, measure="wall", jobs=2)   # or ray="auto"
    db.save("tuning.json")          # plait compile/run/explain --tuning tuning.json

Layer: above the driver (it runs the build up to lowering to find the workloads, and compiles and runs
candidates through the pieces' code generation), below the CLI. See docs/tuning.md.
"""

from plait.tune.jobs import MEASURES, Job, JobResult, TuneError, run_job
from plait.tune.runner import TuneInfo, make_jobs, tune, workloads
from plait.tune.space import candidates, default_config

__all__ = ["Job", "JobResult", "MEASURES", "TuneError", "TuneInfo", "candidates", "default_config", "make_jobs",
           "run_job", "tune", "workloads"]
