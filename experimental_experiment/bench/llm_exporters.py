"""Models and exporters of :mod:`experimental_experiment.bench.llm_latency`: Llama-like
decoders with random weights, exported by :func:`to_onnx` (with a pattern set),
``torch.onnx.export(dynamo=True)`` and onnxruntime-genai's model builder (run in a
subprocess from a separate folder, it is not a dependency of this package).

.. code-block:: python

    config, model = make_llama("tiny")
    path, seconds = export_to_onnx(model, config, "default", "/tmp/llm/ours.onnx")
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import numpy as np
import torch

logger = logging.getLogger("experimental_experiment.bench.llm_exporters")

_LM = dict(
    vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False, rms_norm_eps=1e-6
)
#: model sizes: ``tiny`` for tests, ``small`` and ``medium`` for the benchmark
SIZES = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    ),
    "small": dict(
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        **_LM,
    ),
    "medium": dict(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=8,
        **_LM,
    ),
}


def make_llama(size: str, seed: int = 0):
    """``(config, model)``: a LlamaForCausalLM of ``size`` (:data:`SIZES`) with random
    weights, the normalization weights too (no multiplication by one disappears)."""
    import transformers

    from ..torch_models.llm_helper import build_causal_lm

    config = transformers.LlamaConfig(**SIZES[size])
    config._attn_implementation = "sdpa"
    model = build_causal_lm(config, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    return config, model


def _export_inputs(config, model):
    """Inputs and dynamic shapes used to export (batch 2, 3 tokens, a cache of 5)."""
    from ..torch_models.llm_helper import make_llm_inputs

    return make_llm_inputs(
        config, batch=2, seq=3, past=5, model=model, generator=torch.Generator().manual_seed(0)
    )


def _save(onx, path: str) -> None:
    import onnx

    tmp = path + ".tmp"
    onnx.save(onx, tmp)
    os.replace(tmp, path)


def export_to_onnx(model, config, patterns: str, path: str) -> tuple[str, float]:
    """Exports with :func:`to_onnx` and the pattern set ``patterns``; returns
    ``(path, export time in seconds)``."""
    from ..torch_interpreter import to_onnx
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors
    from ..xbuilder import OptimizationOptions

    inputs, ds = _export_inputs(config, model)
    begin = time.perf_counter()
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = to_onnx(
            model,
            (),
            modificator(inputs),
            dynamic_shapes=ds,
            options=OptimizationOptions(patterns=patterns),
        )
    duration = time.perf_counter() - begin
    _save(onx, path)
    return path, duration


def export_torch_onnx(model, config, path: str) -> tuple[str, float]:
    """Exports with ``torch.onnx.export(dynamo=True)`` (its default optimization)."""
    from ..torch_interpreter.onnx_export_errors import bypass_export_some_errors

    inputs, ds = _export_inputs(config, model)
    ds = torch.utils._pytree.tree_map(
        lambda v: torch.export.Dim.DYNAMIC if isinstance(v, str) else v, ds
    )
    begin = time.perf_counter()
    with torch.no_grad(), bypass_export_some_errors(patch_transformers=True) as modificator:
        onx = torch.onnx.export(
            model, (), kwargs=modificator(inputs), dynamic_shapes=ds, dynamo=True, verbose=False
        ).model_proto
    duration = time.perf_counter() - begin
    _save(onx, path)
    return path, duration


def builder_available(genai_path: str | None) -> str | None:
    """None if onnxruntime-genai's builder imports in a subprocess with ``genai_path``
    prepended to PYTHONPATH, the reason otherwise."""
    proc = subprocess.run(
        [sys.executable, "-c", "import onnxruntime_genai.models.builder"],
        env=_genai_env(genai_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return f"onnxruntime-genai's builder is not importable ({last[:200]})"


def _genai_env(genai_path: str | None) -> dict:
    env = dict(os.environ)
    if genai_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (genai_path, env.get("PYTHONPATH")) if p)
    return env


def _write_tokenizer(folder: str) -> None:
    """A word-level tokenizer: the builder reads one, the benchmark feeds token ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(100)}
    vocab.update({"<unk>": 100, "<s>": 101, "</s>": 102})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(folder)


def run_builder(
    hf: str,
    out: str,
    folder: str,
    precision: str,
    *,
    extra_options: dict | None = None,
    env: dict | None = None,
    timeout: int = 1800,
) -> tuple[str, float]:
    """Runs ``python -m onnxruntime_genai.models.builder -i hf -o out -p precision -e cpu``
    in ``folder`` (its cache in ``folder/builder_cache``); ``extra_options`` become
    ``--extra_options key=value``. Returns ``(model.onnx path, seconds)``, RuntimeError
    with the builder's last line when it fails."""
    cmd = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        hf,
        "-o",
        out,
        "-p",
        precision,
        "-e",
        "cpu",
        "-c",
        os.path.join(folder, "builder_cache"),
    ]
    if extra_options:
        cmd += ["--extra_options"] + [f"{k}={v}" for k, v in extra_options.items()]
    begin = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=folder)
    duration = time.perf_counter() - begin
    path = os.path.join(out, "model.onnx")
    if proc.returncode != 0 or not os.path.exists(path):
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"the builder failed ({proc.returncode}): {last[:300]}")
    return path, duration


def export_builder(
    model,
    folder: str,
    genai_path: str | None,
    timeout: int = 1800,
    *,
    precision: str = "fp32",
    extra_options: dict | None = None,
    name: str = "builder",
) -> tuple[str, float]:
    """Saves ``model`` (``save_pretrained`` and a tokenizer) in ``folder/hf`` (once) then
    runs ``python -m onnxruntime_genai.models.builder -p <precision> -e cpu`` on it, the
    package written in ``folder/<name>``; ``extra_options`` become ``--extra_options
    key=value`` (``accuracy_level=4``). Returns ``(model.onnx path, seconds)``."""
    hf, out = os.path.join(folder, "hf"), os.path.join(folder, name)
    if not os.path.exists(os.path.join(hf, "config.json")):
        model.save_pretrained(hf)
        _write_tokenizer(hf)
    return run_builder(
        hf,
        out,
        folder,
        precision,
        extra_options=extra_options,
        env=_genai_env(genai_path),
        timeout=timeout,
    )


def make_feeds(config, batch: int, seq: int, past: int, seed: int = 0) -> dict:
    """Named numpy inputs of one step: ``input_ids``, ``attention_mask`` (ones),
    ``position_ids``, ``key_<i>`` and ``value_<i>`` (the cache, ``past`` positions)."""
    rng = np.random.default_rng(seed)
    n_kv = config.num_key_value_heads
    head = config.hidden_size // config.num_attention_heads
    feeds = {
        "input_ids": rng.integers(0, config.vocab_size, (batch, seq), dtype=np.int64),
        "attention_mask": np.ones((batch, past + seq), dtype=np.int64),
        "position_ids": np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1)),
    }
    for kind in ("key", "value"):
        for i in range(config.num_hidden_layers):
            feeds[f"{kind}_{i}"] = rng.standard_normal((batch, n_kv, past, head), dtype=np.float32)
    return feeds


def eager_inputs(feeds: dict, config, model) -> dict:
    """The keyword arguments of ``model`` for ``feeds`` (a DynamicCache)."""
    from transformers.cache_utils import DynamicCache

    from ..torch_models.llm_helper import cache_argument_name

    cache = DynamicCache()
    for i in range(config.num_hidden_layers):
        cache.update(torch.from_numpy(feeds[f"key_{i}"]), torch.from_numpy(feeds[f"value_{i}"]), i)
    inputs = {
        k: torch.from_numpy(feeds[k]) for k in ("input_ids", "attention_mask", "position_ids")
    }
    inputs[cache_argument_name(model)] = cache
    return inputs


def session_feeds(input_names: list[str], feeds: dict, n_layers: int) -> dict:
    """Maps the named feeds on the inputs of a session: the builder's names
    (``past_key_values.<i>.key``), or the order of the exported signature (input_ids,
    attention_mask, position_ids, every key, every value)."""
    if "past_key_values.0.key" in input_names:
        out = {}
        for name in input_names:
            if name.startswith("past_key_values."):
                _, i, kind = name.split(".")
                out[name] = feeds[f"{kind}_{i}"]
            else:
                out[name] = feeds[name]
        return out
    order = ["input_ids", "attention_mask", "position_ids"] + [
        f"{kind}_{i}" for kind in ("key", "value") for i in range(n_layers)
    ]
    if len(input_names) != len(order):
        raise ValueError(f"unexpected inputs {input_names}, expected {order}")
    return {name: feeds[key] for name, key in zip(input_names, order)}
