"""House rules on the shape of the code: no file of plait/ over 600 lines, and no two public classes with
the same name (a reader searching for a class finds one)."""

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "plait"
MAX_LINES = 600

# The TIR and Relay node classes mirror each other by design (as in TVM) and are always used through
# their package: tir.Var / relay.Var, tir.Call / relay.Call, tir.Let / relay.Let.
MIRRORED_IR_MODULES = ("plait/relay/expr.py", "plait/tir/expr.py")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_files(paths: list[Path], root: Path = ROOT) -> dict[str, int]:
    """Files over the line limit, with their line counts."""
    out = {}
    for p in paths:
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            out[p.relative_to(root).as_posix()] = n
    return out


def duplicate_classes(paths: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    """Public (no leading underscore) module-level class names defined in more than one file."""
    where: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        for node in ast.parse(p.read_text(encoding="utf-8"), str(p)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(p.relative_to(root).as_posix())
    return {name: files for name, files in where.items()
            if len(files) > 1 and tuple(sorted(files)) != MIRRORED_IR_MODULES}


def sessions_made_outside(paths: list[Path], allowed: tuple[str, ...], root: Path = ROOT) -> list[str]:
    """Files that call ``InferenceSession(`` and are not under one of the ``allowed`` folders."""
    return [p.relative_to(root).as_posix() for p in paths
            if "InferenceSession(" in p.read_text(encoding="utf-8")
            and not p.relative_to(root).as_posix().startswith(allowed)]


def test_onnx_runtime_sessions_are_made_in_one_place():
    """Tests compare with ONNX Runtime only through plait.testing.ort_reference (exact integer sums on every
    x86-64, whatever kernels ONNX Runtime picks for the CPU); in plait/ only the onnxruntime kind makes sessions.
    bench/ measures ONNX Runtime's speed with its defaults and may make its own."""
    tests = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p != Path(__file__).resolve()]
    assert sessions_made_outside(tests, ()) == []
    assert sessions_made_outside(_sources(), ("plait/backends/onnxruntime/",)) == []


def test_no_file_over_600_lines():
    assert long_files(_sources()) == {}


def test_no_two_public_classes_share_a_name():
    assert duplicate_classes(_sources()) == {}


def test_the_checks_find_what_they_look_for(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("class Region:\n    pass\nclass _Private:\n    pass\n")
    b.write_text("class Region:\n    pass\nclass _Private:\n    pass\ndef f():\n    class Local:\n        pass\n")
    c.write_text("x = 1\n" * (MAX_LINES + 1))
    assert duplicate_classes([a, b, c], tmp_path) == {"Region": ["a.py", "b.py"]}
    assert long_files([a, b, c], tmp_path) == {"c.py": MAX_LINES + 1}
    (tmp_path / "k").mkdir()
    d, e = tmp_path / "d.py", tmp_path / "k" / "e.py"
    d.write_text("s = ort.InferenceSession(m)\n")
    e.write_text("s = ort.InferenceSession(m)\n")
    assert sessions_made_outside([a, d, e], ("k/",), tmp_path) == ["d.py"]


def executor_name_dispatch(paths: list[Path], names: set[str], root: Path = ROOT) -> list[str]:
    """``file:line: 'name'`` for every string literal equal to an executor's name used to dispatch:
    compared (``==``, ``in (...)``), a dict key, a match arm. Argument defaults and help texts are no
    dispatch and not reported."""
    def literals(node: ast.AST):
        if isinstance(node, ast.Constant) and node.value in names:
            yield node
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for e in node.elts:
                yield from literals(e)

    out = []
    for p in paths:
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Compare):
                found = [h for x in (n.left, *n.comparators) for h in literals(x)]
            elif isinstance(n, ast.Dict):
                found = [h for k in n.keys if k is not None for h in literals(k)]
            elif isinstance(n, ast.MatchValue):
                found = list(literals(n.value))
            else:
                continue
            out += [(p.relative_to(root).as_posix(), h.lineno, h.value) for h in found]
    return [f"{f}:{line}: {v!r}" for f, line, v in sorted(out)]


def test_no_code_outside_the_executor_package_dispatches_on_an_executor_name():
    from plait.executor import executors

    names = {e.name for e in executors()}
    paths = [p for p in _sources() if not p.relative_to(PACKAGE).as_posix().startswith("executor/")]
    assert executor_name_dispatch(paths, names) == []


def test_the_dispatch_check_finds_comparisons_keys_and_match_arms(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('def f(executor="vm", x=None):\n    help = "graph or vm"\n    if executor == "aot":\n'
                   '        return {"vm": 1}\n    if executor in ("graph", "other"):\n        return 2\n'
                   '    match executor:\n        case "vm":\n            return 3\n')
    assert executor_name_dispatch([src], {"graph", "aot", "vm"}, tmp_path) == [
        "m.py:3: 'aot'", "m.py:4: 'vm'", "m.py:5: 'graph'", "m.py:8: 'vm'"]


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def kernel_function_names(paths: list[Path], symbols: set[str], root: Path = ROOT) -> list[str]:
    """``file:line: 'token'`` for every string literal (docstrings and f-string parts included) holding a
    backend's kernel function name (``symbols``) or a prefix such names are built from (a token ending in
    ``_`` with two underscores or more that begins one of them: ``plait_dot_``)."""
    def named(token: str) -> bool:
        return token in symbols or (token.endswith("_") and token.count("_") >= 2 and
                                    any(s.startswith(token) for s in symbols))

    out = []
    for p in paths:
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                out += [(p.relative_to(root).as_posix(), n.lineno, t) for t in _TOKEN.findall(n.value) if named(t)]
    return [f"{f}:{line}: {t!r}" for f, line, t in sorted(out)]


def _kernel_symbols() -> set[str]:
    """The functions of every kernel implementation the in-tree backends register (each kind's module loaded)."""
    import importlib

    from plait.backends import MANIFEST
    from plait.tir.kernels import IMPLEMENTATIONS

    for entry in MANIFEST.values():
        importlib.import_module(entry.split(":")[0])
    return {impl.symbol for _, impl in IMPLEMENTATIONS.items()}


def test_no_code_outside_the_backends_names_a_backend_kernel_function():
    """Schedules and operators call kernels by their abstract names (plait/tir/kernels.py); only the backend that
    ships a kernel knows its function's name."""
    symbols = _kernel_symbols()
    assert {"plait_q8_conv", "plait_dot_u8_s8", "plait_dw2_s16"} <= symbols
    paths = [p for p in _sources() if not p.relative_to(PACKAGE).as_posix().startswith("backends/")]
    assert kernel_function_names(paths, symbols) == []


def test_the_kernel_name_check_finds_literals_docstrings_and_prefixes(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""Calls ``plait_dot_<a>_<b>``."""\nK = "plait_q8_conv"\n\n\ndef f(a):\n'
                   '    return f"plait_dot2_{a}", "q8_conv", "plait_r_", "plait_", "plait_q8_convx"\n')
    assert kernel_function_names([src], {"plait_q8_conv", "plait_dot_u8_s8", "plait_dot2_u8_s8"}, tmp_path) == [
        "m.py:1: 'plait_dot_'", "m.py:2: 'plait_q8_conv'", "m.py:6: 'plait_dot2_'"]
