"""Artifacts whose modules are not shared libraries export and load back: ONNX Runtime regions
(lib_<k>.onnx) and LLVM JIT modules (lib.ll)."""

import json

import numpy as np
import pytest

import plait
from plait.executor import GraphArtifact, GraphModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models

def test_ort_regions_export_and_load(tmp_path):
    model = onnx_models.mlp()
    mod = from_onnx(model)
    art = plait.build(mod, "host: c; ort: onnxruntime", place="Gemm=ort", config={"cc.cache_dir": str(tmp_path / "cc")})
    assert {p.piece for p in art.placement} == {"host", "ort"}
    x = np.random.default_rng(3).standard_normal((1, 256)).astype(np.float32)
    (want,) = GraphModule(art)(x=x)
    out = art.export(tmp_path / "art")
    manifest = json.loads((out / "manifest.json").read_text())
    onnx_files = [e for e in manifest["modules"] if e["file"] and e["file"].endswith(".onnx")]
    assert onnx_files and all(e["symbol"].startswith("ort_") for e in onnx_files)
    assert all((out / e["file"]).stat().st_size > 0 for e in onnx_files)
    (got,) = GraphModule(GraphArtifact.load(out))(x=x)
    np.testing.assert_array_equal(got, want)


def test_llvm_module_exports_as_ir_and_is_jit_compiled_again(tmp_path):
    pytest.importorskip("llvmlite")
    model = onnx_models.resnet_block()
    mod = from_onnx(model)
    art = plait.build(mod, "llvm")
    x = np.random.default_rng(4).standard_normal((1, 64, 56, 56)).astype(np.float32)
    name = GraphModule(art).input_names[0]
    (want,) = GraphModule(art)(**{name: x})
    out = art.export(tmp_path / "art")
    manifest = json.loads((out / "manifest.json").read_text())
    (entry,) = manifest["modules"]
    assert entry["file"] == "lib.ll" and entry["signatures"] and "define " in (out / "lib.ll").read_text()
    loaded = GraphArtifact.load(out)
    assert type(loaded.lib).__name__ == "LLVMModule"
    (got,) = GraphModule(loaded)(**{name: x})
    np.testing.assert_array_equal(got, want)


def test_llvm_module_compiled_for_missing_cpu_features_loads_but_refuses_to_run(tmp_path, monkeypatch):
    pytest.importorskip("llvmlite")
    import plait.backends.llvm.backend as llvm_kind
    from plait.errors import PlaitError

    art = plait.build(from_onnx(onnx_models.mlp(sizes=(8, 16, 4))), "llvm")
    out = art.export(tmp_path / "art")
    monkeypatch.setattr(llvm_kind, "missing_host_features", lambda cpu, features: ["avx512f"])
    loaded = GraphArtifact.load(out)
    cpu = json.loads((out / "manifest.json").read_text())["modules"][0]["cpu"]
    with pytest.raises(PlaitError) as e:
        GraphModule(loaded)
    assert str(e.value) == (f"function 'fused_nn_dense_add_nn_relu' cannot run here: lib.ll was compiled for cpu "
                            f"'{cpu}' with features this machine lacks (avx512f)")
