"""The compile cache: a bad entry is rebuilt, never loaded; an unusable directory falls back; relative
directories, killed compiles and concurrent builds work."""

import hashlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

from plait.runtime import CSourceModule, DSOModule
from plait.runtime import cc as ccmod
from plait.runtime import cc_cache
from plait.runtime.cc import compile_source
from plait.runtime.cc_cache import CompileCacheWarning

SRC_A = "#include <stdint.h>\nint32_t answer(int32_t* out) { out[0] = 42; return 0; }\n"
SRC_B = "#include <stdint.h>\nint32_t other(int32_t* out) { out[0] = 7; return 0; }\n"


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """Each test sees a process that has not yet warned about, cleaned or fallen back from any dir."""
    monkeypatch.setattr(cc_cache, "_unusable", {})
    monkeypatch.setattr(cc_cache, "_cleaned", set())
    monkeypatch.setattr(cc_cache, "_fallback", [])


@pytest.fixture
def compiles(monkeypatch):
    """The number of times the C compiler was run to build (not asked for its version)."""
    count = []
    real = ccmod._run

    def counting(cmd, name, cwd):
        count.append(cmd)
        return real(cmd, name, cwd)

    monkeypatch.setattr(ccmod, "_run", counting)
    return count


def answer(path) -> int:
    import numpy as np

    out = np.zeros(1, np.int32)
    DSOModule(path)["answer"](out)
    return int(out[0])


def build(source=SRC_A, cache_dir=None):
    """The cached library's path, not loaded: the tests damage files in place, which would crash this
    process if it had them mapped (the cache itself never writes an entry in place)."""
    sig = {"answer": ("ptr",)} if "answer" in source else {"other": ("ptr",)}
    return compile_source(CSourceModule(source, sig).full_source(), flags=["-O1"], cache_dir=cache_dir)


def test_entries_are_stored_with_their_hash(tmp_path, compiles):
    path = build(cache_dir=tmp_path)
    assert path.parent == tmp_path and re.fullmatch(r"[0-9a-f]{32}\.so", path.name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / f"{path.name}.sha256").read_text() == f"{digest}  {path.name}\n"
    assert build(cache_dir=tmp_path) == path
    assert len(compiles) == 1  # the second build was a verified hit
    assert answer(path) == 42
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, f"{path.name}.sha256", "locks"])


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _flip(p):
    data = bytearray(p.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 64):
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))


def _empty(p):
    p.write_bytes(b"")


def _no_hash_file(p):
    p.with_name(p.name + ".sha256").unlink()


def _hash_of_other_content(p):
    p.with_name(p.name + ".sha256").write_text(f"{'0' * 64}  {p.name}\n")


@pytest.mark.parametrize("damage", [_truncate, _flip, _empty, _no_hash_file, _hash_of_other_content])
def test_a_damaged_entry_is_rebuilt_not_loaded(tmp_path, compiles, damage):
    path = build(cache_dir=tmp_path)
    good = path.read_bytes()
    damage(path)
    assert build(cache_dir=tmp_path) == path
    assert len(compiles) == 2
    assert path.read_bytes() == good  # the same compile again (names relative to the build dir)
    assert answer(path) == 42


@pytest.mark.parametrize("with_its_hash_file", [False, True])
def test_a_foreign_library_under_the_keys_name_is_rebuilt(tmp_path, compiles, with_its_hash_file):
    mine, foreign = build(SRC_A, tmp_path), build(SRC_B, tmp_path)
    os.replace(foreign, mine)  # a valid .so, but another source's
    if with_its_hash_file:
        os.replace(foreign.with_name(foreign.name + ".sha256"), mine.with_name(mine.name + ".sha256"))
    assert build(SRC_A, tmp_path) == mine
    assert len(compiles) == 3
    assert answer(mine) == 42


def test_a_directory_under_the_keys_name_is_replaced(tmp_path, compiles):
    path = build(cache_dir=tmp_path)
    path.unlink()
    (path / "junk").mkdir(parents=True)
    assert build(cache_dir=tmp_path) == path and path.is_file()
    assert answer(path) == 42


def _warned(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, CompileCacheWarning)]


def test_cache_whose_parent_is_a_file_falls_back_with_one_warning(tmp_path, compiles):
    (tmp_path / "file").write_text("not a directory")
    bad = tmp_path / "file" / "cc"
    with pytest.warns(CompileCacheWarning) as record:
        path = build(cache_dir=bad)
        again = build(cache_dir=bad)
        build(SRC_B, cache_dir=bad)
    fallback = cc_cache.fallback_dir()
    assert _warned(record) == [f"compile cache '{bad}' is not usable (a parent of it is not a directory); "
                               f"compiling into the private temporary directory '{fallback}' for this process"]
    assert path == again and path.parent == fallback and answer(path) == 42
    assert len(compiles) == 2
    assert fallback.name.startswith("plait-cc-") and fallback.parent != tmp_path


def test_cache_that_is_a_file_falls_back(tmp_path):
    (tmp_path / "cc").write_text("")
    with pytest.warns(CompileCacheWarning, match=re.escape(f"'{tmp_path / 'cc'}' is not usable (it exists and is "
                                                           "not a directory)")):
        assert answer(build(cache_dir=tmp_path / "cc")) == 42


def test_read_only_cache_directory_falls_back():
    """/sys is a directory nobody can create files in, root included (chmod would not stop root)."""
    with pytest.warns(CompileCacheWarning) as record:
        path = build(cache_dir="/sys")
    (msg,) = _warned(record)
    assert re.fullmatch(r"compile cache '/sys' is not usable \((it is not writable|Operation not permitted|Read-only "
                        r"file system|Permission denied)\); compiling into the private temporary directory "
                        + re.escape(f"'{cc_cache.fallback_dir()}'") + " for this process", msg)
    assert path.parent == cc_cache.fallback_dir() and answer(path) == 42


def test_cache_failing_after_the_checks_falls_back(tmp_path, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cc_cache, "build_dir", no_space)
    with pytest.warns(CompileCacheWarning, match=re.escape(f"'{tmp_path}' is not usable (No space left on device)")):
        with pytest.raises(cc_cache.CacheError) as e:
            build(cache_dir=tmp_path)
    assert str(e.value) == f"cannot write compiled code to '{cc_cache.fallback_dir()}': No space left on device"


def test_relative_cache_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = build(cache_dir="rel/cc")
    assert path.is_absolute() and path.parent == tmp_path / "rel" / "cc"
    assert answer(path) == 42
    monkeypatch.chdir(tmp_path / "rel")
    assert build(cache_dir="cc") == path


def test_default_dir_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc_cache.default_cache_dir() == tmp_path / "xdg" / "plait" / "cc"
    assert build().parent == tmp_path / "xdg" / "plait" / "cc"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/not/allowed")  # the XDG spec says: ignore it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cc_cache.default_cache_dir() == tmp_path / "home" / ".cache" / "plait" / "cc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cc_cache.default_cache_dir() == tmp_path / "home" / ".cache" / "plait" / "cc"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_build_dirs_are_removed(tmp_path):
    now = int(time.time())
    host = cc_cache._host_tag()
    dead = tmp_path / f"tmp.{_dead_pid()}.{now}.{host}.abc"
    old = tmp_path / f"tmp.{os.getpid()}.{now - 2 * cc_cache.STALE_SECONDS}.{host}.def"
    live = tmp_path / f"tmp.{os.getpid()}.{now}.{host}.ghi"
    elsewhere = tmp_path / f"tmp.{_dead_pid()}.{now}.00000000.jkl"  # another host's: only age counts
    legacy_old, legacy_new = tmp_path / "tmpab_cd123", tmp_path / "tmpzz_zz999"
    keep = tmp_path / "tmp.notours"
    for d in (dead, old, live, elsewhere, legacy_old, legacy_new, keep):
        (d / "x.c").parent.mkdir()
        (d / "x.c").write_text("int x;")
    os.utime(legacy_old, (now - 2 * cc_cache.STALE_SECONDS,) * 2)
    build(cache_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(
        ["locks", live.name, elsewhere.name, legacy_new.name, keep.name])


def test_a_killed_compile_leaves_nothing_behind(tmp_path):
    """A process killed during gcc leaves its build dir; the next process removes it and builds."""
    cache = tmp_path / "cache"
    slow = tmp_path / "slowcc"
    slow.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo slowcc 1; exit 0; }\nexec sleep 60\n')
    slow.chmod(0o755)
    code = textwrap.dedent(f"""
        from plait.runtime.cc import compile_source
        compile_source("int x;", cc={str(slow)!r}, cache_dir={str(cache)!r})
    """)
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not any(cache.glob("tmp.*/*.c")) and time.monotonic() < deadline:
            time.sleep(0.05)
        (left,) = cache.glob("tmp.*")
        assert left.name.startswith(f"tmp.{p.pid}.")
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the Python process and its sleeping "compiler"
        p.wait()
    path = build(cache_dir=cache)
    assert answer(path) == 42
    assert not list(cache.glob("tmp*"))


def test_concurrent_processes_build_the_same_key(tmp_path):
    """Both succeed; the compiler runs once, the second process waits for it and reuses the entry."""
    log = tmp_path / "compiles.log"
    slow = tmp_path / "slowgcc"
    slow.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec gcc --version\necho run >> {log}\nsleep 1\n'
                    'exec gcc "$@"\n')
    slow.chmod(0o755)
    code = textwrap.dedent(f"""
        import numpy as np
        from plait.runtime import CSourceModule
        mod = CSourceModule({SRC_A!r}, {{"answer": ("ptr",)}}).compile(cc={str(slow)!r}, cache_dir={str(tmp_path)!r})
        out = np.zeros(1, np.int32)
        mod["answer"](out)
        print(out[0], mod.path)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert [(r[2], r[1]) for r in results] == [(0, ""), (0, "")]
    outs = {r[0] for r in results}
    assert len(outs) == 1 and outs.pop().startswith("42 ")
    assert log.read_text() == "run\n"


def test_concurrent_threads_build_the_same_key(tmp_path, compiles):
    paths, errors = [], []

    def one():
        try:
            paths.append(build(cache_dir=tmp_path))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(paths)) == 1 and len(paths) == 4
    assert len(compiles) == 1


def test_warning_is_not_repeated_for_the_same_dir(tmp_path):
    (tmp_path / "f").write_text("")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        build(cache_dir=tmp_path / "f" / "a")
        build(cache_dir=tmp_path / "f" / "a")
        build(cache_dir=tmp_path / "f" / "b")
    assert [m.split(" is not")[0] for m in _warned(record)] == [f"compile cache '{tmp_path / 'f' / 'a'}'",
                                                                f"compile cache '{tmp_path / 'f' / 'b'}'"]
