"""The AOT executor: a lowered module -> a directory of plain C with a fixed memory map.

    art = plait.build(mod, target="c", executor="aot", config={"aot.name": "kws", "aot.align": 16})
    art.export("out/")               # include/plait_kws.h, src/*.c, Makefile, memory.json, metadata.json
    print(art.memory_summary())      # per piece: pool, bytes, lower bound, algorithm
    y, = AotModule(art)(x=x)         # plait.executor.aot.module: the same C compiled for this machine

It reads the graph form every executor starts from (:func:`plait.executor.graph_codegen.graph_form`
on the same lowered ``main``; it lowers nothing itself), then:

1. checks that every piece with calls is built by the ``c`` code generator (an AOT build is C);
2. gives each piece its own memory: where a call reads a value made on another piece (or a graph
   input, which lives in the caller's memory, on the host piece), a ``copy`` node is inserted that
   copies it into the consumer piece's memory; the graph's own copy nodes stay copies;
3. plans the memory (:func:`plait.memory.plan.plan_memory`, the Graph executor's planner, with one
   memory per piece): every activation and workspace at an offset in its piece's pool;
4. writes the C (:mod:`plait.executor.aot.c_writer`).

Build config: ``aot.name`` (the model's C name; default the module's ``name`` attr, else ``model``;
sanitized), ``aot.align`` (the alignment of pools and of every buffer in them, a power of two,
default 16), ``aot.algorithm`` (the memory planning algorithm, default ``auto``: see docs/memory.md),
``cc.cache_dir`` (the host runner's compile cache).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from plait.errors import PlaitError
from plait.executor.files import BuildRecord
from plait.executor.graph_codegen import graph_form
from plait.memory.algorithms import DEFAULT_ALIGN
from plait.memory.plan import entry_bytes, live_ranges, plan_memory
from plait.pipeline.stages import ProgramPlan
from plait.relay.module import IRModule
from plait.target.composite import piece_of

if TYPE_CHECKING:
    from plait.target import CompositeTarget



class AotError(PlaitError):
    """The module cannot be built by the AOT executor (a piece without C code, a bad setting)."""


@dataclass
class AotArtifact(BuildRecord):
    """What ``plait.build(..., executor="aot")`` returns.

    ``name``: the C name of the model (``plait_<name>_run``); ``files``: relative path -> text of the
    directory :meth:`export` writes; ``graph``: the planned graph (the Graph executor's, with the copies
    between pieces added; every activation's storage has a pool and an offset, see ``memory``);
    ``metadata``: what ``metadata.json`` holds; ``memory``: what ``memory.json`` holds; ``params``: the
    constants; ``ir``: the lowered module; ``cache_dir``: the C compile cache of the host runner.
    """

    name: str
    files: dict[str, str]
    graph: dict[str, Any]
    metadata: dict[str, Any]
    memory: dict[str, Any]
    params: dict[str, Any] = field(repr=False, default_factory=dict)
    target: str = ""
    ir: IRModule | None = field(default=None, repr=False)
    cache_dir: str | None = field(default=None, repr=False)
    #: the composite target it was built for (``target`` is its text, for metadata and messages)
    composite: CompositeTarget | None = field(default=None, repr=False)
    executor = "aot"

    def __post_init__(self) -> None:
        if self.composite is None:  # made by hand from a target string
            from plait.target import CompositeTarget

            self.composite = CompositeTarget(self.target or "c")

    def export(self, path: str | Path) -> Path:
        """Write every file of :attr:`files` under ``path`` (created); returns the directory."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        for rel, text in sorted(self.files.items()):
            f = out / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text, encoding="utf-8")
        return out

    def memory_summary(self) -> str:
        """One line per pool: its piece, bytes, the lower bound and the algorithm that planned it."""
        lines = [f"memory of '{self.name}' (AOT):"]
        for p in self.memory["pools"]:
            lines.append(f"  piece '{p['piece']}': pool '{p['name']}' {p['bytes']:,} B (lower bound "
                         f"{p['lower_bound']:,} B, align {p['align']}, {p['algorithm']})")
        if not self.memory["pools"]:
            lines.append("  no pools (the model has no activations or workspaces)")
        lines.append(f"  constants {self.memory['constant_bytes']:,} B (read-only: flash / .rodata)")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"AotArtifact(name={self.name!r}, target={self.target!r}, files={len(self.files)})"


# ---- pieces ---------------------------------------------------------------------------------------


def check_pieces(mod: IRModule, composite: Any, used: set[str]) -> None:
    """Every piece with calls must be compiled as portable C (:meth:`plait.target.Backend.generates_c`)."""
    for piece in composite.pieces:
        if piece.name not in used:
            continue
        kind = piece.target.kind
        external = [k for k, f in mod.items() if piece_of(f) == piece.name
                    and getattr(f, "attrs", {}).get("external")]
        own = not type(kind.backend).generates_c()
        why = ("runs its calls in an external runtime (relay_to_runtime)" if external else
               "generates its own code (tir_to_runtime)" if own else None)
        if why:
            raise AotError(f"the AOT executor needs C code for every piece: piece '{piece.name}' (kind "
                           f"'{kind.name}') {why}; place its calls on a 'c' piece (--place) or use the graph "
                           "executor")


def add_copies(graph: dict[str, Any], host: str) -> tuple[dict[str, Any], dict[int, str]]:
    """A copy of ``graph`` where no call reads a value of another piece's memory: before such a call a
    ``copy`` node copies the value into its piece's memory (once per value and piece). Graph inputs
    live on ``host``; params (constants) are read in place. Returns (the graph, entry -> piece)."""
    g = copy.deepcopy(graph)
    entries, nodes = g["entries"], []
    home: dict[int, str] = {}
    for n in g["nodes"]:
        if n["op"] == "input":
            home[n["outputs"][0]] = host
    copies: dict[tuple[int, str], int] = {}
    for n in g["nodes"]:
        if n["op"] == "call":
            piece = str(n.get("piece", host))
            new_inputs = []
            for e in n["inputs"]:
                if e in home and home[e] != piece:
                    key = (e, piece)
                    if key not in copies:
                        entries.append({"shape": list(entries[e]["shape"]), "dtype": entries[e]["dtype"]})
                        copies[key] = len(entries) - 1
                        nodes.append({"op": "copy", "name": f"copy to {piece}", "src": home[e], "dst": piece,
                                      "inputs": [e], "outputs": [copies[key]]})
                        home[copies[key]] = piece
                    e = copies[key]
                new_inputs.append(e)
            n["inputs"] = new_inputs
            for e in (*n["outputs"], *n.get("workspace", ())):
                home[e] = piece
        elif n["op"] == "copy":
            for e in n["outputs"]:
                home[e] = str(n["dst"])
        elif n["op"] == "view" and n["inputs"][0] in home:  # the same bytes, in its input's memory
            home[n["outputs"][0]] = home[n["inputs"][0]]
        nodes.append(n)
    g["nodes"] = nodes
    g["inputs"] = [i for i, n in enumerate(nodes) if n["op"] == "input"]
    g["params"] = [i for i, n in enumerate(nodes) if n["op"] == "param"]
    return g, home


# ---- codegen ----------------------------------------------------------------------------------------


def _setting(config: Mapping[str, Any], mod: IRModule) -> tuple[str, int]:
    from plait.runtime.c_lang import NameTable

    raw = config.get("aot.name") or mod.attrs.get("name") or "model"
    name = NameTable().fresh(str(raw), "model")
    align = config.get("aot.align", DEFAULT_ALIGN)
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise AotError(f"aot.align: expected a power of two (1, 2, 4, ... bytes), got {align!r}")
    return name, align


def aot_plan(mod: IRModule, composite: CompositeTarget, config: Mapping[str, Any] | None = None) -> ProgramPlan:
    """The AOT memory plan of a lowered ``mod``: the graph form, with a copy wherever a call reads a
    value of another piece's memory, planned with one pool per piece (``aot.align``, ``aot.algorithm``);
    ``state`` the memory each entry lives in. Every piece with calls must be C (:func:`check_pieces`)."""
    config = dict(config or {})
    _, align = _setting(config, mod)
    graph, params, functions = graph_form(mod)
    host = composite.host.name
    used = {str(n.get("piece", host)) for n in graph["nodes"] if n["op"] == "call"}
    check_pieces(mod, composite, used)
    g, home = add_copies(graph, host)
    plan_memory(g, config.get("aot.algorithm", "auto"), align, domains=home)  # one pool per piece
    return ProgramPlan(g, params, functions, home)


def aot_codegen(mod: IRModule, plan: ProgramPlan, composite: CompositeTarget,
                config: Mapping[str, Any] | None = None) -> AotArtifact:
    """The AOT artifact of a lowered ``mod`` from its plan (:func:`aot_plan`; see the module docstring)."""
    from plait.executor.aot.c_writer import write_files

    config = dict(config or {})
    name, align = _setting(config, mod)
    g, params, functions, home = plan.graph, plan.params, plan.functions, plan.state
    host = composite.host.name
    pools = g["pools"]  # "workspace_<piece>": the same names as the Graph executor's pools
    first, last = live_ranges(g)
    buffers = []
    views = {n["outputs"][0] for n in g["nodes"] if n["op"] == "view"}  # no bytes of their own
    for e, ent in enumerate(g["entries"]):
        sid = ent["storage"]
        st = g["storage"][sid]
        if st["kind"] not in ("activation", "workspace") or e not in home or e in views:
            continue
        buffers.append({"entry": e, "pool": pools[st["pool"]]["name"], "offset": st["offset"],
                        "bytes": entry_bytes(ent), "kind": st["kind"], "live": [first[sid], last[sid]],
                        "dtype": ent["dtype"], "shape": ent["shape"]})
    memory = {"align": align, "pools": pools, "buffers": buffers,
              "constant_bytes": sum(int(a.nbytes) for a in params.values())}
    files, metadata = write_files(name, align, g, params, mod, composite, host, functions, memory)
    files["memory.json"] = json.dumps(memory, indent=1, sort_keys=True) + "\n"
    files["metadata.json"] = json.dumps(metadata, indent=1, sort_keys=True) + "\n"
    return AotArtifact(name, files, g, metadata, memory, params, str(composite), mod, config.get("cc.cache_dir"),
                       composite=composite)


def aot_executor_codegen(mod: IRModule, lib: Any = None, target: Any = "c",
                         config: Mapping[str, Any] | None = None) -> AotArtifact:
    """The AOT artifact of a lowered ``mod`` built for ``target`` (a composite target or its string),
    planned here: :func:`aot_plan` then :func:`aot_codegen` (what a build does in two steps). ``lib``
    (the Graph executor's runtime module) is not used: the AOT C is generated from the PrimFuncs."""
    from plait.target import CompositeTarget

    composite = CompositeTarget(target)
    return aot_codegen(mod, aot_plan(mod, composite, config), composite, config)


__all__ = ["AotArtifact", "AotError", "DEFAULT_ALIGN", "add_copies", "aot_codegen", "aot_executor_codegen", "aot_plan",
           "check_pieces"]
