"""ColModernVBERT's image features without a boolean index nor a split per row: the
retrieval model exported with a dynamic batch and sequence matches the eager (unpatched)
model in onnxruntime on two input sizes, and on inputs with a padding image."""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)
from experimental_experiment.torch_interpreter.patches import active_patches, apply_patches
from experimental_experiment.torch_interpreter.patches.patch_models import (
    _real_images_first,
    get_model_patches,
)

pytestmark = pytest.mark.usefixtures("quiet_transformers")

IMAGES = 2  # images per row
DS = {
    "input_ids": {0: "batch", 1: "seq"},
    "pixel_values": {0: "batch"},
    "attention_mask": {0: "batch", 1: "seq"},
}


@pytest.mark.parametrize(
    "real",
    [[True, True, True], [False, True, True, False, True], [False, False], [True, False]],
)
def test_real_images_first_is_a_stable_partition(real):
    real = torch.tensor(real)
    expected = torch.argsort((~real).to(torch.int64), stable=True)
    torch.testing.assert_close(_real_images_first(real), expected, rtol=0, atol=0)


@pytest.fixture(scope="module")
def model():
    from transformers import ColModernVBertForRetrieval

    from experimental_experiment.bench.zoo_configs import tiny_config

    torch.manual_seed(0)
    return ColModernVBertForRetrieval._from_config(tiny_config("colmodernvbert")).eval()


def _inputs(model, batch, seq, seed, padding=()):
    """``IMAGES`` images per row (``padding``: the (row, image) set to zeros), then as
    many image tokens as the row has real images, then ``seq`` text tokens."""
    generator = torch.Generator().manual_seed(seed)
    image_id, per_image = model.vlm.config.image_token_id, model.vlm.image_seq_len
    pixels = torch.randn(batch, IMAGES, 3, 32, 32, generator=generator)
    real = [IMAGES] * batch
    for row, image in padding:
        pixels[row, image] = 0
        real[row] -= 1
    ids = torch.randint(0, image_id, (batch, IMAGES * per_image + seq), generator=generator)
    for row, count in enumerate(real):
        ids[row, : IMAGES * per_image] = 0
        ids[row, : count * per_image] = image_id
    return dict(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids))


@pytest.mark.parametrize("padding", [(), ((1, 1),), ((0, 0), (1, 1))])
def test_eager_is_unchanged(model, padding):
    inputs = _inputs(model, 2, 4, 0, padding)
    with torch.no_grad():
        expected = model(**inputs)
        features = model.vlm.get_image_features(pixel_values=inputs["pixel_values"])
        with apply_patches(get_model_patches()) as active:
            assert "ModernVBertModel.get_image_features" in active, active
            got = model(**inputs)
            got_features = model.vlm.get_image_features(pixel_values=inputs["pixel_values"])
    for name in ("embeddings", "image_hidden_states"):
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)
    assert len(got_features.pooler_output) == len(features.pooler_output)
    for g, e in zip(got_features.pooler_output, features.pooler_output):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_retrieval_exports_a_dynamic_batch_and_sequence(model):
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True):
        assert "ModernVBertModel.get_image_features" in " ".join(active_patches())
        onx = to_onnx(model, (), _inputs(model, 2, 4, 0), dynamic_shapes=DS)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert names == list(DS), names
    for batch, seq, padding in ((3, 5, ()), (1, 9, ()), (3, 6, ((1, 1), (2, 0)))):
        inputs = _inputs(model, batch, seq, batch + seq, padding)
        with torch.no_grad():
            expected = model(**inputs)  # unpatched
        embeddings, features = sess.run(None, {k: inputs[k].numpy() for k in names})
        assert embeddings.shape == tuple(expected.embeddings.shape)
        np.testing.assert_allclose(embeddings, expected.embeddings.numpy(), atol=1e-5, rtol=1e-5)
        # the real images' features first, the padding images' after (the docstring)
        real = expected.image_hidden_states.numpy()
        assert features.shape == (batch * IMAGES * model.vlm.image_seq_len, real.shape[-1])
        np.testing.assert_allclose(features[: len(real)], real, atol=1e-5, rtol=1e-5)
