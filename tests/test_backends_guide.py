"""docs/backends.md runs: its first ```python block is installed as the plugin module plait_vecacc (a
module plus a .dist-info with the guide's entry point, on sys.path), the other blocks are executed in
order in one namespace (with the target registries isolated), then the kinds build more models, checked
against numpy and ONNX Runtime."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import plait
from plait.errors import RegistryError
from plait.target import get_kind
from plait.target.testing import isolated_registry
from plait.testing.ort_reference import reference_session

DOC = Path(__file__).resolve().parents[1] / "docs" / "backends.md"
ROOT = DOC.parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def entry_point(text: str) -> str:
    """The guide's entry-point line (its ```toml block)."""
    (toml,) = re.findall(r"^```toml\n(.*?)^```$", text, flags=re.S | re.M)
    (line,) = [ln for ln in toml.splitlines() if ln.startswith("vecacc = ")]
    return line.replace('"', "")


def install_plugin(where: Path) -> Path:
    """The guide's one-file plugin, installed on a path: plait_vecacc.py plus its .dist-info."""
    text = DOC.read_text(encoding="utf-8")
    (where / "plait_vecacc.py").write_text(python_blocks(text)[0])
    dist = where / "plait_vecacc-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plait-vecacc\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[plait.backends]\n{entry_point(text)}\n")
    return where


@pytest.fixture
def guide(tmp_path, monkeypatch):
    """The namespace the guide's examples leave behind (vecacc from the plugin, pyref registered)."""
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path)))
    try:
        with isolated_registry():
            ns = {"__name__": "backends_guide"}
            for k, block in enumerate(python_blocks(DOC.read_text(encoding="utf-8"))[1:], 2):
                exec(compile(block, f"docs/backends.md, python block {k}", "exec"), ns)
            yield ns
    finally:
        sys.modules.pop("plait_vecacc", None)


def test_the_guide_has_a_complete_one_file_example_of_at_most_a_hundred_lines():
    text = DOC.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    assert len(blocks) == 3
    kind = blocks[0]
    assert len(kind.splitlines()) <= 100
    assert "class VecAcc(Backend):" in kind and "def tir_to_runtime" not in kind
    for hook in ("supports(self, call, target)", "patterns(self, target)", "cost(self, obj, target)",
                 "relay_to_tir(self, mod, target)"):
        assert f"def {hook}:" in kind
    assert entry_point(text) == "vecacc = plait_vecacc:VecAcc"
    assert "def relay_to_runtime(self, func, target):" in blocks[2]
    for page in ("kind-blas.md", "kind-llvm.md", "kind-onnxruntime.md"):
        assert f"]({page})" in text


def test_plait_targets_finds_the_installed_plugin(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(install_plugin(tmp_path)), str(ROOT)])}
    r = subprocess.run([sys.executable, "-m", "plait.cli", "targets"], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    block = r.stdout.split("\nvecacc ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block[:2] == [" [device cpu, cannot host]  toy vector accelerator: float32 elementwise operators, chains "
                         "fused in one pass", "  from: entry point 'vecacc' (plait_vecacc:VecAcc)"]
    assert "    -lanes=<int>  default 16    float32 lanes per cycle" in block
    assert block[-1] == "  hooks: cost, patterns, relay_to_tir, supports"


def test_the_guide_runs_and_its_kinds_do_not_leak(guide):
    assert [p.piece for p in guide["art"].placement] == ["host", "ref", "ref"]  # the last build: pyref
    assert get_kind("vecacc").origin == "entry point 'vecacc' (plait_vecacc:VecAcc)"
    assert get_kind("pyref").name == "pyref"


def test_kinds_do_not_leak_out_of_the_guide():  # runs after the test above has closed its isolation
    for name in ("vecacc", "pyref"):
        with pytest.raises(RegistryError, match=f"^unknown target kind '{name}'"):
            get_kind(name)


def _onnx_gate(batch=2, k=16, n=32, seed=3):
    """x @ W -> h; y = relu(h * sigmoid(h) + r) - h: matmul and sigmoid on the host, the rest on vec."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
        helper.make_node("Sigmoid", ["h"], ["s"], name="/gate/Sigmoid"),
        helper.make_node("Mul", ["h", "s"], ["m"], name="/gate/Mul"),
        helper.make_node("Add", ["m", "r"], ["a"], name="/gate/Add"),
        helper.make_node("Relu", ["a"], ["y0"], name="/gate/Relu"),
        helper.make_node("Sub", ["y0", "h"], ["y"], name="/out/Sub"),
    ]
    graph = helper.make_graph(
        nodes, "gate",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, k]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])],
        [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_vecacc_matches_onnxruntime(guide):
    pytest.importorskip("onnxruntime")
    model = _onnx_gate()
    rng = np.random.default_rng(7)
    feeds = {"x": rng.standard_normal((2, 16)).astype(np.float32),
             "r": rng.standard_normal((2, 32)).astype(np.float32)}
    sess = reference_session(model)
    (want,) = sess.run(None, feeds)
    mod = plait.from_onnx(model)
    # the host's facts pinned: the vec piece's estimate against the host's must not depend on this machine
    art = plait.build(mod, "host: c -simd-bits=512 -clock-mhz=2596; vec: vecacc")
    where = {p.call.meta["name"]: (p.piece, p.region) for p in art.placement}
    assert where == {"/fc/MatMul": ("host", None), "/gate/Sigmoid": ("host", None), "/gate/Mul": ("vec", "fma"),
                     "/gate/Add": ("vec", "fma"), "/gate/Relu": ("vec", None), "/out/Sub": ("vec", None)}
    assert [r.name for r in art.placement.regions] == ["fma"]
    assert art.piece_modules["vec"].function_names() == ["vec_0"]  # mul, add, relu, sub: one loop nest
    (got,) = plait.executor.GraphModule(art)(**feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # everything pinned to the host: the same numbers through the c kind alone
    art = plait.build(mod, "host: c; vec: vecacc", place="*=host")
    assert {p.piece for p in art.placement} == {"host"}
    (got,) = plait.executor.GraphModule(art)(**feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_vecacc_lowers_call_by_call_when_a_region_has_constants(guide):
    from plait.frontend.builder import Builder

    rng = np.random.default_rng(1)
    c1, c2 = rng.standard_normal((2, 3, 8)).astype(np.float32), rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = Builder("consts")
    x = b.input("x", (2, 3, 8))
    y = b.maximum(x * b.const(c1) + b.const(c2), x)
    art = plait.build(b.finish(y), "host: c; vec: vecacc", place="*=vec")
    assert {p.piece for p in art.placement} == {"vec"}
    assert art.piece_modules["vec"].function_names() == ["vec_add", "vec_maximum", "vec_multiply"]
    xv = rng.standard_normal((2, 3, 8)).astype(np.float32)
    (got,) = plait.executor.GraphModule(art)(x=xv)
    np.testing.assert_allclose(got, np.maximum(xv * c1 + c2, xv), rtol=1e-6, atol=1e-6)


def test_vecacc_declines_broadcasts_and_other_dtypes(guide):
    from plait.frontend.builder import Builder
    from plait.placement import PlacementError

    b = Builder("bcast")
    x = b.input("x", (4, 8))
    y = b.nn.relu(x + b.const(np.ones((8,), np.float32)), name="act")
    mod = b.finish(y)
    auto = plait.build(mod, "host: c; vec: vecacc")
    # the broadcast add stays on the host; the relu follows it there (fused with the add it costs next to nothing)
    assert [(p.call.op_name, p.piece) for p in auto.placement] == [("add", "host"), ("nn.relu", "host")]
    art = plait.build(mod, "host: c; vec: vecacc", place="act=vec")
    assert [(p.call.op_name, p.piece) for p in art.placement] == [("add", "host"), ("nn.relu", "vec")]
    add = art.placement.placed[0]
    assert add.alternatives["vec"] == "the 'supports' hook of target kind 'vecacc' says no"
    xv = np.arange(32, dtype=np.float32).reshape(4, 8) - 16
    (got,) = plait.executor.GraphModule(art)(x=xv)
    np.testing.assert_allclose(got, np.maximum(xv + 1, 0))
    b = Builder("ints")
    i = b.input("i", (4,), "int32")
    with pytest.raises(PlacementError) as e:
        plait.build(b.finish(b.nn.relu(i, name="r")), "host: c; vec: vecacc", place="r=vec")
    assert str(e.value) == ("call 'r' (nn.relu) is pinned to piece 'vec' by --place rule 'r=vec', but that piece "
                            "cannot run it: the 'supports' hook of target kind 'vecacc' says no")


def test_pyref_runs_a_tuple_valued_region(guide):
    """relay_to_runtime with two values leaving the region: both outputs are filled."""
    from plait.frontend.builder import Builder

    b = Builder("two")
    x = b.input("x", (3, 5))
    t = b.tanh(x, name="t")
    s = b.nn.relu(t, name="s")
    mod = b.finish(s, b.nn.dense(t, b.const(np.eye(5, dtype=np.float32)), name="fc"))
    art = plait.build(mod, "host: c; ref: pyref", place="t=ref,s=ref")
    assert [(p.call.meta["name"], p.piece) for p in art.placement] == [("t", "ref"), ("s", "ref"), ("fc", "host")]
    xv = np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5)
    got = plait.executor.GraphModule(art)(x=xv)
    np.testing.assert_allclose(got[0], np.maximum(np.tanh(xv), 0), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.tanh(xv), rtol=1e-6, atol=1e-6)
