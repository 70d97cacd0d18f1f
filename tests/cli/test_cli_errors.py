"""Every bad model file, every failure and interruption of `plait` ends in one clean line (or in
silence for a closed pipe), with the documented exit code; never a traceback."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from onnx import helper

import plait.cli as cli
import plait.cli.info as cli_info
from plait.cli import main, shorten

from .conftest import RANDOM_X, save, small_model

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
COMMANDS = {
    "show": [],
    "run": [],
    "compile": ["-o", "OUT"],
    "explain": ["--target", SEED],
}


def bad_models(tmp_path, mlp_path) -> list[tuple[str, str]]:
    """(path, the exact error message) for every kind of bad model file."""
    p = tmp_path
    (p / "dir.onnx").mkdir()
    (p / "empty.onnx").write_bytes(b"")
    (p / "text.onnx").write_text("this is not a model\n")
    whole = open(mlp_path, "rb").read()
    (p / "trunc.onnx").write_bytes(whole[:300])
    (p / "latin1.relay").write_bytes(b"def @main(%x\xe9) { %x }\n")
    (p / "bad.relay").write_text("garbage\n")
    load = "cannot load ONNX model"
    not_onnx = "not a valid ONNX protobuf file (truncated, or not ONNX)"
    return [
        (p / "missing.onnx", f"{load} '{p / 'missing.onnx'}': No such file or directory"),
        (p / "dir.onnx", f"{load} '{p / 'dir.onnx'}': Is a directory"),
        (p / "empty.onnx", f"{load} '{p / 'empty.onnx'}': the file is empty"),
        (p / "text.onnx", f"{load} '{p / 'text.onnx'}': {not_onnx}"),
        (p / "trunc.onnx", f"{load} '{p / 'trunc.onnx'}': {not_onnx}"),
        (p / "missing.relay", f"cannot read '{p / 'missing.relay'}': No such file or directory"),
        (p / "latin1.relay", f"cannot read '{p / 'latin1.relay'}': not UTF-8 text (byte 12)"),
        (p / "bad.relay", f"{p / 'bad.relay'}:1:1: parse error: expected 'def' but found 'garbage'"),
    ]


def test_bad_model_files_in_every_command(tmp_path, mlp_path, capsys):
    for path, message in bad_models(tmp_path, mlp_path):
        for cmd, extra in COMMANDS.items():
            extra = [str(tmp_path / "out") if a == "OUT" else a for a in extra]
            assert main([cmd, str(path), *extra]) == 1, (cmd, path)
            got = capsys.readouterr()
            want = message
            if cmd == "run" and path.name == "dir.onnx":  # run takes a directory written by compile -o
                want = (f"'{path}' is a directory but not an exported artifact (no manifest.json); run a model "
                        "file, or a directory written by plait compile -o")
            assert (got.out, got.err) == ("", f"plait: error: {want}\n"), (cmd, path)
    assert not (tmp_path / "out").exists()


def test_ops_and_targets_errors(capsys):
    assert main(["ops", "nn.conv"]) == 1
    assert capsys.readouterr().err.startswith("plait: error: unknown operator 'nn.conv'; did you mean ")
    assert main(["targets", "--explain", ""]) == 1
    assert capsys.readouterr().err == "plait: error: empty target string\n"


def test_compile_into_a_file(mlp_path, tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert main(["compile", mlp_path, "-o", str(tmp_path / "f")]) == 1
    assert capsys.readouterr().err == (f"plait: error: -o: cannot write into '{tmp_path / 'f'}': it exists and is "
                                       "not a directory\n")
    assert main(["compile", mlp_path, "-o", str(tmp_path / "f" / "sub")]) == 1
    assert capsys.readouterr().err == f"plait: error: -o: cannot write into '{tmp_path / 'f' / 'sub'}': Not a directory\n"


# ---- long and hostile messages --------------------------------------------------------------------


def test_shorten():
    assert shorten("short") == "short"
    assert shorten("a\x1b[2Jb\tc\nd\x00") == "a\\x1b[2Jb\tc\nd\\x00"
    assert shorten("x" * 200 + "y" * 100, 100) == "x" * 44 + " ...[233 characters left out]... " + "y" * 23
    assert shorten("x" * 200 + "y" * 100, 300) == "x" * 200 + "y" * 100
    assert len(shorten("z" * 100_000)) == cli.MAX_MESSAGE
    assert len(shorten("z" * 1_000_000, 1000)) == 1000  # a count with more digits


def test_a_100k_character_node_name_is_not_printed_whole(tmp_path, capsys):
    name = "N" * 100_000
    x = [("x", [1, 4])]
    path = save(small_model([helper.make_node("FooBar", ["x"], ["y"], name=name)], x, [("y", [1, 4])]),
                tmp_path / "long.onnx")
    assert main(["show", path]) == 1
    err = capsys.readouterr().err
    assert len(err) == cli.MAX_MESSAGE + 1  # the whole line, "plait: error: " included, and its newline
    assert err.startswith("plait: error: model uses 1 unsupported node(s): node 'NNNN")
    assert " ...[98133 characters left out]... " in err  # of the 100,084-character message
    assert err.endswith("NNNN' (FooBar, opset 17): operator not supported\n")


def test_terminal_escapes_in_names_are_escaped(tmp_path, capsys):
    x = [("x", [1, 4])]
    path = save(small_model([helper.make_node("FooBar", ["x"], ["y"], name="a\x1b[2Jb")], x, [("y", [1, 4])]),
                tmp_path / "esc.onnx")
    assert main(["show", path]) == 1
    assert capsys.readouterr().err == ("plait: error: model uses 1 unsupported node(s): "
                                       "node 'a\\x1b[2Jb' (FooBar, opset 17): operator not supported\n")


# ---- what the top level catches ----------------------------------------------------------------------


@pytest.mark.parametrize("exc, code, message", [
    (PermissionError(13, "Permission denied", "/some/file"), 1, "plait: error: Permission denied: '/some/file'\n"),
    (OSError(5, "Input/output error"), 1, "plait: error: Input/output error\n"),
    (MemoryError(), 1, "plait: error: out of memory; a smaller --max-memory makes plait refuse such sizes before "
                       "allocating\n"),
    (KeyboardInterrupt(), 130, "plait: error: interrupted\n"),
])
def test_top_level_errors(mlp_path, capsys, monkeypatch, exc, code, message):
    def fail(path, *args):
        raise exc

    monkeypatch.setattr(cli_info, "load_any", fail)  # inside `plait show`
    assert main(["show", mlp_path]) == code
    got = capsys.readouterr()
    assert (got.out, got.err) == ("", message)


def test_broken_pipe_in_process_exits_quietly(mlp_path, capsys, monkeypatch):
    def closed(path, *args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli_info, "load_any", closed)
    assert main(["show", mlp_path]) == 1
    assert capsys.readouterr().err == ""


def plait_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "plait.cli", *args]


def test_head_closing_the_pipe_is_quiet(many_outputs_path):
    """`plait run model.onnx | head -3`: the reader goes away while plait still writes."""
    p = subprocess.Popen(plait_cmd("run", many_outputs_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()
    err = p.stderr.read().decode()
    assert (p.wait(timeout=120), err) == (1, RANDOM_X)
    assert lines[0] == b"y0: float32[1, 64]\n"


def test_a_pipe_closed_before_any_output(mlp_path):
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(plait_cmd("run", mlp_path), stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (1, RANDOM_X)


def test_exit_codes_in_a_process(mlp_path, tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    r = subprocess.run(plait_cmd("run", mlp_path, "--inputs", str(tmp_path / "empty.npz")), capture_output=True,
                       text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"plait: error: cannot read inputs '{tmp_path / 'empty.npz'}'"
                                                         ": the file is empty (expected a .npz or .npy file)\n")
    r = subprocess.run(plait_cmd("run", mlp_path, "--max-memory", "lots"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("plait: error: --max-memory: bad memory size 'lots'")


def _terminal_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_compile(mlp_path, tmp_path):
    """SIGINT while gcc runs: exit 130, one line, and the build directory is removed."""
    started = tmp_path / "started"
    slow = tmp_path / "slowcc"
    slow.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec gcc --version\ntouch {started}\nexec sleep 60\n')
    slow.chmod(0o755)
    cache = tmp_path / "cache"
    # plait as a terminal starts it: SIGINT neither blocked nor ignored (a process inherits both, and this
    # test process's may have been changed by a library an earlier test used)
    worker = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
    p = subprocess.Popen(plait_cmd("compile", mlp_path, "--target", f"c -cc={slow}", "--cache-dir", str(cache),
                                   "-o", str(tmp_path / "out")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=_terminal_sigint)
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), p.communicate()
        os.kill(p.pid, signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            status = Path(f"/proc/{p.pid}/status").read_text()
            sig = [ln for ln in status.splitlines() if ln.startswith(("SigBlk", "SigIgn", "SigCgt", "State"))]
            raise AssertionError(f"plait still runs 60 s after SIGINT: {sig}; this process: {worker}") from None
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert (p.returncode, out, err) == (130, "", "plait: error: interrupted\n")
    assert not list(cache.glob("tmp*"))


@pytest.mark.parametrize("seed, shown", [("-1", "-1"), ("x", "'x'")])
def test_bad_seed_is_a_usage_error(mlp_path, capsys, seed, shown):
    with pytest.raises(SystemExit) as e:
        main(["run", mlp_path, f"--seed={seed}"])
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith(f"plait run: error: argument --seed: expected a non-negative integer, "
                                            f"got {shown}\n")
