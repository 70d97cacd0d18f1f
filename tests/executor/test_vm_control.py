"""The VM executor runs control flow: Relay If and Loop (compiled from the lowered main, blocks allocated
at run time) against the reference interpreter, and ONNX models whose loop trip count or condition is
an input against ONNX Runtime."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import plait
from plait import relay
from plait.executor import VirtualMachine
from plait.frontend.onnx import from_onnx
from plait.relay.expr import Function, If, Loop, Tuple, TupleGetItem, call, const, var
from plait.relay.interpreter import run
from plait.relay.module import IRModule
from plait.testing.ort_reference import reference_session


@pytest.fixture(scope="module")
def cc_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def _build(mod, cc_cache):
    return VirtualMachine(plait.build(mod, target="c", executor="vm", config={"cc.cache_dir": cc_cache}))


def _if_module() -> IRModule:
    x, c = var("x", (2, 3)), var("c", (), "bool")
    t = call("add", call("exp", x), x)
    return IRModule({"main": Function((x, c), call("nn.relu", If(c, t, call("multiply", x, x))))})


def _loop_module(static_trip: bool = False, with_if: bool = False) -> IRModule:
    x, m = var("x", (2,)), var("m", (), "int64")
    i, c, s = var("i", (), "int64"), var("c", (), "bool"), var("s", (2,))
    nxt = call("add", s, x)
    if with_if:  # odd iterations add, even ones multiply by x
        odd = call("equal", call("mod", i, const(2, "int64")), const(1, "int64"))
        nxt = If(odd, nxt, call("multiply", s, x))
    body = Function((i, c, s), Tuple((c, nxt, call("multiply", s, s))))
    lp = Loop(const(3, "int64") if static_trip else m, None, (x,), body, 1)
    return IRModule({"main": Function((x, m), Tuple((TupleGetItem(lp, 0), TupleGetItem(lp, 1))))})


def test_if_runs_the_branch_taken(cc_cache):
    mod = _if_module()
    vm = _build(mod, cc_cache)
    text = vm.exe.text()
    assert text.endswith("""\
if %1 {  # if
  alloc_tensor_dyn %3: float32[2, 3]
  call %3 = fused_exp_add(%0)  # fused_exp_add @c
  yield %3
} else {
  alloc_tensor_dyn %4: float32[2, 3]
  call %4 = fused_multiply(%0)  # fused_multiply @c
  yield %4
} -> %2
call %5 = fused_nn_relu(%2)  # fused_nn_relu @c
ret %5
""")  # each branch fused on its own
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for c in (True, False):
        want = run(mod, {"x": x, "c": np.array(c)})
        np.testing.assert_allclose(vm(x, np.array(c))[0], want, rtol=1e-5)


@pytest.mark.parametrize("with_if", [False, True])
def test_loop_with_a_run_time_trip_count(cc_cache, with_if):
    mod = _loop_module(with_if=with_if)
    vm = _build(mod, cc_cache)
    assert "loop %2, %3 = trip %1 cond - init (%0) scan 1 body(%4, %5, %6) {" in vm.exe.text()
    assert vm.exe.registers[3] == {"shape": ["?", 2], "dtype": "float32", "dyn": True}
    x = np.array([0.5, -1.5], np.float32)
    for m in (0, 1, 5, 2):
        got = vm(x, np.array(m, np.int64))
        want = run(mod, {"x": x, "m": np.array(m, np.int64)})
        assert got[1].shape == (m, 2)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5)


def test_loop_with_a_constant_trip_count_is_planned(cc_cache):
    mod = _loop_module(static_trip=True)
    vm = _build(mod, cc_cache)
    text = vm.exe.text()
    assert "alloc_tensor %4 s4: float32[3, 2]" in text  # the scan output has a planned place
    x = np.array([0.5, -1.5], np.float32)
    got = vm(x, np.array(7, np.int64))
    for g, w in zip(got, run(mod, {"x": x, "m": np.array(7, np.int64)})):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_arena_grows_then_is_reused_between_runs(cc_cache):
    vm = _build(_loop_module(), cc_cache)
    x = np.ones(2, np.float32)
    first = vm(x, np.array(10000, np.int64))  # a scan output of 80000 bytes: more than the first chunk
    assert len(vm.arena.chunks) == 2
    vm(x, np.array(10000, np.int64))
    assert len(vm.arena.chunks) == 1  # merged by the reset
    where = vm.arena.chunks[0].ctypes.data
    again = vm(x, np.array(10000, np.int64))
    assert vm.arena.chunks[0].ctypes.data == where and len(vm.arena.chunks) == 1
    for g, w in zip(first, again):
        assert np.array_equal(g, w)


# ---- ONNX: a loop whose trip count (or condition) is an input, against ONNX Runtime ---------------


def onnx_loop_model(with_cond: bool = False):
    """``Loop(M, cond, s0)``: ``s = s * 0.5 + x`` per iteration, scan output ``s``; with ``with_cond`` the
    loop also stops once ``sum(s) > limit`` (an input)."""
    f = TensorProto.FLOAT
    body_nodes = [helper.make_node("Mul", ["s_in", "half"], ["h"]), helper.make_node("Add", ["h", "x"], ["s_out"]),
                  helper.make_node("Identity", ["s_out"], ["scan"])]
    if with_cond:
        body_nodes += [helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
                       helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", f, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", f, [2, 3]), helper.make_tensor_value_info("scan", f, [2, 3])],
        [helper.make_tensor("half", f, [], [0.5])])
    inputs = [helper.make_tensor_value_info("M", TensorProto.INT64, []),
              helper.make_tensor_value_info("x", f, [2, 3])]
    if with_cond:
        inputs.append(helper.make_tensor_value_info("limit", f, []))
    g = helper.make_graph(
        [helper.make_node("Constant", [], ["cond"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["M", "cond", "x"], ["s_final", "scans"], body=body)],
        "loop", inputs,
        [helper.make_tensor_value_info("s_final", f, [2, 3]), helper.make_tensor_value_info("scans", f, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("with_cond", [False, True])
def test_onnx_loop_with_an_input_trip_count_matches_onnx_runtime(cc_cache, with_cond):
    model = onnx_loop_model(with_cond)
    mod = from_onnx(model)
    assert any(isinstance(e, Loop) for e in relay.post_order(mod.main.body))  # not unrolled
    vm = _build(mod, cc_cache)
    sess = reference_session(model)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    for m in (0, 1, 4, 9):
        feeds = {"M": np.array(m, np.int64), "x": x}
        if with_cond:
            feeds["limit"] = np.array(6.0, np.float32)
        got, want = vm(**feeds), sess.run(None, feeds)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_model_with_control_flow_stays_on_the_host_piece_and_explain_says_why(cc_cache):
    from plait.errors import PlaitError
    from plait.pipeline.explain import explain

    target = "host: c; acc: c -mcpu=cortex-m7f"
    mod = _if_module()
    exe = plait.build(mod, target=target, executor="vm", config={"c.host_simulation": True, "cc.cache_dir": cc_cache})
    assert {i.attrs.get("piece") for i in _calls(exe.instructions)} == {"host"}
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    for c in (True, False):
        (got,) = VirtualMachine(exe)(x=x, c=np.array(c))
        np.testing.assert_allclose(got, run(mod, {"x": x, "c": np.array(c)}), rtol=1e-6)
    rep = explain(mod, target)
    assert {c.piece for c in rep.calls} == {"host"}
    assert all("the model's control flow (If): its calls stay on the host piece" in c.reason for c in rep.calls)
    with pytest.raises(PlaitError) as e:  # an explicit pin elsewhere cannot be honoured yet
        plait.build(_loop_module(), target=target, executor="vm", place="add=acc",
                    config={"c.host_simulation": True})
    assert str(e.value).startswith("placement across pieces: main has control flow (Loop), so its calls stay on the "
                                   "host piece 'host', but call ")
    assert str(e.value).endswith("is pinned to piece 'acc'; calls of a model with control flow are not split across "
                                 "pieces yet")


def _calls(code):
    for ins in code:
        if ins.op == "call":
            yield ins
        for b in ins.blocks:
            yield from _calls(b)


def test_the_graph_executor_points_control_flow_to_the_vm(cc_cache):
    from plait.errors import PlaitError

    with pytest.raises(PlaitError) as e:
        plait.build(_if_module(), target="c", config={"cc.cache_dir": cc_cache})
    assert str(e.value).endswith("graph executor: unsupported If in main (control flow: build with executor='vm', "
                                 "plait --executor vm)")
