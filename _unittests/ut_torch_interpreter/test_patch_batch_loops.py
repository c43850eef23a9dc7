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
    _fastspeech2_length_regulator,
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


def _assert_applied(active, names):
    """The patches ``names`` are among those applied (the others depend on the models
    the test process imported before)."""
    assert set(names) <= set(active), (names, active)


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
                _assert_applied(active, ["TimesFmModelForPrediction.forward"])
                got = _outputs(model(past_values=values, freq=freq, **kwargs))
                # a list of series (several lengths) still goes to the original
                rows = [values[0], values[1, 5:]]
                listed = _outputs(model(past_values=rows, freq=[0, 1], **kwargs))
            unpatched = _outputs(model(past_values=rows, freq=[0, 1], **kwargs))
        for e, g in zip(expected + unpatched, got + listed):
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


def _timesfm2_5():
    from transformers import TimesFm2_5Config, TimesFm2_5ModelForPrediction

    config = TimesFm2_5Config(
        context_length=64,
        patch_length=16,
        horizon_length=32,
        output_quantile_len=48,
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return TimesFm2_5ModelForPrediction(config).eval()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"window_size": 5},
        {"force_flip_invariance": False, "truncate_negative": False},
        {"forecast_context_len": 48},
        {"future_values": "yes"},
    ],
)
def test_timesfm2_5_batched_rows_equal_the_loop(kwargs):
    """Shorter, equal and longer series than the context, positive ones (clamped),
    with and without the trend/residual decomposition and the flip invariance, with a
    loss: the same numbers as the loop, bit for bit."""
    model = _timesfm2_5()
    for length, positive in ((40, False), (64, True), (80, False)):
        values = torch.randn(3, length)
        values = values.abs() if positive else values
        # the list of two series below takes no targets (three rows)
        one = {k: v for k, v in kwargs.items() if k != "future_values"}
        kw = {**one, "future_values": torch.randn(3, 20)} if "future_values" in kwargs else one
        with torch.no_grad():
            out = model(past_values=values, **kw)
            expected = (*_outputs(out), out.last_hidden_state, out.loss)
            with apply_patches(get_batch_loop_patches()) as active:
                _assert_applied(active, ["TimesFm2_5ModelForPrediction.forward"])
                out = model(past_values=values, **kw)
                got = (*_outputs(out), out.last_hidden_state, out.loss)
                assert (out.loss is None) == ("future_values" not in kwargs)
                # a list of series (several lengths) still goes to the original
                rows = [values[0], values[1, 5:]]
                listed = _outputs(model(past_values=rows, **one))
            unpatched = _outputs(model(past_values=rows, **one))
        for e, g in zip(expected + unpatched, got + listed):
            torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.mark.parametrize("exported_length", [40, 80])
def test_timesfm2_5_exports_a_dynamic_batch_and_length(exported_length):
    """Exported with series shorter or longer than the context (64), the model pads or
    cuts series of both kinds."""
    model = _timesfm2_5()
    ds = {"past_values": {0: "batch", 1: "length"}}
    values = torch.randn(2, exported_length)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "TimesFm2_5ModelForPrediction.forward" in " ".join(active_patches())
        onx = to_onnx(model, (), dict(past_values=values), dynamic_shapes=ds)
    dims = [d.dim_param for d in onx.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "length"], dims
    for batch, length in ((3, 48), (5, 100)):
        values = torch.randn(batch, length)
        with torch.no_grad():
            # last_hidden_state, mean_predictions, full_predictions
            expected = model(past_values=values).to_tuple()
        got = _run_ort(onx, [values])
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
                _assert_applied(active, ["SuperPointForKeypointDetection.forward"])
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


def _fastspeech2():
    from transformers import FastSpeech2ConformerConfig, FastSpeech2ConformerModel

    config = FastSpeech2ConformerConfig(
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_linear_units=64,
        decoder_linear_units=64,
        vocab_size=30,
        num_mel_bins=8,
    )
    torch.manual_seed(0)
    model = FastSpeech2ConformerModel(config).eval()
    with torch.no_grad():  # durations of several frames, not the same for every token
        model.duration_predictor.linear.bias.fill_(1.0)
    return model


def _tokens(batch, seq, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, 30, (batch, seq), generator=generator)


def test_fastspeech2_length_regulator_equals_the_loop():
    from transformers.models.fastspeech2_conformer import modeling_fastspeech2_conformer as mf

    patched = _fastspeech2_length_regulator(mf.length_regulator)
    embeddings = torch.randn(3, 4, 5)
    cases = [
        torch.tensor([[1, 0, 2, 3], [0, 0, 1, 0], [2, 2, 2, 2]]),  # rows of other lengths
        torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]),  # zero rows stay zero
        torch.zeros((3, 4), dtype=torch.int64),  # all zero: every duration becomes 1
    ]
    for durations in cases:
        for speed in (1.0, 1.7):
            original, ours = durations.clone(), durations.clone()
            expected = mf.length_regulator(embeddings, original, speed)
            got = patched(embeddings, ours, speed)
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
            torch.testing.assert_close(ours, original, rtol=0, atol=0)  # same in place change


def test_fastspeech2_exports_a_dynamic_batch_and_length():
    model = _fastspeech2()
    ids = _tokens(2, 5, 0)
    ds = ({0: "batch", 1: "seq"},)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        names = " ".join(active_patches())
        assert "length_regulator" in names, names
        assert "FastSpeech2ConformerRelPositionalEncoding.forward" in names, names
        onx = to_onnx(model, (ids,), dynamic_shapes=ds)
    frames = set()
    for batch, seq, seed in ((3, 7, 1), (4, 4, 2)):
        ids = _tokens(batch, seq, seed)
        with torch.no_grad():
            out = model(ids)
        expected = out.to_tuple()
        got = _run_ort(onx, [ids])
        assert len(got) == len(expected), (len(got), len(expected))
        for e, g in zip(expected, got):
            assert g.shape == tuple(e.shape), (g.shape, e.shape)
            np.testing.assert_allclose(g, e.numpy(), atol=1e-4, rtol=1e-4)
        frames.update(out.duration_outputs.sum(dim=1).tolist())
        assert out.spectrogram.shape[1] == max(out.duration_outputs.sum(dim=1).tolist())
    assert len(frames) > 2, frames  # rows of several lengths, padded


class _CounterCell(torch.nn.Module):
    """Features counting the steps, each row at its own speed (the mean of its
    memory): a stand-in for SLANeXt's attention GRU cell."""

    def forward(self, prev_hidden, batch_hidden, char_onehots):
        speed = batch_hidden.mean(dim=(1, 2))[:, None]
        return prev_hidden + speed + 0 * char_onehots.sum(), None


class _BumpGenerator(torch.nn.Module):
    """The end token wins while the count is between 5 and 8 (then other tokens win
    again: a row that ended stays ended for the stop rule)."""

    def __init__(self, channels):
        super().__init__()
        self.channels = channels

    def forward(self, features):
        count = features[:, :1]
        logits = torch.nn.functional.one_hot(
            (count.squeeze(1) * 7).long().abs() % (self.channels - 1), self.channels
        ).float()
        bump = ((count > 5) & (count < 8)).float() * 2
        return torch.cat([logits[:, :-1], bump], dim=1)


#: (module, config, head) of the table-structure heads sharing the decoding loop
_SLA_HEADS = {
    "slanext": ("slanext", "SLANeXtConfig", "SLANeXtSLAHead"),
    "slanet": ("slanet", "SLANetConfig", "SLANetSLAHead"),
}


def _slanext_head(max_text_length=20, kind="slanext"):
    import importlib

    import transformers

    name, config_name, head_name = _SLA_HEADS[kind]
    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    config = getattr(transformers, config_name)(
        hidden_size=4, out_channels=6, max_text_length=max_text_length
    )
    head = getattr(module, head_name)(config).eval()
    head.structure_attention_cell = _CounterCell()
    head.structure_generator = _BumpGenerator(config.out_channels)
    return head


def _memory(speeds, length=3):
    return torch.tensor(speeds, dtype=torch.float32)[:, None, None].expand(-1, length, 4)


@pytest.mark.parametrize(
    ("speeds", "steps"),
    [
        ([1.0, 2.0, 3.0], 6),  # every row ends, the slowest at step 6: the loop stops
        ([3.0, 1.5], 4),
        ([1.0, 0.1], 21),  # a row never ends: every step
        ([6.0], 1),
    ],
)
@pytest.mark.parametrize("kind", sorted(_SLA_HEADS))
def test_slanext_all_steps_cut_where_the_loop_stops(speeds, steps, kind):
    head = _slanext_head(kind=kind)
    memory = _memory(speeds)
    with torch.no_grad():
        expected = head(memory).last_hidden_state
        with apply_patches(get_batch_loop_patches()) as active:
            _assert_applied(active, [f"{_SLA_HEADS[kind][2]}.forward"])
            got = head(memory).last_hidden_state
    assert expected.shape[1] == steps, expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("kind", sorted(_SLA_HEADS))
def test_slanext_exports_a_dynamic_batch_and_number_of_steps(kind):
    head = _slanext_head(kind=kind)
    memory = _memory([1.0, 2.0])
    ds = ({0: "batch", 1: "length"},)
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert f"{_SLA_HEADS[kind][2]}.forward" in " ".join(active_patches())
        onx = to_onnx(head, (memory,), dynamic_shapes=ds)
    for speeds, length in (([1.0, 2.0, 3.0], 5), ([3.0, 1.5], 2), ([1.0, 0.1, 2.0, 9.0], 4)):
        memory = _memory(speeds, length)
        with torch.no_grad():
            expected = head(memory).last_hidden_state
        (got,) = _run_ort(onx, [memory])
        assert got.shape == tuple(expected.shape), (got.shape, expected.shape)
        np.testing.assert_allclose(got, expected.numpy(), atol=1e-6)


def _vilt():
    from transformers import ViltConfig, ViltForQuestionAnswering

    config = ViltConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        vocab_size=50,
        num_labels=5,
    )
    torch.manual_seed(0)
    return ViltForQuestionAnswering(config).eval()


def test_vilt_full_mask_patches_in_order_match_the_shuffled_ones():
    """No pixel mask: the same answer as the original (which shuffles the patches at
    random); a partial mask still goes to the original (same draws, same numbers)."""
    model = _vilt()
    ids = _tokens(2, 4, 0)
    pixels = torch.randn(2, 3, 32, 48)
    partial = torch.ones((2, 32, 48), dtype=torch.int64)
    partial[0, :, 24:] = 0
    with torch.no_grad():
        expected = model(input_ids=ids, pixel_values=pixels).logits
        torch.manual_seed(5)
        expected_partial = model(input_ids=ids, pixel_values=pixels, pixel_mask=partial).logits
        with apply_patches(get_batch_loop_patches()) as active:
            _assert_applied(active, ["ViltModel.forward", "ViltEmbeddings.visual_embed"])
            got = model(input_ids=ids, pixel_values=pixels).logits
            torch.manual_seed(5)
            got_partial = model(input_ids=ids, pixel_values=pixels, pixel_mask=partial).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_partial, expected_partial, rtol=0, atol=0)


def test_vilt_exports_a_dynamic_batch_sequence_and_image_size():
    model = _vilt()
    inputs = dict(input_ids=_tokens(2, 4, 0), pixel_values=torch.randn(2, 3, 32, 48))
    ds = {
        "input_ids": {0: "batch", 1: "seq"},
        "pixel_values": {0: "batch", 2: "height", 3: "width"},
    }
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "ViltEmbeddings.visual_embed" in " ".join(active_patches())
        onx = to_onnx(model, (), inputs, dynamic_shapes=ds)
    for batch, seq, height, width in ((3, 6, 48, 32), (1, 3, 64, 64)):
        ids, pixels = _tokens(batch, seq, batch), torch.randn(batch, 3, height, width)
        with torch.no_grad():
            expected = model(input_ids=ids, pixel_values=pixels).logits
        got = _run_ort(onx, [ids, pixels])[0]
        assert got.shape == tuple(expected.shape), (got.shape, expected.shape)
        np.testing.assert_allclose(got, expected.numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("make", ["_timesfm", "_timesfm2_5"])
def test_timesfm_tuple_output_without_return_dict(make):
    model = globals()[make]()
    values = torch.randn(2, 64)
    with torch.no_grad():
        expected = model(past_values=values, return_dict=False)
        with apply_patches(get_batch_loop_patches()):
            got = model(past_values=values, return_dict=False)
    assert isinstance(got, tuple) and len(got) == len(expected)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
