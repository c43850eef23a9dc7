"""Loops over the batch rewritten on the whole batch: in eager mode the patched model
gives exactly the numbers of the original, and the model exported with a dynamic batch
(and length) matches the eager (unpatched) model in onnxruntime on two input sizes."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches, apply_patches
from experimental_experiment.torch_interpreter.patches.patch_batch_loops import (
    get_batch_loop_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def _timesfm():
    from transformers import TimesFmConfig, TimesFmModelForPrediction

    config = TimesFmConfig(
        context_length=64,
        patch_length=16,
        horizon_length=32,
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        num_attention_heads=4,
        num_hidden_layers=2,
        freq_size=3,
    )
    torch.manual_seed(0)
    return TimesFmModelForPrediction(config).eval()


def _outputs(out):
    return (out.mean_predictions, out.full_predictions)


def _run_ort(onx, feeds):
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: f.numpy() for n, f in zip(names, feeds)})


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"window_size": 5},
        {"return_forecast_on_context": True, "truncate_negative": True},
        {"forecast_context_len": 48},
    ],
)
def test_timesfm_batched_rows_equal_the_loop(kwargs):
    """Shorter, equal and longer series than the context, with and without the
    trend/residual decomposition: the same numbers as the loop, bit for bit."""
    model = _timesfm()
    for length in (40, 64, 80):
        values = torch.randn(3, length)
        freq = torch.tensor([[0], [1], [2]])
        with torch.no_grad():
            expected = _outputs(model(past_values=values, freq=freq, **kwargs))
            with apply_patches(get_batch_loop_patches()) as active:
                assert active == ["TimesFmModelForPrediction.forward"], active
                got = _outputs(model(past_values=values, freq=freq, **kwargs))
                # a list of series (several lengths) still goes to the original
                rows = [values[0], values[1, 5:]]
                listed = _outputs(model(past_values=rows, freq=[0, 1], **kwargs))
            unpatched = _outputs(model(past_values=rows, freq=[0, 1], **kwargs))
        for e, g in zip(expected + unpatched, got + listed):
            torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_timesfm_tuple_output_without_return_dict():
    model = _timesfm()
    values = torch.randn(2, 64)
    with torch.no_grad():
        expected = model(past_values=values, return_dict=False)
        with apply_patches(get_batch_loop_patches()):
            got = model(past_values=values, return_dict=False)
    assert isinstance(got, tuple) and len(got) == len(expected)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_timesfm_exports_a_dynamic_batch_and_length():
    model = _timesfm()
    values, freq = torch.randn(2, 40), torch.zeros((2, 1), dtype=torch.int64)
    ds = {"past_values": {0: "batch", 1: "length"}, "freq": {0: "batch"}}
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "TimesFmModelForPrediction.forward" in " ".join(active_patches())
        onx = to_onnx(model, (), dict(past_values=values, freq=freq), dynamic_shapes=ds)
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "length"], dims
    for batch, length in ((3, 48), (5, 32)):
        values = torch.randn(batch, length)
        freq = torch.randint(0, 3, (batch, 1))
        with torch.no_grad():
            # last_hidden_state, mean_predictions, full_predictions
            expected = model(past_values=values, freq=freq).to_tuple()
        got = _run_ort(onx, [values, freq])
        assert len(got) == len(expected) == 3, (len(got), len(expected))
        for e, g in zip(expected, got):
            assert g.shape == tuple(e.shape), (g.shape, e.shape)
            np.testing.assert_allclose(g, e.numpy(), atol=1e-4, rtol=1e-4)


def _superpoint(max_keypoints):
    from transformers import SuperPointConfig, SuperPointForKeypointDetection

    config = SuperPointConfig(
        max_keypoints=max_keypoints,
        keypoint_threshold=0.016,
        nms_radius=2,
        encoder_hidden_sizes=[8, 8, 16, 16],
        decoder_hidden_size=32,
        descriptor_decoder_dim=16,
    )
    torch.manual_seed(0)
    model = SuperPointForKeypointDetection(config).eval()
    with torch.no_grad():  # scores that vary: some pixels pass the threshold, not all
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model


def _keypoint_outputs(out):
    return (out.keypoints, out.scores, out.descriptors, out.mask)


def _assert_keypoints_close(expected, got):
    for e, g in zip(expected, got):
        g = torch.as_tensor(np.asarray(g))
        assert g.shape == e.shape, (g.shape, e.shape)
        torch.testing.assert_close(g.to(e.dtype), e, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("max_keypoints", [-1, 20])
def test_superpoint_batched_keypoints_equal_the_loop(max_keypoints):
    """Every image keeps its own number of keypoints (the others padded with zeros,
    masked): the same keypoints, scores and descriptors as the loop over the images."""
    model = _superpoint(max_keypoints)
    counts = set()
    for shape in ((2, 3, 64, 64), (3, 3, 96, 64)):
        x = torch.randn(*shape)
        with torch.no_grad():
            expected = _keypoint_outputs(model(x))
            with apply_patches(get_batch_loop_patches()) as active:
                assert active == ["SuperPointForKeypointDetection.forward"], active
                got = _keypoint_outputs(model(x))
                as_tuple = model(x, return_dict=False)
        _assert_keypoints_close(expected, got)
        _assert_keypoints_close(expected, as_tuple)
        counts.update(expected[3].sum(dim=1).tolist())
    if max_keypoints < 0:
        assert len(counts) > 1, counts  # the padding is tested


def test_superpoint_exports_a_dynamic_batch_and_image_size():
    model = _superpoint(-1)
    x = torch.randn(2, 3, 64, 64)
    ds = ({0: "batch", 2: "height", 3: "width"},)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "SuperPointForKeypointDetection.forward" in " ".join(active_patches())
        onx = to_onnx(model, (x,), dynamic_shapes=ds)
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2:] == ["height", "width"], dims
    for shape in ((3, 3, 96, 64), (1, 3, 64, 128)):
        x = torch.randn(*shape)
        with torch.no_grad():
            expected = _keypoint_outputs(model(x))
        _assert_keypoints_close(expected, _run_ort(onx, [x]))
