"""A tiny causal LM trained for a few hundred steps on a synthetic deterministic
language, so that its next-token distributions are peaked: greedy decoding then tells
whether a lower precision (int4, int8) changes what the model predicts, which random
weights (flat logits, every argmax a near tie) cannot.

The language: ``<bos> s s+d s+2d ...`` modulo :data:`MODULUS`, the start ``s`` and the
step ``d`` (one of :data:`STEPS`) drawn per sequence. Every token after the first two
numbers is determined by the two before it.

The trained model is cached as ``config.json`` + ``model.safetensors``
(``save_pretrained(safe_serialization=True)``), loaded with ``use_safetensors=True``:
nothing is ever unpickled.

.. code-block:: python

    from experimental_experiment.torch_models.trained_tiny import (
        trained_tiny_model, make_sequences, argmax_accuracy)

    config, model = trained_tiny_model("llama", steps=300)
    ids, mask = make_sequences(64, 48, seed=12345)
    print(argmax_accuracy(model, ids, mask))  # close to 1
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time

import torch

from ..errors import ExportError

logger = logging.getLogger("experimental_experiment.torch_models.trained_tiny")

#: numbers of the language are 0 .. MODULUS-1
MODULUS = 64
#: the steps of the progressions
STEPS = (1, 2, 3, 5)
#: token starting every sequence
BOS = MODULUS
#: end of sequence: never in the data, so never predicted (generation does not stop)
EOS = MODULUS + 1
VOCAB_SIZE = MODULUS + 2

#: architecture of the model (dimensions multiple of 32: int4 blocks of 32 fit)
MODEL_PARAMS = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=VOCAB_SIZE,
    max_position_embeddings=1024,
    bos_token_id=BOS,
    eos_token_id=EOS,
    pad_token_id=EOS,
    tie_word_embeddings=False,
)
#: training: batch, sequence length, learning rate, warmup steps
TRAIN_PARAMS = dict(batch=16, length=40, lr=3e-3, warmup=20, weight_decay=0.0)
#: bumped when the recipe changes in a way the parameters above do not show
RECIPE_VERSION = 1


class TrainedTinyError(ExportError):
    """The trained tiny model cannot be built or loaded.

    Cause: the architecture is neither a transformers model type nor a configuration
    class name, or ``save_pretrained`` wrote no ``model.safetensors`` in the cache.

    Fix: give a decoder's model type (``llama``, ``qwen2``) or its configuration class
    (``LlamaConfig``); for a cache problem, delete the cache folder and train again."""


def make_sequences(batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of the language and the mask of the positions whose next token is
    determined by the grammar.

    :param batch: number of sequences
    :param length: tokens per sequence, ``<bos>`` included
    :param seed: seed of the starts and the steps
    :return: ``(ids (batch, length) int64, mask (batch, length - 1) bool)``,
        ``mask[:, i]`` tells whether ``ids[:, i + 1]`` follows from ``ids[:, :i + 1]``
    """
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(0, MODULUS, (batch, 1), generator=gen)
    step = torch.tensor(STEPS)[torch.randint(0, len(STEPS), (batch, 1), generator=gen)]
    numbers = (start + step * torch.arange(length - 1)) % MODULUS
    ids = torch.cat([torch.full((batch, 1), BOS), numbers], dim=1)
    mask = torch.zeros((batch, length - 1), dtype=torch.bool)
    # ids[:, i + 1] is determined once two numbers are known: i >= 2
    mask[:, 2:] = True
    return ids, mask


def make_prompts(n: int, length: int = 6, seed: int = 7) -> torch.Tensor:
    """``n`` prompts of ``length`` tokens (``<bos>`` then numbers) of the language."""
    return make_sequences(n, length, seed=seed)[0]


def argmax_accuracy(model, ids: torch.Tensor, mask: torch.Tensor) -> float:
    """Share of the determined positions (``mask``) where the argmax of the logits is
    the next token."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    hits = (logits.argmax(-1) == ids[:, 1:])[mask]
    return float(hits.float().mean())


def make_config(arch: str = "llama", **kwargs):
    """The small configuration of ``arch``: a model type (``llama``) or the name of a
    transformers configuration class (``LlamaConfig``)."""
    import transformers

    params = {**MODEL_PARAMS, **kwargs}
    if arch.endswith("Config") and hasattr(transformers, arch):
        config = getattr(transformers, arch)(**params)
    else:
        try:
            config = transformers.AutoConfig.for_model(arch, **params)
        except ValueError as e:
            raise TrainedTinyError(
                f"unknown architecture {arch!r}: give a transformers model type "
                f"(llama, qwen2, ...) or a configuration class name (LlamaConfig)"
            ) from e
    config._attn_implementation = "sdpa"
    return config


def recipe(arch: str, steps: int, seed: int) -> dict:
    """Everything the trained weights depend on."""
    return dict(
        arch=arch,
        steps=steps,
        seed=seed,
        model=MODEL_PARAMS,
        train=TRAIN_PARAMS,
        modulus=MODULUS,
        progression_steps=list(STEPS),
        version=RECIPE_VERSION,
        torch=torch.__version__.split("+")[0],
    )


def recipe_hash(arch: str, steps: int, seed: int) -> str:
    """A short hash of :func:`recipe`."""
    text = json.dumps(recipe(arch, steps, seed), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def default_cache_dir(arch: str, steps: int, seed: int) -> str:
    """``~/.cache/experimental_experiment/trained_tiny/<arch>-<steps>-<seed>-<hash>``."""
    return os.path.join(
        os.path.expanduser("~"),
        ".cache",
        "experimental_experiment",
        "trained_tiny",
        f"{arch}-{steps}-{seed}-{recipe_hash(arch, steps, seed)}",
    )


def train(
    config, steps: int, seed: int = 0, threads: int | None = 2, batch: int | None = None
) -> tuple[object, dict]:
    """Trains the causal LM of ``config`` for ``steps`` steps (``batch`` sequences a step,
    ``TRAIN_PARAMS["batch"]`` if None); returns ``(model in eval mode, report)``, the
    report holds ``loss`` (mean of the last 10 steps, at least about 0.14: the first two
    numbers of a sequence are random), ``accuracy`` (:func:`argmax_accuracy` on held-out
    sequences) and ``seconds``."""
    from .llm_helper import build_causal_lm

    if threads:
        torch.set_num_threads(threads)
    tp = TRAIN_PARAMS
    model = build_causal_lm(config, seed=seed).train()
    opt = torch.optim.AdamW(model.parameters(), lr=tp["lr"], weight_decay=tp["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / tp["warmup"]) * max(0.05, 1 - i / max(steps, 1))
    )
    losses = []
    begin = time.perf_counter()
    for i in range(steps):
        ids, _ = make_sequences(batch or tp["batch"], tp["length"], seed=seed * 1_000_003 + i)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if i % 50 == 0:
            logger.info("step %d loss %.4f", i, losses[-1])
    seconds = time.perf_counter() - begin
    model.eval()
    # held out: the training seeds are seed * 1_000_003 + i, i < steps
    ids, mask = make_sequences(256, tp["length"], seed=seed * 1_000_003 - 1)
    last = losses[-10:] or [float("nan")]
    report = dict(
        loss=sum(last) / len(last),
        accuracy=argmax_accuracy(model, ids, mask),
        seconds=seconds,
        steps=steps,
    )
    return model, report


def _load(folder: str):
    import transformers

    from .llm_helper import _causal_lm_class

    config = transformers.AutoConfig.from_pretrained(folder)
    config._attn_implementation = "sdpa"
    cls = _causal_lm_class(config)
    model = cls.from_pretrained(folder, config=config, use_safetensors=True)
    return config, model.eval()


def trained_tiny_model(
    arch: str = "llama", steps: int = 300, seed: int = 0, cache_dir: str | None = None
):
    """``(config, model)``: a tiny causal LM of ``arch`` trained ``steps`` steps on the
    language of :func:`make_sequences`, from the cache when it is there.

    :param arch: a transformers model type of a decoder (``llama``, ``qwen2``...) or the
        name of its configuration class (``LlamaConfig``)
    :param steps: training steps (300: loss 0.158 for a floor of about 0.142, every
        held-out determined token right; 154 s on 2 cores shared with another job)
    :param seed: seed of the initial weights and of the data
    :param cache_dir: the folder of the cached model (``config.json``,
        ``model.safetensors``, ``training.json``), :func:`default_cache_dir` if None
    :return: ``(config, model in eval mode)``; ``model.training_report`` holds the
        final loss, the held-out argmax accuracy and the training time

    .. code-block:: python

        config, model = trained_tiny_model("llama", steps=300)
        print(model.training_report)
    """
    folder = cache_dir or default_cache_dir(arch, steps, seed)
    weights = os.path.join(folder, "model.safetensors")
    info = os.path.join(folder, "training.json")
    if os.path.exists(weights) and os.path.exists(info):
        config, model = _load(folder)
        with open(info) as f:
            model.training_report = json.load(f)
        logger.info("loaded the trained model from %r", folder)
        return config, model
    config = make_config(arch)
    model, report = train(config, steps, seed)
    report["recipe"] = recipe(arch, steps, seed)
    tmp = f"{folder}.tmp{os.getpid()}"
    model.save_pretrained(tmp, safe_serialization=True)
    if not os.path.exists(os.path.join(tmp, "model.safetensors")):
        raise TrainedTinyError(f"save_pretrained wrote no model.safetensors in {tmp!r}")
    with open(os.path.join(tmp, "training.json"), "w") as f:
        json.dump(report, f, indent=1)
    os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
    if os.path.exists(folder):
        import shutil

        shutil.rmtree(folder)
    os.replace(tmp, folder)
    logger.info("trained %s in %.1fs: %s", arch, report["seconds"], report)
    config, model = _load(folder)
    model.training_report = report
    return config, model
