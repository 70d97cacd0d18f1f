"""Tamper with one thing in an exported artifact directory, whatever files it holds.

The tamperer is generic: it lists the directory and picks among the files it finds by kind (``*.json``,
``*.npz``, ``*.so``, anything else as bytes), so files added to the artifact later (a manifest) are
tampered with too. Only the ``graph`` family knows graph.json's layout, to reproduce the tamperings
known to crash or to give silently wrong results.

A tampering is ``strict`` when no valid artifact can come out of it: the result must then equal the
original model's reference, or loading/running must refuse. It is not strict when it can make
another valid program (a call pointed at a different entry of the same type, two params of the
same shape swapped): then only crashes, tracebacks and hangs count.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .npz import npy_bytes, read_npz, write_npz

FAMILIES = ["none", "json-value", "json-structure", "json-text", "graph", "npz", "so", "files"]
HOSTILE_VALUES: list[Any] = [None, True, False, -1, 0, 1, 2**31, 2**63, -(2**63), 10**30, 1.5, float("nan"), "", "x" * 100_000,
                             "float32", "int64", "bogus", [], {}, [0], {"a": 1}, [[[]]]]


@dataclass
class Tampering:
    description: str
    strict: bool = True


def _files(d: Path, suffix: str | None = None) -> list[Path]:
    out = sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink())
    return [p for p in out if suffix is None or p.suffix == suffix]


def _pick(rng: random.Random, files: list[Path], prefer: str) -> Path:
    """A file, ``prefer`` (e.g. graph.json) three times as likely as each other one."""
    weighted = [f for f in files for _ in range(3 if f.name == prefer else 1)]
    return rng.choice(weighted)


# ---- JSON ----------------------------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _strings(doc: Any) -> list[str]:
    return sorted({_get(doc, p) for p in _paths(doc) if isinstance(_get(doc, p), str) and len(_get(doc, p)) < 200})


def _new_value(rng: random.Random, doc: Any, old: Any) -> Any:
    if isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.6:
        return rng.choice([old + 1, old - 1, 0, -1, old * 2, -old, 2**31, 2**40])
    if isinstance(old, str) and rng.random() < 0.5:
        return rng.choice(_strings(doc) or [""])
    return rng.choice(HOSTILE_VALUES)


def same_typed_retarget(graph: Any, path: tuple, new: Any, params: dict[str, np.ndarray]) -> bool:
    """Whether setting graph.json's ``path`` to ``new`` points a reference at another valid thing of
    the same dtype and shape (an entry, a param, a function): a different but valid program."""
    try:
        entries, nodes = graph["entries"], graph["nodes"]
        old = _get(graph, path)
        if (path[0] == "outputs" or path[0] == "nodes" and path[2] in ("inputs", "outputs", "workspace")) and \
                type(new) is int and 0 <= new < len(entries):
            a, b = entries[old], entries[new]
            return a["dtype"] == b["dtype"] and list(a["shape"]) == list(b["shape"])
        if path[0] == "nodes" and path[2] == "name" and nodes[path[1]].get("op") == "param" and new in params:
            a, b = params.get(old), params[new]
            return a is not None and a.shape == b.shape and a.dtype == b.dtype
        if path[0] == "nodes" and path[2] == "func" and isinstance(new, str):
            sig = [(entries[e]["dtype"], entries[e]["shape"]) for e in nodes[path[1]]["inputs"] + nodes[path[1]]["outputs"]]
            return any(n.get("func") == new and [(entries[e]["dtype"], entries[e]["shape"])
                                                 for e in n["inputs"] + n["outputs"]] == sig for n in nodes)
    except (KeyError, IndexError, TypeError):
        return False
    return False


def _params_of(d: Path) -> dict[str, np.ndarray]:
    try:
        return read_npz(d / "params.npz")
    except Exception:  # noqa: BLE001
        return {}


def json_value(d: Path, rng: random.Random) -> Tampering:
    f = _pick(rng, _files(d, ".json"), "graph.json")
    doc = json.loads(f.read_text(encoding="utf-8"))
    path = rng.choice(_paths(doc))
    old = _get(doc, path)
    new = _new_value(rng, doc, old)
    strict = not (f.name == "graph.json" and same_typed_retarget(doc, path, new, _params_of(d)))
    _get(doc, path[:-1])[path[-1]] = new
    f.write_text(json.dumps(doc), encoding="utf-8")
    shown = repr(new)[:40]
    return Tampering(f"{f.name}: {'/'.join(map(str, path))} {repr(old)[:30]} -> {shown}", strict)


def json_structure(d: Path, rng: random.Random) -> Tampering:
    f = _pick(rng, _files(d, ".json"), "graph.json")
    doc = json.loads(f.read_text(encoding="utf-8"))
    containers = [()] + [p for p in _paths(doc) if isinstance(_get(doc, p), (dict, list)) and _get(doc, p)]
    path = rng.choice(containers)
    c = _get(doc, path)
    if isinstance(c, dict):
        key = rng.choice(sorted(c))
        op = rng.choice(["delete", "add", "rename"])
        if op == "delete":
            del c[key]
        elif op == "add":
            c["zz_unknown"] = rng.choice(HOSTILE_VALUES[:12])
        else:
            c[key + "_"] = c.pop(key)
        what = f"{op} key '{key}'"
    else:
        op = rng.choice(["drop", "duplicate", "swap", "reverse", "empty"])
        i, j = rng.randrange(len(c)), rng.randrange(len(c))
        if op == "drop":
            del c[i]
        elif op == "duplicate":
            c.insert(i, json.loads(json.dumps(c[i])))
        elif op == "swap":
            c[i], c[j] = c[j], c[i]
        elif op == "reverse":
            c.reverse()
        else:
            c.clear()
        what = f"{op} list item {i}{f' <-> {j}' if op == 'swap' else ''}"
    f.write_text(json.dumps(doc), encoding="utf-8")
    return Tampering(f"{f.name}: {'/'.join(map(str, path)) or '(top)'}: {what}")


def json_text(d: Path, rng: random.Random) -> Tampering:
    f = _pick(rng, _files(d, ".json"), "graph.json")
    text = f.read_bytes()
    op = rng.choice(["truncate", "invalid", "empty", "null", "list", "deep", "huge number", "NaN", "BOM", "not UTF-8",
                     "reformatted"])
    data = {
        "truncate": text[: rng.randrange(len(text))] if text else b"",
        "invalid": text.replace(b":", b"=", 1),
        "empty": b"",
        "null": b"null",
        "list": b"[]",
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "huge number": b'{"format": "plait.graph", "version": 1e999}',
        "NaN": text.replace(b"1", b"NaN", 1),
        "BOM": b"\xef\xbb\xbf" + text,
        "not UTF-8": text.replace(b'"', b'"\xff', 1),
        "reformatted": json.dumps(json.loads(text), indent=4, sort_keys=True).encode() if text else b"",
    }[op]
    f.write_bytes(data)
    return Tampering(f"{f.name}: {op}")


# ---- graph.json, knowingly ---------------------------------------------------------------------------


def graph_semantic(d: Path, rng: random.Random) -> Tampering:
    """The tamperings known to crash or mislead: shrunk shapes, aliased storage, reordered calls, ..."""
    f = d / "graph.json"
    if not f.exists():
        return json_value(d, rng)
    g = json.loads(f.read_text(encoding="utf-8"))
    nodes, entries, storage = g["nodes"], g["entries"], g["storage"]
    calls = [i for i, n in enumerate(nodes) if n["op"] == "call"]
    op = rng.choice(["shrink input", "shrink param", "output dtype", "alias param", "swap calls", "storage bytes",
                     "retarget input", "drop param node", "drop workspace", "grow output", "output entry"])
    strict = True
    if op in ("shrink input", "shrink param", "grow output"):
        kind = {"shrink input": "input", "shrink param": "param", "grow output": None}[op]
        eid = (g["outputs"][0] if kind is None else
               rng.choice([nodes[i]["outputs"][0] for i, n in enumerate(nodes) if n["op"] == kind]))
        shape = entries[eid]["shape"]
        k = rng.randrange(len(shape)) if shape else None
        if k is not None:
            shape[k] = max(1, shape[k] - 1) if kind else shape[k] + 1
        if kind == "param":  # keep params.npz consistent, so only the compiled code can notice
            name = next(n["name"] for n in nodes if n["op"] == "param" and n["outputs"][0] == eid)
            params = read_npz(d / "params.npz")
            params[name] = np.resize(params[name], shape).astype(params[name].dtype)
            write_npz(d / "params.npz", params)
        what = f"entry {eid} shape -> {shape}"
    elif op == "output dtype":
        e = entries[g["outputs"][0]]
        e["dtype"] = {"float32": "int32", "int32": "float32", "int64": "float64"}.get(e["dtype"], "uint8")
        what = f"output entry dtype -> {e['dtype']}"
    elif op == "alias param":
        act = [i for i, s in enumerate(storage) if s["kind"] == "activation"]
        par = [i for i, s in enumerate(storage) if s["kind"] == "param"]
        victim = rng.choice([i for i, e in enumerate(entries) if e["storage"] in act] or [0])
        entries[victim]["storage"] = rng.choice(par or [0])
        what = f"entry {victim} moved onto param storage {entries[victim]['storage']}"
    elif op == "swap calls" and len(calls) > 1:
        i, j = rng.sample(calls, 2)
        nodes[i], nodes[j] = nodes[j], nodes[i]
        what = f"nodes {i} and {j} swapped"
    elif op == "storage bytes":
        s = rng.choice(storage)
        s["bytes"] = rng.choice([0, 1, s["bytes"] // 2, -8, 2**40, 2**63])
        what = f"a {s['kind']} storage of {s['bytes']} bytes"
    elif op == "retarget input" and calls:
        n = nodes[rng.choice(calls)]
        k = rng.randrange(len(n["inputs"]))
        new = rng.randrange(len(entries))
        strict = not same_typed_retarget(g, ("nodes", nodes.index(n), "inputs", k), new, _params_of(d))
        what = f"call '{n['name']}' input {k}: entry {n['inputs'][k]} -> {new}"
        n["inputs"][k] = new
    elif op == "drop param node":
        pid = rng.choice(g["params"])
        g["params"].remove(pid)
        what = f"param node {pid} dropped from 'params'"
    elif op == "drop workspace" and any("workspace" in nodes[i] for i in calls):
        n = next(nodes[i] for i in calls if "workspace" in nodes[i])
        del n["workspace"]
        what = f"call '{n['name']}' loses its workspace"
    else:  # "output entry", and the ops above that do not apply to this graph
        op = "output entry"
        new = rng.randrange(len(entries))
        strict = not same_typed_retarget(g, ("outputs", 0), new, _params_of(d))
        what = f"graph output entry {g['outputs'][0]} -> {new}"
        g["outputs"][0] = new
    f.write_text(json.dumps(g), encoding="utf-8")
    return Tampering(f"graph.json: {op}: {what}", strict)


# ---- npz ------------------------------------------------------------------------------------------------


def npz(d: Path, rng: random.Random) -> Tampering:
    files = _files(d, ".npz")
    if not files:
        return files_op(d, rng, [])
    f = _pick(rng, files, "params.npz")
    try:
        arrays = read_npz(f)
    except Exception:  # noqa: BLE001
        arrays = {}
    keys = sorted(arrays)
    op = rng.choice(["drop", "extra", "dtype", "shape", "pickled", "truncate", "empty", "garbage", "plain npy",
                     "huge header", "swap same shape", "compressed", "raw member", "fortran"])
    k = rng.choice(keys) if keys else "p0"
    strict = True
    if op == "drop" and keys:
        del arrays[k]
        write_npz(f, arrays)
    elif op == "extra":
        write_npz(f, {**arrays, "zz_extra": np.ones(3, np.float32)})
    elif op == "dtype" and keys:
        write_npz(f, {**arrays, k: arrays[k].astype(rng.choice(["float64", "float16", "int32", ">f4"]))})
    elif op == "shape" and keys:
        a = arrays[k]
        write_npz(f, {**arrays, k: rng.choice([a.reshape(-1), a[None], a.reshape(-1)[:-1], np.concatenate([a, a])])})
    elif op == "pickled":
        obj = np.empty(1, dtype=object)
        obj[0] = {"evil": True}
        write_npz(f, {**arrays, k: obj})
    elif op == "truncate":
        data = f.read_bytes()
        f.write_bytes(data[: rng.randrange(len(data))])
    elif op == "empty":
        f.write_bytes(b"")
    elif op == "garbage":
        f.write_bytes(bytes(rng.randrange(256) for _ in range(512)))
    elif op == "plain npy" and keys:
        f.write_bytes(npy_bytes(arrays[k]))
    elif op == "huge header":
        header = repr({"descr": "<f4", "fortran_order": False, "shape": (2**40,)}).encode()
        header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
        write_npz(f, {**arrays, k: b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header})
    elif op == "swap same shape":
        same = [(a, b) for a in keys for b in keys if a < b and arrays[a].shape == arrays[b].shape
                and arrays[a].dtype == arrays[b].dtype]
        if same:
            a, b = rng.choice(same)
            arrays[a], arrays[b] = arrays[b], arrays[a]
            k = f"{a}<->{b}"
            strict = False
        write_npz(f, arrays)
    elif op == "compressed":
        write_npz(f, arrays, compress=True)
    elif op == "raw member":
        write_npz(f, [*((f"{n}.npy", npy_bytes(a)) for n, a in arrays.items() if n != k), (k, b"not npy")],
                  raw_names=True)
    else:
        write_npz(f, {n: np.asfortranarray(a) for n, a in arrays.items()})
    return Tampering(f"{f.name}: {op} ({k})", strict)


# ---- shared libraries and other binary files -----------------------------------------------------------------


def binary(d: Path, rng: random.Random, donors: list[Path]) -> Tampering:
    files = _files(d, ".so") or [p for p in _files(d) if p.suffix not in (".json", ".npz")]
    if not files:
        return files_op(d, rng, donors)
    f = _pick(rng, files, "lib.so")
    data = f.read_bytes()
    op = rng.choice(["truncate", "flip", "zero page", "donor", "donor", "text", "empty", "append"])
    if op == "truncate":
        n = rng.choice([1, 64, len(data) // 2, len(data) - 1, rng.randrange(len(data))])
        f.write_bytes(data[:n])
        what = f"truncated to {n} of {len(data)} bytes"
    elif op == "flip":
        buf = bytearray(data)
        k = rng.choice([1, 8, 64])
        for _ in range(k):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(buf))
        what = f"{k} bits flipped"
    elif op == "zero page":
        at = rng.randrange(0, max(1, len(data) - 4096))
        f.write_bytes(data[:at] + b"\0" * min(4096, len(data) - at) + data[at + 4096:])
        what = f"4 KiB zeroed at {at}"
    elif op == "donor" and donors:
        donor = rng.choice(donors)
        shutil.copyfile(donor, f)
        what = f"replaced by {donor.parent.parent.name}'s {donor.name}"
    elif op == "text":
        f.write_text("int main(void) { return 0; }\n")
        what = "replaced by a text file"
    elif op == "empty":
        f.write_bytes(b"")
        what = "empty"
    else:
        f.write_bytes(data + b"\xcc" * rng.choice([1, 4096]))
        what = "junk appended"
    return Tampering(f"{f.name}: {what}")


# ---- whole files -------------------------------------------------------------------------------------------


def files_op(d: Path, rng: random.Random, donors: list[Path]) -> Tampering:
    files = _files(d)
    f = rng.choice(files)
    op = rng.choice(["delete", "directory", "symlink loop", "stray file", "bad modules.json", "rename to .c",
                     "dangling symlink"])
    if op == "delete":
        f.unlink()
    elif op == "directory":
        f.unlink()
        f.mkdir()
    elif op == "symlink loop":
        f.unlink()
        os.symlink(f.name, f)
    elif op == "dangling symlink":
        f.unlink()
        os.symlink("nowhere", f)
    elif op == "stray file":
        (d / "notes.txt").write_text("hello\n")
    elif op == "bad modules.json":
        (d / "modules.json").write_text(json.dumps({"format": "plait.modules", "version": 1, "modules": [
            {"file": rng.choice(["lib.so", "lib_1.so", "lib.c", None, "../lib.so"]), "imports": rng.choice([[], [0], [1]])}]}))
        f = d / "modules.json"
    elif op == "rename to .c":
        so = d / "lib.so"
        if so.exists():
            so.rename(d / "lib.c")
        f = so
    return Tampering(f"{f.name}: {op}")


def tamper(d: Path, family: str, rng: random.Random, donors: list[Path]) -> Tampering:
    """Apply one tampering of ``family`` (one of :data:`FAMILIES`) to the artifact directory ``d``."""
    if family == "none":
        return Tampering("untouched")
    if family == "json-value":
        return json_value(d, rng)
    if family == "json-structure":
        return json_structure(d, rng)
    if family == "json-text":
        return json_text(d, rng)
    if family == "graph":
        return graph_semantic(d, rng)
    if family == "npz":
        return npz(d, rng)
    if family == "so":
        return binary(d, rng, donors)
    return files_op(d, rng, donors)
