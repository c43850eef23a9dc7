"""Multi-step greedy decoding with an exported ONNX model feeding its own cache back,
checked against transformers' eager generation.

One call of an exported model may match eager while the cache it returns is wrong
(a missing position, a wrong order of layers): it shows only at the next step. Here the
ONNX model runs ``steps`` times, the first call with an empty cache, every other call
with the present keys and values it returned.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch


def _cache_input_names(names: list[str]) -> tuple[list[str], list[str]]:
    """Names of the ONNX inputs holding the keys and the values, ordered by layer."""

    def index(name):
        return int(re.search(r"(\d+)$", name).group(1))

    keys = sorted((n for n in names if re.search(r"key_\d+$", n)), key=index)
    values = sorted((n for n in names if re.search(r"value_\d+$", n)), key=index)
    if len(keys) != len(values) or not keys:
        raise ValueError(f"cannot find the cache inputs (..._key_<i>, ..._value_<i>) in {names}")
    return keys, values


def _empty_cache_shape(sess, name: str, batch: int) -> tuple[int, ...]:
    shape = next(i.shape for i in sess.get_inputs() if i.name == name)
    if not isinstance(shape[1], int) or not isinstance(shape[3], int):
        raise ValueError(f"input {name!r} has no static number of heads or head size: {shape}")
    return (batch, shape[1], 0, shape[3])


def onnx_greedy_decoding(onx, input_ids: torch.Tensor, steps: int) -> tuple[np.ndarray, list]:
    """Greedy generation with an ONNX model exported with a cache.

    The model takes ``input_ids``, ``attention_mask``, optionally ``position_ids``, then
    the cache (``*_key_<i>``, ``*_value_<i>``), returns the logits then the present
    keys and values in the same order. Returns ``(tokens (batch, steps), logits of the
    last position at every step)``.
    """
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        onx.SerializeToString() if hasattr(onx, "SerializeToString") else onx,
        providers=["CPUExecutionProvider"],
    )
    names = [i.name for i in sess.get_inputs()]
    key_names, value_names = _cache_input_names(names)
    batch = input_ids.shape[0]
    cache = {
        n: np.zeros(_empty_cache_shape(sess, n, batch), dtype=np.float32)
        for n in key_names + value_names
    }
    ids = input_ids.numpy().astype(np.int64)
    past, tokens, logits = 0, [], []
    for _ in range(steps):
        seq = ids.shape[1]
        outputs = sess.run(None, {**cache, **_token_feeds(names, ids, past)})
        last = outputs[0][:, -1, :]
        logits.append(last)
        next_token = last.argmax(axis=-1).reshape((batch, 1)).astype(np.int64)
        tokens.append(next_token)
        n = len(key_names)
        presents = outputs[1 : 1 + 2 * n]
        cache = dict(zip(key_names + value_names, presents))
        past += seq
        ids = next_token
    return np.concatenate(tokens, axis=1), logits


def _token_feeds(names: list[str], ids: np.ndarray, past: int) -> dict[str, np.ndarray]:
    """input_ids, and attention_mask, position_ids when the model takes them."""
    batch, seq = ids.shape
    feeds = {"input_ids": ids}
    if "attention_mask" in names:
        feeds["attention_mask"] = np.ones((batch, past + seq), dtype=np.int64)
    if "position_ids" in names:
        feeds["position_ids"] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
    return feeds


def eager_greedy_decoding(
    model, input_ids: torch.Tensor | None, steps: int, /, **inputs
) -> tuple[np.ndarray, list]:
    """Greedy generation with transformers' ``generate`` (no sampling, exactly ``steps``
    new tokens): the new tokens ``(batch, steps)`` and the logits of every step.
    ``input_ids`` (a keyword for ``generate``: BLIP-2's takes ``pixel_values`` first)
    comes with a full attention mask unless ``inputs`` gives one; ``inputs`` holds what
    else the model reads (pixels, audio features, decoder ids, or the prompt itself
    when ``input_ids`` is None)."""
    if input_ids is not None:
        base = dict(attention_mask=torch.ones_like(input_ids), pad_token_id=0)
        inputs = {**base, **inputs, "input_ids": input_ids}
    with torch.no_grad():
        out = model.generate(
            **inputs,
            do_sample=False,
            max_new_tokens=steps,
            min_new_tokens=steps,
            output_logits=True,
            return_dict_in_generate=True,
        )
    return out.sequences[:, -steps:].numpy(), [t.numpy() for t in out.logits]


def check_greedy_decoding(
    model, onx, input_ids: torch.Tensor, steps: int = 8, *, atol: float = 1e-3
) -> dict[str, Any]:
    """Runs greedy generation for ``steps`` steps with the ONNX model ``onx`` feeding its
    own present key/values back, and with ``model.generate`` in eager mode.

    :param model: the transformers causal LM ``onx`` was exported from
    :param onx: the ONNX model exported with a cache (a ModelProto or its bytes):
        inputs ``input_ids``, ``attention_mask``, optionally ``position_ids``, then the
        cache (``*_key_<i>``, ``*_value_<i>``); outputs the logits then the present
        keys and values in the same order
    :param input_ids: the prompt, ``(batch, length)``
    :param steps: number of generated tokens
    :param atol: tolerance on the logits
    :return: a report, ``dict(steps, same_tokens, max_abs_diff, diffs (one per step),
        eager_tokens, onnx_tokens, first_token_mismatch (step or None), ok)``;
        ``ok`` is True when the tokens are equal and every logits difference is
        below ``atol``

    .. code-block:: python

        import torch
        from experimental_experiment.torch_models.decoding_check import (
            check_greedy_decoding)

        # model: a causal LM, onx: its export with a cache
        input_ids = torch.randint(0, model.config.vocab_size, (2, 4))
        report = check_greedy_decoding(model, onx, input_ids, steps=8)
        assert report["ok"], report["first_token_mismatch"]
    """
    eager_tokens, eager_logits = eager_greedy_decoding(model, input_ids, steps)
    onnx_tokens, onnx_logits = onnx_greedy_decoding(onx, input_ids, steps)
    diffs = [float(np.abs(e - o).max()) for e, o in zip(eager_logits, onnx_logits)]
    mismatch = np.nonzero((eager_tokens != onnx_tokens).any(axis=0))[0]
    first = int(mismatch[0]) if len(mismatch) else None
    report = dict(
        steps=steps,
        same_tokens=first is None,
        first_token_mismatch=first,
        max_abs_diff=max(diffs) if diffs else 0.0,
        diffs=diffs,
        eager_tokens=eager_tokens.tolist(),
        onnx_tokens=onnx_tokens.tolist(),
    )
    report["ok"] = report["same_tokens"] and report["max_abs_diff"] <= atol
    return report


def _session(onx):
    import onnxruntime

    return onnxruntime.InferenceSession(
        onx.SerializeToString() if hasattr(onx, "SerializeToString") else onx,
        providers=["CPUExecutionProvider"],
    )


def onnx_prefill_decode(
    prefill, decode, input_ids: torch.Tensor, steps: int
) -> tuple[np.ndarray, list]:
    """Greedy generation with two ONNX models, for decoders whose cache holds more than
    keys and values (hybrid decoders: convolution and recurrent states).

    ``prefill`` takes the prompt without a cache and returns the logits then the cache;
    ``decode`` takes one token and that cache (the same tensors in the same order,
    :func:`cache_leaf_names
    <experimental_experiment.torch_interpreter.patches.cache_registration.cache_leaf_names>`)
    and returns the logits then the new cache. Outputs named ``*_updated`` (inputs
    changed in place) are ignored. Returns ``(tokens (batch, steps), logits of the last
    position at every step)``.
    """
    from .onnx_outputs import user_outputs

    first, step = _session(prefill), _session(decode)
    names = [i.name for i in step.get_inputs()]
    cache_names = [n for n in names if n not in ("input_ids", "attention_mask", "position_ids")]
    ids = input_ids.numpy().astype(np.int64)
    batch, past = ids.shape[0], 0
    prefill_names = [i.name for i in first.get_inputs()]
    outputs = user_outputs(first, first.run(None, _token_feeds(prefill_names, ids, 0)))
    tokens, logits = [], []
    for i in range(steps):
        if len(outputs) != 1 + len(cache_names):
            raise ValueError(
                f"step {i}: {len(outputs) - 1} cache outputs for "
                f"{len(cache_names)} cache inputs {cache_names}"
            )
        last = outputs[0][:, -1, :]
        logits.append(last)
        next_token = last.argmax(axis=-1).reshape((batch, 1)).astype(np.int64)
        tokens.append(next_token)
        past += ids.shape[1]
        ids = next_token
        if i + 1 < steps:
            feeds = {**dict(zip(cache_names, outputs[1:])), **_token_feeds(names, ids, past)}
            outputs = user_outputs(step, step.run(None, feeds))
    return np.concatenate(tokens, axis=1), logits


def check_prefill_decode(
    model, prefill, decode, input_ids: torch.Tensor, steps: int = 8, *, atol: float = 1e-3
) -> dict[str, Any]:
    """:func:`check_greedy_decoding` for a pair of ONNX models (:func:`onnx_prefill_decode`):
    the prefill, then ``steps - 1`` decode steps feeding the cache back, against
    ``model.generate``. Returns the same report.

    .. code-block:: python

        report = check_prefill_decode(model, prefill_onx, decode_onx, input_ids, steps=6)
        assert report["ok"], report
    """
    eager_tokens, eager_logits = eager_greedy_decoding(model, input_ids, steps)
    onnx_tokens, onnx_logits = onnx_prefill_decode(prefill, decode, input_ids, steps)
    diffs = [float(np.abs(e - o).max()) for e, o in zip(eager_logits, onnx_logits)]
    mismatch = np.nonzero((eager_tokens != onnx_tokens).any(axis=0))[0]
    first = int(mismatch[0]) if len(mismatch) else None
    report = dict(
        steps=steps,
        same_tokens=first is None,
        first_token_mismatch=first,
        max_abs_diff=max(diffs) if diffs else 0.0,
        diffs=diffs,
        eager_tokens=eager_tokens.tolist(),
        onnx_tokens=onnx_tokens.tolist(),
    )
    report["ok"] = report["same_tokens"] and report["max_abs_diff"] <= atol
    return report
