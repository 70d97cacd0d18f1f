"""The SMLAD dot-product kernels of Cortex-M cores with the DSP extension (plait/backends/c/dsp_kernels.py,
put in by plait/schedule/dsp_dot.py): every kernel, compiled for a Cortex-M4, M7 and M55 (the DSP body:
``smlad`` in the object code) and for a Cortex-M3 and the host (the plain C body), gives the numpy sums on
runs of every length around its 8-element steps, at unaligned addresses, with extreme values and zero points
(and the depthwise kernel, two channels per call, over windows of several shapes); int8 convolutions
(depthwise ones included) and products built for cortex-m4f / cortex-m7f call the kernels and their AOT
firmware (and cortex-m55's) equals the reference on QEMU, and a cortex-m3 build (no DSP: the loops) the same
numbers."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import plait
from plait.backends.c.dsp_kernels import dot_kernels
from plait.executor.aot.firmware import SEMIHOST_C, SEMIHOST_H, _linker, _startup
from plait.executor.aot.qemu import QemuModule, run_firmware
from plait.relay import IRModule, call, const, run, var
from plait.target.boards import get_board

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
needs_qemu = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
HAVE_OBJDUMP = shutil.which("arm-none-eabi-objdump") is not None

TYPES = {"u8": np.uint8, "s8": np.int8, "s16": np.int16}
LENGTHS = (1, 3, 7, 8, 9, 15, 16, 27, 32, 40, 64, 75)


def _cases():
    """(kernel name, a, b, za, zb) for every kernel and length: random values, then the extremes."""
    rng = np.random.default_rng(7)
    out = []
    for name in sorted(k for k in dot_kernels() if k != "plait_dw2_s16"):
        ta, tb = name.split("_")[2:]
        da, db = TYPES[ta.rstrip("z")], TYPES[tb.rstrip("z")]
        for n in LENGTHS:
            for extreme in (False, True):
                lo_a, hi_a = np.iinfo(da).min, np.iinfo(da).max
                lo_b, hi_b = np.iinfo(db).min, np.iinfo(db).max
                if da == np.int16:  # (the packed int16 operands are 8-bit values minus a zero point)
                    lo_a, hi_a, lo_b, hi_b = -255, 255, -255, 255
                if extreme:
                    a, b = np.full(n, lo_a, da), np.full(n, lo_b, db)
                else:
                    a, b = rng.integers(lo_a, hi_a + 1, n).astype(da), rng.integers(lo_b, hi_b + 1, n).astype(db)
                za = (hi_a if extreme else int(rng.integers(lo_a, hi_a + 1))) if ta.endswith("z") else 0
                zb = (hi_b if extreme else int(rng.integers(lo_b, hi_b + 1))) if tb.endswith("z") else 0
                out.append((name, a, b, za, zb))
    for kh, kw, c in ((3, 3, 64), (1, 3, 6), (10, 4, 2), (2, 5, 8), (3, 3, 2)):  # depthwise, two channels per call
        for extreme in (False, True):
            xr, xc, wr, wc = c * (kw + 3), c, c * kw, c
            nx, nw = (kh - 1) * xr + (kw - 1) * xc + 2, (kh - 1) * wr + (kw - 1) * wc + 2
            if extreme:
                x, w = np.full(nx, -255, np.int16), np.full(nw, -255, np.int16)
            else:
                x, w = rng.integers(-255, 256, nx).astype(np.int16), rng.integers(-255, 256, nw).astype(np.int16)
            out.append(("plait_dw2_s16", x, w, 0, (kh, kw, xr, xc, wr, wc)))
    return out


def _dw2(x, w, geom) -> list[int]:
    kh, kw, xr, xc, wr, wc = geom
    return [int(sum(int(x[ry * xr + rx * xc + k]) * int(w[ry * wr + rx * wc + k]) for ry in range(kh) for rx in range(kw)))
            for k in (0, 1)]


def _dot(a, b, za, zb) -> int:
    return int(np.sum((a.astype(np.int64) - za) * (b.astype(np.int64) - zb)))


def _want(cases) -> np.ndarray:
    """Per case: a single kernel's sum; a paired one's two outputs (5 and -7 before: it adds to them), the
    second against ``b`` reversed."""
    out: list[int] = []
    for name, a, b, za, zb in cases:
        if "dw2" in name:
            out += _dw2(a, b, zb)
            continue
        out += [5 + _dot(a, b, za, zb), -7 + _dot(a, b[::-1], za, zb)] if "dot2" in name else [_dot(a, b, za, zb)]
    return np.array(out, np.int64).astype(np.int32)


def _ctype(x: np.ndarray) -> str:
    return {np.dtype(np.uint8): "uint8_t", np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t"}[x.dtype]


def harness(cases) -> str:
    """C that runs every case (each operand one element past a word boundary: unaligned words) and hands
    the int32 sums to ``put(const int32_t* sums, int count)``."""
    lines = ["#include <stdint.h>", "#include <stddef.h>", "#include <string.h>"]
    lines += [dot_kernels()[k] for k in sorted(dot_kernels())]
    count = len(_want(cases))
    lines.append(f"static int32_t sums[{count}];")
    lines.append("void put(const int32_t* s, int count);")
    body, at = [], 0
    for k, (name, a, b, za, zb) in enumerate(cases):
        skip = a.itemsize  # (an element past a word boundary: unaligned words; int16 at even addresses)
        for tag, x in (("a", a), ("b", b)) + ((("c", b[::-1]),) if "dot2" in name else ()):
            raw = bytes([0x5a] * skip) + x.tobytes()
            lines.append(f"static uint8_t {tag}{k}[{len(raw)}] __attribute__((aligned(4))) = "
                         f"{{{', '.join(str(v) for v in raw)}}};")
        if "dw2" in name:
            geom = ", ".join(str(g) for g in zb)
            body.append(f"  {name}(a{k} + {skip}, b{k} + {skip}, sums + {at}, {geom});")
            at += 2
        elif "dot2" in name:
            body.append(f"  sums[{at}] = 5; sums[{at + 1}] = -7;")
            body.append(f"  {name}(a{k} + {skip}, b{k} + {skip}, c{k} + {skip}, {len(a)}, {za}, {zb}, sums + {at});")
            at += 2
        else:
            body.append(f"  sums[{at}] = {name}(a{k} + {skip}, b{k} + {skip}, {len(a)}, {za}, {zb});")
            at += 1
    # the calls in functions of 16 (noinline): the kernels' plain C bodies inline into their callers, and gcc's
    # alias analysis over one main of ~1000 inlined calls took 40 s on a Cortex-M3 build
    parts = [body[k:k + 16] for k in range(0, len(body), 16)]
    for k, part in enumerate(parts):
        lines += [f"static __attribute__((noinline)) void run{k}(void) {{", *part, "}"]
    lines += ["int main(void) {", *(f"  run{k}();" for k in range(len(parts))), f"  put(sums, {count});",
              "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def test_the_plain_c_bodies_on_the_host(tmp_path):
    cases = _cases()
    (tmp_path / "main.c").write_text(harness(cases) + """#include <stdio.h>
void put(const int32_t* s, int count) { fwrite(s, 4, (size_t)count, stdout); }
""")
    subprocess.run(["gcc", "-std=c99", "-O2", "-o", "dot", "main.c"], cwd=tmp_path, check=True)
    got = np.frombuffer(subprocess.run([str(tmp_path / "dot")], capture_output=True, check=True).stdout, np.int32)
    np.testing.assert_array_equal(got, _want(cases))


WRITE = """#include "semihost.h"
void put(const int32_t* s, int count) {
  int32_t h = sh_open("sums.bin", 5);
  sh_write(h, s, (size_t)count * 4);
  sh_close(h);
}
"""


@needs_qemu
@pytest.mark.parametrize("cpu,board,dsp", [("cortex-m4", "mps2-an386", True), ("cortex-m7", "mps2-an500", True),
                                           ("cortex-m55", "mps3-an547", True), ("cortex-m3", "mps2-an385", False)])
def test_the_kernels_on_emulated_cores(tmp_path, cpu, board, dsp):
    cases = _cases()
    b = get_board(board)
    for name, text in (("startup.c", _startup(b)), ("semihost.c", SEMIHOST_C), ("semihost.h", SEMIHOST_H),
                       ("board.ld", _linker(b)), ("main.c", harness(cases) + WRITE)):
        (tmp_path / name).write_text(text)
    subprocess.run(["arm-none-eabi-gcc", f"-mcpu={cpu}", "-mthumb", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-pedantic", "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", "-T", "board.ld",
                    "startup.c", "semihost.c", "main.c", "-o", "fw.elf"], cwd=tmp_path, check=True)
    run_firmware(tmp_path / "fw.elf", b, tmp_path, 60)
    got = np.frombuffer((tmp_path / "sums.bin").read_bytes(), np.int32)
    np.testing.assert_array_equal(got, _want(cases))
    if HAVE_OBJDUMP:
        asm = subprocess.run(["arm-none-eabi-objdump", "-d", "fw.elf"], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout
        assert ("\tsmlad\t" in asm) == dsp
        assert ("\tsxtb16\t" in asm) == dsp


def _model(kind: str) -> tuple[IRModule, dict[str, np.ndarray]]:
    """A small int8 model whose dot loops take each kind of kernel."""
    rng = np.random.default_rng(11)

    def ints(shape, dtype):
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        return rng.integers(lo, hi + 1, shape).astype(dtype)

    if kind == "conv_rows":  # 1x1 over 64 channels: int8 input shifted to uint8 (u8 x s8), + wsum correction
        x = var("x", (1, 64, 5, 5), "int8")
        e = call("qnn.conv2d", x, const(ints((16, 64, 1, 1), np.int8)), input_zero_point=-3)
        return IRModule.from_expr(e), {"x": ints((1, 64, 5, 5), np.int8)}
    if kind == "conv_window":  # 10 x 4 over one channel, padded: a packed window of 48 (u8 x s8)
        x = var("x", (1, 1, 12, 6), "uint8")
        e = call("qnn.conv2d", x, const(ints((8, 1, 10, 4), np.int8)), padding=(4, 1, 5, 2), strides=(2, 1),
                 input_zero_point=131)
        return IRModule.from_expr(e), {"x": ints((1, 1, 12, 6), np.uint8)}
    if kind == "conv_int16":  # a weight zero point: both packed as int16 (s16 x s16)
        x = var("x", (1, 16, 6, 6), "uint8")
        e = call("qnn.conv2d", x, const(ints((8, 16, 3, 3), np.uint8)), padding=(1, 1, 1, 1), input_zero_point=7,
                 kernel_zero_point=200)
        return IRModule.from_expr(e), {"x": ints((1, 16, 6, 6), np.uint8)}
    if kind == "dense":  # one row: the direct loop, the data's zero point in the kernel (s8z x s8)
        x = var("x", (1, 75), "int8")
        e = call("qnn.dense", x, const(ints((10, 75), np.int8)), input_zero_point=-128)
        return IRModule.from_expr(e), {"x": np.full((1, 75), 127, np.int8)}
    if kind == "depthwise":  # ds_cnn's blocks: 3 x 3 over 16 channels of 25 x 5, channels-last int16
        x = var("x", (1, 16, 25, 5), "int8")
        e = call("qnn.conv2d", x, const(ints((16, 1, 3, 3), np.int8)), padding=(1, 1, 1, 1), groups=16,
                 input_zero_point=-5, kernel_zero_point=3)
        return IRModule.from_expr(e), {"x": ints((1, 16, 25, 5), np.int8)}
    if kind == "depthwise_strided":  # stride 2, dilation along the rows
        x = var("x", (1, 8, 11, 9), "uint8")
        e = call("qnn.conv2d", x, const(ints((8, 1, 3, 2), np.uint8)), padding=(2, 1, 2, 0), groups=8,
                 strides=(2, 2), dilation=(2, 1), input_zero_point=128, kernel_zero_point=255)
        return IRModule.from_expr(e), {"x": ints((1, 8, 11, 9), np.uint8)}
    assert kind == "matmul"  # rows packed, b transposed (u8 x s8) with both zero points: int16
    a = var("a", (6, 40), "uint8")
    e = call("qnn.matmul", a, const(ints((40, 9), np.int8)), a_zero_point=128, b_zero_point=-2)
    return IRModule.from_expr(e), {"a": ints((6, 40), np.uint8)}


KERNEL = {"conv_rows": "plait_dot2_u8_s8", "conv_window": "plait_dot2_u8_s8", "conv_int16": "plait_dot2_s16_s16",
          "dense": "plait_dot2_s8z_s8", "matmul": "plait_dot2_s16_s16", "depthwise": "plait_dw2_s16",
          "depthwise_strided": "plait_dw2_s16"}
KINDS = tuple(KERNEL)


@pytest.mark.parametrize("kind", KINDS)
def test_cortex_m4f_code_calls_the_kernels_and_m3_code_does_not(kind):
    mod, _ = _model(kind)
    src4 = plait.build(mod, target="c -mcpu=cortex-m4f").lib.source  # type: ignore[attr-defined]
    src3 = plait.build(mod, target="c -mcpu=cortex-m3").lib.source  # type: ignore[attr-defined]
    assert set(re.findall(r"(plait_d(?:ot2?|w2)_\w+)\(&", src4)) == {KERNEL[kind]}  # (two outputs per call)
    assert "plait_dot_" not in src3
    assert "const int8_t* restrict p0" in src4 or "const uint8_t* restrict p0" in src4  # (read, not written)


@needs_qemu
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("target", ["c -mcpu=cortex-m4f", "c -mcpu=cortex-m7f", "c -mcpu=cortex-m55", "c -mcpu=cortex-m3"])
def test_firmware_equals_the_reference(tmp_path, kind, target):
    mod, inputs = _model(kind)
    art = plait.build(mod, target=target, executor="aot",
                      config={"aot.name": "dot", "cc.cache_dir": str(tmp_path / "cc"), "c.host_simulation": True})
    q = QemuModule(art, timeout_s=60, build_dir=tmp_path / "fw")
    (got,) = q(**inputs)
    np.testing.assert_array_equal(got, run(mod, list(inputs.values())))
    if HAVE_OBJDUMP:
        elf = next((tmp_path / "fw").rglob("*.elf"))
        asm = subprocess.run(["arm-none-eabi-objdump", "-d", str(elf)], capture_output=True, text=True,
                             check=True).stdout
        insn = "\tsmlatt\t" if kind.startswith("depthwise") else "\tsmlad\t"  # (depthwise: a channel per half)
        assert (insn in asm) == ("cortex-m3" not in target)
