"""`plait run --inputs` with bad input files, --max-memory, and --output: one clean line each, exact."""

import io
import zipfile

import numpy as np
import onnx
import pytest
from numpy.lib import format as npformat
from onnx import helper

from plait.cli import main
from plait.frontend.onnx import from_onnx
from plait.relay import run

from .conftest import RANDOM_X, save, small_model

X = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
LIMIT = "--max-memory", "1GiB"  # a fixed limit: messages do not depend on this machine's memory


def reference(mlp_path, x):
    return run(from_onnx(onnx.load(mlp_path)), {"x": x})


def npy_bytes(header: dict, data: bytes = b"") -> bytes:
    f = io.BytesIO()
    npformat.write_array_header_1_0(f, header)
    return f.getvalue() + data


def npz(path, members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> str:
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return str(path)


NUMPYS = "(numpy's reason)"


def err_of(capsys) -> str:
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    return got.err


@pytest.mark.parametrize("target", [[], ["--target", "c"]])
def test_npy_file_for_a_one_input_model(mlp_path, tmp_path, capsys, target):
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npz"
    assert main(["run", mlp_path, "--inputs", str(tmp_path / "x.npy"), "--output", str(out), *target]) == 0
    assert capsys.readouterr().out.endswith(f"wrote 1 output(s) to {out}: y\n")
    with np.load(out) as d:
        np.testing.assert_allclose(d["y"], reference(mlp_path, X), rtol=1e-5, atol=1e-6)


def test_big_endian_and_fortran_order_inputs_are_read(mlp_path, tmp_path):
    np.savez(tmp_path / "be.npz", x=X.astype(">f4"))
    np.save(tmp_path / "f.npy", np.asfortranarray(X))
    for name in ("be.npz", "f.npy"):
        out = tmp_path / f"{name}.out"
        assert main(["run", mlp_path, "--inputs", str(tmp_path / name), "--output", str(out)]) == 0
        with np.load(out) as d:
            np.testing.assert_array_equal(d["y"], reference(mlp_path, X))


def bad_files(tmp_path) -> list[tuple[str, str]]:
    """(path, the exact error line) for every kind of bad --inputs file."""
    p = tmp_path
    np.savez(p / "ok.npz", x=X)
    whole = (p / "ok.npz").read_bytes()
    (p / "trunc.npz").write_bytes(whole[: len(whole) // 2])
    (p / "empty.npz").write_bytes(b"")
    (p / "text.npz").write_text("x = 1, 2, 3\n")
    (p / "dir.npz").mkdir()
    (p / "huge.npy").write_bytes(npy_bytes({"descr": "<f4", "fortran_order": False, "shape": (1 << 20, 1 << 20)}))
    npz(p / "huge_member.npz", {"x.npy": npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (1 << 40,)})},
        zipfile.ZIP_DEFLATED)
    np.save(p / "short.npy", X)
    (p / "short.npy").write_bytes((p / "short.npy").read_bytes()[:-4])
    npz(p / "short_member.npz", {"x.npy": npy_bytes({"descr": "<f4", "fortran_order": False, "shape": (1, 8)},
                                                    b"\0" * 4)})
    np.save(p / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.savez(p / "obj.npz", x=np.array([None], dtype=object))
    np.savez(p / "str.npz", x=np.array(["abc"]))
    npz(p / "notnpy.npz", {"x.txt": b"hello"})
    (p / "badheader.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4}  \n")
    (p / "v3.npy").write_bytes(b"\x93NUMPY\x03\x00\x10\x00\x00\x00{'descr': 1}\n")
    crc = bytearray(whole)
    at = whole.index(b"x.npy") + len("x.npy") + 128 + 4  # inside the stored array's data
    crc[at] ^= 0xFF
    (p / "crc.npz").write_bytes(bytes(crc))
    np.savez(p / "two.npz", x=X)
    with zipfile.ZipFile(p / "two.npz", "a") as z:
        z.writestr("x.npy", (p / "two.npz").read_bytes()[:0] + npy_bytes(
            {"descr": "<f4", "fortran_order": False, "shape": (1, 8)}, X.tobytes()))
    limit = "more than the memory limit of 1.0 GiB; raise it with --max-memory or the config key 'memory.limit'"
    return [
        (p / "missing.npz", f"cannot read inputs '{p / 'missing.npz'}': No such file or directory"),
        (p / "dir.npz", f"cannot read inputs '{p / 'dir.npz'}': it is a directory"),
        (p / "empty.npz", f"cannot read inputs '{p / 'empty.npz'}': the file is empty (expected a .npz or .npy file)"),
        (p / "text.npz", f"cannot read inputs '{p / 'text.npz'}': not a .npz or .npy file"),
        (p / "trunc.npz", f"cannot read inputs '{p / 'trunc.npz'}': not a valid .npz file (File is not a zip file)"),
        (p / "huge.npy", f"input file '{p / 'huge.npy'}' (float32[1048576, 1048576]) needs 4.0 TiB "
                         f"(4398046511104 bytes), {limit}"),
        (p / "huge_member.npz", f"array 'x' in '{p / 'huge_member.npz'}' (float64[1099511627776]) needs 8.0 TiB "
                                f"(8796093022208 bytes), {limit}"),
        (p / "short.npy", f"input file '{p / 'short.npy'}': truncated: its header declares 32 bytes of data "
                          "(float32[1, 8]), the file holds 28"),
        (p / "short_member.npz", f"array 'x' in '{p / 'short_member.npz'}': truncated: its header declares 32 bytes "
                                 "of data (float32[1, 8]), the file holds 4"),
        (p / "obj.npy", f"input file '{p / 'obj.npy'}': holds Python objects (dtype object); plait reads only arrays "
                        "of numbers or bools (object arrays would be unpickled, which can run code)"),
        (p / "obj.npz", f"array 'x' in '{p / 'obj.npz'}': holds Python objects (dtype object); plait reads only "
                        "arrays of numbers or bools (object arrays would be unpickled, which can run code)"),
        (p / "str.npz", f"array 'x' in '{p / 'str.npz'}': has dtype <U3; model inputs are arrays of numbers or bools"),
        (p / "notnpy.npz", f"array 'x.txt' in '{p / 'notnpy.npz'}': not a .npy member; a .npz holds one NAME.npy "
                           "per input"),
        (p / "badheader.npy", f"input file '{p / 'badheader.npy'}': not a valid .npy array {NUMPYS}"),
        (p / "v3.npy", f"input file '{p / 'v3.npy'}': unsupported .npy format version 3.0"),
        (p / "crc.npz", f"array 'x' in '{p / 'crc.npz'}': damaged in the zip file (Bad CRC-32 for file "
                          "'x.npy')"),
        (p / "two.npz", f"'{p / 'two.npz'}' holds the array 'x' twice"),
    ]


def test_every_bad_inputs_file_is_one_clean_line(mlp_path, tmp_path, capsys):
    with pytest.warns(UserWarning, match="Duplicate name"):  # zipfile, writing two.npz
        cases = bad_files(tmp_path)
    for path, message in cases:
        for target in ([], ["--target", "c"]):
            assert main(["run", mlp_path, "--inputs", str(path), *LIMIT, *target]) == 1, path
            err = err_of(capsys)
            if message.endswith(NUMPYS):  # numpy's wording may change between versions
                assert err.startswith(f"plait: error: {message[:-len(NUMPYS)]}(") and err.endswith(")\n")
                assert err.count("\n") == 1
            else:
                assert err == f"plait: error: {message}\n", path


def test_npy_for_a_model_with_two_inputs(add_path, tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    assert main(["run", add_path, "--inputs", str(tmp_path / "a.npy")]) == 1
    assert err_of(capsys) == (f"plait: error: cannot use inputs '{tmp_path / 'a.npy'}': a .npy file holds one array, "
                              "but the model has 2 inputs (a, b); give a .npz keyed by input name\n")


@pytest.mark.parametrize("target", [[], ["--target", "c"]])
def test_wrong_dtype_and_shape_get_the_executors_message(mlp_path, tmp_path, capsys, target):
    np.savez(tmp_path / "i64.npz", x=np.zeros((1, 8), np.int64))
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 8), np.float32))
    assert main(["run", mlp_path, "--inputs", str(tmp_path / "i64.npz"), *target]) == 1
    assert err_of(capsys) == "plait: error: input 'x': expected dtype float32, got int64\n"
    assert main(["run", mlp_path, "--inputs", str(tmp_path / "shape.npz"), *target]) == 1
    assert err_of(capsys) == "plait: error: input 'x': expected shape (1, 8), got (2, 8)\n"


def test_the_limit_covers_all_arrays_of_a_file(add_path, tmp_path, capsys):
    np.savez(tmp_path / "ab.npz", a=np.zeros((2, 3), np.float32), b=np.zeros((2, 3), np.float32))
    assert main(["run", add_path, "--inputs", str(tmp_path / "ab.npz"), "--max-memory", "40"]) == 1
    assert err_of(capsys) == (f"plait: error: the arrays in '{tmp_path / 'ab.npz'}' needs 48 B (48 bytes), more than "
                              "the memory limit of 40 B; raise it with --max-memory or the config key "
                              "'memory.limit'\n")


@pytest.mark.parametrize("target", [[], ["--target", "c"]])
def test_random_input_too_large_is_refused_before_allocating(big_input_path, capsys, target):
    assert main(["run", big_input_path, *LIMIT, *target]) == 1
    assert err_of(capsys) == ("plait: error: random input 'x' (float32[1048576, 1048576]) needs 4.0 TiB "
                              "(4398046511104 bytes), more than the memory limit of 1.0 GiB; raise it with "
                              "--max-memory or the config key 'memory.limit'\n")


def test_max_memory_reaches_the_graph_module(mlp_path, capsys):
    assert main(["run", mlp_path, "--target", "c", "--max-memory", "100B"]) == 1
    err = err_of(capsys)
    assert err.startswith("plait: error: the graph's buffers needs ")
    assert err.endswith(" bytes), more than the memory limit of 100 B; raise it with --max-memory or the config "
                        "key 'memory.limit'\n")


@pytest.mark.parametrize("size", ["lots", "0", "-1GiB", "1e9"])
def test_bad_max_memory_is_a_usage_error(mlp_path, capsys, size):
    assert main(["run", mlp_path, f"--max-memory={size}"]) == 2
    message = (f"a memory limit must be positive, got '{size}'" if size == "0" else
               f"bad memory size '{size}': expected a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, "
               "GiB, TiB), e.g. 8GiB")
    assert err_of(capsys) == f"plait: error: --max-memory: {message}\n"


# ---- --output ---------------------------------------------------------------------------------


def test_output_is_written_to_exactly_the_given_name(mlp_path, tmp_path, capsys):
    out = tmp_path / "o2"
    assert main(["run", mlp_path, "--output", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {out}: y\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o2"]
    with np.load(out) as d:
        assert d.files == ["y"]


def test_output_named_file(add_path, tmp_path, capsys):
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2.5, np.float32)
    np.savez(tmp_path / "ab.npz", a=a, b=b)
    assert main(["run", add_path, "--inputs", str(tmp_path / "ab.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz") as d:
        np.testing.assert_array_equal(d["file"], a + b)


def test_bad_output_paths(mlp_path, tmp_path, capsys):
    (tmp_path / "d").mkdir()
    cases = [
        (tmp_path / "no" / "dir" / "o.npz",
         f"--output: cannot write '{tmp_path / 'no' / 'dir' / 'o.npz'}': the directory '{tmp_path / 'no' / 'dir'}' "
         "does not exist"),
        (tmp_path / "d", f"--output: '{tmp_path / 'd'}' is a directory; give a file name, e.g. "
                         f"{tmp_path / 'd' / 'out.npz'}"),
    ]
    for path, message in cases:
        assert main(["run", mlp_path, "--output", str(path)]) == 1
        got = capsys.readouterr()
        assert (got.out, got.err) == ("", f"plait: error: {message}\n")


def test_output_write_failure(mlp_path, tmp_path, capsys, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(npformat, "write_array", full)
    assert main(["run", mlp_path, "--output", str(tmp_path / "o.npz")]) == 1
    assert err_of(capsys) == (f"{RANDOM_X}plait: error: --output: cannot write '{tmp_path / 'o.npz'}': No space left "
                              "on device\n")


def test_an_output_name_too_long_for_a_npz_entry(tmp_path, capsys):
    name = "y" * 70_000
    path = save(small_model([helper.make_node("Relu", ["x"], [name], name="r")], [("x", [2])], [(name, [2])]),
                tmp_path / "long.onnx")
    assert main(["run", path, "--output", str(tmp_path / "o.npz")]) == 1
    err = err_of(capsys)
    assert err.startswith(f"{RANDOM_X}plait: error: --output: output 'yyy")
    assert err.endswith("' has a name too long for a .npz entry (70,004 bytes with '.npy'; a zip allows 65,535)\n")
    assert len(err) < 400 + len(RANDOM_X)


def test_output_to_a_file_that_cannot_seek(mlp_path, capsys):
    assert main(["run", mlp_path, "--output", "/dev/null"]) == 0  # a zip is built in memory, then written
    assert capsys.readouterr().out == "wrote 1 output(s) to /dev/null: y\n"
