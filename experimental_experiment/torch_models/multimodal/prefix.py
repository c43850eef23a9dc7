"""Image-text-to-text models merging the image inside their forward (GIT, Kosmos-2,
Kosmos-2.5): no function returns image features to merge at image tokens, so the
prompt with its image is one graph (``Prefill``: tokens, pixels, image positions to
the logits and the cache) and every next token another one (``Step``: one token over
the cache), with the positions ``generate`` gives. The Q-Former models (BLIP-2,
InstructBLIP) take the LLaVA layout with the fixes of ``families``.

.. code-block:: python

    case = build_prefill("git")
    parts = export_prefill_parts(case)  # "prefill" and "step"
    report = check_prefill_generation(case, parts, steps=8)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from .errors import MultimodalPartsError
from .families import has_output_head, is_prefill_merging


@dataclass
class PrefillCase:
    """A tiny model merging the image in its forward, the inputs of its prompt (tokens,
    pixels, the image positions) and the prompt's tokens."""

    model_type: str
    model: Any
    image_inputs: dict
    input_ids: torch.Tensor


class Prefill(torch.nn.Module):
    """The prompt with its image (``PREFILL_INPUTS`` the model reads, in the order of
    ``names``) to the logits and the cache."""

    def __init__(self, model, names: list[str]):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, input_ids, attention_mask, *args):
        from ..causal_lm import output_cache

        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            use_cache=True,
            **dict(zip(self.names, args)),
        )
        return out.logits, output_cache(out)


def generating_model(model):
    """The model ``generate`` runs after the prompt: the text model with its head when
    ``model`` overrides ``generate`` to call it (Kosmos-2: ``text_model``), else
    ``model``."""
    from transformers import GenerationMixin

    if getattr(type(model), "generate", None) is getattr(GenerationMixin, "generate"):  # noqa: B009
        return model
    for name in ("text_model", "language_model"):
        sub = getattr(model, name, None)
        if isinstance(sub, torch.nn.Module) and has_output_head(sub):
            return sub
    return model


def takes_positions(model) -> bool:
    """Whether ``generate`` gives ``model`` the position ids of the new tokens (counted
    on the attention mask of the tokens, the image states of the cache left out: GIT)
    or lets the model compute them (Kosmos-2 sets them to None), read from
    ``prepare_inputs_for_generation``."""
    from transformers.cache_utils import DynamicCache

    if "position_ids" not in inspect.signature(model.forward).parameters:
        return False
    cache = DynamicCache()
    cache.update(torch.zeros((1, 1, 2, 2)), torch.zeros((1, 1, 2, 2)), 0)
    ids = torch.ones((1, 3), dtype=torch.int64)
    found = model.prepare_inputs_for_generation(
        ids,
        past_key_values=cache,
        attention_mask=torch.ones_like(ids),
        position_ids=torch.arange(3).reshape((1, 3)),
        use_cache=True,
        is_first_iteration=False,
    )
    return found.get("position_ids") is not None


class Step(torch.nn.Module):
    """New tokens, the mask of every token so far and the cache to the logits and the
    present cache, with the model ``generate`` runs after the prompt
    (``generating_model``); the positions are counted on the mask when ``generate``
    gives them (``takes_positions``), else the model computes them from the cache."""

    def __init__(self, model):
        from ..llm_helper import cache_argument_name

        super().__init__()
        self.model = generating_model(model)
        self.cache_name = cache_argument_name(self.model)
        self.positions = takes_positions(self.model)

    def forward(self, input_ids, attention_mask, past_key_values):
        from ..causal_lm import output_cache

        kwargs = {self.cache_name: past_key_values}
        if self.positions:
            positions = attention_mask.cumsum(-1) - 1
            kwargs["position_ids"] = positions[:, -input_ids.shape[1] :]
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=True, **kwargs
        )
        return out.logits, output_cache(out)


def build_prefill(
    model_type: str, prompt: tuple[int, int] = (3, 4), seed: int = 0, model=None
) -> PrefillCase:
    """The tiny model (``build_model``, or ``model``), one image of the size of its
    vision configuration and a prompt of ``prompt[0] + prompt[1]`` random tokens; a
    model placing the image at masked positions (Kosmos-2) gets ``latent_query_num``
    placeholder tokens between the two parts."""
    from .cases import _text_ids, build_model

    if not is_prefill_merging(model_type):
        raise MultimodalPartsError(f"{model_type!r} does not merge the image in its forward")
    model = build_model(model_type, seed=seed) if model is None else model
    params = set(inspect.signature(model.forward).parameters)
    vc: Any = getattr(model.config, "vision_config", None) or model.config
    gen = torch.Generator().manual_seed(seed)
    inputs: dict = {}
    if "flattened_patches" in params:  # Kosmos-2.5
        from .families import flattened_patches

        inputs["flattened_patches"] = flattened_patches(vc, gen)
    else:
        size = vc.image_size if isinstance(vc.image_size, int) else vc.image_size[0]
        channels = getattr(vc, "num_channels", 3)
        inputs["pixel_values"] = torch.randn(1, channels, size, size, generator=gen)
    text = model.config.get_text_config(decoder=True)
    avoid = {
        v
        for k, v in model.config.to_dict().items()
        if k.endswith(("_token_id", "_token_index")) and isinstance(v, int)
    } | {getattr(text, "pad_token_id", None), getattr(text, "bos_token_id", None)}
    avoid = {a for a in avoid if isinstance(a, int)}
    gen = torch.Generator().manual_seed(seed + 2)
    first = _text_ids(text.vocab_size, prompt[0], avoid, gen)
    last = _text_ids(text.vocab_size, prompt[1], avoid, gen)
    n = (
        getattr(model.config, "latent_query_num", 0)
        if "image_embeds_position_mask" in params
        else 0
    )
    placeholder = next(i for i in range(4, text.vocab_size) if i not in avoid)
    ids = torch.tensor([first + [placeholder] * n + last], dtype=torch.int64)
    if "image_embeds_position_mask" in params:
        mask = torch.zeros(ids.shape, dtype=torch.bool)
        mask[:, len(first) : len(first) + n] = True
        inputs["image_embeds_position_mask"] = mask
    return PrefillCase(model_type, model, inputs, ids)


def _random_cache_like(cache, batch: int, past: int, generator=None):
    """A DynamicCache with the layers and head shapes of ``cache``, ``batch`` rows and
    ``past`` positions of random keys and values."""
    from transformers.cache_utils import DynamicCache

    out = DynamicCache()
    for i, layer in enumerate(cache.layers):
        shape = (batch, layer.keys.shape[1], past, layer.keys.shape[3])
        out.update(
            torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator), i
        )
    return out


def export_prefill_parts(case: PrefillCase):
    """Exports the prompt's graph (dynamic batch and sequence, the image of the example)
    as ``prefill`` and the one-token graph (dynamic batch and cache length) as
    ``step``."""
    import time

    from ..llm_helper import cache_dynamic_shapes
    from .export import ExportedParts, export_part

    model, result = case.model, ExportedParts()
    names = list(case.image_inputs)
    begin = time.perf_counter()
    prefill = Prefill(model, names)
    ids = case.input_ids.expand(2, -1).contiguous()
    args = [ids, torch.ones_like(ids)]
    ds: list = [{0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}]
    for name in names:
        value = case.image_inputs[name]
        args.append(value.expand(2, *value.shape[1:]).contiguous())
        ds.append({0: "batch", 1: "seq"} if value.dim() == 2 else {0: "batch"})
    result.models["prefill"] = export_part(prefill, tuple(args), dynamic_shapes=tuple(ds))
    result.times["prefill"] = time.perf_counter() - begin
    begin = time.perf_counter()
    with torch.no_grad():
        probe = prefill(*args)[1]
    gen = torch.Generator().manual_seed(0)
    past = probe.get_seq_length() + 2  # the positions of the image included (GIT)
    cache = _random_cache_like(probe, 2, past, generator=gen)
    text_past = case.input_ids.shape[1] + 2
    kwargs = dict(
        input_ids=torch.randint(4, 64, (2, 1), generator=gen),
        attention_mask=torch.ones((2, text_past + 1), dtype=torch.int64),
        past_key_values=cache,
    )
    dss = dict(
        input_ids={0: "batch"},
        attention_mask={0: "batch", 1: "total"},
        past_key_values=cache_dynamic_shapes(len(cache.layers)),
    )
    result.models["step"] = export_part(Step(model), (), dynamic_shapes=dss, kwargs=kwargs)
    result.times["step"] = time.perf_counter() - begin
    return result


def check_prefill_generation(case: PrefillCase, parts, steps: int = 8) -> dict:
    """Greedy tokens of the ONNX prompt graph then the one-token graph against eager
    ``generate``; the report of ``check_generation``."""
    import numpy as np

    from ..decoding_check import eager_greedy_decoding
    from ..onnx_outputs import user_outputs
    from .run import end_token_ids, generation_report, greedy_token, session

    model, ids = case.model, case.input_ids
    eager = eager_greedy_decoding(model, ids, steps, **case.image_inputs)

    prefill, step = session(parts.models["prefill"]), session(parts.models["step"])
    batch = ids.shape[0]
    values = [ids.numpy(), np.ones(ids.shape, dtype=np.int64)]
    values += [v.numpy() for v in case.image_inputs.values()]
    outputs: list[Any] = user_outputs(
        prefill, list(prefill.run(None, dict(zip([i.name for i in prefill.get_inputs()], values))))
    )
    names = [i.name for i in step.get_inputs()]
    eos = end_token_ids(model)
    total, tokens, logits = ids.shape[1], [], []
    token = ids.numpy()[:, -1:]
    for i in range(steps):
        if i > 0:
            feeds = {
                names[0]: token,
                names[1]: np.ones((batch, total), dtype=np.int64),
                **dict(zip(names[2:], outputs[1:])),
            }
            outputs = user_outputs(step, list(step.run(None, feeds)))
        last = outputs[0][:, -1, :]
        logits.append(last)
        token = greedy_token(last, eos)
        tokens.append(token)
        total += 1
    return generation_report(eager, (np.concatenate(tokens, axis=1), logits), eos)


__all__ = [
    "Prefill",
    "PrefillCase",
    "Step",
    "build_prefill",
    "check_prefill_generation",
    "export_prefill_parts",
    "generating_model",
    "takes_positions",
]
