"""House rules on the shape of the code: no file of plait/ over 600 lines, and no two public classes with
the same name (a reader searching for a class finds one)."""

import ast
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
