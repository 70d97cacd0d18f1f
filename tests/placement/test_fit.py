"""Memory fit checks (plait.placement.fit): where weights and activations live, and the one message."""

import pytest

import plait
from plait.errors import PlaitError
from plait.memory.plan import piece_bytes
from plait.frontend.onnx import from_onnx
from plait.placement.fit import FitError, check_fit, fit_message, piece_memory
from plait.target import CompositeTarget, Target
from plait.testing import onnx_models


def test_where_the_weights_of_a_piece_live():
    m7 = piece_memory(Target("c -mcpu=cortex-m7f"))
    assert (m7.weights_in, m7.weights_bytes, m7.ram_bytes) == ("flash", 1024 * 1024, 320 * 1024)
    assert m7.weights_source.startswith("tag cortex-m7f: STM32F746NG datasheet")
    host = piece_memory(Target("c -ram-kb=1024"))  # a host has no flash: its weights are in RAM
    assert (host.weights_in, host.weights_bytes, host.ram_bytes) == ("RAM", 1024 * 1024, 1024 * 1024)
    assert piece_memory(Target("c -mcpu=cortex-m3")) == piece_memory(Target("onnxruntime"))  # nothing known
    assert piece_memory(Target("c -mcpu=cortex-m3")).ram_bytes is None
    unknown_flash = piece_memory(Target("c -mcpu=cortex-m3 -ram-kb=64"))  # its flash is not stated: unchecked
    assert (unknown_flash.weights_in, unknown_flash.weights_bytes, unknown_flash.ram_bytes) == ("flash", None, 65536)
    assert piece_memory(Target("c -flash-kb=0")).weights_bytes == 0  # a flash of 0 bytes holds nothing


def test_check_fit_names_every_piece_that_does_not_fit():
    ct = CompositeTarget("a: c -mcpu=cortex-m0; b: cortex-m7f -ram-kb=8; h: c -ram-kb=4")
    check_fit(ct, {"a": {"pool": "workspace_a", "activation": 16384, "param": 262144},
                   "h": {"pool": "workspace_h", "activation": 2048, "param": 2048}})  # exactly full fits
    with pytest.raises(FitError) as e:
        check_fit(ct, {"a": {"pool": "workspace_a", "activation": 16385, "param": 262145},
                       "b": {"pool": "workspace_b", "activation": 8192, "param": 0},
                       "h": {"pool": "workspace_h", "activation": 2048, "param": 2049}})
    assert str(e.value) == (
        "piece 'a' (c -mcpu=cortex-m0): the weights need 262,145 bytes of flash, more than its 262,144 bytes; "
        "piece 'a' (c -mcpu=cortex-m0): the activations and workspaces in pool 'workspace_a' need 16,385 bytes of "
        "RAM, more than its 16,384 bytes; "
        "piece 'h' (c -ram-kb=4): the weights plus the activations and workspaces in pool 'workspace_h' need 4,097 "
        "bytes of RAM, more than its 4,096 bytes")
    assert fit_message(ct.piece("b"), "the weights", "flash", 2, 1) == \
        "piece 'b' (cortex-m7f -ram-kb=8): the weights need 2 bytes of flash, more than its 1 bytes"


def test_a_host_without_flash_holds_weights_and_activations_in_ram():
    mod = from_onnx(onnx_models.mlp())  # 1,597,480 bytes of weights
    with pytest.raises(PlaitError) as e:  # the weights alone, before lowering
        plait.build(mod, "c -ram-kb=1024")
    assert str(e.value) == "piece 'c' (c -ram-kb=1024): the weights need 1,597,480 bytes of RAM, more than its " \
                           "1,048,576 bytes"
    art = plait.build(mod, "c -simd-bits=256 -clock-mhz=2445")
    use = piece_bytes(art.graph)["c"]
    assert use["param"] == 1597480 and use["activation"] == art.graph["memory"]["activation_bytes"]
    assert use["pool"] == "workspace_c"
    need = use["param"] + use["activation"]
    kb = need // 1024  # the weights fit, the weights and activations together do not
    with pytest.raises(FitError) as e:
        plait.build(mod, f"c -simd-bits=256 -clock-mhz=2445 -ram-kb={kb}")
    assert str(e.value) == (f"piece 'c' (c -simd-bits=256 -clock-mhz=2445 -ram-kb={kb}): the weights plus the "
                            f"activations and workspaces in pool 'workspace_c' need {need:,} bytes of RAM, more than "
                            f"its {kb * 1024:,} bytes")
    plait.build(mod, f"c -simd-bits=256 -clock-mhz=2445 -ram-kb={-(-need // 1024)}")  # rounded up: it fits


def test_piece_bytes_follow_the_memories_of_a_composite_plan():
    mod = from_onnx(onnx_models.resnet_block())
    roomy = "low_power_cpu: c -mcpu=cortex-m0 -ram-kb=1024; inference_cpu: c -mcpu=cortex-m7f -ram-kb=4096"
    art = plait.build(mod, roomy, config={"c.host_simulation": True, "c.cross_check": False})
    use = piece_bytes(art.graph)
    act = 64 * 56 * 56 * 4  # one activation of the block
    # the result copied back
    assert use["low_power_cpu"] == {"pool": "workspace_low_power_cpu", "activation": act, "param": 0}
    # the input copied in and two convolution results, live together at the residual add
    assert use["inference_cpu"]["activation"] == 3 * act
    assert use["inference_cpu"]["param"] == art.graph["memory"]["param_bytes"] == 295424
