"""--cache-dir and --max-memory on the commands that build (run --target, compile)."""

import hashlib
import re

import numpy as np
import pytest

import plait.driver
from plait.cli import main
from plait.runtime import cc_cache

from .conftest import RANDOM_X


@pytest.fixture(autouse=True)
def fresh_cache_state(monkeypatch):
    """A process that has not yet warned about, cleaned or fallen back from any cache dir."""
    monkeypatch.setattr(cc_cache, "_unusable", {})
    monkeypatch.setattr(cc_cache, "_cleaned", set())
    monkeypatch.setattr(cc_cache, "_fallback", [])


def entries(cache):
    """The cached libraries of ``cache``, each checked against its hash file."""
    libs = sorted(cache.glob("*.so"))
    for lib in libs:
        digest, name = (cache / f"{lib.name}.sha256").read_text().split()
        assert (digest, name) == (hashlib.sha256(lib.read_bytes()).hexdigest(), lib.name)
    return libs


@pytest.mark.parametrize("cmd", ["run", "compile"])
def test_relative_cache_dir(mlp_path, tmp_path, monkeypatch, capsys, cmd):
    monkeypatch.chdir(tmp_path)
    extra = ["--target", "c"] if cmd == "run" else ["-o", "out"]
    assert main([cmd, mlp_path, "--cache-dir", "cache", *extra]) == 0
    assert capsys.readouterr().err == (RANDOM_X if cmd == "run" else "")
    assert len(entries(tmp_path / "cache")) == 1


def test_default_cache_follows_xdg_cache_home(mlp_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["compile", mlp_path, "-o", str(tmp_path / "out")]) == 0
    assert len(entries(tmp_path / "xdg" / "plait" / "cc")) == 1


def test_unusable_cache_dir_warns_once_and_still_runs(mlp_path, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "cc"
    x = np.random.default_rng(2).standard_normal((1, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["run", mlp_path, "--target", "c", "--cache-dir", str(bad), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "a.npz")]) == 0
    got = capsys.readouterr()
    assert got.out == f"wrote 1 output(s) to {tmp_path / 'a.npz'}: y\n"
    assert re.fullmatch(re.escape(f"plait: warning: compile cache '{bad}' is not usable (a parent of it is not a "
                                  "directory); compiling into the private temporary directory '")
                        + r"[^']*/plait-cc-[^'/]+' for this process\n", got.err), got.err
    assert main(["run", mlp_path, "--target", "c", "--cache-dir", str(bad), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "b.npz")]) == 0
    assert capsys.readouterr().err == ""  # once per process and directory
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        np.testing.assert_array_equal(a["y"], b["y"])


def test_cache_dir_needs_target_in_run(mlp_path, capsys):
    assert main(["run", mlp_path, "--cache-dir", "x"]) == 2
    assert capsys.readouterr().err == "plait: error: --cache-dir needs --target: only a compiled run builds code\n"


@pytest.mark.parametrize("cmd", ["run", "compile"])
def test_build_config_gets_the_cache_and_the_limit(mlp_path, tmp_path, monkeypatch, cmd):
    seen = {}
    real = plait.driver.build

    def spy(mod, **kwargs):
        seen.update(kwargs["config"] or {})
        return real(mod, **kwargs)

    monkeypatch.setattr(plait.driver, "build", spy)
    extra = ["--target", "c"] if cmd == "run" else ["-o", str(tmp_path / "out")]
    assert main([cmd, mlp_path, "--cache-dir", str(tmp_path / "c"), "--max-memory", "3MiB", *extra]) == 0
    assert seen["cc.cache_dir"] == str(tmp_path / "c")
    assert seen["memory.limit"] == 3 * 1024 * 1024
