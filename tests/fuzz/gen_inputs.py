"""Category ``inputs``: hostile files given to ``plait run --inputs`` (a valid model, a bad file).

The reference reads the file as numpy does (``np.load``, no pickles): when numpy reads it, the
interpreter's result on those arrays (missing inputs random, as the CLI makes them) is what every
leg must equal, or refuse; when numpy cannot read it, the CLI must refuse.
"""

from __future__ import annotations

import io
import os
import random
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .bases import BASES
from .case import Case, Env, Recorder
from .flows import model_legs
from .npz import npy_bytes, write_npz


@dataclass
class FileSpec:
    """How to write the inputs file: ``write(path)`` (may make a directory, a symlink, nothing)."""

    description: str
    write: Callable[[Path], None]
    ort_ref: bool = False


def _npz(members: Any, **kw: Any) -> Callable[[Path], None]:
    return lambda p: write_npz(p, members, **kw)


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


def _huge_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    """A .npy header claiming ``shape`` (and 8 bytes of data)."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 8


def _valid_npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in arrays.items():
            z.writestr(f"{k}.npy", npy_bytes(v))
    return buf.getvalue()


WRONG_DTYPES = ["float64", "float16", "int32", "int64", "bool", "complex64", ">f4", "<U3", "datetime64[s]", "V4",
                "uint8"]


def _generators(arrays: dict[str, np.ndarray], rng: random.Random, nrng: np.random.Generator) -> list[
        tuple[str, Callable[[], FileSpec]]]:
    """Every kind of hostile file, as (kind, make) pairs (make draws from ``rng``)."""
    names = list(arrays)
    first = names[0]

    def subset() -> FileSpec:
        keep = rng.sample(names, rng.randrange(len(names)))
        return FileSpec(f"only {keep} (the rest random)", _npz({k: arrays[k] for k in keep}))

    def extra() -> FileSpec:
        return FileSpec("an extra key 'bogus'", _npz({**arrays, "bogus": np.zeros(3, np.float32)}))

    def misnamed() -> FileSpec:
        bad = rng.choice([first.upper(), first + " ", f"{first}.npy", "", "ü", "../" + first, "a\nb", "x" * 300])
        return FileSpec(f"key {bad[:20]!r} instead of {first!r}", _npz({**{k: v for k, v in arrays.items() if k != first},
                                                                        bad: arrays[first]}))

    def wrong_dtype() -> FileSpec:
        dt = rng.choice(WRONG_DTYPES)
        try:
            value = arrays[first].astype(dt)
        except (TypeError, ValueError):
            value = np.zeros(arrays[first].shape, dt)
        return FileSpec(f"'{first}' as {dt}", _npz({**arrays, first: value}))

    def wrong_shape() -> FileSpec:
        a = arrays[first]
        value = rng.choice([a.T.copy(), a[None], np.asarray(a.reshape(-1)[0]), a.reshape(-1)[:0], np.concatenate([a, a])])
        return FileSpec(f"'{first}' of shape {list(value.shape)}", _npz({**arrays, first: value}))

    def pickled() -> FileSpec:
        obj = np.empty(2, dtype=object)
        obj[0], obj[1] = {"a": 1}, [1, 2]
        return FileSpec(f"'{first}' as a pickled object array", _npz({**arrays, first: obj}))

    def special_values() -> FileSpec:
        out = {k: v.copy() for k, v in arrays.items()}
        floats = [k for k, v in out.items() if v.dtype.kind == "f"]
        k = rng.choice(floats)
        flat = out[k].reshape(-1)
        for _ in range(rng.randint(1, flat.size)):
            flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf, 1e30, -0.0])
        return FileSpec(f"NaN/inf/huge values in '{k}'", _npz(out), ort_ref=True)

    def layout() -> FileSpec:
        kind = rng.choice(["fortran", "compressed", "reordered"])
        if kind == "fortran":
            return FileSpec("Fortran-ordered arrays", _npz({k: np.asfortranarray(v) for k, v in arrays.items()}),
                            ort_ref=True)
        if kind == "compressed":
            return FileSpec("a compressed .npz", _npz(arrays, compress=True), ort_ref=True)
        return FileSpec("keys in reverse order", _npz(dict(reversed(list(arrays.items())))), ort_ref=True)

    def broken_zip() -> FileSpec:
        data = _valid_npz_bytes(arrays)
        mode = rng.choice(["truncated", "flipped", "no central directory", "PK garbage"])
        if mode == "truncated":
            data = data[: rng.randrange(1, len(data))]
        elif mode == "flipped":
            buf = bytearray(data)
            for _ in range(rng.choice([1, 4, 16])):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
            data = bytes(buf)
        elif mode == "no central directory":
            data = data[: data.rfind(b"PK\x01\x02")]
        else:
            data = b"PK\x03\x04" + bytes(nrng.integers(0, 256, 200, dtype=np.uint8))
        return FileSpec(f"a {mode} zip ({len(data)} bytes)", _bytes(data))

    def broken_member() -> FileSpec:
        good = npy_bytes(arrays[first])
        mode = rng.choice(["short data", "huge shape", "bad magic", "code in header", "version 9", "not npy",
                           "duplicate member", "directory member"])
        if mode == "short data":
            members: Any = {**arrays, first: good[:-4]}
        elif mode == "huge shape":
            members = {**arrays, first: _huge_header((2**40,))}
        elif mode == "bad magic":
            members = {**arrays, first: b"\x93NUMPZ" + good[6:]}
        elif mode == "code in header":
            members = {**arrays, first: good.replace(b"'descr'", b"'descr':__import__('os').getcwd(),'x'", 1)}
        elif mode == "version 9":
            members = {**arrays, first: good[:6] + b"\x09\x00" + good[8:]}
        elif mode == "not npy":  # a member without the .npy suffix: np.load hands out its raw bytes
            return FileSpec(f"member '{first}' that is not a .npy", _npz(
                [*((f"{k}.npy", npy_bytes(v)) for k, v in arrays.items() if k != first), (first, b"hello")],
                raw_names=True))
        elif mode == "duplicate member":
            return FileSpec(f"member '{first}.npy' twice", _npz(
                [*((f"{k}.npy", npy_bytes(v)) for k, v in arrays.items()), (f"{first}.npy", npy_bytes(arrays[first] * 0))],
                raw_names=True))
        else:
            return FileSpec("a directory member 'x/'", _npz([*((f"{k}.npy", npy_bytes(v)) for k, v in arrays.items()),
                                                             ("x/", b"")], raw_names=True))
        return FileSpec(f"member '{first}' with {mode}", _npz(members))

    def not_npz() -> FileSpec:
        mode = rng.choice(["empty", "plain npy", "huge npy", "garbage", "text", "npy of a pickle"])
        if mode == "empty":
            return FileSpec("an empty file", _bytes(b""))
        if mode == "plain npy":
            return FileSpec(f"a plain .npy of '{first}'", _bytes(npy_bytes(arrays[first])))
        if mode == "huge npy":
            shape = rng.choice([(2**40,), (2**20, 2**20), (2**62,)])
            return FileSpec(f"a .npy whose header claims {list(shape)}", _bytes(_huge_header(shape)))
        if mode == "garbage":
            return FileSpec("random bytes", _bytes(bytes(nrng.integers(0, 256, rng.choice([1, 100, 5000]),
                                                                       dtype=np.uint8))))
        if mode == "text":
            return FileSpec("a text file", _bytes(b"x = [1, 2, 3]\n"))
        obj = np.empty(1, dtype=object)
        obj[0] = {"x": 1}
        return FileSpec("a .npy of a pickled object", _bytes(npy_bytes(obj, allow_pickle=True)))

    def not_a_file() -> FileSpec:
        mode = rng.choice(["directory", "missing", "dev null", "symlink loop", "dangling symlink"])
        if mode == "directory":
            return FileSpec("a directory", lambda p: p.mkdir())
        if mode == "missing":
            return FileSpec("a path that does not exist", lambda p: None)
        if mode == "dev null":
            return FileSpec("a symlink to /dev/null", lambda p: os.symlink(os.devnull, p))
        if mode == "symlink loop":
            return FileSpec("a symlink to itself", lambda p: os.symlink(p.name, p))
        return FileSpec("a dangling symlink", lambda p: os.symlink("nowhere.npz", p))

    def valid() -> FileSpec:
        return FileSpec("every input, right dtype and shape", _npz(arrays), ort_ref=True)

    return [("valid", valid), ("subset", subset), ("extra", extra), ("misnamed", misnamed), ("dtype", wrong_dtype),
            ("shape", wrong_shape), ("pickled", pickled), ("special-values", special_values), ("layout", layout),
            ("broken-zip", broken_zip), ("broken-member", broken_member), ("not-npz", not_npz),
            ("not-a-file", not_a_file)]


@dataclass
class Prepared:
    dir: Path
    model: Path
    inputs_file: Path
    ort_ref: bool


def build(base_name: str, spec: FileSpec, d: Path, env: Env) -> Prepared:
    model = d / "model.onnx"
    model.write_bytes(BASES[base_name](0).model.SerializeToString())
    path = d / "in.npz"
    spec.write(path)
    return Prepared(d, model, path, spec.ort_ref)


def read_as_numpy(path: Path, input_names: list[str]) -> dict[str, Any] | None:
    """What numpy reads from the file (no pickles): an .npz's members, or one .npy for a one-input model."""
    try:
        obj = np.load(path, allow_pickle=False)
    except Exception:  # noqa: BLE001 - not readable: the CLI must refuse it
        return None
    if isinstance(obj, np.lib.npyio.NpzFile):
        try:
            return {k: obj[k] for k in obj.files}
        except Exception:  # noqa: BLE001
            return None
        finally:
            obj.close()
    if isinstance(obj, np.ndarray) and len(input_names) == 1:
        return {input_names[0]: obj}
    return None


def _api_inputs(p: Prepared, mod: Any) -> dict[str, np.ndarray] | None:
    from plait.relay.io import input_names, make_inputs

    given = read_as_numpy(p.inputs_file, input_names(mod))
    return None if given is None else make_inputs(mod, given, seed=0)


def check(p: Prepared, env: Env, rec: Recorder) -> None:
    model_legs(p.model, env, rec, api_inputs=partial(_api_inputs, p), inputs_file=p.inputs_file, ort_ref=p.ort_ref,
               out_dir=p.dir)


def case(seed: int, index: int) -> Case:
    rng = random.Random(f"inputs:{seed}:{index}")
    nrng = np.random.default_rng([seed, index, 2])
    base_name = rng.choice(["mlp", "intops"])
    arrays = BASES[base_name](0).inputs(nrng)
    kinds = _generators(arrays, rng, nrng)
    kind, make = kinds[index % len(kinds)]
    spec = make()
    return Case(f"inputs:{seed}:{index}", "inputs", f"[{kind}] {base_name}: {spec.description}",
                partial(build, base_name, spec), check)
