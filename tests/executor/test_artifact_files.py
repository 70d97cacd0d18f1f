"""The files of an exported artifact: a changed, truncated, foreign or missing library is never loaded; the
manifest itself is checked; exporting again into the same directory gives the new model."""

import io
import shutil

import numpy as np
import pytest

from plait.errors import PlaitError
from plait.executor import GraphArtifact, GraphModule
from plait.executor.params_file import read_params
from plait.limits import MemoryLimitError

from tests.executor.artifacts import build, edit_manifest, inputs, load_error, reference

F1, F3 = "fused_nn_dense_add_nn_relu", "fused_nn_dense_add"


def changed(name, now, was):
    if now == was:
        return f"{name} does not match the sha256 in the manifest (the file was changed after export)"
    return f"{name} is {now} bytes, the manifest says {was} (the file was changed or truncated after export)"


# ---- libraries ----------------------------------------------------------------------------------------

def test_a_bad_library_is_never_loaded(d, cache, tmp_path):
    good = (d / "lib.so").read_bytes()
    n = len(good)
    other = build(cache, sizes=(8, 32, 32, 4)).export(tmp_path / "other")  # the same function names
    assert sorted(GraphArtifact.load(other).functions) == [F3, F1, F1 + "_1", "fused_nn_softmax"]
    foreign = (other / "lib.so").read_bytes()
    flipped = bytearray(good)
    flipped[n // 2] ^= 0xFF
    cases = [("truncated", good[: n // 2]), ("empty", b""), ("flipped", bytes(flipped)),
             ("another model's", foreign), ("not a library", b"\x7fELF" + b"\0" * (n - 4)),
             ("grown", good + b"\0")]
    for what, data in cases:
        (d / "lib.so").write_bytes(data)
        assert load_error(d) == f"cannot load graph artifact '{d}': {changed('lib.so', len(data), n)}", what
    (d / "lib.so").unlink()
    assert load_error(d) == f"cannot load graph artifact '{d}': lib.so is missing"
    (d / "lib.so").mkdir()
    assert load_error(d) == f"cannot load graph artifact '{d}': lib.so is missing"


def test_missing_files(d):
    for name in ("graph.json", "params.npz"):
        fresh = shutil.copytree(d, d.parent / name)
        (fresh / name).unlink()
        assert load_error(fresh) == f"cannot load graph artifact '{fresh}': {name} is missing"
    old = shutil.copytree(d, d.parent / "old")
    (old / "manifest.json").rename(old / "modules.json")  # what an older plait wrote
    assert load_error(old) == (f"cannot load graph artifact '{old}': no manifest.json (it was exported by an older "
                               "plait or the export did not finish: export it again)")
    assert load_error(d.parent / "nothing") == f"cannot load graph artifact '{d.parent / 'nothing'}': no such directory"


def test_exporting_again_into_the_same_directory_loads_the_new_model(cache, tmp_path):
    """dlopen hands out an already loaded library again for the same path: a library loaded from a
    private copy named by its content never gets confused with an older one."""
    out = tmp_path / "model"
    x = inputs(1)[0]
    small = GraphModule(GraphArtifact.load(build(cache).export(out)))
    np.testing.assert_allclose(small(x)[0], reference(x), rtol=1e-5, atol=1e-6)
    big_sizes = (8, 64, 64, 4)
    big = GraphModule(GraphArtifact.load(build(cache, sizes=big_sizes).export(out)))
    np.testing.assert_allclose(big(x)[0], reference(x, big_sizes), rtol=1e-5, atol=1e-6)
    (out / "lib.so").write_bytes(b"")  # the loaded code is not the file in the artifact
    np.testing.assert_allclose(small(x)[0], reference(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(big(x)[0], reference(x, big_sizes), rtol=1e-5, atol=1e-6)


# ---- the manifest ---------------------------------------------------------------------------------------

def _arg(m, func, k):
    return m["functions"][func]["args"][k]


MANIFEST_CASES = [
    ("format", lambda m: m.update(format="zip"), "not a plait artifact manifest (expected \"format\": "
                                                 "\"plait.artifact\")"),
    ("version", lambda m: m.update(version=2), "manifest version 2 is not supported (this plait reads version 1)"),
    ("files", lambda m: m.update(files=[]), "missing or malformed 'files'"),
    ("sha256", lambda m: m["files"]["lib.so"].update(sha256="xyz"),
     "file 'lib.so': malformed record (expected sha256 and bytes)"),
    ("negative size", lambda m: m["files"]["lib.so"].update(bytes=-1),
     "file 'lib.so': malformed record (expected sha256 and bytes)"),
    ("file name", lambda m: m["files"].update({"../lib.so": m["files"]["lib.so"]}), "unexpected file name '../lib.so'"),
    ("graph not listed", lambda m: m["files"].pop("graph.json"), "'files' does not list graph.json"),
    ("library not listed", lambda m: m["files"].pop("lib.so"), "module 0: file 'lib.so' is not in files"),
    ("unused library", lambda m: m["files"].update({"lib_1.so": m["files"]["lib.so"]}),
     "file 'lib_1.so' is no module's"),
    ("object without C", lambda m: m["files"].update({"lib.o": m["files"]["lib.so"]}),
     "file 'lib.o' is the object file of no C module"),
    ("modules", lambda m: m.update(modules=[]), "missing or malformed 'modules'"),
    ("module file", lambda m: m["modules"][0].update(file="/tmp/x.so"), "malformed module 0"),
    ("no module file", lambda m: m["modules"][0].pop("file"), "malformed module 0"),
    ("functions", lambda m: m.update(functions=None), "missing or malformed 'functions'"),
    ("function module", lambda m: m["functions"][F1].update(module=5),
     f"function '{F1}': module 5 out of range (the manifest lists 1 modules)"),
    ("argument bytes", lambda m: _arg(m, F1, 0).update(bytes=31),
     f"function '{F1}': argument 0 is float32[1, 8] (32 bytes), not 31 bytes"),
    ("argument dtype", lambda m: _arg(m, F1, 0).update(dtype="float128"),
     f"function '{F1}': argument 0 is malformed (expected role, dtype, shape, bytes)"),
    ("argument shape", lambda m: _arg(m, F1, 0).update(shape=[1, -8]),
     f"function '{F1}': argument 0: its shape [1, -8] is not a list of non-negative integers"),
    ("argument order", lambda m: _arg(m, F1, 3).update(role="input") or _arg(m, F1, 0).update(role="output"),
     f"function '{F1}': argument 1 (input) comes after an output (the order is inputs, outputs, workspaces)"),
]


@pytest.mark.parametrize("change, message", [c[1:] for c in MANIFEST_CASES], ids=[c[0] for c in MANIFEST_CASES])
def test_tampered_manifest_is_refused(d, change, message):
    edit_manifest(d, change)
    assert load_error(d) == f"cannot load graph artifact '{d}': manifest.json: {message}"


def test_manifest_against_the_graph_and_the_library(d):
    where = f"cannot load graph artifact '{d}'"
    fresh = shutil.copytree(d, d.parent / "a")
    edit_manifest(fresh, lambda m: _arg(m, F1, 0).update(shape=[1, 4], bytes=16))
    assert load_error(fresh) == (f"cannot load graph artifact '{fresh}': graph.json: node 3 ('{F1}'): argument 0 "
                                 f"(input) of '{F1}' is float32[1, 4] (16 bytes), but entry 0 is float32[1, 8] "
                                 "(32 bytes)")
    fresh = shutil.copytree(d, d.parent / "b")
    edit_manifest(fresh, lambda m: m["functions"].pop(F1))
    assert load_error(fresh) == (f"cannot load graph artifact '{fresh}': graph.json: node 3 ('{F1}') calls '{F1}', "
                                 "which the artifact's manifest does not describe")
    # a function the library does not have
    edit_manifest(d, lambda m: m["functions"].update(extra={"module": 0, "args": []}))
    assert load_error(d) == f"{where}: function 'extra' is not in lib.so (module 0)"
    (d / "manifest.json").write_text('{"format": ')
    assert load_error(d) == f"{where}: manifest.json: not JSON (Expecting value: line 1 column 12 (char 11))"


def test_two_module_artifact_checks_which_module_has_each_function(art, cache, tmp_path):
    from plait.backends.c.backend import build_c
    from plait.tir.stmt import PrimFunc

    funcs = {k: f for k, f in art.ir.items() if isinstance(f, PrimFunc)}
    host = build_c([funcs[k] for k in sorted(funcs) if k != F3], cache_dir=str(cache), name="host")
    host.import_module(build_c([funcs[F3], funcs[F1]], cache_dir=str(cache), name="dsp"))  # F1 twice: host first
    two = GraphArtifact.from_module(art.ir, host, "c")
    out = two.export(tmp_path / "two")
    x = inputs(1)[0]
    np.testing.assert_allclose(GraphModule(GraphArtifact.load(out))(x)[0], reference(x), rtol=1e-5, atol=1e-6)
    assert {k: f["module"] for k, f in GraphArtifact.load(out).manifest["functions"].items()} == {
        F1: 0, F1 + "_1": 0, F3: 1, "fused_nn_softmax": 0}
    edit_manifest(out, lambda m: m["functions"][F3].update(module=0))
    assert load_error(out) == f"cannot load graph artifact '{out}': function '{F3}' is not in lib.so (module 0)"
    edit_manifest(out, lambda m: (m["functions"][F3].update(module=1), m["functions"][F1].update(module=1)))
    assert load_error(out) == (f"cannot load graph artifact '{out}': function '{F1}' is found in lib.so before "
                               "lib_1.so, which the manifest names")
    edit_manifest(out, lambda m: (m["functions"][F1].update(module=0), m["modules"][0].update(imports=[])))
    assert load_error(out) == (f"cannot load graph artifact '{out}': function '{F3}' is in lib_1.so (module 1), which "
                               "the library does not import")


# ---- memory limit ------------------------------------------------------------------------------------------

def test_load_checks_file_sizes_and_param_bytes_against_the_memory_limit(art, d):
    size = (d / "manifest.json").stat().st_size
    with pytest.raises(MemoryLimitError) as e:
        GraphArtifact.load(d, memory_limit=1000)
    assert str(e.value) == (f"'{d / 'manifest.json'}' needs {size / 1024:.1f} KiB ({size} bytes), more than the "
                            "memory limit of 1000 B; raise it with --max-memory or the config key 'memory.limit'")
    # a compressed params.npz claims more than its size: refused from the headers, before reading
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.zeros_like(v) for k, v in art.params.items()})
    assert len(buf.getvalue()) < 1500
    with pytest.raises(MemoryLimitError) as e:
        read_params(buf.getvalue(), art.graph, "params.npz", 1500)
    assert str(e.value) == ("the params needs 1.9 KiB (1936 bytes), more than the memory limit of 1.5 KiB; raise it "
                            "with --max-memory or the config key 'memory.limit'")
    assert sorted(read_params(buf.getvalue(), art.graph, "params.npz", 2000)) == sorted(art.params)


# ---- loading a verified library -------------------------------------------------------------------------

def test_a_library_is_loaded_from_its_checked_bytes(art, d, monkeypatch):
    import plait.runtime.module as rt

    x = inputs(1)[0]
    data = (d / "lib.so").read_bytes()
    lib = rt.load_library(data, d / "lib.so")
    assert lib.path != d / "lib.so" and lib.path.read_bytes() == data  # a private copy named by its content
    # when no private copy can be written (e.g. a read-only or noexec temp dir), the file itself, if unchanged
    monkeypatch.setattr(rt, "_private_dir", lambda: d / "lib.so" / "not a dir")
    back = GraphArtifact.load(d)
    assert back.lib.path == d / "lib.so"
    np.testing.assert_allclose(GraphModule(back)(x)[0], reference(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(PlaitError) as e:
        rt.load_library(data[:-1], d / "lib.so")
    assert str(e.value) == (f"cannot load library '{d / 'lib.so'}': it cannot be copied to a private directory and "
                            "changed since it was checked")


def test_a_library_with_a_malformed_embedded_manifest(tmp_path):
    from plait.runtime import load_module
    from plait.runtime.cc import compile_source

    for body in ('"{}"', '"not json"', '"{\\"name\\": \\"m\\", \\"signatures\\": {\\"f\\": [\\"float128\\"]}}"', "0"):
        so = compile_source(f"const char* plait_manifest(void) {{ return {body}; }}\n", cache_dir=tmp_path)
        with pytest.raises(PlaitError) as e:
            load_module(so)
        assert str(e.value) == f"library '{so}' has a malformed plait_manifest"


def test_a_cortex_m_artifact_loads_and_exports_its_c_again(cache, tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (.ci/run installs it)")
    out = build(cache, target="c -mcpu=cortex-m7f").export(tmp_path / "m7")
    assert sorted(p.name for p in out.iterdir()) == ["graph.json", "lib.c", "lib.o", "manifest.json", "params.npz"]
    back = GraphArtifact.load(out)
    assert back.lib.function_names() == sorted(back.functions)
    again = back.export(tmp_path / "again")
    for name in ("graph.json", "lib.c", "params.npz"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    size = (out / "lib.o").stat().st_size
    (out / "lib.o").write_bytes(b"")  # the object file a firmware build links is checked too
    assert load_error(out) == f"cannot load graph artifact '{out}': {changed('lib.o', 0, size)}"
