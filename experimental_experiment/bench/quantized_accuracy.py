"""Greedy decoding agreement of low precision models with eager on a *trained* tiny
decoder (``trained_tiny_model``, peaked
next-token distributions: a changed token is a quantization error, not a tie).

.. code-block:: bash

    python -m experimental_experiment.bench.quantized_accuracy --out quantized_accuracy.csv

Variants: the ONNX model exported by :func:`to_onnx` (onnxruntime pattern set) in
float32, quantized by :func:`quantize_model <experimental_experiment.quantize.quantize_model>`
(int4 blocks of 32 with accuracy level 4 or the default, lm_head kept float or quantized,
int8), and onnxruntime-genai's builder packages (fp32, int4) generated with
``onnxruntime_genai``. One row per variant: the share of the generated tokens equal to
eager's (all prompts), the first step where a prompt diverges, the largest difference of
the logits with eager over the steps before any divergence (ours only; eager's row holds
the smallest margin between its two best logits, how far a token is from changing),
the size on disk and the
median latency of one decoding step with a cache of ``--past`` positions in a plain
``onnxruntime.InferenceSession`` (1 thread, the variants timed in turns).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

import numpy as np
import torch

from . import llm_exporters as lx
from ._timing import interleaved_medians

logger = logging.getLogger("experimental_experiment.bench.quantized_accuracy")

#: variant -> keyword arguments of quantize_model (None: float32)
OURS = {
    "ours fp32": None,
    "ours int4 b32 acc4": dict(precision="int4", block_size=32, accuracy_level=4),
    "ours int4 b32": dict(precision="int4", block_size=32),
    "ours int4 b32 acc4 lm_head": dict(
        precision="int4", block_size=32, accuracy_level=4, quantize_lm_head=True
    ),
    "ours int8": dict(precision="int8"),
}
#: variant -> precision of the builder
BUILDER = {"builder fp32": "fp32", "builder int4": "int4"}
COLUMNS = (
    "variant",
    "tokens",
    "agreement",
    "first_divergence",
    "prompts_equal",
    "max_abs_diff",
    "min_margin",
    "bytes",
    "latency_ms",
    "past",
    "build_s",
)


def agreement(eager: np.ndarray, other: np.ndarray) -> tuple[float, int | None, int]:
    """``(share of equal tokens, first step where a prompt diverges or None, number of
    prompts entirely equal)`` of two ``(prompts, steps)`` arrays of generated tokens.

    .. code-block:: python

        agreement(np.array([[1, 2, 3]]), np.array([[1, 2, 4]]))  # (0.667, 2, 0)
    """
    equal = eager == other
    bad = np.nonzero(~equal.all(axis=0))[0]
    return (float(equal.mean()), int(bad[0]) if len(bad) else None, int(equal.all(axis=1).sum()))


def export_ours(model, config, folder: str) -> dict[str, dict]:
    """Exports with :func:`to_onnx` then quantizes; ``{variant: {path, build_s}}``."""
    import onnx

    from ..quantize import quantize_model
    from ..xbuilder.model_container import save_model

    fp32 = os.path.join(folder, "ours_fp32.onnx")
    _, seconds = lx.export_to_onnx(model, config, "default+onnxruntime", fp32)
    float_model = onnx.load(fp32)
    out = {}
    for name, kwargs in OURS.items():
        if kwargs is None:
            out[name] = dict(path=fp32, build_s=seconds)
            continue
        begin = time.perf_counter()
        q = quantize_model(float_model, **kwargs)
        path = os.path.join(folder, name.replace(" ", "_") + ".onnx")
        save_model(q, path)
        out[name] = dict(path=path, build_s=seconds + time.perf_counter() - begin)
    return out


def _write_tokenizer(folder: str, config) -> None:
    """A word-level tokenizer of the model's vocabulary (the builder reads the special
    tokens from it; generation feeds token ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = {config.bos_token_id: "<s>", config.eos_token_id: "</s>"}
    vocab = {special.get(i, f"t{i}"): i for i in range(config.vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="</s>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="</s>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    ).save_pretrained(folder)


def export_builder(model, folder: str, precision: str, timeout: int = 1800) -> dict:
    """Runs onnxruntime-genai's builder (``-p precision -e cpu``) in a subprocess on
    ``model`` saved with ``save_pretrained`` and a tokenizer; ``{path, folder, build_s}``."""
    hf = os.path.join(folder, "hf")
    if not os.path.exists(hf):
        model.save_pretrained(hf, safe_serialization=True)
        _write_tokenizer(hf, model.config)
    out = os.path.join(folder, f"builder_{precision}")
    path, seconds = lx.run_builder(hf, out, folder, precision, timeout=timeout)
    return dict(path=path, folder=out, build_s=seconds)


def genai_greedy(folder: str, prompts: torch.Tensor, steps: int) -> np.ndarray:
    """Greedy generation of ``steps`` tokens per prompt with ``onnxruntime_genai``
    (one prompt at a time); ``(prompts, steps)``."""
    import onnxruntime_genai as og

    from ..genai.generate import greedy_sequence

    model = og.Model(folder)
    rows = []
    for prompt in prompts.tolist():
        tokens = greedy_sequence(model, prompt, steps)[len(prompt) :]
        rows.append(tokens + [-1] * (steps - len(tokens)))
    return np.array(rows, dtype=np.int64)


def onnx_greedy(path: str, prompts: torch.Tensor, steps: int, *, logits: bool = False):
    """Greedy generation with a model exported by :func:`to_onnx` feeding its own cache
    back (one prompt at a time, as the builder's models run): the tokens
    ``(prompts, steps)``, and with ``logits=True`` the logits ``(steps, prompts, vocab)``
    too."""
    from ..torch_models.decoding_check import onnx_greedy_decoding

    runs = [onnx_greedy_decoding(path, p[None], steps) for p in prompts]
    tokens = np.concatenate([r[0] for r in runs])
    if not logits:
        return tokens
    return tokens, np.stack([np.concatenate(step) for step in zip(*(r[1] for r in runs))])


def min_margin(logits: np.ndarray) -> float:
    """Smallest difference between the largest and the second largest logit."""
    top = np.sort(logits, axis=-1)
    return float((top[..., -1] - top[..., -2]).min())


def time_variants(paths: dict[str, str], config, past: int, repeat: int) -> dict[str, float]:
    """Median seconds of one decoding step (batch 1, one token, a cache of ``past``),
    1 thread, the variants timed in turns."""
    import onnxruntime

    feeds = lx.make_feeds(config, 1, 1, past)
    runners = {}
    for name, path in paths.items():
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        sess = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        sfeeds = lx.session_feeds(
            [i.name for i in sess.get_inputs()], feeds, config.num_hidden_layers
        )
        sfeeds = {k: (v.astype(np.int32) if _int32(sess, k) else v) for k, v in sfeeds.items()}
        runners[name] = lambda s=sess, f=sfeeds: s.run(None, f)
    return {k: v[0] for k, v in interleaved_medians(runners, warmup=3, repeat=repeat).items()}


def _int32(sess, name: str) -> bool:
    return any(i.name == name and i.type == "tensor(int32)" for i in sess.get_inputs())


def run(
    steps: int = 32,
    n_prompts: int = 4,
    past: int = 512,
    repeat: int = 50,
    *,
    train_steps: int = 300,
    seed: int = 0,
    builder: bool = True,
    folder: str | None = None,
) -> tuple[list[dict], dict]:
    """The rows of :data:`COLUMNS` and the training report of the model.

    :param steps: generated tokens per prompt
    :param n_prompts: prompts of the synthetic language
    :param past: cache length of the timed decoding step
    :param repeat: timed steps per variant
    :param train_steps: training steps of the tiny model
    :param seed: seed of the training
    :param builder: also runs onnxruntime-genai's builder
    :param folder: parent of the temporary folder holding the models

    .. code-block:: python

        rows, report = run(steps=16, n_prompts=2, repeat=5, builder=False)
    """
    from ..torch_models.decoding_check import eager_greedy_decoding
    from ..torch_models.trained_tiny import make_prompts, trained_tiny_model
    from .quantize_latency import disk_size

    config, model = trained_tiny_model("llama", steps=train_steps, seed=seed)
    prompts = make_prompts(n_prompts)
    eager, eager_logits = eager_greedy_decoding(model, prompts, steps)
    eager_logits = np.stack(eager_logits)
    rows = []
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        built = export_ours(model, config, tmp)
        tokens, diffs = {}, {}
        for name, info in built.items():
            tokens[name], found = onnx_greedy(info["path"], prompts, steps, logits=True)
            # the logits are comparable while the tokens are the same
            same = (tokens[name] == eager).all(axis=0)
            n = len(same) if same.all() else int(np.argmin(same))
            diffs[name] = float(np.abs(found[:n] - eager_logits[:n]).max()) if n else None
        if builder:
            for name, precision in BUILDER.items():
                built[name] = export_builder(model, tmp, precision)
                tokens[name] = genai_greedy(built[name]["folder"], prompts, steps)
        times = time_variants({k: v["path"] for k, v in built.items()}, config, past, repeat)
        rows.append(
            dict(
                variant="eager",
                tokens=steps * n_prompts,
                agreement=1.0,
                prompts_equal=n_prompts,
                min_margin=min_margin(eager_logits),
            )
        )
        for name, info in built.items():
            share, first, equal = agreement(eager, tokens[name])
            rows.append(
                dict(
                    variant=name,
                    tokens=steps * n_prompts,
                    agreement=share,
                    first_divergence=first,
                    prompts_equal=equal,
                    max_abs_diff=diffs.get(name),
                    bytes=disk_size(info["path"]),
                    latency_ms=times[name] * 1000,
                    past=past,
                    build_s=info["build_s"],
                )
            )
            logger.info("%s", rows[-1])
    return rows, model.training_report


def _fmt(v) -> str:
    if v is None:
        return ""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def format_table(rows: list[dict]) -> str:
    """A markdown table of the rows of :func:`run`."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns its exit code.

    .. code-block:: python

        main(["--out", "quantized_accuracy.csv"])
    """
    from .llm_latency import write_csv

    parser = argparse.ArgumentParser(
        prog="python -m experimental_experiment.bench.quantized_accuracy",
        description="Greedy decoding agreement with eager of float32, int4 and int8 "
        "models (to_onnx + quantize_model, onnxruntime-genai's builder) on a trained "
        "tiny Llama, with their size and decoding latency.",
    )
    parser.add_argument("--out", default=None, help="CSV written atomically")
    parser.add_argument("--steps", type=int, default=32, help="generated tokens")
    parser.add_argument("--prompts", type=int, default=4, help="number of prompts")
    parser.add_argument("--past", type=int, default=512, help="cache of the timed step")
    parser.add_argument("--repeat", type=int, default=50, help="timed steps")
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument(
        "--no-builder", action="store_true", help="skip onnxruntime-genai's builder"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if ns.verbose else logging.WARNING)
    rows, report = run(
        ns.steps,
        ns.prompts,
        ns.past,
        ns.repeat,
        train_steps=ns.train_steps,
        builder=not ns.no_builder,
    )
    print(
        f"training: loss {report['loss']:.4f}, held-out argmax accuracy "
        f"{report['accuracy']:.4f}, {report['seconds']:.1f}s, {report['steps']} steps"
    )
    print(format_table(rows))
    if ns.out:
        write_csv(rows, COLUMNS, ns.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
