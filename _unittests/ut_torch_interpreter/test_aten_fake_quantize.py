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
    "per_tensor": (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127),
                   set()),
    "per_tensor_uint8": (lambda x: torch.fake_quantize_per_tensor_affine(
        x, 0.05, 128, 0, 255), set()),
    "per_tensor_4bit": (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.05, 3, 0, 15),
                        {"Clip"}),
    "per_tensor_narrow": (lambda x: torch.fake_quantize_per_tensor_affine(
        x, 0.05, 0, -127, 127), {"Clip"}),
    "per_tensor_tensor_qparams": (lambda x: torch.fake_quantize_per_tensor_affine(
        x, torch.tensor(0.05), torch.tensor(3, dtype=torch.int32), 0, 255), set()),
    "per_channel": (lambda x: torch.fake_quantize_per_channel_affine(
        x, SCALES, ZPS, 1, -128, 127), set()),
    "per_channel_last_axis": (lambda x: torch.fake_quantize_per_channel_affine(
        x.transpose(1, 2), SCALES, ZPS, 2, -128, 127), set()),
    "cachemask_per_tensor": (lambda x: aten.fake_quantize_per_tensor_affine_cachemask(
        x, 0.05, 3, -128, 127), set()),
    "cachemask_per_channel": (lambda x: aten.fake_quantize_per_channel_affine_cachemask(
        x, SCALES, ZPS, 1, -20, 20), {"Clip"}),
    "cachemask_tensor_qparams": (
        lambda x: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
            x, torch.tensor([0.05]), torch.tensor([3], dtype=torch.int32),
            torch.tensor([1], dtype=torch.uint8), -128, 127), set()),
    # float zero points are rounded (2.6 -> 3) and clamped (-200 -> -128)
    "learnable_per_tensor": (lambda x: torch._fake_quantize_learnable_per_tensor_affine(
        x, torch.tensor([0.05]), torch.tensor([2.6]), -128, 127, 1.0), set()),
    "learnable_per_channel": (lambda x: torch._fake_quantize_learnable_per_channel_affine(
        x, SCALES, torch.tensor([2.6, -200.0, 0.4]), 1, -128, 127, 1.0), set()),
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
            x, torch.tensor([0.05]), torch.tensor([3], dtype=torch.int32), self.enabled,
            -128, 127)


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
            observer=fq.MovingAveragePerChannelMinMaxObserver, ch_axis=0, dtype=torch.qint8,
            quant_min=-128, quant_max=127, qscheme=torch.per_channel_symmetric)
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

    def forward(self, x):
        w = torch.fake_quantize_per_channel_affine(
            self.linear.weight, torch.full((6,), 0.01), torch.zeros(6, dtype=torch.int32),
            0, -127, 127)
        x = torch.fake_quantize_per_tensor_affine(x, 0.05, 128, 0, 255)
        return torch.nn.functional.linear(x, w, self.linear.bias)


def test_constant_weight_keeps_qdq(tmp_path):
    """The optimizer folds no QuantizeLinear / DequantizeLinear of a constant weight into
    a float initializer: onnxruntime still sees the QDQ form and fuses it."""
    import onnxruntime

    onx = check_export(_FakeQuantLinear(), [(torch.randn(3, 5, 4),), (torch.randn(2, 5, 4),)],
                       dynamic_shapes=DS, atol=1e-5, rtol=0)
    inits = {i.name for i in onx.graph.initializer}
    q_of_constant = [n for n in onx.graph.node
                     if n.op_type == "QuantizeLinear" and n.input[0] in inits]
    assert len(q_of_constant) == 1, [n.op_type for n in onx.graph.node]
    so = onnxruntime.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxruntime.InferenceSession(onx.SerializeToString(), so,
                                 providers=["CPUExecutionProvider"])
    fused = {n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node}
    assert fused & {"QLinearMatMul", "MatMulIntegerToFloat", "QGemm"}, fused
    np.testing.assert_equal(len(onx.graph.input), 1)
