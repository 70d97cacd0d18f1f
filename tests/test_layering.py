"""The package layering of plait/ (docs/design.md, "Layers"): imports point down only, and no two
packages import each other (directly or through others).

Every import of plait/ is read from the source (module level and inside functions, relative or
absolute, and ``importlib.import_module("plait...")`` with a literal name), so a lazy import cannot
hide an upward dependency. The order below is the one in docs/design.md; change both together, with
the reason written there.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import pytest

#: lowest first. "foundation" is plait/errors.py, registry.py, limits.py and version.py; "api" is the
#: package facade plait/__init__.py (``plait.build``, ``plait.from_onnx``... loaded on first use).
LAYERS = (
    "foundation", "ir", "tir", "te", "op", "relay", "target", "frontend", "schedule", "lowering", "memory",
    "runtime", "placement", "backends", "pipeline", "executor", "driver", "tune", "cli", "testing", "api",
)
FOUNDATION = {"plait.errors", "plait.registry", "plait.limits", "plait.version"}
ROOT = Path(__file__).resolve().parent.parent / "plait"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The layer of a plait module: its top-level package (or driver.py), foundation modules apart."""
    if module == "plait":
        return "api"
    if module in FOUNDATION:
        return "foundation"
    top = module.split(".")[1]
    if top not in LAYERS:
        raise AssertionError(f"module '{module}' is in no layer: add its package to LAYERS and docs/design.md")
    return top


def package_of(module: str) -> str:
    """The unit of the cycle check: plait.<layer>, and each backend package plait.backends.<kind>."""
    parts = module.split(".")
    if module == "plait" or module in FOUNDATION:
        return module
    if parts[1] == "backends" and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, imported plait module) for every import in the file, wherever it stands."""
    me = module_name(path, root)
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if is_package else me.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from plait import tir` imports plait.tir, `from plait.tir import expr` plait.tir.expr (resolve
            # keeps the longest prefix that is a module: `from plait.tir import Buffer` imports plait.tir)
            names = [f"{mod}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        out += [(node.lineno, n) for n in names if n == "plait" or n.startswith("plait.")]
    return out


def resolve(module: str, root: Path) -> str:
    """``from plait.tir import expr`` names plait.tir.expr or a name in plait/tir/__init__: the module."""
    parts = module.split(".")
    while len(parts) > 1 and not ((root.parent / Path(*parts)).is_dir()
                                  or (root.parent / Path(*parts)).with_suffix(".py").is_file()):
        parts.pop()
    return ".".join(parts)


def import_edges(root: Path) -> list[tuple[str, int, str]]:
    edges = []
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        for line, target in imports_of(path, root):
            edges.append((f"{path.relative_to(root.parent)}:{line} ({me})", line, resolve(target, root)))
    return edges


def upward_imports(root: Path) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for where, _, target in import_edges(root):
        me = where.split("(")[1].rstrip(")")
        a, b = layer_of(me), layer_of(target)
        if rank[b] > rank[a]:
            bad.append(f"{where} imports {target}: layer '{a}' may not import layer '{b}' (higher)")
    return bad


def package_cycles(root: Path, unit: Callable[[str], str] = package_of) -> list[list[str]]:
    """Strongly connected groups of more than one package in the package import graph (Tarjan); with
    ``unit=file_of``, of more than one file (module) in the module import graph."""
    graph: dict[str, set[str]] = {}
    for where, _, target in import_edges(root):
        a, b = unit(where.split("(")[1].rstrip(")")), unit(target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b:
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_every_import_points_down():
    bad = upward_imports(ROOT)
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def file_of(module: str) -> str:
    """The unit of the file cycle check: the module itself."""
    return module


def test_no_cycle_between_files():
    cycles = package_cycles(ROOT, file_of)
    assert not cycles, "files that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_cycle_between_packages():
    cycles = package_cycles(ROOT)
    assert not cycles, "packages that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_walk_sees_every_kind_of_import():
    """The reader finds imports inside functions, relative imports and import_module calls (known ones)."""
    edges = {(w.split(":")[0], t) for w, _, t in import_edges(ROOT)}
    assert ("plait/cli/verbosity_flags.py", "plait.version") in edges  # an import inside a function
    assert any(w.startswith("plait/") and t == "plait.errors" for w, t in edges)
    # every package of plait/ is in a layer
    for path in ROOT.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            layer_of(f"plait.{path.name}")


@pytest.fixture
def toy_tree(tmp_path):
    root = tmp_path / "plait"
    for pkg in ("ir", "relay", "backends/c", "backends/llvm"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    return root


def test_an_upward_import_inside_a_function_is_reported(toy_tree):
    (toy_tree / "ir" / "types.py").write_text("def f():\n    from plait.relay import expr\n")
    (toy_tree / "relay" / "expr.py").write_text("from ..ir import types\n")
    assert upward_imports(toy_tree) == [
        "plait/ir/types.py:2 (plait.ir.types) imports plait.relay.expr: layer 'ir' may not import layer 'relay' "
        "(higher)"]


def test_an_import_module_call_with_a_literal_name_is_read(toy_tree):
    (toy_tree / "ir" / "load.py").write_text("import importlib\nimportlib.import_module('plait.relay')\n")
    assert [b.split(" imports ")[1].split(":")[0] for b in upward_imports(toy_tree)] == ["plait.relay"]


def test_two_backend_packages_importing_each_other_are_a_cycle(toy_tree):
    (toy_tree / "backends" / "c" / "emit.py").write_text("from plait.backends.llvm import x\n")
    (toy_tree / "backends" / "llvm" / "x.py").write_text("import plait.backends.c.emit\n")
    assert upward_imports(toy_tree) == []
    assert package_cycles(toy_tree) == [["plait.backends.c", "plait.backends.llvm"]]


def test_two_files_importing_each_other_inside_functions_are_a_cycle(toy_tree):
    (toy_tree / "ir" / "a.py").write_text("def f():\n    from plait.ir import b\n")
    (toy_tree / "ir" / "b.py").write_text("def g():\n    import plait.ir.a\n")
    assert package_cycles(toy_tree) == []
    assert package_cycles(toy_tree, file_of) == [["plait.ir.a", "plait.ir.b"]]
