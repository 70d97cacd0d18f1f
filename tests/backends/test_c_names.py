"""Identifiers and comments from model names: sanitized, unique, deterministic, never breaking C."""

from __future__ import annotations

import re

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import CodegenError, c_function_names, codegen_c
from plait.runtime.c_lang import NameTable, comment_text, is_reserved, sanitize
from plait.tir import Allocate, Buffer, For, LetStmt, PrimFunc, Var, seq

from .conftest import run_c, run_ref

EVIL = ['in"put', "a*/b", "line\nbreak", "tri??/graph", "int", "return", "main", "", "9lives", "_x", "__y",
        "exp", "expf", "plait_c_min_f32", "PLAIT_C_ALIGN", "plait_manifest", "int32_t", "INFINITY", "bool",
        "na\u00efve", "x" * 300, "a b", "\\", "/*", "??=", "\t"]


@pytest.mark.parametrize("name,want", [
    ("conv1", "conv1"), ('in"put', "in_put"), ("a*/b", "a__b"), ("line\nbreak", "line_break"), ("int", "int_"),
    ("return", "return_"), ("main", "main_"), ("", "v"), ("9lives", "v9lives"), ("_x", "v_x"), ("expf", "expf_"),
    ("plait_c_min_f32", "vplait_c_min_f32"), ("int32_t", "int32_t_"), ("na\u00efve", "na_ve"), ("/0", "v_0"),
])
def test_sanitize(name, want):
    assert sanitize(name) == want


def test_sanitized_names_are_valid_unreserved_and_short():
    for name in EVIL:
        s = sanitize(name)
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s), name
        assert not is_reserved(s), name
        assert len(s) <= 65
    assert sanitize("x" * 300) != sanitize("x" * 299)  # long names keep a hash of the full name


def test_name_table_suffixes_are_deterministic_and_unique():
    t = NameTable()
    got = [t.fresh(n) for n in ["i", "i", "i_1", "i", "int", "int_", "a b", "a_b"]]
    assert got == ["i", "i_1", "i_1_1", "i_2", "int_", "int__1", "a_b", "a_b_1"]
    inner = NameTable(t)
    assert inner.fresh("i") == "i_3" and inner.fresh("fresh") == "fresh"
    t.reserve("sgemm")
    assert t.fresh("sgemm") == "sgemm_1"


def test_comment_text_cannot_close_a_comment_or_form_trigraphs():
    for text in ["*/", "a */ b", "??/", "line\nbreak\r", "\\", "/* nested", "\u2603 \U0001F600"]:
        c = comment_text(text)
        assert "*/" not in c and "/*" not in c and "??" not in c and "\n" not in c and "\r" not in c
        assert all(" " <= ch <= "~" for ch in c)
    assert comment_text('weird "fn" */') == 'weird "fn" \\x2a\\x2f'
    assert comment_text("x" * 500).endswith("...")


def evil_func(fname: str) -> PrimFunc:
    """Every buffer and variable named after something nasty; two loops share the name 'i'."""
    ins = [Buffer(n, (3,), "float32") for n in EVIL[:6]]
    out = Buffer("return", (3,), "float32")
    scalar = Var("main", "float32")
    tmp = Buffer("int", (3,), "float32", "local")
    ws = Buffer("*/", (3,), "float32", "global.workspace")
    i1, i2, t = Var("i"), Var("i"), Var("??/", "float32")
    total = ins[0][i1]
    for b in ins[1:]:
        total = total + b[i1]
    body = Allocate(tmp, Allocate(ws, seq(
        For(i1, 0, 3, "serial", LetStmt(t, total * scalar, tmp.store(i1, t)), annotations={"stage": "*/ evil ??/"}),
        For(i2, 0, 3, "vectorized", seq(ws.store(i2, tmp[i2] + 1.0), out.store(i2, ws[i2]))),
    )))
    return PrimFunc((*ins, scalar, out), body, {"global_symbol": fname})


@pytest.mark.parametrize("fname", ['weird "fn" */', "int", "return", "main", "??/", "a\nb", "exp"])
def test_evil_names_compile_and_run(fname, cache_dir):
    f = evil_func(fname)
    src = codegen_c([f]).source
    # no raw model text can end a comment, form a trigraph or start a new line of C
    body = src[src.index("/* PrimFunc"):]
    assert "??" not in src
    for line in body.splitlines():
        if line.lstrip().startswith("/*"):
            assert line.count("*/") == 1 and line.rstrip().endswith("*/")
    (cname,) = c_function_names([f])
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cname) and not is_reserved(cname)
    args = [np.arange(3, dtype=np.float32) + k for k in range(6)] + [2.0, np.zeros(3, np.float32)]
    want = run_ref(f, args)
    (got,) = run_c([f], [args], cache_dir)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-6)


def test_keyword_names_in_the_source():
    src = codegen_c([evil_func("main")]).source
    assert "int32_t main_(const float* restrict in_put, const float* restrict a__b, " in src
    # 'int', 'return', 'main' are taken by then (inputs, the function): unique suffixes
    assert "const float* restrict return_, float main__1, float* restrict return__1) {" in src
    assert "  float int__1[3];\n  static float buf___storage[3] PLAIT_C_ALIGN(64);\n  float* restrict buf__ = buf___storage;\n" in src
    assert "const float v___ = " in src  # the let variable '??/'
    assert "for (int64_t i = 0; i < 3; ++i) {" in src and "for (int64_t i_1 = 0; i_1 < 3; ++i_1) {" in src
    assert "/* stage \\x2a\\x2f evil \\x3f\\x3f\\x2f */" in src


def test_duplicate_function_names_get_suffixes(cache_dir):
    fs = [evil_func("f"), evil_func("f"), evil_func("f_1")]
    assert c_function_names(fs) == ["f", "f_1", "f_1_1"]
    assert set(codegen_c(fs).signatures) == {"f", "f_1", "f_1_1"}


def test_function_names_avoid_extern_names():
    X = Buffer("X", (1,))
    call = tir.call_extern("void", "kernel", tir.address_of(X))
    f = PrimFunc((X,), tir.Evaluate(call), {"global_symbol": "kernel"})
    assert c_function_names([f]) == ["kernel_1"]
    assert "extern void kernel(void*);" in codegen_c([f]).source


def test_extern_names_must_be_identifiers_and_consistent():
    X = Buffer("X", (1,))
    bad = PrimFunc((X,), tir.Evaluate(tir.call_extern("void", "not an ident", tir.address_of(X))),
                   {"global_symbol": "f"})
    with pytest.raises(CodegenError) as e:
        codegen_c([bad])
    assert str(e.value) == "C codegen of PrimFunc 'f': extern function name 'not an ident' is not a usable C identifier"
    a = PrimFunc((X,), tir.Evaluate(tir.call_extern("void", "g", tir.const(1, "int32"))), {"global_symbol": "a"})
    b = PrimFunc((X,), tir.Evaluate(tir.call_extern("void", "g", tir.const(1.0))), {"global_symbol": "b"})
    with pytest.raises(CodegenError) as e:
        codegen_c([a, b])
    assert str(e.value) == ("C codegen of PrimFunc 'b': extern function 'g' is called as void(float32) here and "
                            "as void(int32) in PrimFunc 'a'")


def test_unsupported_scalar_params_are_codegen_errors():
    f = PrimFunc((Var("h", "float16"), Buffer("X", (1,))), tir.no_op(), {"global_symbol": "half_param"})
    with pytest.raises(CodegenError) as e:
        codegen_c([f])
    assert str(e.value) == ("C codegen of PrimFunc 'half_param': scalar parameter 'h' has dtype float16, which the "
                            "C backend cannot pass (use a buffer)")
