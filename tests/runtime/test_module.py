import numpy as np
import pytest

from plait.errors import PlaitError
from plait.runtime import CSourceModule, PyModule, load_module
from plait.runtime.cc import CompileError

SRC = """
#include <stdint.h>
int32_t scale(const float* restrict x, float* restrict y, int32_t n, float s) {
  for (int32_t i = 0; i < n; ++i) y[i] = x[i] * s;
  return 0;
}
int32_t fail(void) { return 3; }
"""


def test_compile_call_export_load(tmp_path):
    src = CSourceModule(SRC, {"scale": ("ptr", "ptr", "int32", "float32"), "fail": ()}, name="demo")
    mod = src.compile(cache_dir=tmp_path / "cache")
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, np.float32)
    mod["scale"](x, y, 5, 2.5)
    np.testing.assert_array_equal(y, x * np.float32(2.5))
    with pytest.raises(PlaitError) as e:
        mod["fail"]()
    assert str(e.value) == "function 'fail' returned error status 3"
    with pytest.raises(PlaitError) as e:
        mod["scale"](x, y)
    assert str(e.value) == "function 'scale' takes 4 arguments, got 2"
    with pytest.raises(PlaitError) as e:
        mod["scale"](x[::2], y, 3, 1.0)
    assert str(e.value) == "function 'scale': argument 0 must be a C-contiguous numpy array"
    with pytest.raises(PlaitError) as e:
        mod["scael"]
    assert str(e.value) == "unknown runtime function 'scael'; did you mean 'scale'?"
    out = mod.export_library(tmp_path / "demo.so")
    again = load_module(out)
    assert again.signatures == {"scale": ("ptr", "ptr", "int32", "float32"), "fail": ()}
    y2 = np.zeros(5, np.float32)
    again["scale"](x, y2, 5, 2.5)
    np.testing.assert_array_equal(y2, y)


def test_cache_reuses_and_compile_error(tmp_path):
    src = CSourceModule(SRC, {"fail": ()}, name="demo")
    a = src.compile(cache_dir=tmp_path)
    b = src.compile(cache_dir=tmp_path)
    assert a.path == b.path
    assert len(list(tmp_path.glob("*.so"))) == 1
    bad = CSourceModule("int32_t f(void) { return undefined_thing; }", {"f": ()}, name="broken")
    with pytest.raises(CompileError) as e:
        bad.compile(cache_dir=tmp_path)
    assert str(e.value).startswith("compiling 'broken' with gcc failed:\n")
    assert "undefined_thing" in str(e.value)


def test_imports_are_searched_and_load_errors(tmp_path):
    host = PyModule({"main": lambda: 1})
    host.import_module(PyModule({"kernel": lambda: 2}))
    assert host["kernel"]() == 2
    with pytest.raises(PlaitError) as e:
        load_module(tmp_path / "missing.so")
    assert str(e.value) == f"cannot load module '{tmp_path / 'missing.so'}': no such file"
