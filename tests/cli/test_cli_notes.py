"""What `plait run` says it did on its own (`plait: note:` lines): random inputs (and --fill), pieces
simulated on the host (and the -cc that builds them); a --place rule that matches nothing is an error;
--output writes and reports exactly the given name."""

import os
import shutil
import stat

import numpy as np
import pytest

from plait.cli import main
from plait.target import Target
from plait.backends.c.backend import simulation_compiler

from .conftest import RANDOM_X

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"


def test_random_inputs_are_named_with_their_seed(add_path, tmp_path, capsys):
    assert main(["run", add_path, "--seed", "7", "--output", str(tmp_path / "o.npz")]) == 0
    assert capsys.readouterr().err == ("plait: note: random inputs for a, b (seed 7; give them with --inputs, or "
                                       "--fill zeros|ones)\n")
    np.savez(tmp_path / "a.npz", a=np.ones((2, 3), np.float32))
    assert main(["run", add_path, "--inputs", str(tmp_path / "a.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    assert capsys.readouterr().err == ("plait: note: random input for b (seed 0; give it with --inputs, or "
                                       "--fill zeros|ones)\n")


@pytest.mark.parametrize("target", [[], ["--target", "c"]])
@pytest.mark.parametrize("fill,value", [("zeros", 0.0), ("ones", 2.0)])
def test_fill_zeros_and_ones(add_path, tmp_path, capsys, target, fill, value):
    out = tmp_path / "o.npz"
    assert main(["run", add_path, "--fill", fill, "--output", str(out), *target]) == 0
    assert capsys.readouterr() == (f"wrote 1 output(s) to {out}: file\n", "")
    with np.load(out) as d:
        np.testing.assert_array_equal(d["file"], np.full((2, 3), value, np.float32))


def test_fill_keeps_the_memory_check(big_input_path, capsys):
    assert main(["run", big_input_path, "--fill", "zeros", "--max-memory", "1GiB"]) == 1
    assert capsys.readouterr().err == ("plait: error: input 'x' filled with zeros (float32[1048576, 1048576]) needs "
                                       "4.0 TiB (4398046511104 bytes), more than the memory limit of 1.0 GiB; raise "
                                       "it with --max-memory or the config key 'memory.limit'\n")


def test_bad_fill_is_a_usage_error(mlp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", mlp_path, "--fill", "twos"])
    assert e.value.code == 2
    assert "argument --fill: invalid choice: 'twos'" in capsys.readouterr().err


def test_host_simulation_is_said_per_piece(mlp_path, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.float32))
    common = ["--inputs", str(tmp_path / "x.npy"), "--output", str(tmp_path / "o.npz")]
    assert main(["run", mlp_path, "--target", "c -mcpu=cortex-m0", *common]) == 0
    assert capsys.readouterr().err == ("plait: note: piece 'c' (c -mcpu=cortex-m0) is made for cortex-m0; it runs here "
                                       "in host simulation, its C built for this machine with gcc\n")
    assert main(["run", mlp_path, "--target", SEED, "--place", "*Gemm=low_power_cpu,*=inference_cpu", *common]) == 0
    assert capsys.readouterr().err == (
        "plait: note: piece 'low_power_cpu' (c -mcpu=cortex-m0) is made for cortex-m0; it runs here in host "
        "simulation, its C built for this machine with gcc\n"
        "plait: note: piece 'inference_cpu' (c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard) is made for "
        "cortex-m7; it runs here in host simulation, its C built for this machine with gcc\n")
    assert main(["run", mlp_path, "--target", "c", *common]) == 0  # a host target: nothing simulated
    assert capsys.readouterr().err == ""


def test_a_cross_cc_is_named_when_the_host_builds_the_simulation(mlp_path, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.float32))
    t = "c -mcpu=cortex-m0 -cc=arm-none-eabi-gcc"
    assert main(["run", mlp_path, "--target", t, "--inputs", str(tmp_path / "x.npy")]) == 0
    assert capsys.readouterr().err == (
        f"plait: note: piece 'c' ({t}) is made for cortex-m0; it runs here in host simulation, its C built for this "
        "machine with gcc (its -cc 'arm-none-eabi-gcc' makes code for arm-none-eabi, not this machine; it compiles "
        "the device code)\n")
    assert simulation_compiler(Target(t)) == ("gcc", "its -cc 'arm-none-eabi-gcc' makes code for arm-none-eabi, not "
                                                     "this machine")


def logging_cc(tmp_path):
    """A C compiler command that logs every call: arm-none-eabi-gcc for Thumb code, else gcc."""
    log = tmp_path / "cc.log"
    cc = tmp_path / "mycc"
    cc.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncase "$*" in *-mthumb*) exec {shutil.which("arm-none-eabi-gcc")} '
                  f'"$@";; esac\nexec {shutil.which("gcc")} "$@"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    return str(cc), log


@pytest.mark.parametrize("mcpu", ["", " -mcpu=cortex-m0"])
def test_run_target_honours_a_host_cc(mlp_path, tmp_path, capsys, mcpu):
    cc, log = logging_cc(tmp_path)
    t = f"c{mcpu} -cc={cc}"
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.float32))
    assert main(["run", mlp_path, "--target", t, "--inputs", str(tmp_path / "x.npy"), "--cache-dir",
                 str(tmp_path / "cache")]) == 0
    err = capsys.readouterr().err
    assert err == (f"plait: note: piece 'c' ({t}) is made for cortex-m0; it runs here in host simulation, its C built "
                   f"for this machine with {cc}\n" if mcpu else "")
    host_builds = [ln for ln in log.read_text().splitlines() if "-o" in ln.split() and "-mthumb" not in ln]
    assert len(host_builds) == 1  # the simulation (or the host build) went through -cc, not plain gcc


def test_a_place_rule_matching_nothing_is_an_error_everywhere(mlp_path, tmp_path, capsys):
    message = ("plait: error: --place: rule 'Cnv=inference_cpu' matches no call of the model (a pattern is a glob "
               "over ONNX node names, ONNX op types and plait op names; ONNX op types: Gemm, Relu, Softmax; plait "
               "ops: nn.dense, add, nn.relu, nn.softmax; node names: /fc0/Gemm, /fc0/Relu, /fc1/Gemm, "
               "/softmax/Softmax)\n")
    for cmd, extra in (("run", []), ("compile", ["-o", str(tmp_path / "out")]), ("explain", [])):
        assert main([cmd, mlp_path, "--target", SEED, "--place", "Gemm=low_power_cpu,Cnv=inference_cpu", *extra]) == 1
        assert capsys.readouterr() == ("", message), cmd


def test_a_long_list_of_candidates_is_shortened(many_outputs_path, capsys):
    assert main(["explain", many_outputs_path, "--target", SEED, "--place", "relu=low_power_cpu"]) == 1
    assert capsys.readouterr().err == (
        "plait: error: --place: rule 'relu=low_power_cpu' matches no call of the model (a pattern is a glob over "
        "ONNX node names, ONNX op types and plait op names; ONNX op types: Relu; plait ops: nn.relu; node names: "
        "relu_0, relu_1, relu_2, relu_3, relu_4, relu_5, relu_6, relu_7 and 292 more)\n")


def test_output_is_written_and_reported_under_exactly_its_name(mlp_path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", mlp_path, "--output", "o2"]) == 0
    assert capsys.readouterr() == ("wrote 1 output(s) to o2: y\n", RANDOM_X)
    assert sorted(os.listdir(tmp_path)) == ["o2"]
    with np.load(tmp_path / "o2") as d:
        assert d.files == ["y"]
