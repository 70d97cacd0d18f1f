"""Symbolic dims through the shape-dependent operators under the VM executor: each model compiled once and run
at 2-3 concrete shapes, equal to ONNX Runtime and bit for bit to the Graph executor built for that static shape;
and the run-time shape checks: inputs whose shapes do not fit stop the generated function with status
SHAPE_MISMATCH (INDEX_OUT_OF_RANGE for an index), which the VM raises as a PlaitError naming the instruction and
the function. The bundled models with symbolic dims are in test_dynamic_models.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.errors import PlaitError
from plait.executor import GraphModule
from plait.executor.vm.machine import VirtualMachine
from plait.frontend.onnx import from_onnx
from plait.ir import status
from plait.relay import infer_type
from plait.testing.ort_reference import reference_session

F, I64, I8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT8
SHAPES = f"stopped: {status.MESSAGES[status.SHAPE_MISMATCH]} (status 2)"
INDEX = f"stopped: {status.MESSAGES[status.INDEX_OUT_OF_RANGE]} (status 1)"


def _model(nodes, inputs, inits=(), opset=18):
    g = oh.make_graph(nodes, "g", [oh.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                      [oh.make_empty_tensor_value_info("y")],
                      [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])


def _rnd(*shape, seed=0, dtype=np.float32):
    x = np.random.default_rng(seed).standard_normal(shape) * (40 if dtype == np.int8 else 1)
    return x.astype(dtype)


def _fixed(model, feeds):
    """``model`` with its inputs' shapes those of ``feeds`` (the Graph executor's static build)."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    for i in m.graph.input:
        for d, n in zip(i.type.tensor_type.shape.dim, feeds[i.name].shape):
            d.dim_value = n
    return m


def _vm(model):
    return VirtualMachine(plait.build(from_onnx(model), "c", executor="vm"))


def close(got, want, rtol=1e-6):
    """Within ``rtol`` of ``want``, each element, or of ``want``'s largest magnitude where a sum cancels to
    about 0 (two summation orders of the same float32 terms differ by a rounding of the terms, not of the sum)."""
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.max(np.abs(want), initial=0)))


def _check(model, feeds_list, rtol=None, same_schedule=True):
    """The VM (one build) on each feed: ONNX Runtime's result (bit for bit, or within ``rtol``) and the Graph
    executor's at that shape: bit for bit where both builds schedule the function alike, else within 1e-6
    (a static convolution's window loops are split and vectorized, a symbolic one's are not: another
    contraction of the same sums into FMAs)."""
    vm = _vm(model)
    sess = reference_session(model)
    for feeds in feeds_list:
        (got,) = vm(**feeds)
        (want,) = sess.run(None, feeds)
        (static,) = GraphModule(plait.build(from_onnx(_fixed(model, feeds)), "c"))(**feeds)
        assert got.shape == want.shape
        if same_schedule:
            np.testing.assert_array_equal(got, static)
        else:
            close(got, static)
        if rtol is None:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-4)
    return vm


def _stops(vm, feeds, kind=SHAPES):
    """The VM stops on ``feeds`` with the status ``kind``: the PlaitError names the call and its function."""
    with pytest.raises(PlaitError) as e:
        vm(**feeds)
    call = next(i for i in vm.exe.instructions if i.op == "call")
    assert str(e.value) == f"VM instruction '{vm.exe.line(call)}': runtime function '{call.func}' {kind}"
    return str(e.value)


def _relu(node):
    """``node`` writes 'r'; a Relu after it (fused with it) writes 'y'."""
    return [node, oh.make_node("Relu", ["r"], ["y"], name="/Relu")]


# ---- Resize over a symbolic H and W -------------------------------------------------------------------------

RESIZE = [("nearest", "asymmetric", "floor", [1, 1, 2, 2]),
          ("nearest", "half_pixel", "round_prefer_ceil", [1, 1, 0.5, 1.5]),
          ("linear", "half_pixel", "", [1, 1, 2, 2]), ("linear", "align_corners", "", [1, 1, 0.5, 1.5]),
          ("linear", "pytorch_half_pixel", "", [1, 1, 1, 3]), ("linear", "half_pixel_symmetric", "", [1, 1, 1.5, 0.5]),
          ("linear", "tf_crop_and_resize", "", [1, 1, 2, 1.5]), ("cubic", "half_pixel", "", [1, 1, 2, 2])]


@pytest.mark.parametrize("mode, ctm, nearest, scales", RESIZE, ids=[f"{m}-{c}" for m, c, _, _ in RESIZE])
def test_resize_with_scales_over_symbolic_h_and_w(mode, ctm, nearest, scales):
    roi = [0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8] if ctm == "tf_crop_and_resize" else []
    attrs = {"nearest_mode": nearest} if nearest else {}
    node = oh.make_node("Resize", ["x", "roi", "sc"], ["r"], mode=mode, coordinate_transformation_mode=ctm, **attrs)
    m = _model(_relu(node), [("x", F, ["N", 2, "H", "W"])], [("sc", np.array(scales, np.float32)),
                                                               ("roi", np.array(roi, np.float32))])
    hw = [name if s == 1 and ctm != "tf_crop_and_resize" else "?" for name, s in zip("HW", scales[2:])]
    assert str(infer_type(from_onnx(m)).main.checked_type.ret_type) == f"Tensor[(N, 2, {hw[0]}, {hw[1]}), float32]"
    _check(m, [{"x": _rnd(n, 2, h, w, seed=h)} for n, h, w in ((1, 5, 7), (2, 8, 3), (3, 1, 1))],
           rtol=1e-5 if mode == "cubic" else None)  # cubic: plait's float32 sums are not ORT's (as static)


def test_resize_int8_linear_and_static_sizes_on_symbolic_axes():
    node = oh.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")
    _check(_model([node], [("x", I8, [1, "C", "H", "W"])], [("sc", np.array([1, 1, 2, 1.5], np.float32))]),
           [{"x": _rnd(1, c, h, w, dtype=np.int8)} for c, h, w in ((1, 3, 4), (3, 6, 2))])
    node = oh.make_node("Resize", ["x", "", "", "sz"], ["r"], mode="linear", axes=[2, 3])
    _check(_model(_relu(node), [("x", F, ["N", 2, "H", "W"])], [("sz", np.array([6, 9], np.int64))]),
           [{"x": _rnd(n, 2, h, w)} for n, h, w in ((1, 5, 7), (2, 8, 3))])


def test_resize_to_the_size_of_another_tensor_read_by_shape():
    """A U-Net's upsampling to its skip's size (F.interpolate(x, size=skip.shape[2:])): the sizes are that
    tensor's dims when the function runs (image.resize2d's like argument)."""
    nodes = [oh.make_node("Shape", ["s"], ["sh"], start=2),
             *_relu(oh.make_node("Resize", ["x", "", "", "sh"], ["r"], mode="linear", axes=[2, 3]))]
    m = _model(nodes, [("x", F, ["N", 2, "h", "w"]), ("s", F, ["N", 1, "H", "W"])])
    assert str(infer_type(from_onnx(m)).main.checked_type.ret_type) == "Tensor[(N, 2, H, W), float32]"
    _check(m, [{"x": _rnd(n, 2, 3, 4), "s": _rnd(n, 1, a, b)} for n, a, b in ((1, 6, 8), (2, 5, 3), (3, 3, 4))])


def test_resize_refusals_name_the_node():
    node = oh.make_node("Resize", ["x", "", "sc"], ["y"], name="/Resize", mode="nearest")
    with pytest.raises(PlaitError) as e:
        from_onnx(_model([node], [("x", F, ["N", 3, "L"])], [("sc", np.array([1, 1, 2], np.float32))]))
    assert str(e.value) == ("model uses 1 unsupported node(s):\n  node '/Resize' (Resize, opset 18): input with a "
                            "scale other than 1 on a symbolic axis must have a static shape, got "
                            "Tensor[(N, 3, L), float32]")


# ---- Reshape with 0 / -1 over symbolic dims -----------------------------------------------------------------

RESHAPES = [([0, -1], ["N", 3, 4], [(1, 3, 4), (3, 3, 4), (8, 3, 4)]), ([-1, 6], ["N", 3, 4], [(1, 3, 4), (3, 3, 4)]),
            ([-1, 2], ["N", 5], [(2, 5), (4, 5)]), ([0, 0, -1], ["N", "T", 6], [(1, 2, 6), (3, 4, 6)]),
            ([-1, 3, 2], ["N", "T", 6], [(1, 2, 6), (3, 4, 6)]), ([2, -1], ["N", "M"], [(2, 3), (4, 5)])]


@pytest.mark.parametrize("fused", [True, False], ids=["in-a-function", "a-view"])
@pytest.mark.parametrize("target, shape, sizes", RESHAPES, ids=[str(r[0]) for r in RESHAPES])
def test_reshape_with_0_and_minus_1_over_symbolic_dims(target, shape, sizes, fused):
    node = oh.make_node("Reshape", ["x", "s"], ["r" if fused else "y"], name="/Reshape")
    _check(_model(_relu(node) if fused else [node], [("x", F, shape)], [("s", np.array(target, np.int64))]),
           [{"x": _rnd(*s)} for s in sizes])


def test_reshape_to_a_shape_computed_from_shape():
    nodes = [oh.make_node("Shape", ["x"], ["sh"]), oh.make_node("Gather", ["sh", "i0"], ["b"], axis=0),
             oh.make_node("Concat", ["b", "c"], ["t"], axis=0), *_relu(oh.make_node("Reshape", ["x", "t"], ["r"]))]
    _check(_model(nodes, [("x", F, ["N", 3, 4])], [("i0", np.array([0], np.int64)), ("c", np.array([-1], np.int64))]),
           [{"x": _rnd(n, 3, 4)} for n in (1, 3, 8)])


def test_a_reshape_whose_element_count_does_not_fit_stops():
    """In a function: the -1 (N * 5 // 2) does not divide, or a static target does not hold N * 3 elements: the
    function stops (SHAPE_MISMATCH) before it writes anything. As a view in main: the VM refuses the view."""
    def model(target, shape, fused):
        node = oh.make_node("Reshape", ["x", "s"], ["r" if fused else "y"], name="/Reshape")
        return _model(_relu(node) if fused else [node], [("x", F, shape)], [("s", np.array(target, np.int64))])

    vm = _vm(model([-1, 2], ["N", 5], True))
    assert vm(x=_rnd(4, 5))[0].shape == (10, 2)
    assert _stops(vm, {"x": _rnd(3, 5)}) == (
        "VM instruction 'call %1 = fused_reshape_nn_relu(%0)  # fused_reshape_nn_relu @c': runtime function "
        "'fused_reshape_nn_relu' stopped: the inputs' run-time shapes do not fit the operator (dims that must be "
        "equal differ, a symbolic dim is not broadcast, an axis is too small for its window or padding, or a reshape "
        "changes the element count) (status 2)")
    _stops(_vm(model([6], ["N", 3], True)), {"x": _rnd(3, 3)})
    with pytest.raises(PlaitError) as e:
        _vm(model([-1, 2], ["N", 5], False))(x=_rnd(3, 5))
    assert str(e.value) == ("the VM executor: instruction 'view %1 = %0: float32[?, 2]  # /Reshape': 15 elements of "
                            "shape (3, 5) do not fit the shape (7, 2)")


# ---- Expand against symbolic dims ---------------------------------------------------------------------------

EXPANDS = {
    "symbolic-dim-kept": ([oh.make_node("Expand", ["x", "s"], ["r"])], [("x", F, ["N", 1, 4])],
                          [("s", np.array([1, 3, 1], np.int64))], [{"x": _rnd(n, 1, 4)} for n in (1, 3, 8)]),
    "rank-grows": ([oh.make_node("Expand", ["x", "s"], ["r"])], [("x", F, ["N", 4])],
                   [("s", np.array([2, 1, 4], np.int64))], [{"x": _rnd(n, 4)} for n in (1, 3)]),
    "to-a-shape": ([oh.make_node("Shape", ["z"], ["s"]), oh.make_node("Expand", ["x", "s"], ["r"])],
                   [("x", F, [1, 4]), ("z", F, ["N", 4])], [],
                   [{"x": _rnd(1, 4), "z": _rnd(n, 4)} for n in (1, 3, 8)]),
    "mask-to-the-batch": ([oh.make_node("Shape", ["z"], ["sh"]), oh.make_node("Gather", ["sh", "i0"], ["b"], axis=0),
                           oh.make_node("Concat", ["b", "c"], ["s"], axis=0),
                           oh.make_node("Expand", ["x", "s"], ["r"])],
                          [("x", F, [1, 5, 5]), ("z", F, ["B", 5, 8])],
                          [("i0", np.array([0], np.int64)), ("c", np.array([5, 5], np.int64))],
                          [{"x": _rnd(1, 5, 5), "z": _rnd(n, 5, 8)} for n in (1, 3, 8)]),
}


@pytest.mark.parametrize("case", sorted(EXPANDS))
def test_expand_broadcasts_against_symbolic_dims(case):
    nodes, inputs, inits, feeds = EXPANDS[case]
    _check(_model(nodes + [oh.make_node("Relu", ["r"], ["y"])], inputs, inits), feeds)


def test_expand_of_a_symbolic_dim_to_a_static_one_checks_it_when_it_runs():
    """A symbolic dim is never broadcast (plait's rule, where ONNX would also accept 1): N must be 3."""
    m = _model(_relu(oh.make_node("Expand", ["x", "s"], ["r"])), [("x", F, ["N", 4])],
               [("s", np.array([3, 4], np.int64))])
    vm = _check(m, [{"x": _rnd(3, 4)}])
    _stops(vm, {"x": _rnd(2, 4)})


# ---- Gather along and over symbolic axes --------------------------------------------------------------------

GATHERS = {
    "along-a-symbolic-axis": (oh.make_node("Gather", ["x", "i"], ["r"], axis=0), [("x", F, ["N", 4]), ("i", I64, [3])],
                              [{"x": _rnd(n, 4), "i": np.array([0, -1, n // 2], np.int64)} for n in (1, 3, 8)]),
    "indices-of-symbolic-length": (oh.make_node("Gather", ["x", "i"], ["r"], axis=1),
                                   [("x", F, [2, 5]), ("i", I64, ["K"])],
                                   [{"x": _rnd(2, 5), "i": np.arange(k, dtype=np.int64) % 5 - 2} for k in (1, 3, 8)]),
    "both": (oh.make_node("Gather", ["x", "i"], ["r"], axis=1), [("x", F, ["N", "T", 3]), ("i", I64, ["B", "K"])],
             [{"x": _rnd(n, t, 3), "i": (np.arange(b * k, dtype=np.int64).reshape(b, k) % t) - 1}
              for n, t, b, k in ((1, 2, 1, 1), (3, 4, 2, 3), (8, 5, 2, 2))]),
    "elements": (oh.make_node("GatherElements", ["x", "i"], ["r"], axis=1),
                 [("x", F, ["N", "T"]), ("i", I64, ["N", "K"])],
                 [{"x": _rnd(n, t), "i": np.arange(n * k, dtype=np.int64).reshape(n, k) % t}
                  for n, t, k in ((1, 3, 2), (3, 5, 4))]),
    "nd": (oh.make_node("GatherND", ["x", "i"], ["r"]), [("x", F, ["N", "T", 3]), ("i", I64, ["K", 2])],
           [{"x": _rnd(n, t, 3), "i": np.array([[0, 0], [n - 1, t - 1]][:k], np.int64)}
            for n, t, k in ((1, 2, 1), (3, 4, 2))]),
}


@pytest.mark.parametrize("case", sorted(GATHERS))
def test_gather_along_and_over_symbolic_axes(case):
    node, inputs, feeds = GATHERS[case]
    _check(_model(_relu(node), inputs), feeds)


def test_gather_indices_are_checked_against_the_run_time_length():
    node, inputs, _ = GATHERS["along-a-symbolic-axis"]
    vm = _vm(_model(_relu(node), inputs))
    _stops(vm, {"x": _rnd(3, 4), "i": np.array([0, 3, 1], np.int64)}, INDEX)  # 3 is past an axis of 3
    assert vm(x=_rnd(4, 4), i=np.array([0, 3, -4], np.int64))[0].shape == (3, 4)
    node, inputs, _ = GATHERS["elements"]
    _stops(_vm(_model(_relu(node), [("x", F, ["N", "T"]), ("i", I64, ["M", "K"])])),
           {"x": _rnd(2, 3), "i": np.zeros((3, 2), np.int64)})  # more index rows than data rows


# ---- slices, pads, joins, windows over symbolic dims (the operators of the first part) ----------------------

OTHERS = {
    "slice-clamped": ([oh.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["r"])], [("x", F, ["N", "L"])],
                      [("st", np.array([1, -2], np.int64)), ("en", np.array([2**63 - 1, -100], np.int64)),
                       ("ax", np.array([0, 1], np.int64)), ("sp", np.array([1, -1], np.int64))],
                      [(1, 4), (3, 1), (8, 6)]),
    "slice-crop": ([oh.make_node("Slice", ["x", "st", "en", "ax"], ["r"])], [("x", F, ["N", 2, "H", "W"])],
                   [("st", np.array([1, 1], np.int64)), ("en", np.array([-1, -1], np.int64)),
                    ("ax", np.array([2, 3], np.int64))], [(1, 2, 4, 5), (3, 2, 3, 3)]),
    "pad-reflect": ([oh.make_node("Pad", ["x", "p"], ["r"], mode="reflect")], [("x", F, ["N", "L"])],
                    [("p", np.array([0, 2, 0, 1], np.int64))], [(1, 3), (3, 5)]),
    "concat": ([oh.make_node("Concat", ["x", "x"], ["r"], axis=1)], [("x", F, ["N", "C", 2])], [],
               [(1, 1, 2), (3, 4, 2)]),
    "tile": ([oh.make_node("Tile", ["x", "t"], ["r"])], [("x", F, ["N", 2])], [("t", np.array([2, 3], np.int64))],
             [(1, 2), (3, 2)]),
    "split-equal": ([oh.make_node("Split", ["x"], ["r", "r1"], axis=1, num_outputs=2)], [("x", F, [2, "L"])], [],
                    [(2, 4), (2, 5), (2, 1)]),
    "maxpool": ([oh.make_node("MaxPool", ["x"], ["r"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
                [("x", F, ["N", 2, "H", "W"])], [], [(1, 2, 4, 5), (2, 2, 7, 3)]),
    "avgpool": ([oh.make_node("AveragePool", ["x"], ["r"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                [("x", F, ["N", 2, "H", "W"])], [], [(1, 2, 4, 5), (2, 2, 1, 3)]),
    "conv": ([oh.make_node("Conv", ["x", "w"], ["r"], kernel_shape=[3, 3], strides=[2, 1], pads=[1, 0, 1, 0])],
             [("x", F, ["N", 3, "H", "W"])],
             [("w", (np.random.default_rng(1).standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32))],
             [(1, 3, 5, 6), (2, 3, 8, 3)]),
    "conv-same": ([oh.make_node("Conv", ["x", "w"], ["r"], kernel_shape=[3, 3], auto_pad="SAME_UPPER")],
                  [("x", F, ["N", 3, "H", "W"])],
                  [("w", (np.random.default_rng(2).standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32))],
                  [(1, 3, 5, 6), (2, 3, 2, 3)]),
    "conv-transpose": ([oh.make_node("ConvTranspose", ["x", "w"], ["r"], kernel_shape=[2, 2], strides=[2, 2])],
                       [("x", F, ["N", 4, "H", "W"])],
                       [("w", (np.random.default_rng(3).standard_normal((4, 2, 2, 2)) * 0.3).astype(np.float32))],
                       [(1, 4, 3, 5), (2, 4, 1, 2)]),
    "conv-transpose-same": ([oh.make_node("ConvTranspose", ["x", "w"], ["r"], kernel_shape=[3, 3], strides=[2, 2],
                                          auto_pad="SAME_LOWER")], [("x", F, ["N", 4, "H", "W"])],
                            [("w", (np.random.default_rng(4).standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32))],
                            [(1, 4, 3, 5), (2, 4, 1, 2)]),
    "global-pool-and-mean": ([oh.make_node("GlobalAveragePool", ["x"], ["g"]),
                              oh.make_node("ReduceMean", ["g", "ax"], ["r"], keepdims=0)],
                             [("x", F, ["N", 3, "H", "W"])],
                             [("ax", np.array([2, 3], np.int64))], [(1, 3, 4, 5), (2, 3, 1, 7)]),
}


@pytest.mark.parametrize("case", sorted(OTHERS))
def test_shape_dependent_operators_over_symbolic_dims(case):
    nodes, inputs, inits, shapes = OTHERS[case]
    # float sums of a window in another order than ONNX Runtime's: within a few float32 ulps
    rtol = 1e-5 if case.startswith(("conv", "avgpool", "global")) else None
    _check(_model(nodes + [oh.make_node("Relu", ["r"], ["y"])], inputs, inits),
           [{"x": _rnd(*s, seed=k)} for k, s in enumerate(shapes)], rtol=rtol,
           same_schedule=not case.startswith("conv"))


@pytest.mark.parametrize("case, bad", [("pad-reflect", (2, 2)), ("conv", (1, 3, 5, 2)), ("maxpool", (1, 2, 1, 4))],
                         ids=["reflect-pad-too-wide", "conv-window-too-large", "pool-window-too-large"])
def test_inputs_too_small_for_a_window_or_a_pad_stop(case, bad):
    nodes, inputs, inits, _ = OTHERS[case]
    _stops(_vm(_model(nodes + [oh.make_node("Relu", ["r"], ["y"])], inputs, inits)), {"x": _rnd(*bad)})


def test_concatenated_dims_that_differ_at_run_time_stop():
    m = _model([oh.make_node("Concat", ["a", "b"], ["r"], axis=1), oh.make_node("Relu", ["r"], ["y"])],
               [("a", F, ["N", 2]), ("b", F, ["M", 3])])
    vm = _check(m, [{"a": _rnd(2, 2), "b": _rnd(2, 3, seed=1)}])
    _stops(vm, {"a": _rnd(2, 2), "b": _rnd(3, 3)})


def test_an_output_of_negative_length_is_refused_before_the_call():
    """A window longer than its axis by more than the stride, a transposed convolution of an empty axis: the
    shape functions give a negative length, refused (naming the buffer and the sizes) before anything runs."""
    m = _model([oh.make_node("MaxPool", ["x"], ["r"], kernel_shape=[5, 5]), oh.make_node("Relu", ["r"], ["y"])],
               [("x", F, ["N", 3, "H", "W"])])
    vm = _check(m, [{"x": _rnd(1, 3, 5, 6)}])
    with pytest.raises(PlaitError) as e:
        vm(x=_rnd(1, 3, 1, 8))
    assert str(e.value) == (
        "VM instruction 'call %1 = fused_nn_max_pool2d_nn_relu(%0)  # fused_nn_max_pool2d_nn_relu @c': PrimFunc "
        "'fused_nn_max_pool2d_nn_relu': buffer 'T_nn_relu' (N, 3, H + -5 + 1, W + -5 + 1) would have the shape "
        "(1, 3, -3, 4) for N = 1, H = 1, W = 8: the inputs' run-time shapes do not fit the operator")
