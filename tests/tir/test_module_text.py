"""PrimFuncs in the Relay module text (`primfn` blocks) and in Relay type inference."""

import subprocess
import sys

import pytest

from plait import relay, tir
from plait.errors import ParseError
from plait.relay.text import parse_module, print_module

from .fixtures import FIXTURES, matmul


def module():
    mm = matmul(2, 3, 4)
    a, w = relay.var("a", (2, 4)), relay.var("w", (4, 3))
    main = relay.Function((a, w), relay.Call(relay.GlobalVar("mm"), (a, w)))
    return relay.IRModule({"main": main, "mm": mm, "fused/x": FIXTURES["weird_names"]()})


def test_module_with_prim_funcs_round_trips():
    mod = module()
    text = print_module(mod)
    assert "\nprimfn @mm {\n  @prim_func(global_symbol=\"matmul\", num_inputs=2, piece=\"c\")\n  def mm(" in text
    assert 'primfn @"fused/x" {\n' in text and '\n  def "fused/x"(' in text
    back = parse_module(text)
    for name in ("mm", "fused/x"):
        tir.assert_structural_equal(back[name], mod[name])
    assert print_module(back) == text
    relay.infer_type(back)
    assert str(back.main.checked_type) == "fn (Tensor[(2, 4), float32], Tensor[(4, 3), float32]) -> Tensor[(2, 3), float32]"


def test_errors_inside_a_block_have_module_line_numbers():
    text = print_module(module()).replace("C[i, j] = 0.0", "C[i, j] = zero")
    bad = next(s for s in text.splitlines() if "= zero" in s)
    line, column = text.splitlines().index(bad) + 1, bad.index("zero") + 1
    with pytest.raises(ParseError) as e:
        parse_module(text, source_name="m.plait")
    assert str(e.value) == f"m.plait:{line}:{column}: parse error: undefined name 'zero'"


def test_relay_text_reads_prim_funcs_without_importing_tir_first(tmp_path):
    """The Relay layer uses TIR directly: no registration by importing plait.tir is needed to read,
    print and compare PrimFuncs in a fresh process. (Operators load TE and TIR with their definitions.)"""
    path = tmp_path / "m.plait"
    path.write_text(print_module(module()))
    code = ("import sys\n"
            "from plait.relay.text import parse_module, print_module\n"
            "print('plait.tir' in sys.modules)\n"
            f"text = open({str(path)!r}).read(); back = parse_module(text)\n"
            "print(type(back['mm']).__name__, print_module(back) == text)\n"
            "from plait.relay import structural_equal, structural_hash\n"
            "print(structural_equal(back, parse_module(text)), structural_hash(back) == structural_hash(parse_module(text)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "False\nPrimFunc True\nTrue True\n"  # plait.tir was not imported before the parse
