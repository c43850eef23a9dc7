"""UDOP (words, their boxes and the image of a document in its encoder) exported as an
encoder (states and their mask) and a decoder reading that mask, chained in onnxruntime
against eager ``generate`` (8 greedy tokens) on two layouts of word boxes covering
different numbers of image patches (the encoder drops them and pads the others)."""

import pytest
import torch

from experimental_experiment.torch_models.multimodal.seq2seq import build_image_seq2seq
from experimental_experiment.torch_models.multimodal.speech import (
    check_speech_generation,
    export_speech_parts,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")

_EXPORTED: dict = {}

#: word boxes (x0, y0, x1, y1) per row: the tiny model's image has 4 x 4 patches
_LAYOUTS = {
    # three words in three patches
    "three": [[[0.0, 0.0, 0.2, 0.2], [0.3, 0.55, 0.45, 0.7], [0.8, 0.8, 0.95, 0.9]]],
    # two rows: words sharing a patch, a box of no word (zeros), a box over the page
    # (ones), words over patch borders
    "mixed": [
        [
            [0.1, 0.1, 0.2, 0.2],
            [0.12, 0.05, 0.22, 0.15],
            [0.0, 0.0, 0.0, 0.0],
            [0.5, 0.2, 0.9, 0.3],
            [1.0, 1.0, 1.0, 1.0],
            [0.3, 0.7, 0.7, 0.8],
        ],
        [
            [0.6, 0.6, 0.7, 0.7],
            [0.1, 0.3, 0.2, 0.4],
            [0.4, 0.4, 0.6, 0.6],
            [0.2, 0.8, 0.3, 0.9],
            [0.75, 0.1, 0.9, 0.2],
            [0.6, 0.3, 0.95, 0.4],
        ],
    ],
}


def _case(layout: str, model):
    boxes = torch.tensor(_LAYOUTS[layout])
    batch, words = boxes.shape[:2]
    case = build_image_seq2seq("udop", prompt=2, batch=batch, model=model, seed=words)
    gen = torch.Generator().manual_seed(words)
    vocab = model.config.vocab_size
    case.encoder_inputs = dict(
        pixel_values=torch.randn(
            batch, *case.encoder_inputs["pixel_values"].shape[1:], generator=gen
        ),
        input_ids=torch.randint(4, vocab - 64, (batch, words), generator=gen),
        bbox=boxes,
        attention_mask=torch.ones((batch, words), dtype=torch.int64),
    )
    return case


def _padded_patches(case) -> list[int]:
    """The number of positions the eager encoder pads (mask 0) per row."""
    with torch.no_grad():
        mask = case.model.get_encoder()(**case.encoder_inputs).attention_mask
    return (mask == 0).sum(dim=1).tolist()


@pytest.mark.parametrize("layout", ["three", "mixed"])
def test_udop_generation(layout):
    if "udop" not in _EXPORTED:
        case = build_image_seq2seq("udop")
        _EXPORTED["udop"] = case.model, export_speech_parts(case)
    model, parts = _EXPORTED["udop"]
    assert set(parts.models) == {"encoder", "decoder"}
    case = _case(layout, model)
    padded = _padded_patches(case)
    # the layouts cover 3 patches, then different numbers in the two rows
    assert padded[0] == 3 if layout == "three" else len(set(padded)) == 2, padded
    report = check_speech_generation(case, parts, steps=8)
    assert report["max_abs_diff"] < 1e-3, report["max_abs_diff"]
    assert report["equal_tokens"] == 8, (report["eager_tokens"], report["onnx_tokens"])


def test_udop_encoder_outputs_match_eager():
    # the exported encoder's states and mask at every position, on both layouts
    import numpy as np

    from experimental_experiment.torch_models.multimodal.run import session

    if "udop" not in _EXPORTED:
        case = build_image_seq2seq("udop")
        _EXPORTED["udop"] = case.model, export_speech_parts(case)
    model, parts = _EXPORTED["udop"]
    sess = session(parts.models["encoder"])
    for layout in _LAYOUTS:
        case = _case(layout, model)
        with torch.no_grad():
            expected = model.get_encoder()(**case.encoder_inputs)
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, dict(zip(names, [v.numpy() for v in case.encoder_inputs.values()])))
        np.testing.assert_array_equal(got[1], expected.attention_mask.numpy())
        np.testing.assert_allclose(got[0], expected.last_hidden_state.numpy(), atol=1e-4)
