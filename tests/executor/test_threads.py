"""GraphModule and threads: one instance shared by several threads gives the right answer for every call
(calls take turns), and per-thread copies (sharing the library and the params) run at the same time."""

import threading

import numpy as np
import pytest

import plait
from plait.executor import GraphModule

from tests.executor.artifacts import build, inputs, mlp, reference

THREADS, RUNS = 4, 100
SIZES = (64, 256, 256, 10)  # big enough that a run takes a while: threads interleave


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    return build(tmp_path_factory.mktemp("cc"), sizes=SIZES)


@pytest.fixture(scope="module")
def cases():
    xs = inputs(THREADS * RUNS, SIZES, seed=7)
    return xs, [reference(x, SIZES) for x in xs]


def run_threads(work) -> list:
    """``work(t)`` in THREADS threads at once; returns their results (exceptions are re-raised)."""
    results: list = [None] * THREADS
    errors: list = []
    start = threading.Barrier(THREADS)

    def body(t):
        try:
            start.wait()
            results[t] = work(t)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return results


def wrong(outputs, xs_index, want) -> int:
    return sum(not np.allclose(y, want[i], rtol=1e-5, atol=1e-6) for y, i in zip(outputs, xs_index))


def test_a_shared_instance_gives_every_thread_its_own_answer(art, cases):
    xs, want = cases
    gm = GraphModule(art)

    def work(t):
        idx = list(range(t, len(xs), THREADS))
        return idx, [gm(xs[i])[0] for i in idx]

    results = run_threads(work)
    assert sum(wrong(outs, idx, want) for idx, outs in results) == 0
    assert sum(len(idx) for idx, _ in results) == THREADS * RUNS


def test_a_call_waits_while_another_thread_holds_the_lock(art, cases):
    xs, want = cases
    gm = GraphModule(art)
    got = []
    worker = threading.Thread(target=lambda: got.append(gm(xs[0])[0]))
    with gm.lock:
        gm.set_input("x", xs[1])
        worker.start()
        worker.join(timeout=0.2)
        assert worker.is_alive() and not got  # it cannot set its input, run or read while the lock is held
        gm.run()
        mine = gm.get_output(0)
    worker.join()
    np.testing.assert_allclose(mine, want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_a_sequence_of_calls_holds_the_lock(art, cases):
    xs, want = cases
    gm = GraphModule(art)

    def work(t):
        outs, idx = [], list(range(t, len(xs), THREADS))[:25]
        for i in idx:
            with gm.lock:
                gm.set_input("x", xs[i])
                gm.run()
                outs.append(gm.get_output(0))
        return idx, outs

    assert sum(wrong(outs, idx, want) for idx, outs in run_threads(work)) == 0


def test_copies_run_in_parallel_and_share_library_and_params(art, cases):
    xs, want = cases
    gm = GraphModule(art)
    copies = [gm.copy() for _ in range(THREADS)]
    assert all(c.artifact is gm.artifact and c.graph is gm.graph for c in copies)
    # the params' buffers are shared (read-only), everything else is each copy's own
    p0 = gm.graph["entries"][gm.graph["nodes"][gm.graph["params"][0]]["outputs"][0]]
    assert gm.graph["storage"][p0["storage"]]["kind"] == "param"
    a, b = copies[0], copies[1]
    assert not a._views[1].flags.writeable and np.shares_memory(a._views[1], b._views[1])
    assert not np.shares_memory(a.get_output(0, copy=False), b.get_output(0, copy=False))
    a(xs[0])
    b(xs[1])
    np.testing.assert_allclose(a.get_output(0, copy=False), want[0], rtol=1e-5, atol=1e-6)

    def work(t):
        idx = list(range(t, len(xs), THREADS))
        return idx, [copies[t](xs[i])[0] for i in idx]

    assert sum(wrong(outs, idx, want) for idx, outs in run_threads(work)) == 0


def test_copies_of_a_module_with_an_onnxruntime_region(tmp_path):
    """Copies share the ONNX Runtime session; each keeps its own binding of its buffers."""
    sizes = (8, 32, 32, 4)
    art = plait.build(mlp(sizes), "host: c; ort: onnxruntime", place="Gemm=ort",
                      config={"cc.cache_dir": str(tmp_path / "cc")})
    assert {p.piece for p in art.placement} == {"host", "ort"}
    xs = inputs(THREADS * 20, sizes, seed=3)
    want = [reference(x, sizes) for x in xs]
    gm = GraphModule(art)
    copies = [gm.copy() for _ in range(THREADS)]

    def work(t):
        idx = list(range(t, len(xs), THREADS))
        return idx, [copies[t](xs[i])[0] for i in idx]

    assert sum(wrong(outs, idx, want) for idx, outs in run_threads(work)) == 0
    shared = run_threads(lambda t: (list(range(t, len(xs), THREADS)),
                                    [gm(xs[i])[0] for i in range(t, len(xs), THREADS)]))
    assert sum(wrong(outs, idx, want) for idx, outs in shared) == 0
