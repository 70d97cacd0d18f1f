"""What the C and LLVM emitters share (plait/tir/codegen.py)."""

from plait import tir
from plait.tir.codegen import fused_pair, has_extern_call, static_index_terms, static_size


def test_static_index_terms_fold_constants_and_fuse_div_mod_pairs():
    i, j = tir.Var("i"), tir.Var("j")
    dims = (tir.IntImm(3), tir.IntImm(4), tir.IntImm(5))
    nodes = (tir.FloorDiv(i, tir.IntImm(4)), tir.FloorMod(i, tir.IntImm(4)), j)
    fused = []
    terms, const = static_index_terms(dims, nodes, ["a", "b", "c"], lambda x: fused.append(x) or "x")
    assert fused == [i] and terms == [(i, "x", 5), (j, "c", 1)] and const == 0
    terms, const = static_index_terms(dims, (tir.IntImm(2), j, tir.IntImm(3)), ["a", "b", "c"], str)
    assert terms == [(j, "b", 5)] and const == 2 * 20 + 3
    assert static_index_terms((tir.IntImm(3), tir.Var("n")), (i, j), ["a", "b"], str) is None


def test_fused_pair_needs_the_inner_dimension_and_the_same_operand():
    i, k = tir.Var("i"), tir.Var("k")
    four = tir.IntImm(4)
    assert fused_pair(tir.TruncDiv(i, four), tir.TruncMod(i, four), four) is i
    assert fused_pair(tir.TruncDiv(i, four), tir.TruncMod(k, four), four) is None
    assert fused_pair(tir.TruncDiv(i, four), tir.TruncMod(i, four), tir.IntImm(8)) is None
    assert fused_pair(tir.FloorDiv(i, four), tir.TruncMod(i, four), four) is None


def test_static_size_and_extern_calls():
    assert static_size(tir.Buffer("a", (2, 3))) == 6
    assert static_size(tir.Buffer("e", (0,))) == 1
    assert static_size(tir.Buffer("d", (tir.Var("n"),))) is None
    call = tir.Call("void", "f", (), kind="extern")
    assert has_extern_call(tir.Add(tir.IntImm(1), tir.Cast("int64", tir.Call("int32", "g", (), kind="extern"))))
    assert has_extern_call(call) and not has_extern_call(tir.Call("float32", "exp", (tir.FloatImm(1.0),)))
