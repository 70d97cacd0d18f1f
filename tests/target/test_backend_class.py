"""The Backend class: a subclass overriding nothing is a working kind; kinds load lazily from the
in-tree manifest, which equals pyproject.toml's entry-point table."""

import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import plait
from plait.backends import MANIFEST
from plait.frontend.builder import Builder
from plait.ir.transform import Pass
from plait.lowering.lower import legalized_group
from plait.relay import call
from plait.relay.expr import Call
from plait.relay.infer import infer_type
from plait.relay.visitor import ExprMutator, post_order
from plait.target import Backend, Target, get_kind, hooks_of, option, register_backend
from plait.target.plugins import in_tree_manifest
from plait.target.testing import isolated_registry

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PlainOptions:
    width: int = option(8, "a documented option nobody reads")


class Plain(Backend):
    """A kind that overrides nothing: default lowering, the c kind's code generation."""

    name = "plain"
    Options = PlainOptions


def test_a_subclass_overriding_nothing_is_a_valid_kind(tmp_path):
    with isolated_registry():
        kind = register_backend(Plain)
        t = Target("plain -width=4")
        assert hooks_of("plain") == {} and kind.can_host and t.device == "host"
        assert kind.doc == "A kind that overrides nothing: default lowering, the c kind's code generation."
        assert kind.option("width").doc == "a documented option nobody reads"
        assert Plain().options(t) == PlainOptions(width=4)
        assert Plain().schedule_rules(t) == "cpu"
        b = Builder("plain")
        x = b.input("x", (3, 8))
        y = b.nn.relu(x * b.const(np.full((3, 8), 2.0, np.float32)), name="act")
        art = plait.build(b.finish(y), "plain -width=4", config={"cc.cache_dir": str(tmp_path)})
        assert art.target == "plain -width=4" and list(art.piece_modules) == ["plain"]
        xv = np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8)
        (got,) = plait.executor.GraphModule(art)(x=xv)
        np.testing.assert_allclose(got, np.maximum(2 * xv, 0), rtol=1e-6)


class _ReluToRelu6(Pass):
    """nn.relu -> clip(0, 6): a legalization a kind might run (here only to see that it ran)."""

    name = "relu_to_relu6"

    def run(self, mod, ctx):
        class Swap(ExprMutator):
            def rewrite_call(self, pre, post):
                if post.op_name == "nn.relu":
                    return call("clip", post.args[0], a_min=0.0, a_max=6.0, meta=post.meta)
                return post

        return infer_type(mod.with_functions({k: Swap().visit(f) for k, f in mod.relay_functions().items()}))


class Legalizing(Backend):
    """A kind that legalizes its functions before default lowering and pricing."""

    name = "legalizing"

    def legalize(self, target):
        return [_ReluToRelu6()]


def test_a_kind_s_legalize_passes_run_before_default_lowering_and_pricing(tmp_path):
    from plait.placement.cost import CostModel
    from plait.target.composite import Piece

    with isolated_registry():
        register_backend(Legalizing)
        b = Builder("legal")
        x = b.input("x", (3, 8))
        y = b.nn.relu(x * b.const(np.full((3, 8), 2.0, np.float32)), name="act")
        mod = b.finish(y)
        art = plait.build(mod, "legalizing", config={"cc.cache_dir": str(tmp_path)})
        xv = np.linspace(-5, 5, 24, dtype=np.float32).reshape(3, 8)
        (got,) = plait.executor.GraphModule(art)(x=xv)
        np.testing.assert_array_equal(got, np.clip(2 * xv, 0, 6))  # what runs is the legalized function
        relu = [n for n in post_order(infer_type(mod).main.body) if isinstance(n, Call) and n.op_name == "nn.relu"]
        assert legalized_group(relu, Target("legalizing")).attrs["anchor"] == "clip"  # and what placement prices
        assert legalized_group(relu, Target("c")) is None  # a kind without legalize passes: the call's own function
        assert CostModel().call_cost(relu[0], Piece("p", Target("legalizing"))).source == "schedule"


def test_the_in_tree_manifest_is_the_pyproject_entry_point_table():
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["plait.backends"]
    assert table == MANIFEST == in_tree_manifest()
    for name, value in MANIFEST.items():
        assert get_kind(name).backend.__class__.__name__ == value.split(":")[1]


def test_parsing_a_target_imports_only_its_kind():
    code = ("import sys\nfrom plait.target import Target\nTarget('c -mcpu=cortex-m0')\n"
            "print(sorted(m for m in sys.modules if m.startswith('plait.backends.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert "plait.backends.c.backend" in loaded
    assert not [m for m in loaded if m.startswith(("plait.backends.llvm", "plait.backends.blas",
                                                   "plait.backends.onnxruntime"))]
    code = "import sys\nfrom plait.target import list_kinds\nprint([k.name for k in list_kinds()])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout) == ["blas", "c", "llvm", "onnxruntime"]
