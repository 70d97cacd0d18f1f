"""Generated C under gcc's sanitizers: no undefined behaviour and no out-of-bounds access for any input.

A sample of generated C (tests/backends/edge_programs.py: casts of NaN, infinities and out-of-range
floats to every type, every integer operator at its edges, quantize-like cast chains, and lowered
operators: gather with indices far outside their axis, conv2d, softmax, reductions, resize, integer
divide/mod/power/shift) is compiled with ``-fsanitize=undefined,address,float-cast-overflow
-fno-sanitize-recover=all`` (gcc's ``undefined`` does not include ``float-cast-overflow``) into one
standalone program: a generated ``main`` reads every buffer from a file into a ``malloc``'ed block of
exactly its size (so AddressSanitizer catches any access past it), calls each PrimFunc, and writes
the buffers back. The test runs it in a subprocess and checks that the sanitizers report nothing and
that every output equals the TIR interpreter's bit for bit (float outputs of libm calls: within
rounding). Negative controls show that the harness does catch an out-of-bounds read, a signed
overflow and an out-of-range float conversion.

The sanitizer runtimes (libasan, libubsan) come with Debian's gcc (libgcc-12-dev depends on them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from plait.backends.c.backend import BASE_FLAGS, c_function_names, codegen_c
from plait.tir import Buffer, For, PrimFunc, Var

from .edge_programs import assert_outputs_equal, element_programs, interpret, operator_programs, reference

SANITIZE = ("-fsanitize=undefined,address,float-cast-overflow", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
# -O1 keeps the build quick; -ffp-contract=off makes float arithmetic round like the interpreter's
FLAGS = (*BASE_FLAGS, "-O1", "-g", "-ffp-contract=off", *SANITIZE)
ENV = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def _nbytes(buf: Buffer) -> int:
    n = 1
    for d in buf.static_shape:
        n *= d
    return n * np.dtype(buf.dtype).itemsize


def standalone_main(calls: list[tuple[str, list[int]]], statuses: list[int] | None = None) -> str:
    """A C ``main(argc, argv)``: for each (function, buffer sizes) in order, read every buffer from
    ``argv[1]`` into its own exactly sized ``malloc`` block, call the function, write the buffers to
    ``argv[2]`` and free them. Exit status 2-4: bad files or a return other than the call's status
    in ``statuses`` (default 0)."""
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "",
             "static void* plait_t_read(FILE* f, size_t n) {",
             "  void* p = malloc(n);",
             "  if (p == NULL || fread(p, 1, n, f) != n) exit(2);",
             "  return p;", "}",
             "static void plait_t_write(FILE* f, void* p, size_t n) {",
             "  if (fwrite(p, 1, n, f) != n) exit(3);",
             "  free(p);", "}", "",
             "int main(int argc, char** argv) {",
             "  FILE* in = argc == 3 ? fopen(argv[1], \"rb\") : NULL;",
             "  FILE* out = argc == 3 ? fopen(argv[2], \"wb\") : NULL;",
             "  if (in == NULL || out == NULL) return 2;"]
    for k, (name, sizes) in enumerate(calls):
        names = [f"b{k}" for k in range(len(sizes))]
        lines.append("  {")
        lines += [f"    void* {b} = plait_t_read(in, {n});" for b, n in zip(names, sizes)]
        lines.append(f"    if ({name}({', '.join(names)}) != {statuses[k] if statuses else 0}) return 4;")
        lines += [f"    plait_t_write(out, {b}, {n});" for b, n in zip(names, sizes)]
        lines.append("  }")
    lines += ["  fclose(in);", "  return fclose(out) != 0;", "}", ""]
    return "\n".join(lines)


def run_sanitized(source: str, calls: list[tuple[str, list[int]]], buffers: list[list[np.ndarray]],
                  tmp_path: Path, statuses: list[int] | None = None) -> tuple[subprocess.CompletedProcess,
                                                                             list[list[np.ndarray]]]:
    """Compile ``source`` + the standalone main with the sanitizers, run it on ``buffers`` (per call,
    every buffer argument in order); the process and the buffers it wrote back."""
    prog = tmp_path / "prog"
    (tmp_path / "prog.c").write_text(source + "\n" + standalone_main(calls, statuses), encoding="utf-8")
    build = subprocess.run(["gcc", *FLAGS, "-o", str(prog), str(tmp_path / "prog.c"), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    (tmp_path / "in.bin").write_bytes(b"".join(a.tobytes() for args in buffers for a in args))
    proc = subprocess.run([str(prog), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                          text=True, env={**os.environ, **ENV}, timeout=120)
    raw = (tmp_path / "out.bin").read_bytes() if proc.returncode == 0 else b""
    outs, pos = [], 0
    for args in buffers if proc.returncode == 0 else []:
        got = []
        for a in args:
            got.append(np.frombuffer(raw[pos:pos + a.nbytes], a.dtype).reshape(a.shape).copy())
            pos += a.nbytes
        outs.append(got)
    return proc, outs


def _sanitizer_report(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr if "runtime error" in proc.stderr or "Sanitizer" in proc.stderr else ""


def test_generated_c_has_no_undefined_behaviour_on_hostile_inputs(tmp_path):
    programs = [*element_programs(), *operator_programs("c")]
    funcs = [p.func for p in programs]
    src = codegen_c(funcs, "c")
    calls = [(cname, [_nbytes(b) for b in p.func.params])
             for cname, p in zip(c_function_names(funcs), programs)]
    buffers = [[*p.inputs, *p.outputs()] for p in programs]
    proc, got = run_sanitized(src.source, calls, buffers, tmp_path, [p.status for p in programs])
    assert _sanitizer_report(proc) == "" and proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr == ""
    for p, args in zip(programs, got):
        for k, x in enumerate(p.inputs):  # inputs are never written
            np.testing.assert_array_equal(args[k], x, err_msg=p.name)
        if p.status:
            continue  # it returned the status of its failed index check (as the interpreter stops there)
        assert_outputs_equal(args[len(p.inputs):], interpret(p), p.exact, p.name)
        want = reference(p) if p.op else None
        if want is not None:  # and the operator's numpy reference (floats: up to libm and order of sums)
            assert_outputs_equal(args[len(p.inputs):], want, False, f"{p.name} vs the numpy reference")


def test_the_harness_catches_an_out_of_bounds_read(tmp_path):
    X, Y = Buffer("X", (8,)), Buffer("Y", (8,))
    i = Var("i")
    f = PrimFunc((X, Y), For(i, 0, 8, "serial", Y.store(i, X[i + 1])), {"global_symbol": "past_end"})
    src = codegen_c([f], "c")
    proc, _ = run_sanitized(src.source, [("past_end", [32, 32])], [[np.ones(8, np.float32), np.zeros(8, np.float32)]],
                            tmp_path)
    assert proc.returncode != 0 and "heap-buffer-overflow" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("body,value,report", [
    ("x[0] = x[0] + 1;", np.array([2**31 - 1], np.int32), "signed integer overflow"),
    ("x[0] = (int32_t)(*(float*)x * 1e10f);", np.array([1.0], np.float32).view(np.int32),
     "is outside the range of representable values"),
    ("x[0] = x[0] / x[1];", np.array([5, 0], np.int32), "division by zero"),
    ("x[0] = x[0] << x[1];", np.array([5, 40], np.int32), "shift exponent 40 is too large"),
])
def test_the_harness_catches_undefined_behaviour(body, value, report, tmp_path):
    src = f"#include <stdint.h>\nint32_t bad(int32_t* x) {{\n  {body}\n  return 0;\n}}\n"
    proc, _ = run_sanitized(src, [("bad", [value.nbytes])], [[value]], tmp_path)
    assert proc.returncode != 0 and report in proc.stderr, proc.stderr[-2000:]
