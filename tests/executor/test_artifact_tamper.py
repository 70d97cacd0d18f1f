"""Tampered artifacts are refused before anything runs, each with its exact message; harmless changes
to an in-memory artifact run and equal the reference interpreter.

The artifact: mlp 8-16-16-4 built for c (see tests/executor/artifacts.py). Its graph:
nodes 0 x, 1 p0, 2 p1, 3 relu(0,1,2)->3, 4 p2, 5 p3, 6 relu_1(3,4,5)->6, 7 p4, 8 p5, 9 dense_add(6,7,8)->9,
10 softmax(9)->10 (workspace 11); storage 0 input, 1/2/4/5/7/8 params, 3/6/9/10 activations, 11 workspace,
all in pool 0.
"""

import io
import json
import shutil
import zipfile

import numpy as np
import pytest

from plait.executor import ExecutorError, GraphArtifact, GraphModule
from plait.executor.graph_codegen import dumps
from plait.limits import MemoryLimitError

from tests.executor.artifacts import edit_graph, inputs, load_error, reference

F1, F2, F3, F4 = "fused_nn_dense_add_nn_relu", "fused_nn_dense_add_nn_relu_1", "fused_nn_dense_add", "fused_nn_softmax"
N3, N6, N9, N10 = (f"node {i} ('{f}')" for i, f in ((3, F1), (6, F2), (9, F3), (10, F4)))


def swap(items, i, j):
    items[i], items[j] = items[j], items[i]


def test_the_untampered_artifact_loads_and_runs(d):
    gm = GraphModule(GraphArtifact.load(d))
    for x in inputs(2):
        np.testing.assert_allclose(gm(x)[0], reference(x), rtol=1e-5, atol=1e-6)


# ---- graph.json: every change that makes the graph wrong is named; the others fail the hash ------------

def _set(path, value):
    """change(graph): graph[path[0]][path[1]]... = value"""
    def change(g):
        obj = g
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return change


GRAPH_CASES = [
    ("shrunk input", _set(["entries", 0, "shape"], [1, 4]),
     f"{N3}: argument 0 (input) of '{F1}' is float32[1, 8] (32 bytes), but entry 0 is float32[1, 4] (16 bytes)"),
    ("grown activation", _set(["entries", 3, "shape"], [1, 32]),
     "entry 3, float32[1, 32] (128 bytes), does not fit its storage 3 (64 bytes)"),
    ("grown activation and storage", lambda g: (_set(["entries", 3, "shape"], [1, 32])(g),
                                                _set(["storage", 3, "bytes"], 128)(g),
                                                _set(["storage", 3, "offset"], g["pools"][0]["bytes"])(g),
                                                _set(["pools", 0, "bytes"], g["pools"][0]["bytes"] + 128)(g)),
     f"{N3}: argument 3 (output) of '{F1}' is float32[1, 16] (64 bytes), but entry 3 is float32[1, 32] (128 bytes)"),
    ("output dtype changed", _set(["entries", 10, "dtype"], "int32"),
     f"{N10}: argument 1 (output) of '{F4}' is float32[1, 4] (16 bytes), but entry 10 is int32[1, 4] (16 bytes)"),
    ("unknown dtype", _set(["entries", 10, "dtype"], "float33"), "entry 10: unknown dtype 'float33'"),
    ("storage shrunk", _set(["storage", 1, "bytes"], 256),
     "entry 1, float32[16, 8] (512 bytes), does not fit its storage 1 (256 bytes)"),
    ("activation aliased onto a param", _set(["entries", 6, "storage"], 4),
     f"entry 6 (written by {N6}) is an activation but lives in storage 4 of kind 'param'"),
    ("param aliased onto a param", _set(["entries", 5, "storage"], 2),
     "storage 2 (param) holds entries 2 and 5: a param is never shared (only its views share it)"),
    ("live activations share storage", _set(["entries", 6, "storage"], 3),
     "storage 3 (activation) holds entries 3 and 6: an activation storage holds one value (and its views)"),
    ("live activations overlap in their pool", lambda g: (_set(["pools", 0, "bytes"], 8192)(g),
                                                          _set(["storage", 3, "offset"], 4096)(g),
                                                          _set(["storage", 6, "offset"], 4128)(g)),
     f"pool 0 ('workspace_c'): storage 3 at bytes 4096 to 4160, live from {N3} to {N6} overlaps storage 6 at bytes "
     f"4128 to 4192, live from {N6} to {N9}"),
    ("activation outside its pool", lambda g: (_set(["pools", 0, "bytes"], 4096)(g),
                                               _set(["storage", 6, "offset"], 4096)(g)),
     "storage 6: bytes 4096 to 4160 are outside pool 0 ('workspace_c', 4096 bytes)"),
    ("misaligned activation", _set(["storage", 6, "offset"], 8),
     "storage 6: offset 8 is not a multiple of the alignment of pool 0 ('workspace_c', 16 bytes)"),
    ("activation in no pool", _set(["storage", 6, "pool"], 1), "storage 6: 1 is not a pool id (the graph has 1 pools)"),
    ("param in a pool", _set(["storage", 4, "pool"], 0), "storage 4: a param has its own buffer (no pool, no offset)"),
    ("pool malformed", _set(["pools", 0, "align"], 0),
     "pool 0: malformed (expected name, piece, bytes, align, algorithm, lower_bound, sizes, optimal)"),
    ("param storage made an activation", _set(["storage", 4, "kind"], "activation"),
     "storage 4: None is not a pool id (the graph has 1 pools)"),
    ("unknown storage kind", _set(["storage", 4, "kind"], "rom"),
     "storage 4: unknown kind 'rom' (expected one of input, param, activation, workspace)"),
    ("calls swapped", lambda g: swap(g["nodes"], 3, 6),
     f"node 3 ('{F2}') reads entry 3 before node 6 ('{F1}') writes it (the nodes are not in execution order)"),
    ("consumer before producer", lambda g: swap(g["nodes"], 9, 10),
     f"node 9 ('{F4}') reads entry 9 before node 10 ('{F3}') writes it (the nodes are not in execution order)"),
    ("dangling node input", _set(["nodes", 3, "inputs", 0], 99),
     f"{N3}: inputs: 99 is not an entry id (the graph has 12 entries)"),
    ("float entry id", _set(["nodes", 3, "inputs", 0], 0.0),
     f"{N3}: inputs: 0.0 is not an entry id (the graph has 12 entries)"),
    ("bool entry id", _set(["nodes", 3, "inputs", 0], True),
     f"{N3}: inputs: True is not an entry id (the graph has 12 entries)"),
    ("dangling output", _set(["outputs"], [12]), "output 0: 12 is not an entry id (the graph has 12 entries)"),
    ("dangling storage", _set(["entries", 0, "storage"], 12),
     "entry 0: 12 is not a storage id (the graph has 12 storages)"),
    ("negative storage id", _set(["entries", 0, "storage"], -1),
     "entry 0: -1 is not a storage id (the graph has 12 storages)"),
    ("inputs list wrong", _set(["inputs"], [1]), "'inputs' lists nodes [1], but the input nodes are [0]"),
    ("params list short", _set(["params"], [1, 2]),
     "'params' lists nodes [1, 2], but the param nodes are [1, 2, 4, 5, 7, 8]"),
    ("entry nobody writes", lambda g: g["entries"].append({"dtype": "float32", "shape": [1], "storage": 3}),
     "entry 12 is not written by any node"),
    ("entry written twice", _set(["nodes", 6, "outputs"], [3]), f"entry 3 is written by {N3} and by {N6}"),
    ("negative dim", _set(["entries", 0, "shape"], [-1, 8]),
     "entry 0: its shape [-1, 8] is not a list of non-negative integers"),
    ("huge dims", _set(["entries", 0, "shape"], [2**40, 2**40]),
     "entry 0, float32[1099511627776, 1099511627776] (4835703278458516698824704 bytes), does not fit its "
     "storage 0 (32 bytes)"),
    ("too many dims", _set(["entries", 0, "shape"], [1] * 40),
     "entry 0: its shape has 40 dimensions (at most 32)"),
    ("negative storage bytes", _set(["storage", 0, "bytes"], -32),
     "storage 0: malformed (expected a non-negative byte count)"),
    ("version", _set(["version"], 1), "graph version 1 is not supported (this plait reads version 2)"),
    ("format", _set(["format"], "tvm.graph"), "not a plait graph (expected \"format\": \"plait.graph\")"),
    ("nodes not a list", _set(["nodes"], {}), "missing or malformed 'nodes'"),
    ("unknown node op", _set(["nodes", 3, "op"], "exec"),
     "node 3: malformed (expected an object with \"op\" one of input, param, call, copy, view)"),
    ("node name not a string", _set(["nodes", 3, "name"], 7), "node 3: malformed name"),
    ("param node with an input", _set(["nodes", 1, "inputs"], [0]),
     "node 1 ('p0'): a param node has exactly one output and no inputs"),
    ("call of another function", _set(["nodes", 3, "func"], F3),
     f"{N3}: argument 0 (input) of '{F3}' is float32[1, 16] (64 bytes), but entry 0 is float32[1, 8] (32 bytes)"),
    ("call of an unknown function", _set(["nodes", 3, "func"], "system"),
     f"{N3} calls 'system', which the artifact's manifest does not describe"),
    ("call without its workspace", lambda g: (_set(["nodes", 10, "workspace"], [])(g), g["entries"].pop()),
     f"{N10} passes 1 input, 1 output to '{F4}', which takes 1 input, 1 output, 1 workspace"),
    ("call with an extra input", _set(["nodes", 9, "inputs"], [6, 7, 8, 0]),
     f"{N9} passes 4 inputs, 1 output to '{F3}', which takes 3 inputs, 1 output"),
    ("workspace read", _set(["nodes", 10, "inputs"], [11]), f"{N10} reads entry 11, the workspace of {N10}"),
    ("workspace as output", _set(["outputs"], [11]), f"output 0 is entry 11, the workspace of {N10}"),
    ("duplicate output names", lambda g: (_set(["outputs"], [10, 10])(g), _set(["output_names"], ["y", "y"])(g)),
     "two outputs are named 'y'"),
    ("output names mismatch", _set(["output_names"], ["y", "z"]), "'output_names' must name each of the 1 outputs"),
    ("duplicate param names", _set(["nodes", 2, "name"], "p0"), "two params are named 'p0' (nodes 1 and 2)"),
    ("memory not counts", _set(["memory", "peak_bytes"], "lots"),
     "missing or malformed 'memory' (byte counts by kind)"),
    ("long hostile node name",
     lambda g: (_set(["nodes", 3, "name"], "n" * 100_000)(g), _set(["nodes", 3, "inputs", 0], 99)(g)),
     f"node 3 ('{'n' * 60}...'): inputs: 99 is not an entry id (the graph has 12 entries)"),
]


@pytest.mark.parametrize("change, message", [c[1:] for c in GRAPH_CASES], ids=[c[0] for c in GRAPH_CASES])
def test_tampered_graph_is_refused_with_its_reason(d, change, message):
    edit_graph(d, change)
    assert load_error(d) == f"cannot load graph artifact '{d}': graph.json: {message}"


@pytest.mark.parametrize("change, message", [c[1:] for c in GRAPH_CASES], ids=[c[0] for c in GRAPH_CASES])
def test_the_same_checks_guard_an_in_memory_artifact(art, change, message):
    g = json.loads(art.graph_json)
    change(g)
    bad = GraphArtifact(dumps(g), art.params, art.lib, art.target, manifest=art.manifest)
    with pytest.raises(ExecutorError) as e:
        GraphModule(bad)
    assert str(e.value) == f"graph: {message}"


def test_graph_json_that_is_not_json(d):
    text = (d / "graph.json").read_text()
    for bad in (text[: len(text) // 2].encode(), b"[" * 100_000, b"\xff{}"):
        (d / "graph.json").write_bytes(bad)
        with pytest.raises((ValueError, RecursionError)) as exc:
            json.loads(bad.decode("utf-8"))
        why = str(exc.value) if len(str(exc.value)) <= 120 else str(exc.value)[:120] + "..."
        assert load_error(d) == f"cannot load graph artifact '{d}': graph.json: not JSON ({why})"


def test_consistent_but_changed_graph_fails_the_hash_and_runs_in_memory(art, d):
    x = inputs(1)[0]
    harmless = [lambda g: swap(g["nodes"], 4, 5),  # two params in the other order: same meaning
                _set(["output_names"], ["probabilities"])]
    for change in harmless:
        fresh = shutil.copytree(d, d.parent / f"h{harmless.index(change)}")
        size = (fresh / "graph.json").stat().st_size
        edit_graph(fresh, change)
        new = (fresh / "graph.json").stat().st_size
        expected = ("graph.json does not match the sha256 in the manifest (the file was changed after export)"
                    if new == size else f"graph.json is {new} bytes, the manifest says {size} (the file was changed "
                                        "or truncated after export)")
        assert load_error(fresh) == f"cannot load graph artifact '{fresh}': {expected}"
        g = json.loads(art.graph_json)
        change(g)
        gm = GraphModule(GraphArtifact(dumps(g), art.params, art.lib, art.target, manifest=art.manifest))
        np.testing.assert_allclose(gm(x)[0], reference(x), rtol=1e-5, atol=1e-6)
    assert gm.output_names == ["probabilities"]


def test_huge_storage_is_refused_by_the_memory_limit_before_allocation(art):
    g = json.loads(art.graph_json)
    g["storage"][0]["bytes"] = 2**60
    bad = GraphArtifact(dumps(g), art.params, art.lib, art.target, manifest=art.manifest)
    with pytest.raises(MemoryLimitError) as e:
        GraphModule(bad, memory_limit="1GiB")
    total = 2**60 + g["memory"]["param_bytes"] + g["memory"]["activation_bytes"]  # the input, params, the pool
    assert str(e.value) == (f"the graph's buffers needs 1024.0 PiB ({total} bytes), more than the memory "
                            "limit of 1.0 GiB; raise it with --max-memory or the config key 'memory.limit'")


# ---- params ------------------------------------------------------------------------------------------

def write_params(d, **arrays):
    with open(d / "params.npz", "wb") as f:
        np.savez(f, **arrays)


def test_tampered_params_are_refused(art, d):
    p = {k: v.copy() for k, v in art.params.items()}
    where = f"cannot load graph artifact '{d}': params.npz"
    cases = [
        ({k: v for k, v in p.items() if k != "p3"}, "parameter 'p3' is missing"),
        ({**p, "p9": np.zeros(3, np.float32)}, "unexpected array 'p9' (the graph has no parameter of that name)"),
        ({**p, "p0": p["p0"].astype(np.float64)}, "parameter 'p0' is float64[16, 8]; the graph expects float32[16, 8]"),
        ({**p, "p0": p["p0"].reshape(8, 16)}, "parameter 'p0' is float32[8, 16]; the graph expects float32[16, 8]"),
        ({**p, "p0": p["p0"].astype(">f4")}, "parameter 'p0' is >f4[16, 8]; the graph expects float32[16, 8]"),
        ({**p, "p0": np.array([{"a": 1}], dtype=object)},
         "parameter 'p0' holds Python objects (pickled data is never loaded)"),
        ({**p, "p0": p["p0"] + 1}, None),  # same dtype and shape, other values: the hash
    ]
    for arrays, message in cases:
        write_params(d, **arrays)
        if message is None:
            assert load_error(d) == (f"cannot load graph artifact '{d}': params.npz does not match the sha256 in the "
                                     "manifest (the file was changed after export)")
        else:
            assert load_error(d) == f"{where}: {message}"


def test_corrupt_params_files_are_refused(art, d):
    good = (d / "params.npz").read_bytes()
    where = f"cannot load graph artifact '{d}': params.npz"
    (d / "params.npz").write_bytes(good[: len(good) // 2])
    assert load_error(d) == f"{where}: not a readable .npz archive (File is not a zip file)"
    (d / "params.npz").write_bytes(b"")
    assert load_error(d) == f"{where}: not a readable .npz archive (File is not a zip file)"
    # a flipped byte inside p0's data: the zip's CRC
    at = good.index(art.params["p0"].tobytes()) + 5
    (d / "params.npz").write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])
    assert load_error(d) == f"{where}: parameter 'p0': not a readable .npy array (Bad CRC-32 for file 'p0.npy')"
    # a header claiming 2^40 elements: refused from the header, nothing allocated
    hdr = np.lib.format.header_data_from_array_1_0(art.params["p0"])
    hdr["shape"] = (2**20, 2**20)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in art.params.items():
            with z.open(f"{k}.npy", "w") as f:
                if k == "p0":
                    np.lib.format.write_array_header_1_0(f, hdr)
                    f.write(v.tobytes())
                else:
                    np.lib.format.write_array(f, v)
    (d / "params.npz").write_bytes(buf.getvalue())
    assert load_error(d) == f"{where}: parameter 'p0' is float32[1048576, 1048576]; the graph expects float32[16, 8]"
    # the same array twice
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        for k, v in [*art.params.items(), ("p0", art.params["p0"])]:
            with z.open(f"{k}.npy", "w") as f:
                np.lib.format.write_array(f, v)
    (d / "params.npz").write_bytes(buf.getvalue())
    assert load_error(d) == f"{where}: the array 'p0' is stored twice"


def test_in_memory_params_are_checked(art):
    p = dict(art.params)
    cases = [
        ({k: v for k, v in p.items() if k != "p3"}, "the params: parameter 'p3' is missing"),
        ({**p, "p9": np.zeros(3, np.float32)},
         "the params: unexpected parameter 'p9' (the graph has no parameter of that name)"),
        ({**p, "p0": p["p0"].astype(np.float64)},
         "the params: parameter 'p0' is float64[16, 8]; the graph expects float32[16, 8]"),
        ({**p, "p0": [[0.0] * 8] * 16}, "the params: parameter 'p0' is a list, not a numpy array"),
    ]
    for params, message in cases:
        with pytest.raises(ExecutorError) as e:
            GraphModule(GraphArtifact(art.graph_json, params, art.lib, art.target, manifest=art.manifest))
        assert str(e.value) == message
    with pytest.raises(ExecutorError) as e:
        GraphModule(GraphArtifact(art.graph_json, p, art.lib, art.target))
    assert str(e.value) == ("the artifact has no manifest of its functions (make it with plait.build, "
                            "GraphArtifact.from_module or GraphArtifact.load)")
