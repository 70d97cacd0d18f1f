"""Every example of the README and of docs/*.md runs: docs drift is caught by CI.

The fenced ```sh and ```python blocks of each page are extracted and executed in a temporary directory
holding the bundled models (``examples/``, as ``python3 -m plait.testing.onnx_models examples`` makes
them). A block opts out with a ``<!-- not run: why -->`` line right before its fence.

- ``sh`` blocks run with bash (``set -euo pipefail``), where ``plait``, ``python3`` and ``python`` are
  this interpreter running the checkout under test (``python3 -m plait.cli``), never whatever ``plait``
  is first on PATH.
- the ``python`` blocks of one page run in order in one fresh namespace (a later block may use what an
  earlier one made), in a subprocess, so kinds or hooks a page registers do not leak into other tests.

docs/backends.md's python blocks are run (and checked further) by tests/test_backends_guide.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
COVERED_ELSEWHERE = {("docs/backends.md", "python"): "tests/test_backends_guide.py"}
OPT_OUT = re.compile(r"^<!-- not run: .+ -->$")

# Defines the commands an sh block may use; the checkout under test comes first on PYTHONPATH.
SH_PRELUDE = """set -euo pipefail
plait() { "$PLAIT_PY" -m plait.cli "$@"; }
python3() { "$PLAIT_PY" "$@"; }
python() { "$PLAIT_PY" "$@"; }
"""

# Runs the python blocks given as JSON [[label, source], ...] in one namespace, in order. Fragments of
# docs/*.md use ``model.onnx``, ``mod``, ``onnx_model`` and ``x`` without making them: the bundled MLP.
PY_DRIVER = """import json, sys
import numpy as np, onnx, plait
ns = {"__name__": "__main__", "np": np, "plait": plait, "mod": plait.load_onnx("model.onnx"),
      "onnx_model": onnx.load("model.onnx"), "x": np.ones((1, 256), np.float32)}
for label, src in json.load(sys.stdin):
    exec(compile(src, label, "exec"), ns)
"""


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    source: str
    run: bool  # False: opted out

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    """The fenced sh and python blocks of ``page`` (a path relative to the repository root)."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"```(\w*)\s*", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        if lang in ("sh", "python"):
            prev = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
            out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:i]) + "\n", not OPT_OUT.match(prev)))
        i += 1
    return out


def env() -> dict[str, str]:
    e = dict(os.environ, PLAIT_PY=sys.executable, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    e.pop("PYTHONSTARTUP", None)
    return e


@pytest.fixture(scope="session")
def examples(tmp_path_factory) -> Path:
    """A directory with the bundled models, made by the README's command."""
    d = tmp_path_factory.mktemp("docs_examples")
    subprocess.run([sys.executable, "-m", "plait.testing.onnx_models", "examples"], cwd=d, env=env(), check=True,
                   capture_output=True)
    return d / "examples"


@pytest.fixture
def workdir(tmp_path, examples) -> Path:
    shutil.copytree(examples, tmp_path / "examples")
    shutil.copy(examples / "mlp.onnx", tmp_path / "model.onnx")  # the name docs/*.md use for any model
    return tmp_path


def check(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def sh_cases() -> list:
    return [pytest.param(b, id=b.label) for p in PAGES for b in blocks(p) if b.lang == "sh" and b.run]


def python_pages() -> list:
    return [p for p in PAGES if (p, "python") not in COVERED_ELSEWHERE
            and any(b.lang == "python" and b.run for b in blocks(p))]


@pytest.mark.parametrize("block", sh_cases())
def test_sh_block(block: Block, workdir: Path) -> None:
    proc = subprocess.run(["bash", "-c", SH_PRELUDE + block.source], cwd=workdir, env=env(), text=True,
                          capture_output=True, timeout=300)
    check(proc, f"sh block {block.label}")


@pytest.mark.parametrize("page", python_pages())
def test_python_blocks(page: str, workdir: Path) -> None:
    todo = [[b.label, b.source] for b in blocks(page) if b.lang == "python" and b.run]
    proc = subprocess.run([sys.executable, "-c", PY_DRIVER], input=json.dumps(todo), cwd=workdir, env=env(), text=True,
                          capture_output=True, timeout=300)
    check(proc, f"python blocks of {page}")
