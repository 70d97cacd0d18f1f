"""The C of an AOT artifact: header, entry point, device interface, constants, operators, Makefile.

    include/plait_<name>.h              the public API (structs, size macros, run functions, device ABI)
    src/plait_<name>.c                  the entry point: calls in order, pools (static, .bss)
    src/plait_<name>_device.c           the device interface's default (shared address space): a board
                                        port replaces this file
    src/plait_<name>_constants.c        the constants, ``const`` arrays (.rodata / flash)
    src/plait_<name>_<piece>_ops.c      each piece's operator functions (the c backend's C)
    src/plait_<name>_internal.h         declarations shared by the files of src/
    Makefile

Every name from the model is sanitized (:mod:`plait.runtime.c_lang`); model text appears only in
escaped comments. Operator functions are renamed ``<name>_<symbol>`` so that several models link into
one program; their C is otherwise exactly what the Graph build compiles.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

from plait.runtime.c_lang import storage_type
from plait.runtime.c_lang import NameTable, comment_text
from plait.memory.plan import entry_bytes
from plait.relay.module import IRModule
from plait.target import get_kind
from plait.target.composite import piece_of
from plait.tir.stmt import PrimFunc

WARNINGS = ("-Wall", "-Wextra", "-Werror", "-pedantic")
_HEAD = re.compile(r"^int32_t ([A-Za-z_][A-Za-z0-9_]*)\((.*)\) \{$", re.M)


def _literal(v: Any, dtype: str) -> str:
    """An exact C literal of one element (floats as hexadecimal literals)."""
    if dtype in ("float32", "float64"):
        f = float(v)
        if f != f:
            return "NAN"
        if f in (float("inf"), float("-inf")):
            return "INFINITY" if f > 0 else "-INFINITY"
        mant, exp = f.hex().split("p")
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        return f"{mant}p{exp}" + ("f" if dtype == "float32" else "")
    if dtype == "float16":
        return str(int(np.asarray(v, np.float16).view(np.uint16)))
    if dtype == "bool":
        return "1" if v else "0"
    i = int(v)
    if dtype == "int64":
        return "(-INT64_C(9223372036854775807) - 1)" if i == -2**63 else f"INT64_C({i})"
    if dtype == "uint64":
        return f"UINT64_C({i})"
    if dtype == "int32":
        return "(-2147483647 - 1)" if i == -2**31 else str(i)
    if dtype == "uint32":
        return f"{i}u"
    return str(i)


def _array_text(a: np.ndarray) -> str:
    flat = a.reshape(-1)
    if flat.size == 0:
        return "  0"
    vals = [_literal(x, a.dtype.name) for x in flat.tolist()] if a.dtype.name != "float16" else \
        [str(int(x)) for x in flat.view(np.uint16)]
    return "\n".join("  " + ", ".join(vals[k:k + 8]) + "," for k in range(0, len(vals), 8))


class _Names:
    """The C names of one model: ``p`` = plait_<name>, ``P`` = PLAIT_<NAME>, fields and macros."""

    def __init__(self, name: str):
        self.p, self.P = f"plait_{name}", f"PLAIT_{name.upper()}"
        self.macros = NameTable()

    def macro(self, *parts: str, suffix: str = "") -> str:
        """A unique macro name ``PLAIT_<NAME>_<PARTS>`` (upper case; ``_1``... when taken) + ``suffix``."""
        return self.macros.fresh("_".join([self.P, *(x.upper() for x in parts)]), "M") + suffix


def _piece_sources(mod: IRModule, composite: Any, name: str, used: set[str]) -> dict[str, dict[str, Any]]:
    """Per piece with calls: its C text, C function name per symbol, prototypes, flags."""
    out: dict[str, dict[str, Any]] = {}
    for piece in composite.pieces:
        if piece.name not in used:
            continue
        own = {k: f for k, f in mod.items() if isinstance(f, PrimFunc) and piece_of(f) == piece.name
               and not f.attrs.get("external")}
        funcs = [f if f.name else f.with_attrs(global_symbol=k) for k, f in sorted(own.items())]
        symbols = [f.name for f in funcs]
        renamed = [f.with_attrs(global_symbol=f"{name}_{f.name}") for f in funcs]
        writer = c_writer(piece.target)
        unit = writer.c_unit(renamed, piece.target, f"{name}_{piece.name}")
        tools = writer.c_toolchain(piece.target)
        out[piece.name] = {"text": unit.text, "cnames": dict(zip(symbols, unit.function_names)),
                           "protos": [f"int32_t {n}({a});" for n, a in _HEAD.findall(unit.text)], "cc": tools.cc,
                           "flags": list(tools.flags), "host_flags": list(tools.host_flags),
                           "link_flags": list(unit.link_flags), "required_flags": tools.required_flags,
                           "target": str(piece.target)}
    return out


def c_writer(target: Any) -> Any:
    """The backend that writes ``target``'s C for the AOT sources: the target's kind when it emits C
    itself (:attr:`plait.target.Backend.emits_c`), else the kind its ``default_codegen`` names (a kind
    lowered by default and compiled by the c kind). :func:`plait.executor.aot.artifact.check_pieces` has checked
    that every piece with calls generates C."""
    backend = target.kind.backend
    if type(backend).emits_c:
        return backend
    return get_kind(type(backend).default_codegen).backend


def write_files(name: str, align: int, g: dict[str, Any], params: Mapping[str, np.ndarray], mod: IRModule,
                composite: Any, host: str, functions: Mapping[str, Any],
                memory: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """(relative path -> text, metadata) of the AOT directory of the planned graph ``g``."""
    nm = _Names(name)
    p, P = nm.p, nm.P
    nodes, entries = g["nodes"], g["entries"]
    used = {str(n.get("piece", host)) for n in nodes if n["op"] == "call"}
    pieces = _piece_sources(mod, composite, name, used)
    all_pieces = [x.name for x in composite.pieces]
    pools = memory["pools"]

    fields = NameTable()
    inputs = [(nodes[i]["name"], nodes[i]["outputs"][0]) for i in g["inputs"]]
    in_field = {e: fields.fresh(n, "input") for n, e in inputs}
    ofields = NameTable()
    outputs = list(zip(g["output_names"], g["outputs"]))
    out_field = [ofields.fresh(n, "output") for n, _ in outputs]
    wfields = NameTable()
    pool_field = [wfields.fresh(x["name"], "pool") for x in pools]
    const = {nodes[i]["outputs"][0]: (f"{p}_c{k}", nodes[i]["name"]) for k, i in enumerate(g["params"])}
    piece_macro = {x: nm.macro("piece", x) for x in all_pieces}
    func_ids: dict[tuple[str, str], tuple[str, int]] = {}
    for n in nodes:
        piece = str(n.get("piece", host))
        if n["op"] == "call" and piece != host:
            key = (piece, n["func"])
            if key not in func_ids:
                k = sum(1 for q in func_ids if q[0] == piece)
                func_ids[key] = (nm.macro(piece, "func", n["func"]), k)

    def ctype(e: int) -> str:
        return storage_type(entries[e]["dtype"])

    # ---- header --------------------------------------------------------------------------------------
    h = [f"/* Generated by plait: the AOT C API of model \"{comment_text(name)}\" for target "
         f"\"{comment_text(str(composite))}\". */",
         f"#ifndef {P}_H", f"#define {P}_H", "", "#include <stdbool.h>", "#include <stddef.h>",
         "#include <stdint.h>", "", "#ifdef __cplusplus", "extern \"C\" {", "#endif", ""]
    h.append("/* bytes of each input, output and pool */")
    for (n, e) in inputs:
        h.append(f"#define {nm.macro(in_field[e], suffix='_SIZE')} {entry_bytes(entries[e])}u"
                 f"  /* input \"{comment_text(n)}\": {_desc(entries[e])} */")
    for (n, e), f in zip(outputs, out_field):
        h.append(f"#define {nm.macro(f, suffix='_SIZE')} {entry_bytes(entries[e])}u"
                 f"  /* output \"{comment_text(n)}\": {_desc(entries[e])} */")
    for x, f in zip(pools, pool_field):
        h.append(f"#define {nm.macro('pool', f, suffix='_SIZE')} {x['bytes']}u  /* piece \"{comment_text(x['piece'])}\" */")
    h.append(f"#define {P}_POOL_ALIGN {align}u  /* every pool and every buffer in it is aligned to this */")
    h += ["", f"struct {p}_inputs {{"]
    h += [f"  const {ctype(e)} *{in_field[e]};  /* \"{comment_text(n)}\" */" for n, e in inputs] or \
        ["  const void *reserved;  /* the model has no inputs */"]
    h += ["};", "", f"struct {p}_outputs {{"]
    h += [f"  {ctype(e)} *{f};  /* \"{comment_text(n)}\" */" for (n, e), f in zip(outputs, out_field)]
    h += ["};", "", f"/* memory for the activations and workspaces: one pool per piece, {align}-byte aligned */",
          f"struct {p}_workspaces {{"]
    h += [f"  uint8_t *{f};  /* piece \"{comment_text(x['piece'])}\" */" for x, f in zip(pools, pool_field)] or \
        ["  void *reserved;  /* the model needs no pool */"]
    h += ["};", "", "/* Runs the model on static pools (not re-entrant). Returns 0 on success. */",
          f"int32_t {p}_run(const struct {p}_inputs *inputs, struct {p}_outputs *outputs);", "",
          "/* Runs the model on the caller's pools (re-entrant). Returns 0 on success. */",
          f"int32_t {p}_run_with_workspaces(const struct {p}_inputs *inputs, struct {p}_outputs *outputs,",
          f"    const struct {p}_workspaces *workspaces);", "",
          "/* Device interface (src/" + f"{p}_device.c" + " implements it for pieces sharing one address space;",
          "   a board port replaces that file). Pieces: */"]
    h += [f"#define {piece_macro[x]} {k}  /* \"{comment_text(x)}\"{' (host)' if x == host else ''} */"
          for k, x in enumerate(all_pieces)]
    h += ["/* Copies bytes from src (in piece src_piece's memory) to dst (in dst_piece's); 0 on success. */",
          f"int32_t {p}_copy(int32_t src_piece, int32_t dst_piece, void *dst, const void *src, size_t bytes);"]
    for piece in sorted({q for q, _ in func_ids}, key=all_pieces.index):
        h.append(f"/* Runs function func of piece \"{comment_text(piece)}\" on args (inputs, outputs, workspaces). */")
        h += [f"#define {m} {k}  /* {comment_text(f)} */" for (q, f), (m, k) in func_ids.items() if q == piece]
        h.append(f"int32_t {p}_{_piece_c(piece)}_call(int32_t func, void *const *args);")
    h += ["", "#ifdef __cplusplus", "}", "#endif", f"#endif /* {P}_H */", ""]

    # ---- internal header, constants --------------------------------------------------------------
    i_h = [f"/* Generated by plait: declarations shared by the sources of model \"{comment_text(name)}\". */",
           f"#ifndef {P}_INTERNAL_H", f"#define {P}_INTERNAL_H", "", "#include <stdbool.h>", "#include <stddef.h>",
           "#include <stdint.h>", "", "#if defined(__GNUC__)",
           f"#define {P}_ALIGNED __attribute__((aligned({align})))", "#else", f"#define {P}_ALIGNED", "#endif", ""]
    for q in pieces.values():
        i_h += q["protos"]
    c_lines = [f"/* Generated by plait: the constants of model \"{comment_text(name)}\" (read-only). */",
               "#include <math.h>", f"#include \"{p}_internal.h\"", ""]
    for e, (cname, pname) in const.items():
        a = np.ascontiguousarray(params[pname])
        count = max(1, int(a.size))
        i_h.append(f"extern const {ctype(e)} {cname}[{count}];")
        c_lines += [f"/* {comment_text(pname)}: {_desc(entries[e])} */",
                    f"const {ctype(e)} {cname}[{count}] {P}_ALIGNED = {{", _array_text(a), "};", ""]
    i_h += ["", f"#endif /* {P}_INTERNAL_H */", ""]

    # ---- entry point -----------------------------------------------------------------------------------
    where = {e: (g["storage"][entries[e]["storage"]]) for e in range(len(entries))}
    root: dict[int, int] = {}  # a view's entry -> the entry whose bytes it is (views allocate nothing)
    for n in nodes:
        if n["op"] == "view":
            root[n["outputs"][0]] = root.get(n["inputs"][0], n["inputs"][0])

    def ptr(e: int) -> str:
        e = root.get(e, e)
        if e in in_field:
            return f"inputs->{in_field[e]}"
        if e in const:
            return const[e][0]
        s = where[e]
        return f"(void *)(pool_{pool_field[s['pool']]} + {s['offset']})"

    def void_ptr(e: int) -> str:
        x = ptr(e)
        return x if x.startswith("(void *)") else f"(void *){x}"

    body: list[str] = []
    for nid, n in enumerate(nodes):
        if n["op"] == "call":
            piece = str(n.get("piece", host))
            ids = [*n["inputs"], *n["outputs"], *n.get("workspace", ())]
            body.append(f"  /* node {nid}: \"{comment_text(n['name'])}\" on piece \"{comment_text(piece)}\" */")
            if piece == host:
                cname = pieces[piece]["cnames"][n["func"]]
                body.append(f"  status = {cname}({', '.join(ptr(e) for e in ids)});")
            else:
                m, _ = func_ids[(piece, n["func"])]
                body += ["  {", f"    void *const args[{len(ids)}] = {{{', '.join(void_ptr(e) for e in ids)}}};",
                         f"    status = {p}_{_piece_c(piece)}_call({m}, args);", "  }"]
        elif n["op"] == "copy":
            e, d = n["inputs"][0], n["outputs"][0]
            body.append(f"  /* node {nid}: copy \"{comment_text(n['src'])}\" -> \"{comment_text(n['dst'])}\" */")
            body.append(f"  status = {p}_copy({piece_macro.get(n['src'], -1)}, {piece_macro.get(n['dst'], -1)}, "
                        f"{ptr(d)}, {ptr(e)}, {entry_bytes(entries[e])}u);")
        else:
            continue
        body.append("  if (status != 0) {\n    return status;\n  }")
    piece_of_pool = {x["name"]: x["piece"] for x in pools}
    home = {b["entry"]: piece_of_pool[b["pool"]] for b in memory["buffers"]}  # where each output was made
    for (n, e), f in zip(outputs, out_field):
        nb = entry_bytes(entries[e])
        if nb == 0:
            continue
        body.append(f"  /* output \"{comment_text(n)}\" */")
        src = home.get(root.get(e, e), host)
        if src == host:
            body.append(f"  memcpy(outputs->{f}, {ptr(e)}, {nb}u);")
        else:
            body += [f"  status = {p}_copy({piece_macro[src]}, {piece_macro[host]}, outputs->{f}, {ptr(e)}, {nb}u);",
                     "  if (status != 0) {\n    return status;\n  }"]
    entry = [f"/* Generated by plait: the entry point of model \"{comment_text(name)}\". */", "#include <string.h>",
             "", f"#include \"{p}.h\"", f"#include \"{p}_internal.h\"", ""]
    for x, f in zip(pools, pool_field):
        entry.append(f"static uint8_t {p}_pool_{f}[{max(1, x['bytes'])}] {P}_ALIGNED;")
    entry += ["", f"int32_t {p}_run_with_workspaces(const struct {p}_inputs *inputs, struct {p}_outputs *outputs,",
              f"    const struct {p}_workspaces *workspaces) {{", "  int32_t status = 0;"]
    entry += [f"  uint8_t *const pool_{f} = workspaces->{f};" for f in pool_field]
    entry += ["  (void)inputs;", "  (void)outputs;", "  (void)workspaces;", *body, "  return status;", "}", "",
              f"int32_t {p}_run(const struct {p}_inputs *inputs, struct {p}_outputs *outputs) {{",
              f"  struct {p}_workspaces workspaces;"]
    entry += [f"  workspaces.{f} = {p}_pool_{f};" for f in pool_field] or ["  workspaces.reserved = NULL;"]
    entry += [f"  return {p}_run_with_workspaces(inputs, outputs, &workspaces);", "}", ""]

    # ---- device interface ----------------------------------------------------------------------------
    dev = [f"/* Generated by plait: the device interface of model \"{comment_text(name)}\" for pieces that share",
           "   one address space (a direct call, memcpy). A board port replaces this file (mailbox, DMA). */",
           "#include <string.h>", "", f"#include \"{p}.h\"", f"#include \"{p}_internal.h\"", "",
           f"int32_t {p}_copy(int32_t src_piece, int32_t dst_piece, void *dst, const void *src, size_t bytes) {{",
           "  (void)src_piece;", "  (void)dst_piece;", "  memcpy(dst, src, bytes);", "  return 0;", "}"]
    for piece in sorted({q for q, _ in func_ids}, key=all_pieces.index):
        dev += ["", f"int32_t {p}_{_piece_c(piece)}_call(int32_t func, void *const *args) {{", "  switch (func) {"]
        for (q, f), (m, _) in func_ids.items():
            if q != piece:
                continue
            nargs = len(functions[f]["args"]) if f in functions else 0
            cname = pieces[piece]["cnames"][f]
            dev += [f"  case {m}:", f"    return {cname}({', '.join(f'args[{k}]' for k in range(nargs))});"]
        dev += ["  default:", "    return -1;", "  }", "}"]
    dev.append("")

    # ---- files, Makefile, metadata --------------------------------------------------------------------
    if host not in pieces:
        tools = c_writer(composite.host.target).c_toolchain(composite.host.target)
        hp = {"cc": tools.cc, "flags": list(tools.flags), "host_flags": list(tools.host_flags),
              "required_flags": tools.required_flags}
    else:
        hp = pieces[host]
    files = {f"include/{p}.h": "\n".join(h), f"src/{p}_internal.h": "\n".join(i_h),
             f"src/{p}.c": "\n".join(entry), f"src/{p}_device.c": "\n".join(dev),
             f"src/{p}_constants.c": "\n".join(c_lines)}
    sources = [{"file": f"src/{p}.c", "piece": host, "cc": hp["cc"], "flags": hp["flags"],
                "host_flags": hp["host_flags"]},
               {"file": f"src/{p}_device.c", "piece": host, "cc": hp["cc"], "flags": hp["flags"],
                "host_flags": hp["host_flags"]},
               {"file": f"src/{p}_constants.c", "piece": host, "cc": hp["cc"], "flags": hp["flags"],
                "host_flags": hp["host_flags"]}]
    for piece, q in pieces.items():
        rel = f"src/{p}_{_piece_c(piece)}_ops.c"
        files[rel] = q["text"]
        sources.append({"file": rel, "piece": piece, "cc": q["cc"], "flags": q["flags"], "host_flags": q["host_flags"]})
    link = sorted({f for q in pieces.values() for f in q["link_flags"]}) + ["-lm"]
    files["Makefile"] = _makefile(p, sources, link)
    placement = [{"node": nid, "name": n["name"], "func": n["func"], "piece": str(n.get("piece", host))}
                 for nid, n in enumerate(nodes) if n["op"] == "call"]
    metadata = {
        "format": "plait.aot", "version": 1, "name": name, "target": str(composite), "host": host,
        "pieces": {x: {"target": str(composite.piece(x).target), "id": k} for k, x in enumerate(all_pieces)},
        "placement": placement,
        "inputs": [{"name": n, "field": in_field[e], **_info(entries[e])} for n, e in inputs],
        "outputs": [{"name": n, "field": f, **_info(entries[e])} for (n, e), f in zip(outputs, out_field)],
        "pools": [{"name": x["name"], "field": f, "piece": x["piece"], "bytes": x["bytes"]}
                  for x, f in zip(pools, pool_field)],
        "align": align, "sources": sources, "warning_flags": list(WARNINGS), "link_flags": link,
        "required_flags": list(dict.fromkeys(f for q in (hp, *pieces.values()) for f in q["required_flags"])),
    }
    return files, metadata


def _piece_c(piece: str) -> str:
    return NameTable().fresh(piece, "piece")


def _desc(e: Mapping[str, Any]) -> str:
    return f"{e['dtype']}{list(e['shape'])}"


def _info(e: Mapping[str, Any]) -> dict[str, Any]:
    return {"dtype": e["dtype"], "shape": list(e["shape"]), "bytes": entry_bytes(e)}


def _makefile(p: str, sources: list[dict[str, Any]], link: list[str]) -> str:
    """A Makefile building every source with its recorded compiler and flags, and lib<p>.a."""
    lines = [f"# Generated by plait: builds the objects of {p} and lib{p}.a with the flags recorded in",
             "# metadata.json (make CC=... overrides the host piece's compiler; WARNINGS= turns -Werror off).",
             f"# Linking a program: lib{p}.a {' '.join(link)}", "",
             "ifeq ($(origin CC),default)", f"CC = {sources[0]['cc']}", "endif", "AR ?= ar",
             f"WARNINGS ?= {' '.join(WARNINGS)}", "OBJ = build", "", ".DEFAULT_GOAL := all", ""]
    objs = []
    for s in sources:
        stem = s["file"][len("src/"):-2]
        var = stem.upper()
        obj = f"$(OBJ)/{stem}.o"
        objs.append(obj)
        cc = "$(CC)" if s["cc"] == sources[0]["cc"] else f"$(CC_{var})"
        if cc != "$(CC)":
            lines.append(f"CC_{var} ?= {s['cc']}")
        lines += [f"CFLAGS_{var} = {' '.join(s['flags'])}", f"{obj}: {s['file']} include/{p}.h src/{p}_internal.h",
                  "\t@mkdir -p $(OBJ)", f"\t{cc} $(CFLAGS_{var}) $(WARNINGS) -Iinclude -Isrc -c {s['file']} -o $@", ""]
    lines += [f"lib{p}.a: {' '.join(objs)}", "\t$(AR) rcs $@ $^", "",
              f"all: lib{p}.a", "", "clean:", f"\trm -rf $(OBJ) lib{p}.a", "", ".PHONY: all clean", ""]
    return "\n".join(lines)


__all__ = ["WARNINGS", "write_files"]
