"""quantized_decomposed converters (QuantizeLinear / DequantizeLinear) against eager."""

import onnx
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the operators)

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.errors import UnsupportedOpError

qd = torch.ops.quantized_decomposed
DS = ({0: "batch"},)
SHAPES = [(2, 3, 4), (5, 3, 4)]


def _inputs():
    torch.manual_seed(0)
    return [((torch.randn(shape) * 3).round() / 4,) for shape in SHAPES]  # ties included


SCALES = torch.tensor([0.05, 0.1, 0.02])
ZPS = torch.tensor([3, -7, 0])
UZPS = torch.tensor([128, 100, 0])


def _qdq_tensor(x, dtype, qmin, qmax, zp):
    q = qd.quantize_per_tensor(x, 0.05, zp, qmin, qmax, dtype)
    return q, qd.dequantize_per_tensor(q, 0.05, zp, qmin, qmax, dtype)


def _qdq_tensor_t(x, dtype, qmin, qmax, zp):
    s, z = torch.tensor(0.05), torch.tensor(zp)
    q = qd.quantize_per_tensor.tensor(x, s, z, qmin, qmax, dtype)
    return q, qd.dequantize_per_tensor.tensor(q, s, z, qmin, qmax, dtype)


def _qdq_channel(x, dtype, qmin, qmax, zp):
    zps = UZPS if dtype == torch.uint8 else ZPS
    q = qd.quantize_per_channel(x, SCALES, zps, 1, qmin, qmax, dtype)
    return q, qd.dequantize_per_channel(q, SCALES, zps, 1, qmin, qmax, dtype)


def _qdq_channel_no_zp(x, dtype, qmin, qmax, zp):
    q = qd.quantize_per_channel(x, SCALES, torch.zeros(3, dtype=torch.int64), 1, qmin, qmax, dtype)
    return q, qd.dequantize_per_channel(q, SCALES, None, 1, qmin, qmax, dtype)


CASES = {
    "per_tensor": _qdq_tensor,
    "per_tensor_tensor": _qdq_tensor_t,
    "per_channel": _qdq_channel,
    "per_channel_no_zp": _qdq_channel_no_zp,
}
RANGES = {  # dtype, quant_min, quant_max, zero point
    "int8": (torch.int8, -128, 127, 3),
    "uint8": (torch.uint8, 0, 255, 128),
    "int8_narrow": (torch.int8, -127, 127, 0),
    "uint8_narrow": (torch.uint8, 10, 200, 128),
}


@pytest.mark.parametrize("range_name", sorted(RANGES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_quantize_dequantize(case, range_name):
    dtype, qmin, qmax, zp = RANGES[range_name]
    fn = CASES[case]
    onx = check_export(
        OpModule(lambda x: fn(x, dtype, qmin, qmax, zp)),
        _inputs(),
        dynamic_shapes=DS,
        atol=0,
        rtol=0,
    )
    types = [n.op_type for n in onx.graph.node]
    assert "QuantizeLinear" in types and "DequantizeLinear" in types, types
    assert ("Clip" in types) == range_name.endswith("narrow"), types


def test_dequantize_out_dtype_float16():
    def fn(x):
        q = qd.quantize_per_tensor(x, 0.05, 2, -128, 127, torch.int8)
        return qd.dequantize_per_tensor(q, 0.05, 2, -128, 127, torch.int8, out_dtype=torch.float16)

    check_export(OpModule(fn), _inputs(), dynamic_shapes=DS, atol=0, rtol=0)


def test_quantize_per_token_dynamic():
    """choose_qparams_per_token_asymmetric -> quantize_per_token -> dequantize_per_token."""

    def fn(x):
        s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
        return s, z, q, qd.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float32)

    check_export(OpModule(fn), _inputs(), dynamic_shapes=DS, atol=1e-6, rtol=1e-6)


def test_choose_qparams_tensor():
    def fn(x):
        s, z = qd.choose_qparams.tensor(x, 0, 255, 1e-5, torch.uint8)
        q = qd.quantize_per_tensor.tensor(x, s, z, 0, 255, torch.uint8)
        return s, z, q, qd.dequantize_per_tensor.tensor(q, s, z, 0, 255, torch.uint8)

    inputs = [(x + 0.5,) for (x,) in _inputs()]
    check_export(OpModule(fn), inputs, dynamic_shapes=DS, atol=1e-6, rtol=1e-6)


def test_unsupported_dtype_is_typed():
    def fn(x):
        return qd.quantize_per_tensor(x, 0.05, 0, -(2**31), 2**31 - 1, torch.int32)

    with pytest.raises(UnsupportedOpError, match="int32.*int8 or uint8"):
        to_onnx(OpModule(fn), _inputs()[0], dynamic_shapes=DS)


def test_int16_needs_opset_21():
    def fn(x):
        q = qd.quantize_per_tensor(x, 0.01, 0, -(2**15), 2**15 - 1, torch.int16)
        return qd.dequantize_per_tensor(q, 0.01, 0, -(2**15), 2**15 - 1, torch.int16)

    with pytest.raises(UnsupportedOpError, match="opset >= 21"):
        to_onnx(OpModule(fn), _inputs()[0], dynamic_shapes=DS, target_opset=19)
    onx = check_export(OpModule(fn), _inputs(), dynamic_shapes=DS, atol=0, rtol=0, target_opset=21)
    assert {o.domain: o.version for o in onx.opset_import}[""] == 21


class _SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _pt2e_x86(model, example, calibration, is_dynamic=False):
    """torchao's PT2E quantization: export, prepare, calibrate, convert."""
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    xiq = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    ep = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config(is_dynamic=is_dynamic))
    prepared = pt2e.prepare_pt2e(ep.module(), quantizer)
    for x in calibration:
        prepared(x)
    return pt2e.convert_pt2e(prepared)


def test_pt2e_x86_static_cnn(tmp_path):
    """A Conv2d+ReLU+Linear quantized by torchao exports as QDQ and matches eager."""
    import numpy as np
    import onnxruntime

    torch.manual_seed(0)
    model = _SmallCNN().eval()
    converted = _pt2e_x86(
        model, torch.randn(2, 3, 8, 8), [torch.randn(4, 3, 8, 8) for _ in range(4)]
    )
    onx = to_onnx(converted, (torch.randn(2, 3, 8, 8),), dynamic_shapes=({0: "batch"},))
    onnx.checker.check_model(onx, full_check=True)
    types = [n.op_type for n in onx.graph.node]
    assert types.count("QuantizeLinear") == 2 and types.count("DequantizeLinear") == 4, types
    # the weights stay int8 initializers behind their DequantizeLinear
    weights = {i.name: i.data_type for i in onx.graph.initializer}
    dq_inputs = [n.input[0] for n in onx.graph.node if n.op_type == "DequantizeLinear"]
    assert sum(weights.get(i) == onnx.TensorProto.INT8 for i in dq_inputs) == 2, weights

    # one step of the quantized input of fc moves the output by at most this much
    fc_scale = [
        n.args[1] for n in converted.graph.nodes if n.target == qd.quantize_per_tensor.default
    ][-1]
    one_step = fc_scale * float(model.fc.weight.detach().abs().sum(dim=1).max()) * 1.05
    level = onnxruntime.GraphOptimizationLevel
    for opt, atol in [(level.ORT_DISABLE_ALL, 1e-5), (level.ORT_ENABLE_ALL, one_step)]:
        so = onnxruntime.SessionOptions()
        so.graph_optimization_level = opt
        so.optimized_model_filepath = str(tmp_path / f"opt{int(opt)}.onnx")
        sess = onnxruntime.InferenceSession(
            onx.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
        for batch in (2, 7):
            x = torch.randn(batch, 3, 8, 8)
            with torch.no_grad():
                expected = converted(x).numpy()
            (got,) = sess.run(None, {onx.graph.input[0].name: x.numpy()})
            np.testing.assert_allclose(
                got, expected, atol=atol, rtol=0, err_msg=f"level {opt}, batch {batch}"
            )
    # onnxruntime fuses the quantized convolution (Conv+Relu+QuantizeLinear)
    optimized = onnx.load(so.optimized_model_filepath)
    assert "QLinearConv" in {n.op_type for n in optimized.graph.node}


def test_pt2e_x86_dynamic_mlp():
    """Dynamic quantization (choose_qparams.tensor per call) matches eager exactly."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).eval()
    converted = _pt2e_x86(model, torch.randn(2, 16), [torch.randn(4, 16)], is_dynamic=True)
    assert any(n.target == qd.choose_qparams.tensor for n in converted.graph.nodes)
    onx = check_export(
        converted,
        [(torch.randn(2, 16),), (torch.randn(7, 16),)],
        dynamic_shapes=({0: "batch"},),
        atol=1e-6,
        rtol=0,
    )
    types = [n.op_type for n in onx.graph.node]
    assert types.count("QuantizeLinear") == 2 and types.count("DequantizeLinear") == 4, types
