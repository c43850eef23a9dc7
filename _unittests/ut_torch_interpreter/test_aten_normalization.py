"""Normalization converters against onnxruntime and eager torch, on two shapes."""

import pytest
import torch
import torch.nn.functional as F

from experimental_experiment.ext_test_case import OpModule, check_export, run_onnx
from experimental_experiment.torch_interpreter import ExportOptions, to_onnx

DS3 = ({0: "batch", 1: "seq"},)
DS4 = ({0: "batch", 2: "h", 3: "w"},)


def _tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype in (torch.float16, torch.bfloat16) else {}


def _seq(dtype=torch.float32, last=8):
    return [
        ((torch.randn(2, 3, last) * 2 + 1).to(dtype),),
        ((torch.randn(4, 5, last) * 2 + 1).to(dtype),),
    ]


def _img(dtype=torch.float32, c=4):
    return [
        ((torch.randn(2, c, 5, 6) * 2 + 1).to(dtype),),
        ((torch.randn(3, c, 4, 7) * 2 + 1).to(dtype),),
    ]


def _randomize(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape))
        for name, b in model.named_buffers():
            if "running_var" in name:
                b.copy_(torch.rand(b.shape) + 0.5)
            elif "running_mean" in name:
                b.copy_(torch.randn(b.shape))
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, affine):
    model = _randomize(torch.nn.LayerNorm(8, elementwise_affine=affine)).to(dtype)
    check_export(model, _seq(dtype), dynamic_shapes=DS3, **_tol(dtype))


def test_layer_norm_two_dims_no_bias():
    model = _randomize(torch.nn.LayerNorm([3, 8], bias=False))
    sets = [(torch.randn(2, 3, 8),), (torch.randn(5, 3, 8),)]
    check_export(model, sets, dynamic_shapes=({0: "batch"},))


def test_layer_norm_dynamic_normalized_dim():
    fn = OpModule(lambda x: F.layer_norm(x, x.shape[-1:]))
    check_export(fn, _seq(last=8), dynamic_shapes=DS3)
    sets = [(torch.randn(2, 3, 8),), (torch.randn(4, 5, 6),)]
    check_export(fn, sets, dynamic_shapes=({0: "batch", 1: "seq", 2: "d"},))


def test_layer_norm_bfloat16():
    model = _randomize(torch.nn.LayerNorm(8)).to(torch.bfloat16)
    check_export(
        model, _seq(torch.bfloat16), dynamic_shapes=DS3, atol=5e-2, rtol=5e-2, use_reference=True
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_native_layer_norm(dtype):
    w, b = torch.randn(8).to(dtype), torch.randn(8).to(dtype)
    fn = OpModule(lambda x: torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5))
    check_export(fn, _seq(dtype), dynamic_shapes=DS3, **_tol(dtype))


def test_native_layer_norm_decomposed():
    model = _randomize(torch.nn.LayerNorm(8))
    check_export(
        model,
        _seq(),
        dynamic_shapes=DS3,
        export_options=ExportOptions(decomposition_table="default"),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(dtype, eps):
    model = _randomize(torch.nn.RMSNorm(8, eps=eps)).to(dtype)
    check_export(model, _seq(dtype), dynamic_shapes=DS3, **_tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_opset23(dtype, affine):
    model = _randomize(torch.nn.RMSNorm(8, elementwise_affine=affine)).to(dtype)
    onx = check_export(model, _seq(dtype), dynamic_shapes=DS3, target_opset=23, **_tol(dtype))
    ops = [n.op_type for n in onx.graph.node]
    assert ("RMSNormalization" in ops) == (dtype != torch.float64)


def test_rms_norm_no_weight_two_dims_mixed_dtype():
    w = torch.randn(3, 8)
    fn = OpModule(lambda x: F.rms_norm(x, [3, 8]) + F.rms_norm(x, [3, 8], w.half()))
    sets = [(torch.randn(2, 3, 8).half(),), (torch.randn(5, 3, 8).half(),)]
    check_export(fn, sets, dynamic_shapes=({0: "batch"},), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm(dtype, groups):
    model = _randomize(torch.nn.GroupNorm(groups, 4)).to(dtype)
    check_export(model, _img(dtype), dynamic_shapes=DS4, **_tol(dtype))


def test_group_norm_no_affine_3d():
    model = torch.nn.GroupNorm(3, 6, affine=False)
    sets = [(torch.randn(2, 6, 5),), (torch.randn(3, 6, 9),)]
    check_export(model, sets, dynamic_shapes=({0: "batch", 2: "n"},))


def test_native_group_norm_decomposed():
    model = _randomize(torch.nn.GroupNorm(2, 4))
    check_export(
        model,
        _img(),
        dynamic_shapes=DS4,
        export_options=ExportOptions(decomposition_table="default"),
    )


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("decompose", [False, True])
def test_instance_norm(affine, decompose):
    model = _randomize(torch.nn.InstanceNorm2d(4, affine=affine))
    opts = ExportOptions(decomposition_table="default" if decompose else None)
    check_export(model, _img(), dynamic_shapes=DS4, export_options=opts)


def test_instance_norm_running_stats_eval():
    model = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    model = _randomize(model).eval()
    sets = [(torch.randn(2, 4, 5),), (torch.randn(3, 4, 9),)]
    check_export(model, sets, dynamic_shapes=({0: "batch", 2: "n"},))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("decompose", [False, True])
def test_batch_norm_eval(dtype, decompose):
    model = _randomize(torch.nn.BatchNorm2d(4)).eval().to(dtype)
    opts = ExportOptions(decomposition_table="default" if decompose else None)
    onx = check_export(model, _img(dtype), dynamic_shapes=DS4, export_options=opts, **_tol(dtype))
    assert "BatchNormalization" in [n.op_type for n in onx.graph.node]


@pytest.mark.parametrize("shape", [(2, 4), (2, 4, 5)])
def test_batch_norm1d_eval(shape):
    model = _randomize(torch.nn.BatchNorm1d(4)).eval()
    sets = [(torch.randn(*shape),), (torch.randn(5, *shape[1:]),)]
    check_export(model, sets, dynamic_shapes=({0: "batch"},))


def test_batch_norm_eval_no_affine():
    model = _randomize(torch.nn.BatchNorm2d(4, affine=False)).eval()
    check_export(model, _img(), dynamic_shapes=DS4)


@pytest.mark.parametrize("track", [True, False])
@pytest.mark.parametrize("decompose", [False, True])
def test_batch_norm_train(track, decompose):
    # training mode: normalized with the statistics of the batch
    model = _randomize(torch.nn.BatchNorm2d(4, track_running_stats=track)).train()
    opts = ExportOptions(decomposition_table="default" if decompose else None)
    sets = _img()
    onx = to_onnx(model, sets[0], dynamic_shapes=DS4, export_options=opts)
    for (x,) in sets:
        expected = F.batch_norm(x, None, None, model.weight, model.bias, training=True)
        got = run_onnx(onx, [x])[0]
        torch.testing.assert_close(torch.from_numpy(got), expected.detach(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_functional(training):
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    w, b = torch.randn(4), torch.randn(4)

    def fn(x):
        return torch.ops.aten._native_batch_norm_legit_functional(
            x, w, b, rm, rv, training, 0.1, 1e-5
        )

    check_export(OpModule(fn), _img(), dynamic_shapes=DS4)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm(training):
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    w = torch.randn(4)
    fn = OpModule(
        lambda x: torch.ops.aten.native_batch_norm(x, w, None, rm, rv, training, 0.1, 1e-5)
    )
    check_export(fn, _img(), dynamic_shapes=DS4)


def test_native_batch_norm_legit_no_stats():
    fn = OpModule(
        lambda x: torch.ops.aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)
    )
    check_export(fn, _img(), dynamic_shapes=DS4)


def test_group_norm_is_one_instance_normalization_kernel():
    # group_norm: Reshape [N, G, -1] -> InstanceNormalization -> Reshape, no statistics
    # computed node by node (fewer kernels: MobileViT has 21 group norms)
    model = _randomize(torch.nn.GroupNorm(2, 4))
    onx = check_export(model, _img(), dynamic_shapes=DS4)
    ops = [n.op_type for n in onx.graph.node]
    assert ops.count("InstanceNormalization") == 1 and "ReduceMean" not in ops, ops
