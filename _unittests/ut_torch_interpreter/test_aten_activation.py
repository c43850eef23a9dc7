"""Activation, softmax and dropout converters against onnxruntime and eager torch."""

import pytest
import torch
import torch.nn.functional as F

from experimental_experiment.ext_test_case import OpModule, check_export, run_onnx
from experimental_experiment.torch_interpreter import to_onnx

DS = ({0: "batch", 1: "n"},)
SHAPES = [(2, 3), (5, 4)]


def _inputs(dtype=torch.float32, scale=3.0):
    return [((torch.randn(shape) * scale).to(dtype),) for shape in SHAPES]


def _tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype != torch.float32 else {}


ACTIVATIONS = {
    "relu": F.relu,
    "relu_": lambda x: torch.relu_(x * 1),
    "relu6": F.relu6,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": lambda x: F.elu(x, 0.5),
    "elu_scaled": lambda x: torch.ops.aten.elu(x, 0.5, 2.0, 0.5),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 1.5),
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 2.0),
    "hardtanh_": lambda x: F.hardtanh(x * 1, inplace=True),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "mish": F.mish,
    "threshold": lambda x: F.threshold(x, 0.1, 20.0),
    "hardshrink": F.hardshrink,
    "softshrink": F.softshrink,
    "logsigmoid": F.logsigmoid,
    "glu": lambda x: F.glu(torch.cat([x, x * 2], dim=1)),
    "softmax": lambda x: F.softmax(x, -1),
    "softmax0": lambda x: F.softmax(x, 0),
    "log_softmax": lambda x: F.log_softmax(x, 1),
    "softmax_dtype": lambda x: F.softmax(x, -1, dtype=torch.float64),
    "log_softmax_dtype": lambda x: F.log_softmax(x, 0, dtype=torch.float64),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_activation(name, dtype):
    check_export(OpModule(ACTIVATIONS[name]), _inputs(dtype), dynamic_shapes=DS, **_tol(dtype))


@pytest.mark.parametrize("name", ["gelu", "silu", "softmax", "hardswish", "mish"])
def test_activation_bfloat16(name):
    check_export(
        OpModule(ACTIVATIONS[name]),
        _inputs(torch.bfloat16),
        dynamic_shapes=DS,
        atol=5e-2,
        rtol=5e-2,
        use_reference=True,
    )


@pytest.mark.parametrize("name", ["softplus", "mish", "hardsigmoid", "hardswish", "celu"])
def test_activation_float64(name):
    check_export(OpModule(ACTIVATIONS[name]), _inputs(torch.float64), dynamic_shapes=DS)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate):
    fn = OpModule(lambda x: F.gelu(x, approximate=approximate))
    onx = check_export(fn, _inputs(), dynamic_shapes=DS, target_opset=20)
    assert "Gelu" in [n.op_type for n in onx.graph.node]


def test_softplus_large_values():
    x = torch.tensor([[-100.0, -30.0, 0.0, 10.0, 30.0, 100.0]])
    fn = OpModule(lambda x: F.softplus(x) + F.mish(x) + F.softplus(x, beta=0.5, threshold=40))
    check_export(fn, [(x,), (x[:, :3],)], dynamic_shapes=({1: "n"},))


def test_relu_int64():
    sets = [(torch.randint(-5, 5, s),) for s in SHAPES]
    check_export(OpModule(lambda x: F.relu(x) + F.threshold(x, 1, 7)), sets, dynamic_shapes=DS)


def test_softmax_3d():
    sets = [(torch.randn(2, 3, 4),), (torch.randn(3, 2, 5),)]
    ds = ({0: "a", 1: "b", 2: "c"},)
    fn = OpModule(lambda x: F.softmax(x, 1) + F.log_softmax(x, -1))
    check_export(fn, sets, dynamic_shapes=ds)


def test_softmax_half_to_float():
    # _softmax(half_to_float=True) is CUDA only in torch, check the converter on graph
    fn = OpModule(
        lambda x: torch.ops.aten._softmax(x, -1, False) + torch.ops.aten._log_softmax(x, 0, False)
    )
    check_export(fn, _inputs(), dynamic_shapes=DS)


def test_prelu():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.PReLU(4))
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([0.1, -0.5, 0.3, 2.0]))
    sets = [(torch.randn(2, 3, 5, 5),), (torch.randn(1, 3, 4, 6),)]
    check_export(model, sets, dynamic_shapes=({0: "b", 2: "h", 3: "w"},))


def test_prelu_single_weight():
    sets = _inputs()
    check_export(torch.nn.PReLU(), sets, dynamic_shapes=DS)


def test_prelu_zero_dim_keeps_rank():
    """A 0-d input gives a 0-d output (a [1] output broadcast from the weight before)."""
    model = torch.nn.PReLU(init=0.2)
    onx = to_onnx(model, (torch.tensor(-1.5),))
    for value in (-1.5, 2.0):
        x = torch.tensor(value)
        (got,) = run_onnx(onx, (x,))
        expected = model(x).detach()
        assert tuple(got.shape) == () == tuple(expected.shape)
        assert abs(float(got) - float(expected)) < 1e-6


@pytest.mark.parametrize("kind", ["dropout", "feature", "alpha"])
def test_dropout_eval(kind):
    mods = {
        "dropout": torch.nn.Dropout(0.3),
        "feature": torch.nn.Dropout2d(0.3),
        "alpha": torch.nn.AlphaDropout(0.3),
    }
    model = torch.nn.Sequential(mods[kind], torch.nn.ReLU()).eval()
    sets = [(torch.randn(2, 3, 4, 4),), (torch.randn(3, 2, 5, 5),)]
    onx = check_export(model, sets, dynamic_shapes=({0: "b", 1: "c", 2: "h", 3: "w"},))
    assert "Dropout" not in [n.op_type for n in onx.graph.node]


def test_native_dropout_eval():
    fn = OpModule(lambda x: torch.ops.aten.native_dropout(x, 0.5, False))
    check_export(fn, _inputs(), dynamic_shapes=DS)


def test_native_dropout_train_mask_consistent():
    fn = OpModule(lambda x: torch.ops.aten.native_dropout(x, 0.5, True))
    onx = to_onnx(fn, _inputs()[0], dynamic_shapes=DS)
    x = torch.rand(50, 40) + 1
    out, mask = run_onnx(onx, [x])
    assert mask.dtype == bool and 0.3 < mask.mean() < 0.7
    expected = torch.where(torch.from_numpy(mask), x * 2, 0).numpy()
    torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(expected))


def test_feature_dropout_train_refused():
    fn = OpModule(lambda x: torch.ops.aten.feature_dropout(x, 0.5, True))
    with pytest.raises(Exception, match="training mode"):
        to_onnx(fn, (torch.randn(2, 3, 4),))


def test_softmax_scalar():
    fn = OpModule(lambda x: F.softmax(x.sum(), 0) + F.log_softmax(x.sum(), -1))
    check_export(fn, _inputs(), dynamic_shapes=DS)
