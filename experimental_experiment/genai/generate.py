"""Greedy generation with onnxruntime-genai, one prompt at a time: what the tests and
the benchmarks compare with eager ``generate(do_sample=False)``."""

from __future__ import annotations

from typing import Sequence


def greedy_sequence(model, prompt: Sequence[int], new_tokens: int) -> list[int]:
    """The prompt followed by up to ``new_tokens`` tokens generated greedily
    (fewer when the model emits its end token first).

    :param model: a package folder or an ``onnxruntime_genai.Model``
    :param prompt: token ids
    :param new_tokens: number of tokens to generate
    :return: the whole sequence, as ``generate`` returns it

    .. code-block:: python

        from experimental_experiment.genai.generate import greedy_sequence

        tokens = greedy_sequence("pkg", [1, 5, 7], 16)
    """
    import numpy as np
    import onnxruntime_genai as og

    if isinstance(model, str):
        model = og.Model(model)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(prompt) + new_tokens)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([list(prompt)], dtype=np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    return [int(t) for t in generator.get_sequence(0)]


def eager_greedy_sequence(model, ids, new_tokens: int, eos_token_id=None) -> list[int]:
    """The eager counterpart of :func:`greedy_sequence`: transformers' ``generate``
    without sampling, a mask of ones, padding token 0.

    :param model: a transformers causal LM
    :param ids: the prompt, a tensor of shape ``(1, length)``
    :param new_tokens: number of tokens to generate
    :param eos_token_id: end of sequence token(s), None for the model's own
    :return: the whole sequence (prompt included)
    """
    import torch

    kwargs = {} if eos_token_id is None else dict(eos_token_id=eos_token_id)
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=new_tokens,
            pad_token_id=0,
            **kwargs,
        )
    return out[0].tolist()


__all__ = ["eager_greedy_sequence", "greedy_sequence"]
