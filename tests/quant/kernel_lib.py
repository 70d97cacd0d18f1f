"""One of plait's C kernels (:data:`plait.backends.c.kernels.KERNELS`) compiled with given gcc flags into a
shared library the tests call through ctypes: each ISA-specific body (and the plain C one) is checked against
numpy wherever this machine can run it. The code is compiled on every machine (a body that does not compile
fails the test); only running it is skipped where the CPU lacks the instructions the flags enable."""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from plait.backends.c.kernels import KERNELS
from plait.target.host import cpu_has

X86_GCC = pytest.mark.skipif(shutil.which("gcc") is None or platform.machine().lower() not in ("x86_64", "amd64"),
                             reason="needs gcc on x86-64")
"""The mark of a test that compiles x86-64 flags."""

NEEDS = {"-mavx512f": "avx512f", "-mavx512vnni": "avx512_vnni", "-march=x86-64-v3": "avx2"}
"""gcc flag -> the /proc/cpuinfo flag running its code needs."""


def kernel_library(tmp_path: Path, name: str, wrapper: str, flags: list[str], opt: str = "-O3") -> ctypes.CDLL:
    """``KERNELS[name]`` plus ``wrapper`` (C defining the entry points the test calls) compiled with
    ``gcc -std=c99 opt flags`` and loaded; the test is skipped when this CPU cannot run that code."""
    src, so = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n" + KERNELS[name] + wrapper)
    subprocess.run(["gcc", "-std=c99", opt, "-shared", "-fPIC", *flags, str(src), "-o", str(so)], check=True)
    missing = [NEEDS[f] for f in flags if f in NEEDS and not cpu_has(NEEDS[f])]
    if missing:
        pytest.skip(f"no {', '.join(missing)} on this CPU")
    return ctypes.CDLL(str(so))
