"""--input-shapes (fix a model's symbolic dims) and --opt-level (the pass pipeline's) on run, compile, explain;
the symbolic-dimension error of the CLI and of plait.build; shape_overrides checked against the model."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plait
from plait.lowering.lower import LowerError
from plait.cli import main
from plait.cli.common import UsageError
from plait.cli.shapes import parse_input_shapes
from plait.frontend.shape_overrides import ShapeOverrideError

from .conftest import save, small_model

COMPOSITE = "a: c; b: c -mcpu=cortex-m7f"


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def dyn_path(tmp_path_factory):
    """Input 'x' float32[N, 3, 8, 8] -> Conv(4, 3x3) -> Relu -> Flatten -> Gemm(5): output 'y' [N, 5]."""
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4),
             "g": rng.standard_normal((5, 4 * 6 * 6)), "gb": rng.standard_normal(5)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "g", "gb"], ["y"], name="fc", transB=1)]
    m = _model(nodes, [("x", ["N", 3, 8, 8])], [("y", ["N", 5])],
               {k: v.astype(np.float32) for k, v in inits.items()})
    return save(m, tmp_path_factory.mktemp("m") / "dyn.onnx")


@pytest.fixture(scope="module")
def bn_path(tmp_path_factory):
    """Conv -> BatchNormalization -> Relu on float32[1, 3, 8, 8]: fold_batch_norm (opt level 1) folds the norm."""
    rng = np.random.default_rng(1)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)), "s": rng.random(4) + 0.5, "bb": rng.standard_normal(4),
             "m": rng.standard_normal(4), "v": rng.random(4) + 0.5}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    m = _model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 4, 6, 6])], {k: v.astype(np.float32) for k, v in inits.items()})
    return save(m, tmp_path_factory.mktemp("m") / "bn.onnx")


def _ort(path, feeds):
    from plait.testing.ort_reference import reference_run

    return reference_run(str(path), feeds)


def _err(capsys) -> str:
    return capsys.readouterr().err


# ---- running a dynamic-batch model ------------------------------------------------------------------


@pytest.mark.parametrize("target,shapes", [(None, "x:2,3,8,8"), ("c", "x:[2, 3, 8, 8]")])
def test_dynamic_batch_runs_with_input_shapes_and_matches_onnxruntime(dyn_path, tmp_path, capsys, target, shapes):
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = str(tmp_path / "out.npz")
    argv = ["run", dyn_path, "--input-shapes", shapes, "--inputs", str(tmp_path / "in.npz"), "--output", out]
    assert main(argv + (["--target", target] if target else [])) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {out}: y\n"
    y = np.load(out)["y"]
    assert y.shape == (2, 5)
    np.testing.assert_allclose(y, _ort(dyn_path, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_compile_and_explain_take_input_shapes(dyn_path, tmp_path, capsys):
    out = tmp_path / "art"
    assert main(["compile", dyn_path, "--input-shapes", "x:1,3,8,8", "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {out}: graph.json, lib.so, manifest.json, params.npz"
    graph = json.loads((out / "graph.json").read_text())
    assert graph["entries"][graph["inputs"][0]]["shape"] == [1, 3, 8, 8]
    assert main(["explain", dyn_path, "--target", COMPOSITE, "--input-shapes", "x:[4,3,8,8]", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["params"] == {"x": "Tensor[(4, 3, 8, 8), float32]"}
    assert report["calls"][0]["out_bytes"] == 4 * 4 * 6 * 6 * 4


# ---- the symbolic-dimension error ----------------------------------------------------------------------

NEEDS_SHAPES = ("input 'x' has a symbolic dimension 'N' (dim 0); the graph executor needs static shapes: give them "
                'with --input-shapes "x:1,3,8,8", or use --executor vm')


@pytest.mark.parametrize("argv", [["run", "--target", "c"], ["compile", "-o", "OUT"]])
def test_symbolic_dimension_error_names_the_input_and_suggests_the_flag(dyn_path, tmp_path, capsys, argv):
    argv = [a.replace("OUT", str(tmp_path / "o")) for a in argv]
    assert main([argv[0], dyn_path, *argv[1:]]) == 1
    assert _err(capsys) == f"plait: error: {NEEDS_SHAPES}\n"


def test_random_inputs_of_a_symbolic_input_suggest_inputs_or_the_flag(dyn_path, capsys):
    assert main(["run", dyn_path]) == 1
    assert _err(capsys) == ("plait: error: input 'x' has a symbolic dimension 'N' (dim 0); random inputs need "
                            'static shapes: give the input in --inputs, or the shape with --input-shapes '
                            '"x:1,3,8,8"\n')


def test_the_suggestion_covers_every_symbolic_input_and_unknown_dims(tmp_path, capsys):
    m = small_model([helper.make_node("Add", ["a", "b"], ["y"])], [("a", ["N", 4]), ("b", [None, 4])], [("y", None)])
    path = save(m, tmp_path / "two.onnx")
    assert main(["compile", path, "-o", str(tmp_path / "o")]) == 1
    assert _err(capsys) == ("plait: error: input 'a' has a symbolic dimension 'N' (dim 0); the graph executor needs "
                            'static shapes: give them with --input-shapes "a:1,4 b:1,4", or use --executor vm\n')
    assert main(["compile", path, "--input-shapes", "a:3,4", "-o", str(tmp_path / "o")]) == 1
    assert _err(capsys) == ("plait: error: input 'b' has an unknown dimension (dim 0); the graph executor needs "
                            'static shapes: give them with --input-shapes "b:1,4", or use --executor vm\n')
    assert main(["run", path, "--input-shapes", "a:3,4 b:3,4", "--target", "c"]) == 0


def test_plait_build_names_the_input_and_suggests_shape_overrides(dyn_path):
    with pytest.raises(LowerError) as e:
        plait.build(plait.load_onnx(dyn_path))
    assert str(e.value) == ("input 'x' has a symbolic dimension 'N' (dim 0); the graph executor needs static shapes: "
                            "import the model with shape_overrides={'x': (1, 3, 8, 8)} (plait.load_onnx or "
                            "plait.from_onnx), or build with executor='vm'")
    with pytest.raises(LowerError) as e:
        plait.build(plait.load_onnx(dyn_path), executor="aot")
    assert str(e.value).startswith("input 'x' has a symbolic dimension 'N' (dim 0); the aot executor needs static "
                                   "shapes: import the model with shape_overrides=")
    art = plait.build(plait.load_onnx(dyn_path, shape_overrides={"x": (1, 3, 8, 8)}))
    assert art.lib is not None


# ---- the flag's grammar ----------------------------------------------------------------------------------


def test_grammar_accepts_plain_and_bracketed_dims_spaces_and_repeats():
    want = {"x": (1, 3, 224, 224), "y": (1, 10)}
    for values in (["x:1,3,224,224 y:1,10"], ["x:[1,3,224,224] y:[1,10]"], ["x:[1, 3, 224, 224]  y:1, 10"],
                   ["x:1,3,224,224", "y:[1,10]"], ["  x:1,3,224,224\ty:1,10  "]):
        assert parse_input_shapes(values) == want, values
    assert parse_input_shapes(["input:0:1,3 s:[]"]) == {"input:0": (1, 3), "s": ()}  # the last ':' splits
    assert parse_input_shapes(None) == {}


@pytest.mark.parametrize("value,message", [
    ("x", "'x' is not NAME:DIMS, e.g. \"x:1,3,224,224 y:1,10\""),
    (":1,2", "':1,2' has no input name before ':'"),
    ("x:1,a", "input 'x': '1,a' is not a list of integers separated by commas, e.g. 1,3,224,224 or [1,3,224,224]"),
    ("x:", "input 'x': '' is not a list of integers separated by commas, e.g. 1,3,224,224 or [1,3,224,224]"),
    ("x:[1,3,8,8", "input 'x': '[1,3,8,8' is not a list of integers separated by commas, e.g. 1,3,224,224 or "
                   "[1,3,224,224]"),
    ("x:1,,8", "input 'x': '1,,8' is not a list of integers separated by commas, e.g. 1,3,224,224 or [1,3,224,224]"),
    ("x:0,3,8,8", "input 'x' dim 0 is 0; dims must be positive"),
    ("x:1,-3,8,8", "input 'x' dim 1 is -3; dims must be positive"),
    ("", "no shapes given; expected NAME:DIMS ..., e.g. \"x:1,3,224,224 y:1,10\""),
    ("x:1,3,8,8 x:2,3,8,8", "input 'x' is given twice"),
])
def test_malformed_input_shapes_are_usage_errors(dyn_path, capsys, value, message):
    with pytest.raises(UsageError) as e:
        parse_input_shapes([value])
    assert str(e.value) == f"--input-shapes: {message}"
    for cmd in (["run"], ["compile", "-o", "unused"], ["explain", "--target", COMPOSITE]):
        assert main([cmd[0], dyn_path, *cmd[1:], "--input-shapes", value]) == 2
        assert _err(capsys) == f"plait: error: --input-shapes: {message}\n"


@pytest.mark.parametrize("value,message", [
    ("z:1,3,8,8", "unknown input 'z' (inputs are: x)"),
    ("x:1,3,8", "input 'x' has 4 dims (N, 3, 8, 8); got 3 (1, 3, 8)"),
    ("x:[]", "input 'x' has 4 dims (N, 3, 8, 8); got 0 ()"),
    ("x:1,4,8,8", "input 'x' dim 1 is 3 in the model, not 4 (the model declares (N, 3, 8, 8); only its symbolic "
                  "dims can be set)"),
])
def test_shapes_that_do_not_fit_the_model_are_errors(dyn_path, tmp_path, capsys, value, message):
    for cmd in (["run"], ["compile", "-o", str(tmp_path / "o")], ["explain", "--target", COMPOSITE]):
        assert main([cmd[0], dyn_path, *cmd[1:], "--input-shapes", value]) == 1
        assert _err(capsys) == f"plait: error: --input-shapes: {message}\n"
    with pytest.raises(ShapeOverrideError) as e:  # the API says the same with its own prefix
        plait.load_onnx(dyn_path, shape_overrides=parse_input_shapes([value]))
    assert str(e.value) == f"shape_overrides: {message}"


def test_api_shape_overrides_reject_bad_dims(dyn_path):
    for shape, message in [("1383", "input 'x': expected a sequence of dims, got '1383'"),
                           ((1, 3, 8, -8), "input 'x' dim 3: expected a non-negative int or a name, got -8"),
                           ((1, 3, 8, 8.0), "input 'x' dim 3: expected a non-negative int or a name, got 8.0")]:
        with pytest.raises(ShapeOverrideError) as e:
            plait.load_onnx(dyn_path, shape_overrides={"x": shape})
        assert str(e.value) == f"shape_overrides: {message}"
    assert plait.load_onnx(dyn_path, shape_overrides={"x": ("B", 3, 8, 8)}).main.params[0].type_annotation.shape == \
        ("B", 3, 8, 8)


def test_relay_files_do_not_take_input_shapes(tmp_path, capsys):
    path = tmp_path / "sym.relay"
    path.write_text("def @main(%x: Tensor[(n, 4), float32]) {\n  nn.relu(%x)\n}\n")
    assert main(["run", str(path), "--input-shapes", "x:2,4"]) == 2
    assert _err(capsys) == (f"plait: error: --input-shapes: not supported for a Relay text file ('{path}'): write the "
                            "shapes in the types of its @main parameters\n")
    assert main(["compile", str(path), "-o", str(tmp_path / "o")]) == 1
    assert _err(capsys) == ("plait: error: input 'x' has a symbolic dimension 'n' (dim 0); the graph executor needs "
                            f"static shapes: write them in the types of the @main parameters of '{path}', or use "
                            "--executor vm\n")
    assert main(["run", str(path)]) == 1
    assert _err(capsys) == ("plait: error: input 'x' has a symbolic dimension 'n' (dim 0); random inputs need static "
                            "shapes: give the input in --inputs, or write the shape in the types of the @main "
                            f"parameters of '{path}'\n")


# ---- --opt-level -------------------------------------------------------------------------------------------


def _functions(out) -> list[str]:
    graph = json.loads((out / "graph.json").read_text())
    return [n["name"] for n in graph["nodes"] if n["name"].startswith("fused_")]


def test_opt_level_reaches_the_pass_pipeline(bn_path, tmp_path, capsys):
    """fold_batch_norm has opt level 1: at 0 the batch norm stays a call of its own (fused with the conv)."""
    for level, want in (("0", ["fused_nn_conv2d_nn_batch_norm_nn_relu"]), ("1", ["fused_nn_conv2d_add_nn_relu"]),
                        (None, ["fused_nn_conv2d_add_nn_relu"])):
        out = tmp_path / f"o{level}"
        assert main(["compile", bn_path, "-o", str(out), *(["--opt-level", level] if level else [])]) == 0
        assert _functions(out) == want, level
    capsys.readouterr()
    for level, op in (("0", "nn.batch_norm"), ("3", "add")):
        assert main(["explain", bn_path, "--target", COMPOSITE, "--opt-level", level, "--json"]) == 0
        assert [c["op"] for c in json.loads(capsys.readouterr().out)["calls"]] == ["nn.conv2d", op, "nn.relu"]


def test_run_at_opt_level_0_matches_onnxruntime(bn_path, tmp_path, capsys):
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = str(tmp_path / "y.npz")
    assert main(["run", bn_path, "--target", "c", "--opt-level", "0", "--inputs", str(tmp_path / "x.npy"),
                 "--output", out]) == 0
    np.testing.assert_allclose(np.load(out)["y"], _ort(bn_path, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["4", "-1", "two", "", "2.0"])
def test_bad_opt_level_is_a_usage_error(bn_path, tmp_path, capsys, value):
    for cmd in (["run", "--target", "c"], ["compile", "-o", str(tmp_path / "o")], ["explain", "--target", COMPOSITE]):
        assert main([cmd[0], bn_path, *cmd[1:], f"--opt-level={value}"]) == 2
        assert _err(capsys) == f"plait: error: --opt-level: expected 0, 1, 2 or 3, got '{value}'\n"


def test_opt_level_needs_a_target_on_run(bn_path, capsys):
    assert main(["run", bn_path, "--opt-level", "1"]) == 2
    assert _err(capsys) == "plait: error: --opt-level needs --target: the reference interpreter runs no passes\n"
