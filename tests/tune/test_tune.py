"""plait tune: knob spaces of the rules, candidates, tuning records (format, application, staleness),
the local pool, Ray and the inline runs agreeing, Ctrl-C, and the CLI."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import plait
from plait.cli import main
from plait.executor import GraphModule
from plait.frontend.onnx import from_onnx
from plait.lowering.cache import LoweringCache
from plait.lowering.tuning import TuningError, applying, recording, schedule_with
from plait.placement.cost import CostDatabase, CostError, CostModel
from plait.testing.onnx_models import ds_cnn
from plait.tir.printer import print_prim_func
from plait.tir.stmt import PrimFunc
from plait.tune import candidates, default_config, make_jobs, tune
from plait.tune.jobs import scheduled
from plait.testing.ort_reference import reference_run

ROOT = Path(__file__).resolve().parent.parent.parent
TARGET = "c -clock-mhz=2445 -simd-bits=256"  # host facts pinned: the same knob spaces on AVX2 and AVX-512 machines


@pytest.fixture(scope="module")
def analytic(mod):
    """The model tuned on one piece with the analytic measurement, inline."""
    return tune(mod, TARGET, trials=6, seed=3, measure="analytic")


def _ort(model, feeds):
    return reference_run(model, feeds)


def _conv_job(mod):
    """The pointwise convolution's job (rows of 5 pixels: the rules fuse them with the row loop)."""
    jobs = make_jobs(mod, TARGET, trials=64, measure="analytic")
    return next(j for j in jobs if j.name == "nn_conv2d 1x8x25x5" and "fuse_rows" in str(candidates(
        j.func, j.target, 64, 0, j.workload)))


def test_rules_declare_knobs_whose_defaults_are_the_untuned_schedule(mod):
    job = _conv_job(mod)
    untuned, space = schedule_with(job.func, TARGET, None)
    assert list(space) == ["T_nn_conv2d_n.lanes", "T_nn_conv2d_n.fuse_rows", "T_nn_conv2d_n.overlap",
                           "T_nn_conv2d_n.reuse_block"]
    assert space["T_nn_conv2d_n.lanes"].choices == (2, 4, 8) and space["T_nn_conv2d_n.lanes"].default == 8
    # the fused row of 125 in whole vectors, the last one shifted back (no vector_block knob then)
    assert space["T_nn_conv2d_n.fuse_rows"].default is True and space["T_nn_conv2d_n.overlap"].default is True
    overlapping, space3 = schedule_with(job.func, TARGET, {"T_nn_conv2d_n.overlap": False})
    assert space3["T_nn_conv2d_n.vector_block"].choices == (25,) and "vectorized(0, 25)" in print_prim_func(overlapping)
    from plait.schedule import default_schedule

    assert print_prim_func(untuned) == print_prim_func(default_schedule(job.func, TARGET))  # no config: the rules' own
    # rows left unfused: the register tile runs along the row of 5, and its own knobs follow that choice
    unfused, space2 = schedule_with(job.func, TARGET, {"T_nn_conv2d_n.fuse_rows": False})
    assert space2["T_nn_conv2d_n.vector_block"].choices == (5,)
    assert print_prim_func(unfused) != print_prim_func(untuned) and "vectorized(" in print_prim_func(unfused)


def test_candidates_are_the_knob_tree_grid_or_a_seeded_sample_default_first(mod):
    job = _conv_job(mod)
    grid = candidates(job.func, TARGET, 1000, 0, job.workload)
    assert grid[0] == default_config(job.func, TARGET) == {"T_nn_conv2d_n.lanes": 8, "T_nn_conv2d_n.fuse_rows": True,
                                                        "T_nn_conv2d_n.overlap": True, "T_nn_conv2d_n.reuse_block": 8}
    assert len(grid) == len({json.dumps(c, sort_keys=True) for c in grid}) > 8
    for c in grid:  # complete: exactly the knobs declared under it
        assert set(schedule_with(job.func, TARGET, c)[1]) == set(c)
    sample = candidates(job.func, TARGET, 5, 7, job.workload)
    assert len(sample) == 5 and sample[0] == grid[0] and all(c in grid for c in sample)
    assert candidates(job.func, TARGET, 5, 7, job.workload) == sample  # the seed fixes the draw


def test_tuning_records_round_trip_in_the_cost_database_format(analytic, tmp_path):
    db, info = analytic
    assert not info.interrupted and len(db.tuning()) == len(info.jobs) == 5
    path = tmp_path / "t.json"
    db.save(path)
    data = json.loads(path.read_text())
    assert data["entries"] == [] and len(data["tuning"]) == 5
    rec = data["tuning"][0]
    assert set(rec) == {"workload", "target", "config", "seconds", "source", "name", "candidates", "default_seconds"}
    assert rec["source"] == "analytic estimate" and rec["target"] == TARGET and len(rec["workload"]) == 16
    assert CostDatabase.load(path).to_dict() == data
    for r in db.tuning():  # the best is never worse than the default (which is always a candidate)
        assert r.seconds <= r.info["default_seconds"]


def test_a_tuning_file_changes_the_code_as_its_config_says_and_outputs_match_ort(mod, model):
    job = _conv_job(mod)
    config = {"T_nn_conv2d_n.lanes": 4, "T_nn_conv2d_n.fuse_rows": False, "T_nn_conv2d_n.vector_block": 5,
              "T_nn_conv2d_n.reuse_block": 4}
    db = CostDatabase()
    db.add_tuning(job.workload, TARGET, config, 1e-6, source="measured wall")
    art = plait.build(mod, TARGET, cost_model=CostModel(database=db))
    funcs = [f for f in art.ir.values() if isinstance(f, PrimFunc)]
    got = next(f for f in funcs if f.attrs.get("workload") == job.workload)
    want = scheduled(job, config)
    assert print_prim_func(got, got.name) == print_prim_func(replace(want, attrs=got.attrs), got.name)
    untuned = plait.build(mod, TARGET)
    plain = next(f for f in untuned.ir.values() if isinstance(f, PrimFunc) and f.name == got.name)
    assert print_prim_func(plain) != print_prim_func(got) and "workload" not in plain.attrs
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 49, 10)).astype(np.float32)
    (want_y,) = _ort(model, {"input": x})
    (y,) = GraphModule(art)(input=x)
    np.testing.assert_allclose(y, want_y, rtol=0, atol=1e-4)


def test_placement_prices_tuned_functions_by_their_records(mod):
    from plait.pipeline.explain import explain

    db, info = tune(mod, f"host: {TARGET}; blas: blas", trials=2, measure="analytic", jobs=2)
    # blas runs its calls through its own library: nothing to tune, each call measured alone (tests/tune/test_hook_calls.py)
    assert {j.target for j in info.jobs if j.op is None} == {TARGET} and {j.target for j in info.jobs if j.op} == {"blas"}
    rep = explain(mod, f"host: {TARGET}; blas: blas", cost_model=CostModel(database=db))
    host = [c.costs["host"] for c in rep.calls if c.op == "nn.conv2d"]
    assert host and all(e["source"] == "measured" and "tuning record (analytic estimate) of workload " in e["detail"]
                        for e in host)


def test_the_lowering_cache_keys_by_the_tuning_config(mod):
    from plait.lowering.cache import lower_cached

    fn = _conv_relay_function(mod)
    with recording() as seen:
        lower_cached(fn, "f", TARGET)
    ((workload, target),) = seen
    cache = LoweringCache()
    with cache.active():
        plain = lower_cached(fn, "f", TARGET)
        with applying({(workload, target): {"T_nn_conv2d_n.fuse_rows": False}}):
            tuned = lower_cached(fn, "f", TARGET)
            again = lower_cached(fn, "f", TARGET)
    assert cache.stats.lowered == 2 and cache.stats.hits == 1 and again is tuned
    assert print_prim_func(tuned) != print_prim_func(plain)
    assert "vectorized(0, 5)" in print_prim_func(tuned) and "vectorized(0, 8)" in print_prim_func(plain)


def _conv_relay_function(mod):
    """The single-call function of the model's pointwise convolution (what lowering lowers alone)."""
    from plait.lowering.lower import single_call_function
    from plait.relay import Call, infer_type, post_order

    main_fn = infer_type(mod)["main"]
    return next(single_call_function(c) for c in post_order(main_fn.body) if isinstance(c, Call)
                and c.op_name == "nn.conv2d" and c.args[1].checked_type.shape[2:] == (1, 1)
                and c.args[1].checked_type.shape[0] == 8)


def test_a_stale_record_is_a_clear_error(mod):
    job = _conv_job(mod)
    db = CostDatabase()
    db.add_tuning(job.workload, TARGET, {"T_nn_conv2d_n.tile": 8}, 1e-6)
    with pytest.raises(TuningError) as e:
        plait.build(mod, TARGET, cost_model=CostModel(database=db))
    assert str(e.value) == (f"the tuning record of workload {job.workload} ('{job.func.name}') on target '{TARGET}' does "
                            "not fit: knob 'T_nn_conv2d_n.tile' is not a knob of this function (it has "
                            "T_nn_conv2d_n.lanes, T_nn_conv2d_n.fuse_rows, T_nn_conv2d_n.overlap, "
                            "T_nn_conv2d_n.reuse_block); the tuning file is stale (re-run plait tune)")
    db.add_tuning(job.workload, TARGET, {"T_nn_conv2d_n.lanes": 3}, 1e-6)
    with pytest.raises(TuningError, match=r"knob 'T_nn_conv2d_n.lanes': 3 is not one of \[2, 4, 8\]; the tuning"):
        plait.build(mod, TARGET, cost_model=CostModel(database=db))


def test_a_garbled_tuning_file_is_a_clear_error(tmp_path, capsys, model):
    onnx.save(model, str(tmp_path / "m.onnx"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entries": [], "tuning": [{"workload": "ab", "target": TARGET, "config": [1]}]}))
    assert main(["compile", str(tmp_path / "m.onnx"), "--target", TARGET, "--tuning", str(bad), "-o",
                 str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (f"plait: error: {bad}: tuning record 0 needs 'workload' and 'target' strings, a "
                                       "'config' object of knob values and 'seconds' >= 0\n")
    with pytest.raises(CostError, match=r"^x: 'tuning' must be a list of records$"):
        CostDatabase.from_dict({"entries": [], "tuning": {}}, "x")


def test_local_pool_and_inline_choose_the_same(mod, analytic):
    db, info = analytic
    db2, info2 = tune(mod, TARGET, trials=6, seed=3, measure="analytic", jobs=2)
    assert [info2.results[k].configs for k in sorted(info2.results)] == \
        [info.results[k].configs for k in sorted(info.results)]
    assert db2.to_dict() == db.to_dict()


def test_ray_and_the_local_pool_choose_the_same(mod, analytic):
    ray = pytest.importorskip("ray")  # in [dev]: CI has it
    db, info = analytic
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    ray.init(num_cpus=2, runtime_env={"env_vars": env}, include_dashboard=False, log_to_driver=False)
    try:
        db2, info2 = tune(mod, TARGET, trials=6, seed=3, measure="analytic", ray="auto")
        # wall time: each Ray worker compiles and times its chunks itself
        walled, winfo = tune(from_onnx(ds_cnn(channels=4, blocks=1)), TARGET, trials=2, measure="wall", repeat=2,
                             ray="auto")
    finally:
        ray.shutdown()
    assert len(walled.tuning()) == len(winfo.jobs) and not any(r.errors for r in winfo.results.values())
    assert all(r.info["source"] == "measured wall" and r.seconds > 0 for r in walled.tuning())
    assert [info2.results[k].configs for k in sorted(info2.results)] == \
        [info.results[k].configs for k in sorted(info.results)]
    assert db2.to_dict() == db.to_dict()


def test_ctrl_c_keeps_the_records_measured_so_far(mod):
    def stop(job, res, info):
        if len(info.results) == 2:
            raise KeyboardInterrupt

    db, info = tune(mod, TARGET, trials=2, measure="analytic", on_result=stop)
    assert info.interrupted and len(info.results) == 2 and len(db.tuning()) == 2
    assert [r.workload for r in db.tuning()] == [info.jobs[k].workload for k in sorted(info.results)]


def test_wall_measurement_times_compiled_candidates(tmp_path):
    small = from_onnx(ds_cnn(channels=4, blocks=1))
    db, info = tune(small, TARGET, trials=2, measure="wall", repeat=2, cache_dir=str(tmp_path / "cc"))
    assert len(db.tuning()) == len(info.jobs)
    for r in db.tuning():
        assert r.info["source"] == "measured wall" and r.seconds > 0 and r.info["candidates"] <= 2
    assert not any(res.errors for res in info.results.values())


def test_cli_tune_writes_records_and_ctrl_c_writes_those_so_far(tmp_path, capsys, model, monkeypatch):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    out = tmp_path / "t.json"
    assert main(["tune", path, "--target", TARGET, "-o", str(out), "--measure", "analytic", "--trials", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("tuning 5 functions\n") and text.endswith(f"wrote 5 tuning records to {out}\n")
    assert len(CostDatabase.load(out).tuning()) == 5
    assert main(["run", path, "--target", TARGET, "--tuning", str(out), "--fill", "ones", "-q"]) == 0
    from plait.cli import tune as cli_tune

    real = cli_tune._Bar.result

    def interrupt(self, job, res, info):
        real(self, job, res, info)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_tune._Bar, "result", interrupt)
    capsys.readouterr()
    assert main(["tune", path, "--target", TARGET, "-o", str(out), "--measure", "analytic", "--trials", "3"]) == 130
    assert capsys.readouterr().out.endswith(f"interrupted: wrote the 1 records measured so far (of 5 functions) "
                                            f"to {out}\n")
    assert len(CostDatabase.load(out).tuning()) == 1


def test_cli_tune_flags_are_checked(tmp_path, capsys, model):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    with pytest.raises(SystemExit) as e:
        main(["tune", path, "--target", TARGET, "-o", str(tmp_path / "t.json"), "--jobs", "0"])
    assert e.value.code == 2 and "argument --jobs: expected a positive integer, got 0" in capsys.readouterr().err
    assert main(["run", path, "--tuning", "t.json"]) == 2
    assert capsys.readouterr().err == "plait: error: --tuning needs --target: only a compiled run builds code\n"


def test_the_microcontroller_rules_unroll_knob(mod):
    jobs = make_jobs(mod, "c -mcpu=cortex-m7f", trials=4, measure="analytic")
    spaces = {j.name: schedule_with(j.func, j.target, None)[1] for j in jobs}
    knob = next(k for s in spaces.values() for k in s.values() if k.name.endswith(".unroll"))
    job = next(j for j in jobs if knob.name in spaces[j.name])
    assert knob.choices == (False, True)
    unrolled = print_prim_func(schedule_with(job.func, job.target, {knob.name: True})[0])
    rolled = print_prim_func(schedule_with(job.func, job.target, {knob.name: False})[0])
    assert "unrolled(" in unrolled and "unrolled(" not in rolled
    assert print_prim_func(schedule_with(job.func, job.target, None)[0]) == (unrolled if knob.default else rolled)


def test_a_candidate_replaces_the_default_only_if_the_final_measurement_agrees():
    from plait.tune.jobs import JobResult

    res = JobResult("w", "c", "n", "measured wall", configs=[{}, {"k": 1}, {"k": 2}], seconds=[3e-6, 4e-6, 2e-6])
    assert res.finalists() == [0, 2] and res.chosen() == (2, 2e-6)  # not confirmed: the search's best
    res.confirmed = {0: 2.5e-6, 2: 2.6e-6}  # the search's 2 us was noise
    assert res.chosen() == (0, 2.5e-6)
    res.confirmed = {0: 2.5e-6, 2: 2.5e-6}  # a tie: the default
    assert res.chosen() == (0, 2.5e-6)
    res.confirmed = {0: 2.5e-6, 2: 2.0e-6}
    assert res.chosen() == (2, 2.0e-6)
    res = JobResult("w", "c", "n", "measured wall", configs=[{}, {"k": 1}], seconds=[1e-6, 2e-6])
    assert res.finalists() == [0]


def test_the_analytic_measurement_has_no_final_measurement(analytic, mod):
    db, info = tune(mod, TARGET, trials=2, measure="analytic")
    assert not any(res.confirmed for res in info.results.values())


def test_the_final_measurement_times_one_call_per_round_and_the_search_batches():
    from plait.tune.jobs import time_alternating

    calls = {0: 0, 1: 0}
    order = []

    def make(k):
        def f():
            calls[k] += 1
            order.append(k)
        return f

    got = time_alternating({0: make(0), 1: make(1)}, rounds=5, batch_s=0.0)
    assert calls == {0: 6, 1: 6} and order[2:] == [0, 1] * 5  # one sizing call each, then alternating calls
    assert set(got) == {0, 1} and all(t > 0 for t in got.values())
    calls.update({0: 0, 1: 0})
    time_alternating({0: make(0), 1: make(1)}, rounds=2, batch_s=1e-3)
    assert min(calls.values()) > 2  # cheap calls: batches of many
