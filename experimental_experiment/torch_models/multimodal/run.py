"""Greedy generation with the exported parts chained in onnxruntime, checked against
``model.generate(..., do_sample=False)``.

The runtime does what transformers' ``generate`` does around the model: it runs the
vision encoder once, merges the features into the prompt's embeddings, computes the
position ids (3D for the Qwen-VL family: the model's ``get_rope_index``,
``model_rope_positions``), calls the decoder with an empty cache (prefill), then once per
new token with the cache it returned (``decoder_step`` for a hybrid decoder, whose linear
layers take another path for one token), never choosing an end-of-sequence token.

.. code-block:: python

    report = check_generation(case, export_parts(case), steps=8)
    report["equal_tokens"], report["max_abs_diff"]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .cases import MultimodalCase
from .export import ExportedParts
from .families import DEEPSTACK_INPUTS, image_token_id


def session(onx):
    """An onnxruntime CPU session of a ModelProto."""
    import onnxruntime

    return onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])


def mrope_positions(
    input_ids: np.ndarray, token: int, grids: list[tuple[int, ...]], merge: int
) -> tuple[np.ndarray, np.ndarray]:
    """3D position ids (temporal, height, width) of a prompt, the rule of the Qwen-VL
    family for images: text tokens count up on the three axes, the tokens of an image
    take the coordinates of their patch (after merging ``merge`` x ``merge`` patches)
    shifted by the position the image starts at, the text after it starts after the
    largest of them.

    :param input_ids: the prompt ``(batch, length)``
    :param token: the image token id
    :param grids: (t, h, w) in patches, one per image, in order of appearance
    :param merge: the spatial merge size of the vision tower
    :return: ``(positions (3, batch, length), delta (batch,))``, ``delta`` is added to
        the position of every generated token
    """
    batch, length = input_ids.shape
    positions = np.zeros((3, batch, length), dtype=np.int64)
    deltas = np.zeros((batch,), dtype=np.int64)
    images = iter(grids)
    for b in range(batch):
        i, cur = 0, 0
        while i < length:
            if input_ids[b, i] != token:
                positions[:, b, i] = cur
                i, cur = i + 1, cur + 1
                continue
            t, h, w = next(images)
            h, w = h // merge, w // merge
            tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
            n = t * h * w
            positions[:, b, i : i + n] = np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + cur
            i, cur = i + n, cur + max(h, w)
        deltas[b] = positions[:, b].max() + 1 - length
    return positions, deltas


def model_rope_positions(case: MultimodalCase) -> tuple[np.ndarray, np.ndarray] | None:
    """The position ids of the prompt computed by the model's own ``get_rope_index``
    (what ``generate`` calls before the prefill), ``(positions (axes, batch, length),
    delta (batch,))``, None when the model has none. The rules differ between families:
    Qwen-VL gives (temporal, height, width) shifted by the image start
    (``mrope_positions``), HunYuan-VL keeps the sequence position for the text and gives
    (width, height, image index) to the grid tokens only, between the two tokens
    framing the image."""
    fct = getattr(getattr(case.model, "model", case.model), "get_rope_index", None)
    if fct is None:
        return None
    import inspect

    params = set(inspect.signature(fct).parameters)
    ids = case.input_ids
    values = dict(
        input_ids=ids,
        mm_token_type_ids=case.generate_kwargs.get("mm_token_type_ids"),
        image_grid_thw=case.constants.get("image_grid_thw"),
        attention_mask=torch.ones_like(ids),
    )
    # the image size under its own name (target_sizes: MiniCPM-V 4.7)
    values.update({k: v for k, v in case.constants.items() if k not in values})
    with torch.no_grad():
        positions, delta = fct(**{k: v for k, v in values.items() if k in params})
    return positions.numpy().astype(np.int64), delta.numpy().reshape((-1,)).astype(np.int64)


class _Positions:
    """Position ids of the prefill and of every decode step."""

    def __init__(self, case: MultimodalCase):
        self.mrope = case.mrope
        ids = case.input_ids.numpy()
        found = model_rope_positions(case) if self.mrope else None
        if found is not None:
            self.prefill, self.delta = found
        elif self.mrope:
            vc = case.model.config.vision_config
            grids = [tuple(int(x) for x in g) for g in case.constants["image_grid_thw"]]
            self.prefill, self.delta = mrope_positions(
                ids, image_token_id(case.model), grids, vc.spatial_merge_size
            )
        else:
            self.prefill = np.arange(ids.shape[1], dtype=np.int64)[None, :].repeat(ids.shape[0], 0)
            self.delta = np.zeros((ids.shape[0],), dtype=np.int64)
        self.axes = self.prefill.shape[0] if self.mrope else 0

    def step(self, past: int) -> np.ndarray:
        pos = (past + self.delta).reshape((-1, 1)).astype(np.int64)
        return np.stack([pos] * self.axes) if self.mrope else pos


#: numpy types of the onnxruntime type names of the cache inputs
_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def empty_cache_feeds(decoder, batch: int) -> dict[str, np.ndarray]:
    """The cache inputs of the decoder (every input after the first three) before the
    prompt: the dimensions named ``past`` (keys, values, indexer keys) are 0, the ones
    named ``batch`` are ``batch``, the static ones (the convolution and recurrent
    states of a hybrid decoder) keep their size, filled with zeros (an empty state)."""
    feeds = {}
    for inp in decoder.get_inputs()[3:]:
        if inp.name in DEEPSTACK_INPUTS:
            continue
        shape = [batch if d == "batch" else d if isinstance(d, int) else 0 for d in inp.shape]
        feeds[inp.name] = np.zeros(shape, dtype=_ORT_TYPES[inp.type])
    return feeds


def end_token_ids(model) -> list[int]:
    """The end-of-sequence ids of ``model.generation_config``: ``generate`` called with
    ``min_new_tokens`` sets their logits to ``-inf`` until that many tokens exist, so
    the greedy choice is the best other token (``output_logits`` returns the logits
    before that)."""
    config = getattr(model, "generation_config", None)
    ids = getattr(config, "eos_token_id", None)
    if ids is None:
        return []
    return [int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])]


def onnx_generate(
    case: MultimodalCase, parts: ExportedParts, steps: int = 8
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy generation with the ONNX parts: vision, merge, then the decoder ``steps``
    times (the end-of-sequence tokens excluded, as ``generate(min_new_tokens=steps)``
    does; ``decoder_step`` after the prompt when there is one). Returns ``(tokens
    (batch, steps), logits of the last position per step)``."""
    from ..onnx_outputs import user_outputs

    vision, merge, decoder = (session(parts.models[n]) for n in ("vision", "merge", "decoder"))
    step = session(parts.models["decoder_step"]) if "decoder_step" in parts.models else decoder
    pixels = [v.numpy() for v in case.vision_inputs.values()]
    seen = vision.run(None, dict(zip([i.name for i in vision.get_inputs()], pixels)))
    features: Any = seen[0]
    merge_names = [i.name for i in merge.get_inputs()]
    ids = case.input_ids.numpy()
    embeds: Any = merge.run(None, dict(zip(merge_names, [ids, features])))[0]
    names = [i.name for i in decoder.get_inputs() if i.name not in DEEPSTACK_INPUTS]
    batch = ids.shape[0]
    cache = empty_cache_feeds(decoder, batch)
    # Qwen3-VL: the deepstack features at the image tokens of the prompt, none after
    deepstack = _deepstack_feeds(decoder, ids == image_token_id(case.model), seen[1:])
    eos = end_token_ids(case.model)
    positions = _Positions(case)
    pos, past, tokens, logits = positions.prefill, 0, [], []
    for i in range(steps):
        seq = embeds.shape[1]
        feeds = {
            names[0]: embeds,
            names[1]: np.ones((batch, past + seq), dtype=np.int64),
            names[2]: pos,
            **cache,
            **deepstack,
        }
        sess = decoder if i == 0 else step
        outputs: list[Any] = user_outputs(sess, list(sess.run(None, feeds)))
        last = outputs[0][:, -1, :]
        logits.append(last)
        token = greedy_token(last, eos)
        tokens.append(token)
        cache = dict(zip(names[3:], outputs[1:]))
        past += seq
        pos = positions.step(past)
        embeds = merge.run(None, dict(zip(merge_names, [token, features])))[0]
        deepstack = _deepstack_feeds(decoder, token == image_token_id(case.model), seen[1:])
    return np.concatenate(tokens, axis=1), logits


def _deepstack_feeds(decoder, image: np.ndarray, deepstack: list) -> dict[str, np.ndarray]:
    """The deepstack inputs of a decoder taking them (empty dict otherwise): the image
    positions of the tokens given, and the features of the vision encoder when some
    position is one, one row of zeros otherwise (a new token is never an image)."""
    names = [i.name for i in decoder.get_inputs() if i.name in DEEPSTACK_INPUTS]
    if not names:
        return {}
    features = deepstack[0]
    if not image.any():
        features = np.zeros((features.shape[0], 1, features.shape[2]), dtype=features.dtype)
    return dict(zip(names, [image, features]))


def eager_generate(case: MultimodalCase, steps: int = 8) -> tuple[np.ndarray, list[np.ndarray]]:
    """``model.generate`` on the image and the prompt, greedy, exactly ``steps`` tokens."""
    from ..decoding_check import eager_greedy_decoding

    inputs = {**case.vision_inputs, **case.generate_kwargs}
    return eager_greedy_decoding(case.model, case.input_ids, steps, **inputs)


def greedy_token(last: np.ndarray, eos: list[int]) -> np.ndarray:
    """The next tokens ``(batch, 1)`` from the last logits ``(batch, vocab)``, the
    end-of-sequence tokens excluded: ``generate(min_new_tokens=steps)`` never ends early."""
    allowed = last.copy()
    allowed[:, eos] = -np.inf
    return allowed.argmax(axis=-1).reshape((last.shape[0], 1)).astype(np.int64)


def generation_report(
    eager: tuple[np.ndarray, list[np.ndarray]],
    onnx: tuple[np.ndarray, list[np.ndarray]],
    eos: list[int],
) -> dict[str, Any]:
    """Compares the ``(tokens, logits)`` of eager ``generate`` and of the ONNX parts:
    ``dict(equal_tokens (positions where every batch row agrees), same=bool,
    max_abs_diff, margin (eager), eager_tokens, onnx_tokens, eager_logits,
    onnx_logits)``."""
    (eager_tokens, eager_logits), (onnx_tokens, onnx_logits) = eager, onnx
    steps = eager_tokens.shape[1]
    equal = int((eager_tokens == onnx_tokens).all(axis=0).sum())
    diffs = [float(np.abs(e - o).max()) for e, o in zip(eager_logits, onnx_logits)]
    return dict(
        equal_tokens=equal,
        same=equal == steps,
        max_abs_diff=max(diffs),
        margin=margin(eager_logits, exclude=eos),
        eager_tokens=eager_tokens.tolist(),
        onnx_tokens=onnx_tokens.tolist(),
        eager_logits=eager_logits,
        onnx_logits=onnx_logits,
    )


def margin(logits: list[np.ndarray], exclude: list[int] | None = None) -> float:
    """The smallest gap between the best and the second best logit over the steps,
    the tokens of ``exclude`` left out (the end-of-sequence tokens ``generate`` does not
    choose): near zero, greedy decoding is a coin toss between runtimes."""
    if exclude:
        logits = [np.delete(x, exclude, axis=-1) for x in logits]
    gaps = [float(np.diff(np.sort(x, axis=-1)[:, -2:], axis=-1).min()) for x in logits]
    return min(gaps) if gaps else 0.0


def check_generation(case: MultimodalCase, parts: ExportedParts, steps: int = 8) -> dict[str, Any]:
    """Generates ``steps`` tokens with the chained ONNX parts and with eager
    ``generate``.

    :param case: the model, the image and the prompt
    :param parts: the exported parts (vision, merge, decoder)
    :param steps: number of new tokens
    :return: ``dict(equal_tokens (positions out of steps where every batch row
        agrees), same=bool, max_abs_diff, margin (eager), eager_tokens, onnx_tokens,
        eager_logits, onnx_logits)``

    .. code-block:: python

        report = check_generation(case, export_parts(case))
        assert report["same"], report
    """
    eos = end_token_ids(case.model)
    return generation_report(eager_generate(case, steps), onnx_generate(case, parts, steps), eos)


__all__ = [
    "check_generation",
    "eager_generate",
    "empty_cache_feeds",
    "end_token_ids",
    "generation_report",
    "greedy_token",
    "margin",
    "model_rope_positions",
    "mrope_positions",
    "onnx_generate",
    "session",
]
