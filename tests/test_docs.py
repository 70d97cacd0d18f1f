"""Every example of the README and of docs/*.md runs: docs drift is caught by CI.

The fenced ```sh and ```python blocks of each page are extracted and executed in a temporary directory
holding the bundled models (``examples/``, as ``python3 -m plait.testing.onnx_models examples`` makes
them). A block opts out with a ``<!-- not run: why -->`` line right before its fence.

- ``sh`` blocks run with bash (``set -euo pipefail``), where ``plait``, ``python3`` and ``python`` are
  this interpreter running the checkout under test (``python3 -m plait.cli``), never whatever ``plait``
  is first on PATH.
- the ``python`` blocks of one page run in order in one fresh namespace (a later block may use what an
  earlier one made), in a subprocess, so kinds or hooks a page registers do not leak into other tests.

docs/backends.md's python blocks are run (and checked further) by tests/test_backends_guide.py, docs/cli.md's
examples by tests/cli/, the executor guide of docs/executors.md (installed as a plugin) by
tests/test_executors_guide.py.
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

# Runs the python blocks given as JSON [[label, source], ...] in one namespace, in order, after a prelude.
PY_DRIVER = """import json, sys
import numpy as np, onnx, plait
ns = {"__name__": "__main__"}
prelude, todo = json.load(sys.stdin)
exec(prelude, ns)
for label, src in todo:
    exec(compile(src, label, "exec"), ns)
"""

# Fragments of docs/*.md use names they do not make: ``model.onnx``, ``mod`` and ``onnx_model`` (any
# model; here the bundled MLP, or DS-CNN on the pages about composite targets, which refuse the MLP),
# ``x`` (its input), ``call`` (a typed call of it), ``w1, b1, w2`` (docs/frontend.md's builder weights),
# ``a, b, c`` (the arrays of docs/tir.md's matmul).
PRELUDE = """import json
import numpy as np, onnx, plait
onnx_model = onnx.load("model.onnx")
mod = plait.load_onnx("model.onnx")
x = np.ones((1, 256), np.float32)
"""
PAGE_PRELUDE = {
    "docs/explain.md": 'mod = plait.load_onnx("examples/ds_cnn.onnx")\n',
    "docs/placement.md": 'mod = plait.load_onnx("examples/ds_cnn.onnx")\n',
    "docs/frontend.md": 'call = mod["main"].body\n'
                        "w1, b1, w2 = (np.ones(s, np.float32) for s in ((128, 256), (128,), (128, 10)))\n",
    "docs/tir.md": "a, b, c = np.ones((4, 5), np.float32), np.ones((5, 6), np.float32), np.zeros((4, 6), np.float32)\n",
}


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
    return [pytest.param(b, id=b.label) for p in PAGES for b in blocks(p)
            if b.lang == "sh" and b.run and (p, "sh") not in COVERED_ELSEWHERE]


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
    prelude = PRELUDE + PAGE_PRELUDE.get(page, "")
    proc = subprocess.run([sys.executable, "-c", PY_DRIVER], input=json.dumps([prelude, todo]), cwd=workdir, env=env(), text=True,
                          capture_output=True, timeout=300)
    check(proc, f"python blocks of {page}")


def test_readme_composite_target_refuses_the_mlp_with_the_message_it_quotes(examples: Path) -> None:
    """The README says examples/mlp.onnx does not fit its composite target and quotes the error."""
    target = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
    proc = subprocess.run([sys.executable, "-m", "plait.cli", "explain", str(examples / "mlp.onnx"), "--target", target],
                          env=env(), text=True, capture_output=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("plait: error: ")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"is refused (`{lines[0][len('plait: error: '):]}`)" in readme


def test_blocks_finds_fences_and_opt_outs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- not run: needs a board -->\n```sh\nplait flash\n```\n\n```python\nprint(1)\n```\n"
                    "```\nplain\n```\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert blocks("page.md") == [Block("page.md", 4, "sh", "plait flash\n", False),
                                 Block("page.md", 8, "python", "print(1)\n", True)]
