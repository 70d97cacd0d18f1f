import numpy as np
import pytest

from plait.errors import AttrError, PlaitError, RegistryError
from plait.ir import Attrs, AttrSpec, TensorType, TupleType
from plait.op import get_op
from plait.ir.op import REQUIRED
from plait.registry import Registry


def test_registry_duplicate_and_did_you_mean():
    r: Registry[int] = Registry("thing")
    r.register("conv2d", 1)
    r.register("dense", 2)
    with pytest.raises(RegistryError) as e:
        r.register("dense", 3)
    assert str(e.value) == "thing 'dense' is already registered"
    with pytest.raises(RegistryError) as e:
        r.get("conv2x")
    assert str(e.value) == "unknown thing 'conv2x'; did you mean 'conv2d'?"
    with pytest.raises(RegistryError) as e:
        r.get("zzz")
    assert str(e.value) == "unknown thing 'zzz'"
    assert list(r) == ["conv2d", "dense"]


def test_unknown_operator_message():
    with pytest.raises(PlaitError) as e:
        get_op("nn.reluu")
    # the closest match comes first
    assert str(e.value).startswith("unknown operator 'nn.reluu'; did you mean 'nn.relu'")


def test_attrs_normalize_and_compare():
    a = Attrs({"strides": [1, np.int64(2)], "alpha": np.float32(0.5), "flag": np.bool_(True)})
    assert a["strides"] == (1, 2) and isinstance(a["strides"][1], int)
    assert a == Attrs(strides=(1, 2), alpha=0.5, flag=True)
    assert hash(a) == hash(Attrs(flag=True, alpha=0.5, strides=(1, 2)))
    assert list(a) == ["alpha", "flag", "strides"]
    assert a.with_(alpha=1.0)["alpha"] == 1.0 and a["alpha"] == 0.5
    with pytest.raises(AttrError):
        Attrs(x=object())


def test_attr_spec_checks():
    s = AttrSpec("strides", "ints", (1, 1))
    assert s.check("nn.conv2d", [2, 2]) == (2, 2)
    with pytest.raises(AttrError) as e:
        s.check("nn.conv2d", 2.5)
    assert str(e.value) == "operator 'nn.conv2d', attribute 'strides': expected ints, got 2.5"
    d = AttrSpec("dtype", "dtype", REQUIRED)
    with pytest.raises(AttrError) as e:
        d.check("cast", "bfloat16")
    assert str(e.value).startswith("operator 'cast', attribute 'dtype': unsupported dtype 'bfloat16'")
    c = AttrSpec("mode", "str", "a", choices=("a", "b"))
    with pytest.raises(AttrError) as e:
        c.check("op", "z")
    assert str(e.value) == "operator 'op', attribute 'mode': expected one of a, b, got 'z'"
    assert AttrSpec("alpha", "float", 1.0).check("op", 2) == 2.0


def test_op_make_attrs_unknown_and_missing():
    op = get_op("add")
    with pytest.raises(AttrError) as e:
        op.make_attrs({"axis": 1})
    assert str(e.value) == "operator 'add': unknown attribute 'axis' (valid: none)"


def test_tensor_type_dims_and_str():
    t = TensorType(("n", 3, np.int64(4)), "float32")
    assert t.shape == ("n", 3, 4) and not t.is_static
    assert str(t) == "Tensor[(n, 3, 4), float32]"
    assert str(TensorType((5,), "int64")) == "Tensor[(5,), int64]"
    assert TensorType((2, 3)) == TensorType([2, 3], "float32")
    assert TensorType((2, 3)).nbytes == 24
    assert str(TupleType([TensorType(()), TensorType((1,), "bool")])) == "(Tensor[(), float32], Tensor[(1,), bool])"
    with pytest.raises(PlaitError) as e:
        TensorType((-1,))
    assert str(e.value) == "invalid dimension -1: dimensions are >= 0 (use a name for unknown sizes)"
    with pytest.raises(PlaitError) as e:
        TensorType((2,), "bfloat16")
    assert str(e.value).startswith("unsupported dtype 'bfloat16'")
    with pytest.raises(PlaitError) as e:
        TensorType(("a b",))
    assert str(e.value) == "invalid dimension 'a b': expected an int >= 0 or an identifier"
