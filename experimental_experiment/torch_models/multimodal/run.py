"""Greedy generation with the exported parts chained in onnxruntime, checked against
``model.generate(..., do_sample=False)``.

The runtime does what transformers' ``generate`` does around the model: it runs the
vision encoder once, merges the features into the prompt's embeddings, computes the
position ids (3D for the Qwen-VL family, ``mrope_positions``), calls the decoder
with an empty cache (prefill), then once per new token with the cache it returned.

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
from .parts import image_token_id


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


class _Positions:
    """Position ids of the prefill and of every decode step."""

    def __init__(self, case: MultimodalCase):
        self.mrope = case.mrope
        ids = case.input_ids.numpy()
        if self.mrope:
            vc = case.model.config.vision_config
            grids = [tuple(int(x) for x in g) for g in case.constants["image_grid_thw"]]
            self.prefill, self.delta = mrope_positions(
                ids, image_token_id(case.model), grids, vc.spatial_merge_size
            )
        else:
            self.prefill = np.arange(ids.shape[1], dtype=np.int64)[None, :].repeat(ids.shape[0], 0)
            self.delta = np.zeros((ids.shape[0],), dtype=np.int64)

    def step(self, past: int) -> np.ndarray:
        pos = (past + self.delta).reshape((-1, 1)).astype(np.int64)
        return np.stack([pos] * 3) if self.mrope else pos


def onnx_generate(
    case: MultimodalCase, parts: ExportedParts, steps: int = 8
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy generation with the ONNX parts: vision, merge, then the decoder ``steps``
    times. Returns ``(tokens (batch, steps), logits of the last position per step)``."""
    from ..onnx_outputs import user_outputs

    vision, merge, decoder = (session(parts.models[n]) for n in ("vision", "merge", "decoder"))
    pixels = [v.numpy() for v in case.vision_inputs.values()]
    features: Any = vision.run(None, dict(zip([i.name for i in vision.get_inputs()], pixels)))[0]
    merge_names = [i.name for i in merge.get_inputs()]
    ids = case.input_ids.numpy()
    embeds: Any = merge.run(None, dict(zip(merge_names, [ids, features])))[0]
    names = [i.name for i in decoder.get_inputs()]
    batch = ids.shape[0]
    cache = {}
    for inp in decoder.get_inputs()[3:]:
        cache[inp.name] = np.zeros((batch, inp.shape[1], 0, inp.shape[3]), dtype=np.float32)
    positions = _Positions(case)
    pos, past, tokens, logits = positions.prefill, 0, [], []
    for _ in range(steps):
        seq = embeds.shape[1]
        feeds = {
            names[0]: embeds,
            names[1]: np.ones((batch, past + seq), dtype=np.int64),
            names[2]: pos,
            **cache,
        }
        outputs: list[Any] = user_outputs(decoder, list(decoder.run(None, feeds)))
        last = outputs[0][:, -1, :]
        logits.append(last)
        token = last.argmax(axis=-1).reshape((batch, 1)).astype(np.int64)
        tokens.append(token)
        cache = dict(zip(names[3:], outputs[1:]))
        past += seq
        pos = positions.step(past)
        embeds = merge.run(None, dict(zip(merge_names, [token, features])))[0]
    return np.concatenate(tokens, axis=1), logits


def eager_generate(case: MultimodalCase, steps: int = 8) -> tuple[np.ndarray, list[np.ndarray]]:
    """``model.generate`` on the image and the prompt, greedy, exactly ``steps`` tokens."""
    ids = case.input_ids
    with torch.no_grad():
        out = case.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            **case.vision_inputs,
            **case.generate_kwargs,
            do_sample=False,
            max_new_tokens=steps,
            min_new_tokens=steps,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    return out.sequences[:, ids.shape[1] :].numpy(), [t.numpy() for t in out.logits]


def margin(logits: list[np.ndarray]) -> float:
    """The smallest gap between the best and the second best logit over the steps:
    near zero, greedy decoding is a coin toss between runtimes."""
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
    eager_tokens, eager_logits = eager_generate(case, steps)
    onnx_tokens, onnx_logits = onnx_generate(case, parts, steps)
    equal = int((eager_tokens == onnx_tokens).all(axis=0).sum())
    diffs = [float(np.abs(e - o).max()) for e, o in zip(eager_logits, onnx_logits)]
    return dict(
        equal_tokens=equal,
        same=equal == steps,
        max_abs_diff=max(diffs),
        margin=margin(eager_logits),
        eager_tokens=eager_tokens.tolist(),
        onnx_tokens=onnx_tokens.tolist(),
        eager_logits=eager_logits,
        onnx_logits=onnx_logits,
    )


__all__ = [
    "check_generation",
    "eager_generate",
    "margin",
    "mrope_positions",
    "onnx_generate",
    "session",
]
