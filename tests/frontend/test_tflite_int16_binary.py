"""Quantized binary operators TensorFlow Lite Micro computes in integers, written with plait's TFLiteWriter:
int16 (16x8) ADD, SUB and MUL, with different scales, broadcasting and fused activations, and int8 DIV, all
256 x 256 quotients (zero divisors included); equal to TensorFlow Lite Micro bit for bit, the compiled C
and the numpy interpreter both; what TensorFlow Lite Micro does not run is refused."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import FrontendError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_ops_qbinary import div_int8
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

ACTS = {"NONE": 0, "RELU": 1, "RELU6": 3}
SHAPE = (1, 4, 4, 3)


def tflm(buf: bytes, xs: list[np.ndarray]) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf, arena_size=1 << 20)
    for k, x in enumerate(xs):
        it.set_input(x, k)
    it.invoke()
    return it.get_output(0).copy()


def plait_outputs(buf: bytes, xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(*xs)
    interp = interpret(mod, list(xs))
    return np.asarray(got), np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)


def check(buf: bytes, xss: list[list[np.ndarray]]) -> None:
    """Each input list through TensorFlow Lite Micro, the compiled C and the interpreter: equal."""
    mod = from_tflite(buf)
    gm = plait.executor.GraphModule(plait.build(mod, "c"))
    for xs in xss:
        want = tflm(buf, xs)
        (got,) = gm(*xs)
        interp = interpret(mod, list(xs))
        interp = np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(interp, want)


def binary(op: str, dtype: str, shapes: tuple[tuple, tuple], quants: list, act: str = "NONE") -> bytes:
    w = TFLiteWriter()
    x = w.tensor("x", shapes[0], dtype, quant=quants[0])
    z = w.tensor("z", shapes[1], dtype, quant=quants[1])
    y = w.tensor("y", np.broadcast_shapes(*shapes), dtype, quant=quants[2])
    w.op(op, [x, z], [y], FusedActivationFunction=ACTS[act])
    return w.finish([x, z], [y])


def full_range(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max + 1, shape)
    v.flat[:2] = [info.min, info.max][: v.size]
    return v.astype(dtype)


# int16 scales: equal, unequal, the output finer or coarser than the inputs
Q16 = {"equal": [(1 / 4096, 0), (1 / 4096, 0), (1 / 2048, 0)],
       "unequal": [(0.0003, 0), (0.0011, 0), (0.0009, 0)],
       "fine-out": [(0.002, 0), (0.0007, 0), (0.00025, 0)],
       "coarse-out": [(0.0001, 0), (0.00013, 0), (0.004, 0)]}
Q16_MUL = {"equal": [(1 / 4096, 0), (1 / 4096, 0), (1 / 256, 0)],
           "unequal": [(0.0003, 0), (0.0011, 0), (0.009, 0)],
           "fine-out": [(0.002, 0), (0.0007, 0), (0.03, 0)],
           "coarse-out": [(0.0001, 0), (0.00013, 0), (0.0004, 0)]}
B_SHAPES = [SHAPE, (3,), (1, 1, 1, 3), (1, 4, 1, 1)]


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6"])
@pytest.mark.parametrize("b_shape", B_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("scales", list(Q16))
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_int16_binary_equals_tflite_micro(op, scales, b_shape, act):
    quants = (Q16_MUL if op == "MUL" else Q16)[scales]
    buf = binary(op, "int16", (SHAPE, b_shape), quants, act)
    rng = np.random.default_rng(sum(map(ord, op + scales + act)) + len(b_shape))
    xss = [[full_range(rng, SHAPE, "int16"), full_range(rng, b_shape, "int16")] for _ in range(4)]
    check(buf, xss)


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_int16_add_sub_with_zero_points_equal_tflite_micro(op):
    """TensorFlow Lite Micro's int16 ADD and SUB take any zero points (the general path): so does plait."""
    buf = binary(op, "int16", (SHAPE, (3,)), [(0.0004, 120), (0.0009, -3000), (0.001, 17)], "RELU")
    rng = np.random.default_rng(5)
    check(buf, [[full_range(rng, SHAPE, "int16"), full_range(rng, (3,), "int16")] for _ in range(3)])


def test_int16_input_first_broadcast_equals_tflite_micro():
    """The broadcast operand first: [3] with [1, 4, 4, 3]."""
    rng = np.random.default_rng(9)
    for op in ("ADD", "SUB", "MUL"):
        quants = (Q16_MUL if op == "MUL" else Q16)["unequal"]
        buf = binary(op, "int16", ((3,), SHAPE), quants)
        check(buf, [[full_range(rng, (3,), "int16"), full_range(rng, SHAPE, "int16")] for _ in range(2)])


def test_int16_mul_with_a_zero_point_is_refused():
    buf = binary("MUL", "int16", (SHAPE, SHAPE), [(0.001, 0), (0.001, 4), (0.01, 0)])
    with pytest.raises(FrontendError) as e:
        from_tflite(buf)
    assert "an int16 MUL needs zero points 0 (TensorFlow Lite Micro's 16x8 MUL is symmetric); input 1 has zero " \
           "point 4" in str(e.value)
    with pytest.raises(RuntimeError):  # TensorFlow Lite Micro refuses it too
        tflm(buf, [np.zeros(SHAPE, np.int16)] * 2)


def test_int16_add_with_a_tiny_output_scale_is_refused():
    buf = binary("ADD", "int16", (SHAPE, SHAPE), [(0.01, 0), (0.01, 0), (1e-7, 0)])
    with pytest.raises(FrontendError, match=r"needs a multiplier below 1"):
        from_tflite(buf)


# ---- int8 DIV ----------------------------------------------------------------------------------

Q8_DIV = [[(0.05, -3), (0.02, 5), (0.1, 0)], [(0.1, 0), (0.1, 0), (0.5, -10)], [(0.004, 10), (0.07, -128), (0.02, 3)],
          [(1 / 128, 0), (1 / 128, 0), (0.8, 0)], [(0.5, 3), (0.001, 0), (2.0, 7)],
          [(2.0, 0), (0.0001, 0), (0.001, 0)], [(0.001, 0), (0.5, 127), (1.0, -5)]]
ALL_A, ALL_B = (v.reshape(-1).astype(np.int8) for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128),
                                                                    indexing="ij"))


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6"])
@pytest.mark.parametrize("k", range(len(Q8_DIV)))
def test_int8_div_all_pairs_equal_tflite_micro(k, act):
    """Every (dividend, divisor) pair, zero divisors (divisor == its zero point) included: TensorFlow Lite
    Micro's release build computes a finite value for them (its reciprocal of 0 wraps), which plait matches."""
    buf = binary("DIV", "int8", ((65536,), (65536,)), Q8_DIV[k], act)
    want = tflm(buf, [ALL_A, ALL_B])
    got, interp = plait_outputs(buf, [ALL_A, ALL_B])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(interp, want)
    zero = ALL_B.astype(int) == Q8_DIV[k][1][1]
    assert len(np.unique(want[~zero])) >= (3 if k >= 5 or act == "RELU6" else 100)  # the last two saturate


@pytest.mark.parametrize("b_shape", [(3,), (1, 1, 1, 3), SHAPE], ids=lambda s: "x".join(map(str, s)))
def test_int8_div_broadcast_equals_tflite_micro(b_shape):
    rng = np.random.default_rng(len(b_shape))
    buf = binary("DIV", "int8", (SHAPE, b_shape), Q8_DIV[0], "RELU6")
    check(buf, [[full_range(rng, SHAPE, "int8"), full_range(rng, b_shape, "int8")] for _ in range(4)])


def test_int8_div_reference_matches_a_worked_example():
    """(0.05 * (-128 + 3)) / (0.02 * (-45 - 5)) / 0.1 = 62.5: TensorFlow Lite Micro's reciprocal gives 63."""
    q = Q8_DIV[0]
    assert int(div_int8(np.array(-128), np.array(-45), *q, (-128, 127))) == 63


@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_other_quantized_divs_are_refused(dtype):
    buf = binary("DIV", dtype, (SHAPE, SHAPE), [(0.01, 0), (0.01, 0), (0.01, 0)])
    with pytest.raises(FrontendError, match=r"is not supported \(TensorFlow Lite Micro's is int8 only\)"):
        from_tflite(buf)
