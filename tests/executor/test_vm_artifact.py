"""Export and load of a VM executable: loaded in a fresh process, it gives the outputs of the VM it was
exported from; its bytecode is checked before any library is loaded."""

import json
import subprocess
import sys

import numpy as np
import pytest

import plait
from plait.errors import PlaitError
from plait.executor import VirtualMachine, VMExecutable
from plait.executor.manifest import file_record
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models

from tests.executor.test_vm_control import _loop_module, onnx_loop_model

RUN_LOADED = """
import sys, numpy as np
from plait.executor import VMExecutable, VirtualMachine
exe = VMExecutable.load(sys.argv[1])
feeds = dict(np.load(sys.argv[2]))
np.savez(sys.argv[3], *VirtualMachine(exe)(**feeds))
"""


@pytest.fixture(scope="module")
def cc_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def _fresh_process_outputs(art, feeds, tmp_path):
    np.savez(tmp_path / "feeds.npz", **feeds)
    subprocess.run([sys.executable, "-c", RUN_LOADED, str(art), str(tmp_path / "feeds.npz"), str(tmp_path / "o.npz")],
                   check=True, cwd=str(tmp_path.parent), env=_env())
    got = np.load(tmp_path / "o.npz")
    return [got[f"arr_{i}"] for i in range(len(got.files))]


def _env():
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {**os.environ, "PYTHONPATH": root}


@pytest.mark.parametrize("which", ["mlp", "loop"])
def test_export_then_load_in_a_fresh_process_gives_equal_outputs(which, tmp_path, cc_cache):
    if which == "mlp":
        model = onnx_models.mlp(sizes=(8, 6, 4))
        feeds = {"x": np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)}
    else:
        model = onnx_loop_model(with_cond=True)
        feeds = {"M": np.array(6, np.int64), "x": np.full((2, 3), 0.25, np.float32), "limit": np.array(3, np.float32)}
    exe = plait.build(from_onnx(model), target="c", executor="vm", config={"cc.cache_dir": cc_cache})
    want = VirtualMachine(exe)(**feeds)
    art = exe.export(tmp_path / "art")
    assert sorted(p.name for p in art.iterdir()) == ["lib.so", "manifest.json", "params.npz", "vm.json"]
    got = _fresh_process_outputs(art, feeds, tmp_path)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    loaded = VMExecutable.load(art)
    assert loaded.text() == exe.text() and loaded.input_names == exe.input_names


def _rewrite(art, edit):
    """Edit vm.json and record its new hash in the manifest (a consistent edit: only the checks of the
    bytecode itself can catch it)."""
    vm = json.loads((art / "vm.json").read_text())
    edit(vm)
    data = json.dumps(vm).encode()
    (art / "vm.json").write_bytes(data)
    man = json.loads((art / "manifest.json").read_text())
    man["files"]["vm.json"] = file_record(data)
    (art / "manifest.json").write_text(json.dumps(man))


def test_load_checks_the_bytecode(tmp_path, cc_cache):
    exe = plait.build(_loop_module(with_if=True), target="c", executor="vm", config={"cc.cache_dir": cc_cache})
    art = exe.export(tmp_path / "a")
    where = f"cannot load VM artifact '{art}'"
    (art / "vm.json").write_text((art / "vm.json").read_text().replace('"m"', '"n"'))
    with pytest.raises(PlaitError) as e:
        VMExecutable.load(art)
    assert str(e.value) == (f"{where}: vm.json does not match the sha256 in the manifest (the file was changed "
                            "after export)")

    loop = next(i for i in exe.instructions if i.op == "loop")
    k, call = next((k, i) for k, i in enumerate(loop.blocks[0]) if i.op == "call")
    n = len(call.src) + len(call.dst) + len(call.ws)

    def extra_arg(vm):
        block = next(i for i in vm["instructions"] if i["op"] == "loop")["blocks"][0]
        block[k]["src"].append(block[k]["src"][0])
    art = exe.export(tmp_path / "b")
    _rewrite(art, extra_arg)
    with pytest.raises(PlaitError) as e:
        VMExecutable.load(art)
    where_b = exe.instructions.index(loop) + 1 + k
    assert str(e.value) == (f"cannot load VM artifact '{art}': vm.json: instruction {where_b} (call): '{call.func}' "
                            f"takes {n} buffers, the call passes {n + 1}")

    def no_yield(vm):
        loop = next(i for i in vm["instructions"] if i["op"] == "loop")
        loop["blocks"][0].pop()
    art = exe.export(tmp_path / "c")
    _rewrite(art, no_yield)
    with pytest.raises(PlaitError) as e:
        VMExecutable.load(art)
    assert str(e.value).startswith(f"cannot load VM artifact '{art}': vm.json: instruction ")
    assert str(e.value).endswith(" (loop): expected 1 block(s), each ending with 'yield'")

    def bad_register(vm):
        vm["instructions"][-1]["src"] = [len(vm["registers"])]
    art = exe.export(tmp_path / "d")
    _rewrite(art, bad_register)
    with pytest.raises(PlaitError) as e:
        VMExecutable.load(art)
    assert str(e.value).endswith(f"(ret): register {len(exe.registers)} out of range")
