"""Firmware of the AOT executor on emulated Cortex-M boards (QEMU): models match ONNX Runtime on the
microbit (M0), mps2-an385 (M0 code on an M3), mps2-an386 (M4F), mps2-an500 (M7F) and mps3-an547 (M55); the firmware
directory builds with make alone; boards' errors; time-out, hard fault, exit status and missing output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import plait
from plait.cli import main
from plait.errors import PlaitError
from plait.executor.aot.module import AotModule
from plait.executor.aot.firmware import SEMIHOST_C, SEMIHOST_H, _startup, add_firmware
from plait.executor.aot.qemu import QemuError, QemuModule, run_firmware
from plait.frontend.onnx import from_onnx
from plait.target import Target
from plait.target.boards import BOARDS, board_for
from plait.target.errors import TargetError
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
needs_qemu = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
M0_AN385 = "c -mcpu=cortex-m0 -ram-kb=256 -board=mps2-an385"  # the chip's 16 KiB raised: the model is bigger


def ort_run(model, x: np.ndarray) -> np.ndarray:
    s = reference_session(model)
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def aot(model, target: str, name: str = "m", cache: str | None = None):
    return plait.build(from_onnx(model), target=target, executor="aot",
                       config={"aot.name": name, "cc.cache_dir": cache, "c.host_simulation": True})


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.fixture(scope="module")
def mlp():
    return onnx_models.mlp(sizes=(16, 32, 4))


@pytest.fixture(scope="module")
def mlp_m0(mlp, cache):
    return QemuModule(aot(mlp, "c -mcpu=cortex-m0", "mlp", cache))


@pytest.fixture(scope="module")
def ds_cnn():
    return onnx_models.ds_cnn()


@pytest.fixture(scope="module")
def ds_cnn_runs(ds_cnn, cache):
    """ds_cnn's outputs on three boards, and ORT's, for one input."""
    x = np.random.default_rng(5).standard_normal((1, 1, 49, 10)).astype(np.float32)
    outs = {}
    for target in (M0_AN385, "c -mcpu=cortex-m4f", "c -mcpu=cortex-m7f", "c -mcpu=cortex-m55"):
        m = QemuModule(aot(ds_cnn, target, "kws", cache))
        outs[m.board.name] = m(input=x)[0]
    return outs, ort_run(ds_cnn, x)


# ---- boards ---------------------------------------------------------------------------------------


def test_every_cortex_m_core_has_a_default_board_and_board_selects_one():
    got = {cpu: board_for(Target(f"c -mcpu={cpu}")).name for cpu in
           ("cortex-m0", "cortex-m3", "cortex-m4", "cortex-m4f", "cortex-m7", "cortex-m7f", "cortex-m55")}
    assert got == {"cortex-m0": "microbit", "cortex-m3": "mps2-an385", "cortex-m4": "mps2-an386",
                   "cortex-m4f": "mps2-an386", "cortex-m7": "mps2-an500", "cortex-m7f": "mps2-an500",
                   "cortex-m55": "mps3-an547"}
    assert board_for(Target("c -mcpu=cortex-m0 -board=mps2-an385")).name == "mps2-an385"
    mb, m55 = BOARDS["microbit"], BOARDS["mps3-an547"]
    assert (mb.code.origin, mb.code.size, mb.ram.origin, mb.ram.size) == (0, 256 * 1024, 0x20000000, 16 * 1024)
    # QEMU's hw/arm/mps2-tz.c (an547_raminfo) and armsse.c (the SSE-300's ITCM at 0): the vectors and code
    # boot from the ITCM, the constants go to the 2 MiB SRAM, data to the 4 MiB SRAM2
    assert (m55.code.name, m55.code.origin, m55.code.size) == ("ITCM", 0, 512 * 1024)
    assert (m55.constants.name, m55.constants.origin, m55.constants.size) == ("SRAM", 0x01000000, 2 * 1024 * 1024)
    assert (m55.ram.name, m55.ram.origin, m55.ram.size) == ("SRAM2", 0x21000000, 4 * 1024 * 1024)
    assert mb.constants == mb.code


@pytest.mark.parametrize("target, message", [
    ("c -mcpu=cortex-m0 -board=nrf52", "unknown board 'nrf52' (known boards: microbit, mps2-an385, mps2-an386, "
                                        "mps2-an500, mps3-an547)"),
    ("c -mcpu=cortex-m7f -board=microbit", "-board=microbit: its cortex-m0 (armv6-m) cannot run code for cortex-m7 "
                                           "(armv7e-m); default board for cortex-m7: mps2-an500"),
    ("c -mcpu=cortex-m4f -board=mps2-an385", "-board=mps2-an385: its cortex-m3 (armv7-m) cannot run code for "
                                             "cortex-m4 (armv7e-m); default board for cortex-m4: mps2-an386"),
    ("c -board=microbit", "-board=microbit needs a Cortex-M -mcpu (got none)"),
])
def test_bad_boards_are_target_errors(target, message):
    with pytest.raises(TargetError) as e:
        Target(target)
    assert str(e.value) == f"target '{target}': {message}"


def test_a_board_smaller_than_the_model_is_an_error_naming_the_memory(ds_cnn, cache):
    art = aot(ds_cnn, "c -mcpu=cortex-m0 -ram-kb=256", "kws", cache)  # the chip raised; the microbit is not
    with pytest.raises(TargetError) as e:
        add_firmware(art)
    assert str(e.value) == (
        "board 'microbit' is too small for model 'kws' (constants 90,416 B in FLASH; pools 64,000 B + inputs/outputs "
        "2,008 B + stack 2,048 B in RAM): its RAM holds 16,384 B, 68,056 B needed (Cortex-M0 code runs unchanged "
        "on mps2-an385: -board=mps2-an385)")


@needs_qemu
def test_code_and_constants_overflowing_the_boards_flash_is_an_error(cache):
    # 259,972 B of constants pass the check before the build (256 KiB of flash); with the code (plait's
    # expf among it: -libm=plait) they do not
    art = aot(onnx_models.mlp(sizes=(16, 1969, 16)), "c -mcpu=cortex-m0 -flash-kb=512", "big", cache)
    with pytest.raises(QemuError) as e:
        QemuModule(art)
    assert str(e.value) == ("board 'microbit' is too small for the firmware: its FLASH overflowed by 3,748 B "
                            "(Cortex-M0 code runs unchanged on mps2-an385: -board=mps2-an385)")


# ---- runs -----------------------------------------------------------------------------------------


@needs_qemu
def test_mlp_on_the_microbit_matches_ort_and_the_host(mlp, mlp_m0):
    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)
    (y,) = mlp_m0(x=x)
    assert mlp_m0.board.name == "microbit" and y.dtype == np.float32 and y.shape == (1, 4)
    np.testing.assert_allclose(y, ort_run(mlp, x), atol=1e-4)
    (h,) = AotModule(mlp_m0.art)(x=x)  # softmax's expf: plait's own on both (-libm=plait), so the same bits
    assert np.array_equal(y, h)


@needs_qemu
def test_ds_cnn_on_m0_m4_m7_m55_boards_matches_ort_and_is_bit_identical_across_cores(ds_cnn_runs):
    outs, ref = ds_cnn_runs
    assert sorted(outs) == ["mps2-an385", "mps2-an386", "mps2-an500", "mps3-an547"]
    for y in outs.values():
        np.testing.assert_allclose(y, ref, atol=1e-4)
    # -ffp-contract=off: soft float (M0), the M7's FPU and the M55's give the same float32 results
    assert np.array_equal(outs["mps2-an385"], outs["mps2-an500"])
    assert np.array_equal(outs["mps2-an385"], outs["mps3-an547"])
    assert np.array_equal(outs["mps2-an385"], outs["mps2-an386"])


@needs_qemu
def test_the_firmware_directory_builds_with_make_alone_and_runs(mlp, mlp_m0, tmp_path):
    art = mlp_m0.art
    art.export(tmp_path / "fw")
    r = subprocess.run(["make", "-s", "-C", str(tmp_path / "fw"), "firmware"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    elf = tmp_path / "fw" / "firmware" / "fw.elf"
    work = tmp_path / "run"
    (work / "in").mkdir(parents=True)
    (work / "out").mkdir()
    x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float32)
    x.tofile(work / "in" / "x.bin")
    assert run_firmware(elf, mlp_m0.board, work, timeout_s=30) == ""
    y = np.fromfile(work / "out" / "y.bin", np.float32).reshape(1, 4)
    assert np.array_equal(y, mlp_m0(x=x)[0])
    assert art.metadata["firmware"]["board"] == "microbit" and "-ffp-contract=off" in art.metadata["firmware"]["flags"]


@needs_qemu
def test_cli_run_on_qemu_and_compile_firmware(mlp, tmp_path, cache, capsys):
    path = str(tmp_path / "mlp.onnx")
    Path(path).write_bytes(mlp.SerializeToString())
    x = np.random.default_rng(4).standard_normal((1, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", path, "--target", "c -mcpu=cortex-m0", "--executor", "aot", "--on", "qemu", "--cache-dir",
                 cache, "--inputs", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npz")]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {tmp_path / 'y.npz'}: y\n"
    np.testing.assert_allclose(np.load(tmp_path / "y.npz")["y"], ort_run(mlp, x), atol=1e-4)
    assert main(["compile", path, "--target", "c -mcpu=cortex-m0", "--executor", "aot", "--firmware", "--cache-dir",
                 cache, "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"firmware for board 'microbit' (cortex-m0, QEMU -M microbit): make -C {tmp_path / 'out'} firmware")
    assert {"firmware/startup.c", "firmware/board.ld", "firmware/main.c", "firmware/Makefile"} <= \
        {str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")}


@pytest.mark.parametrize("argv, message", [
    (["--on", "qemu"], "--on qemu needs --executor aot: the firmware is the AOT executor's C"),
    (["--executor", "aot", "--qemu-timeout", "5"], "--qemu-timeout needs --on qemu and a positive number of seconds"),
])
def test_cli_usage_errors(mlp, tmp_path, capsys, argv, message):
    path = str(tmp_path / "mlp.onnx")
    Path(path).write_bytes(mlp.SerializeToString())
    assert main(["run", path, "--target", "c -mcpu=cortex-m0", *argv]) == 2
    assert capsys.readouterr().err.strip() == f"plait: error: {message}"


# ---- failures -------------------------------------------------------------------------------------


def hand_made(tmp_path: Path, body: str) -> Path:
    """A firmware for the microbit: plait's start-up code and semihosting, and ``main`` = ``body``."""
    board = BOARDS["microbit"]
    d = tmp_path / "hand"
    d.mkdir()
    (d / "startup.c").write_text(_startup(board))
    (d / "semihost.c").write_text(SEMIHOST_C)
    (d / "semihost.h").write_text(SEMIHOST_H)
    (d / "main.c").write_text(f"#include <stdint.h>\nint main(void) {{ {body} }}\n")
    from plait.executor.aot.firmware import _linker

    (d / "board.ld").write_text(_linker(board))
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m0", "-mthumb", "-O1", "-nostartfiles", "--specs=nano.specs",
                    "--specs=nosys.specs", "-T", "board.ld", "startup.c", "semihost.c", "main.c", "-o", "fw.elf"],
                   cwd=d, check=True)
    return d / "fw.elf"


@needs_qemu
@pytest.mark.parametrize("body, message", [
    ("for (;;) { __asm volatile (\"\"); }",
     "board 'microbit': the firmware did not finish within 1 s (QEMU stopped; an endless loop, or raise the time limit)"),
    ("void (*volatile f)(void) = 0; f(); return 0;", "board 'microbit': the firmware hit a hard fault (exit status 3)"),
    ("return 7;", "board 'microbit': the firmware exited with status 7"),
])
def test_runs_that_fail_are_clear_errors(tmp_path, body, message):
    elf = hand_made(tmp_path, body)
    with pytest.raises(QemuError) as e:
        run_firmware(elf, BOARDS["microbit"], tmp_path, timeout_s=1)
    assert str(e.value) == message


@needs_qemu
def test_a_firmware_that_writes_no_output_is_an_error(mlp_m0, tmp_path):
    elf = hand_made(tmp_path, "return 0;")
    real, mlp_m0.elf = mlp_m0.elf, elf
    try:
        with pytest.raises(QemuError) as e:
            mlp_m0(x=np.zeros((1, 16), np.float32))
    finally:
        mlp_m0.elf = real
    assert str(e.value) == "board 'microbit': the firmware wrote no output file out/y.bin of 16 B (output 'y')"


def test_qemu_missing_is_an_error_with_the_apt_line(tmp_path, monkeypatch):
    import plait.executor.aot.qemu as q

    monkeypatch.setattr(q.shutil, "which", lambda tool: None)
    with pytest.raises(PlaitError) as e:
        run_firmware(tmp_path / "fw.elf", BOARDS["mps2-an500"], tmp_path)
    assert str(e.value) == ("board 'mps2-an500': qemu-system-arm is not installed (Debian/Ubuntu: apt-get install -y "
                            "--no-install-recommends qemu-system-arm)")


def test_firmware_for_a_host_target_is_refused_by_the_board_lookup(mlp, cache):
    art = aot(mlp, "c", "mlp", cache)
    with pytest.raises(TargetError) as e:
        add_firmware(art)
    assert str(e.value) == "target 'c' is not for a Cortex-M core: no board runs it under QEMU"
