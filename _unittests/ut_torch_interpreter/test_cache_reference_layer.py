"""UnlimitedOCR's reference sliding-window cache layer (the prompt kept apart from a
window of generated tokens): flattened into named leaves and rebuilt equal, and the
decoder exported for the prompt and for one new token matches eager (unpatched) in
onnxruntime, with a window shorter than the prompt and than the generated tokens."""

import copy

import numpy as np
import onnxruntime
import pytest
import torch

pytest.importorskip("transformers.models.unlimited_ocr")

from experimental_experiment.torch_interpreter.patches.cache_layers import (  # noqa: E402
    before_prompt,
    flatten_cache,
)
from experimental_experiment.torch_interpreter.patches.cache_registration import (  # noqa: E402
    register_cache_classes,
)

#: a window shorter than the prompts and than the generated tokens of the tests
WINDOW = 4


@pytest.fixture(scope="module")
def model():
    from experimental_experiment.torch_models.multimodal.cases import build_model

    model = build_model("unlimited_ocr")
    model.config.get_text_config(decoder=True).sliding_window = WINDOW
    return model


def _embeds(model, batch, seq, seed):
    hidden = model.config.get_text_config(decoder=True).hidden_size
    return torch.randn(batch, seq, hidden, generator=torch.Generator().manual_seed(seed))


def _eager_step(model, embeds, cache, past):
    """One call of the unpatched decoder: ``(logits, cache)``."""
    from experimental_experiment.torch_models.multimodal.parts import Decoder

    batch, seq, _ = embeds.shape
    mask = torch.ones((batch, past + seq), dtype=torch.int64)
    positions = torch.arange(past, past + seq, dtype=torch.int64).expand(batch, -1)
    with torch.no_grad():
        return Decoder(model)(embeds, mask, positions.contiguous(), cache)


def _assert_same_layers(got, expected):
    assert len(got.layers) == len(expected.layers)
    for a, b in zip(got.layers, expected.layers):
        assert type(a) is type(b)
        assert sorted(vars(a)) == sorted(vars(b))
        for name, value in vars(b).items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(vars(a)[name], value), name
            else:
                assert vars(a)[name] == value, (name, vars(a)[name], value)


def _roundtrip(cache):
    with register_cache_classes():
        leaves, spec = torch.utils._pytree.tree_flatten(cache)
        return torch.utils._pytree.tree_unflatten(leaves, spec)


def test_flatten_roundtrip(model):
    """After the prompt (its window still a 1-D empty tensor) and after two new tokens,
    the layers rebuilt from the leaves equal the eager ones, and the next call gives
    the same logits and the same cache; before the prompt, the rebuilt cache stores
    the prompt apart as a fresh one does."""
    _, cache = _eager_step(model, _embeds(model, 2, 6, 0), None, 0)
    assert cache.layers[0].sliding_window == WINDOW
    assert cache.layers[0].keys.dim() == 1  # nothing in the window yet
    names = flatten_cache(cache)[1]
    assert names == [
        "key_0",
        "key_1",
        "value_0",
        "value_1",
        "prefill_key_0",
        "prefill_key_1",
        "prefill_value_0",
        "prefill_value_1",
    ]
    past = 6
    for step in range(3):
        rebuilt = _roundtrip(copy.deepcopy(cache))
        _assert_same_layers(rebuilt, cache)
        new = _embeds(model, 2, 1, 10 + step)
        expected, cache = _eager_step(model, new, cache, past)
        got, rebuilt = _eager_step(model, new, rebuilt, past)
        torch.testing.assert_close(got, expected, atol=0, rtol=0)
        _assert_same_layers(rebuilt, cache)
        past += 1

    # before the prompt: the same layers, empty, whose next call is the prompt
    leaves, _, spec = flatten_cache(cache)
    from experimental_experiment.torch_interpreter.patches.cache_registration import (
        cache_classes,
    )

    empty = [t[:, :, :0] for t in leaves]
    fresh = cache_classes()[type(cache)][1](empty, before_prompt(spec))
    prompt = _embeds(model, 2, 5, 20)
    expected, after = _eager_step(model, prompt, None, 0)
    got, rebuilt = _eager_step(model, prompt, fresh, 0)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    for a, b in zip(rebuilt.layers, after.layers):
        assert torch.equal(a.prefill_keys, b.prefill_keys)
        assert a.prefill_length == b.prefill_length == 5
        assert a.keys.numel() == b.keys.numel() == 0


def _export_decoders(model):
    """The decoder for the prompt (an empty cache) and for one new token, as the
    multimodal benchmark exports them."""
    from experimental_experiment.torch_models.multimodal.export import (
        cache_layout,
        decoder_example,
        export_part,
    )
    from experimental_experiment.torch_models.multimodal.parts import Decoder

    assert cache_layout(model) == "reference"
    models = []
    for example in [dict(seq=3, past=0), dict(seq=1, past=5, prefill=7)]:
        args, ds = decoder_example(model, False, batch=2, layout="reference", **example)
        names = list(ds)
        models.append(
            export_part(Decoder(model), (), dynamic_shapes=ds, kwargs=dict(zip(names, args)))
        )
    return models


@pytest.mark.parametrize(("batch", "prompt"), [(1, 6), (2, 9)])
def test_prompt_and_steps_match_eager(model, batch, prompt):
    """The prompt graph, then the step graph fed with the caches onnxruntime returns,
    7 new tokens (past the window): every logit matches the unpatched model fed with
    the same embeddings and its own cache (cut to the window)."""
    from experimental_experiment.torch_models.multimodal.run import empty_cache_feeds
    from experimental_experiment.torch_models.onnx_outputs import user_outputs

    first, step = (
        onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for m in _export_decoders(model)
    )
    names = [i.name for i in first.get_inputs()]
    assert [i.name for i in step.get_inputs()] == names
    assert any(n.startswith("past_key_values_prefill_key_") for n in names)
    feeds_cache = empty_cache_feeds(first, batch)
    cache, past = None, 0
    for i in range(8):
        embeds = _embeds(model, batch, prompt if i == 0 else 1, 100 * prompt + i)
        seq = embeds.shape[1]
        mask = np.ones((batch, past + seq), dtype=np.int64)
        positions = np.arange(past, past + seq, dtype=np.int64)[None].repeat(batch, 0)
        sess = first if i == 0 else step
        feeds = dict(zip(names, [embeds.numpy(), mask, positions]))
        outputs = user_outputs(sess, list(sess.run(None, {**feeds, **feeds_cache})))
        expected, cache = _eager_step(model, embeds, cache, past)
        np.testing.assert_allclose(outputs[0], expected.numpy(), atol=1e-4, rtol=1e-3)
        feeds_cache = dict(zip(names[3:], outputs[1:]))
        past += seq
    # the eager window was cut, the exported one keeps every token (the mask cuts it)
    assert cache.layers[0].keys.shape[2] == WINDOW - 1
    assert feeds_cache["past_key_values_key_0"].shape[2] == 7
    assert feeds_cache["past_key_values_prefill_key_0"].shape[2] == prompt
