"""Fake-quantize converters (QuantizeLinear + DequantizeLinear) against eager, on two
sizes with a dynamic batch.

torch multiplies by ``1 / scale`` where QuantizeLinear divides by ``scale``: an element
within one float rounding of a tie may round to the neighbouring level, the outputs then
differ by one step (``scale``). The inputs are random floats, such ties are rare: the
tests compare exactly (``atol=0``) and fall back to one step only where a case says so.
"""

import numpy as np
import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.errors import UnsupportedOpError

aten = torch.ops.aten
DS = ({0: "batch"},)
SCALES = torch.tensor([0.05, 0.1, 0.02])
ZPS = torch.tensor([3, -7, 0], dtype=torch.int32)


def _inputs():
    torch.manual_seed(0)
    return [(torch.randn(shape) * 3,) for shape in [(2, 3, 4), (5, 3, 4)]]


CASES = {  # name -> (function, node types expected besides Q/DQ)
    "per_tensor": (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127), set()),
    "per_tensor_uint8": (
        lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 128, 0, 255),
        set(),
    ),
    "per_tensor_4bit": (
        lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 3, 0, 15),
        {"Clip"},
    ),
    "per_tensor_narrow": (
        lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -127, 127),
        {"Clip"},
    ),
    "per_tensor_tensor_qparams": (
        lambda x: torch.fake_quantize_per_tensor_affine(
            x, torch.tensor(0.05), torch.tensor(3, dtype=torch.int32), 0, 255
        ),
        set(),
    ),
    "per_channel": (
        lambda x: torch.fake_quantize_per_channel_affine(x, SCALES, ZPS, 1, -128, 127),
        set(),
    ),
    "per_channel_last_axis": (
        lambda x: torch.fake_quantize_per_channel_affine(
            x.transpose(1, 2), SCALES, ZPS, 2, -128, 127
        ),
        set(),
    ),
    "cachemask_per_tensor": (
        lambda x: aten.fake_quantize_per_tensor_affine_cachemask(x, 0.05, 3, -128, 127),
        set(),
    ),
    "cachemask_per_channel": (
        lambda x: aten.fake_quantize_per_channel_affine_cachemask(x, SCALES, ZPS, 1, -20, 20),
        {"Clip"},
    ),
    "cachemask_tensor_qparams": (
        lambda x: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
            x,
            torch.tensor([0.05]),
            torch.tensor([3], dtype=torch.int32),
            torch.tensor([1], dtype=torch.uint8),
            -128,
            127,
        ),
        set(),
    ),
    # float zero points are rounded (2.6 -> 3) and clamped (-200 -> -128)
    "learnable_per_tensor": (
        lambda x: torch._fake_quantize_learnable_per_tensor_affine(
            x, torch.tensor([0.05]), torch.tensor([2.6]), -128, 127, 1.0
        ),
        set(),
    ),
    "learnable_per_channel": (
        lambda x: torch._fake_quantize_learnable_per_channel_affine(
            x, SCALES, torch.tensor([2.6, -200.0, 0.4]), 1, -128, 127, 1.0
        ),
        set(),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fake_quantize(case):
    fn, extra = CASES[case]
    onx = check_export(OpModule(fn), _inputs(), dynamic_shapes=DS, atol=0, rtol=0)
    types = {n.op_type for n in onx.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} | extra <= types, types


def test_fake_quantize_float16_input():
    def fn(x):
        return torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127)

    inputs = [(x.half(),) for (x,) in _inputs()]
    onx = check_export(OpModule(fn), inputs, dynamic_shapes=DS, atol=0, rtol=0)
    assert onx.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


class _Switch(torch.nn.Module):
    """A fake quantizer whose switch is a buffer, as torchao's modules hold it."""

    def __init__(self, enabled):
        super().__init__()
        self.register_buffer("enabled", torch.tensor([int(enabled)], dtype=torch.uint8))

    def forward(self, x):
        return aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
            x, torch.tensor([0.05]), torch.tensor([3], dtype=torch.int32), self.enabled, -128, 127
        )


@pytest.mark.parametrize("enabled", [True, False])
def test_cachemask_switch_buffer(enabled):
    onx = check_export(_Switch(enabled), _inputs(), dynamic_shapes=DS, atol=0, rtol=0)
    assert ("QuantizeLinear" in {n.op_type for n in onx.graph.node}) == enabled


def _fused_fake_quant(per_channel, observer):
    """torchao's QAT fake quantizer (observer + fake quantization in one operator),
    trained on two batches, its observer then switched as asked."""
    fq = pytest.importorskip("torchao.quantization.pt2e.fake_quantize")
    if per_channel:
        module = fq.FusedMovingAvgObsFakeQuantize(
            observer=fq.MovingAveragePerChannelMinMaxObserver,
            ch_axis=0,
            dtype=torch.qint8,
            quant_min=-128,
            quant_max=127,
            qscheme=torch.per_channel_symmetric,
        )
    else:
        module = fq.FusedMovingAvgObsFakeQuantize(quant_min=0, quant_max=255)
    for (x,) in _inputs():
        module(x.transpose(0, 1))
    module.enable_observer(observer)
    return module.eval()


@pytest.mark.parametrize("per_channel", [False, True])
def test_fused_observer_off(per_channel):
    """Observer off (a trained QAT model): plain QDQ, no statistics in the graph."""
    module = _fused_fake_quant(per_channel, observer=False)
    # the channels first: torch's per-channel fused operator only takes axis 0
    inputs = [(x.transpose(0, 1) * 1.5,) for (x,) in _inputs()]
    onx = check_export(module, inputs, dynamic_shapes=({1: "batch"},), atol=0, rtol=0)
    types = [n.op_type for n in onx.graph.node]
    assert types == ["QuantizeLinear", "DequantizeLinear"], types


def test_fused_observer_on_is_typed():
    module = _fused_fake_quant(False, observer=True)
    with pytest.raises(UnsupportedOpError, match="disable the observers"):
        to_onnx(module, (_inputs()[0][0].transpose(0, 1),), dynamic_shapes=({1: "batch"},))


def test_range_wider_than_16_bits_is_typed():
    def fn(x):
        return torch.fake_quantize_per_tensor_affine(x, 0.05, 0, 0, 2**17)

    with pytest.raises(UnsupportedOpError, match="does not fit in 16 bits"):
        to_onnx(OpModule(fn), _inputs()[0], dynamic_shapes=DS)


class _FakeQuantLinear(torch.nn.Module):
    """A linear layer whose weight (a constant) and input are fake quantized."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.linear = torch.nn.Linear(4, 6)
        self.register_buffer("scale", self.linear.weight.detach().abs().amax(dim=1) / 127)
        self.register_buffer("zero_point", torch.zeros(6, dtype=torch.int32))

    def forward(self, x):
        # symmetric: the largest element of each row sits on level 127 exactly
        w = torch.fake_quantize_per_channel_affine(
            self.linear.weight, self.scale, self.zero_point, 0, -127, 127
        )
        x = torch.fake_quantize_per_tensor_affine(x, 0.05, 128, 0, 255)
        return torch.nn.functional.linear(x, w, self.linear.bias)


def test_constant_weight_keeps_qdq(tmp_path):
    """A fake-quantized weight becomes int8 levels (rounded as torch does, exact) behind
    a DequantizeLinear the optimizer does not fold into a float initializer: onnxruntime
    still sees the QDQ form and fuses it."""
    import onnxruntime

    onx = check_export(
        _FakeQuantLinear(),
        [(torch.randn(3, 5, 4),), (torch.randn(2, 5, 4),)],
        dynamic_shapes=DS,
        atol=1e-6,
        rtol=0,
    )
    int8 = {i.name for i in onx.graph.initializer if i.data_type == onnx.TensorProto.INT8}
    dq_of_weight = [
        n for n in onx.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in int8
    ]
    assert len(dq_of_weight) == 1, [n.op_type for n in onx.graph.node]
    assert [n.op_type for n in onx.graph.node].count("QuantizeLinear") == 1
    so = onnxruntime.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxruntime.InferenceSession(onx.SerializeToString(), so, providers=["CPUExecutionProvider"])
    fused = {n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node}
    assert fused & {"QLinearMatMul", "MatMulIntegerToFloat", "QGemm"}, fused
    np.testing.assert_equal(len(onx.graph.input), 1)


class _FakeQuantModules(torch.nn.Module):
    """torch.ao's FakeQuantize modules around a linear layer (per tensor, per channel)."""

    def __init__(self):
        super().__init__()
        from torch.ao.quantization import default_fake_quant, default_per_channel_weight_fake_quant

        torch.manual_seed(2)
        self.act = default_fake_quant()
        self.weight = default_per_channel_weight_fake_quant()
        self.linear = torch.nn.Linear(4, 6)

    def forward(self, x):
        return torch.nn.functional.linear(
            self.act(x), self.weight(self.linear.weight), self.linear.bias
        )


@pytest.mark.parametrize("fake_quant", [True, False])
def test_fake_quantize_modules(fake_quant):
    """torch.export cannot branch on the switch buffers: to_onnx reads them first."""
    from torch.ao.quantization import disable_fake_quant, disable_observer

    model = _FakeQuantModules()
    for (x,) in _inputs():
        model(x.reshape(-1, 4))
    model.apply(disable_observer)
    if not fake_quant:
        model.apply(disable_fake_quant)
    model.eval()
    onx = check_export(
        model, [(torch.randn(3, 4),), (torch.randn(5, 4),)], dynamic_shapes=DS, atol=1e-6, rtol=0
    )
    assert ("DequantizeLinear" in {n.op_type for n in onx.graph.node}) == fake_quant
    assert "forward" not in vars(model.act)  # the module is restored


def test_fake_quantize_module_observing_is_typed():
    model = _FakeQuantModules().eval()
    with pytest.raises(UnsupportedOpError, match="disable_observer"):
        to_onnx(model, (torch.randn(3, 4),), dynamic_shapes=DS)
    assert "forward" not in vars(model.act)
