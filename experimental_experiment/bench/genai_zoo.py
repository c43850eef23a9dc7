"""onnxruntime-genai packages of the zoo's decoders: every model type with a causal LM
head (``list_cases``), tiny and
with random weights, packaged by :func:`package_model
<experimental_experiment.genai.package_model>`, loaded by ``onnxruntime_genai.Model``,
and its greedy generation compared with transformers' eager ``generate``.

.. code-block:: bash

    python -m experimental_experiment.bench.genai_zoo --output genai_zoo.csv \\
        [--types llama,qwen2] [--limit 20] [--timeout 300] [--rerun]

One row per model type: ``model_type, status, stage, reason, genai_type,
tokens_equal, new_tokens, seconds``. ``status`` is ``ok`` when the package generates the
eager tokens on two prompt lengths, ``mismatch`` when it generates other tokens,
``failed`` otherwise (``stage``: ``config`` (the tiny model), ``package``, ``load``,
``generate``, ``timeout``, ``crash``). Every type runs in its own process. A run
skips the types already in the table, ``--rerun`` runs the given types again and
replaces their rows, the others are kept.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
import warnings

logger = logging.getLogger("experimental_experiment.bench.genai_zoo")

COLUMNS = (
    "model_type",
    "status",
    "stage",
    "reason",
    "genai_type",
    "tokens_equal",
    "new_tokens",
    "seconds",
)
NEW_TOKENS = 16
PROMPTS = (5, 11)


def causal_lm_types() -> list[str]:
    """The zoo's model types exported with a causal LM head."""
    from .zoo_cases import list_cases

    return sorted(c.model_type for c in list_cases() if c.head == "causal-lm")


def _tiny_decoder(model_type: str, seed: int = 0):
    """The zoo's tiny causal LM of ``model_type``, normalization weights perturbed (no
    near-ties in the logits)."""

    from ..torch_models.causal_lm import perturb_norm_weights
    from .zoo_cases import ZooCase, build_case

    model = build_case(ZooCase(model_type, "causal-lm"), seed=seed)["model"]
    return perturb_norm_weights(model, seed + 1)


def _eos(model) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


def _package_eos(folder: str) -> list[int]:
    """The end of sequence tokens of a package: those of the model, or the padding
    token when the model has none (genai needs one, it stops there)."""
    import json

    with open(os.path.join(folder, "genai_config.json"), encoding="utf-8") as f:
        eos = json.load(f)["model"]["eos_token_id"]
    return list(eos) if isinstance(eos, list) else [eos]


def _eager(model, ids, eos: list[int] | None = None) -> list[int]:
    """Eager greedy generation, stopping at ``eos`` (default: the model's end of
    sequence tokens) as genai stops at the package's."""
    from ..genai.generate import eager_greedy_sequence

    tokens = eager_greedy_sequence(model, ids, NEW_TOKENS, eos_token_id=eos)
    stop = set(eos) if eos is not None else _eos(model)
    if len(tokens) < ids.shape[1] + NEW_TOKENS and tokens[-1] in stop:
        tokens = tokens[:-1]  # genai stops before the end of sequence token
    return tokens


def _genai(folder: str, ids) -> list[int]:
    from ..genai.generate import greedy_sequence

    return greedy_sequence(folder, ids[0].tolist(), NEW_TOKENS)


def _reason(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}"


def check_type(model_type: str, folder: str) -> dict:
    """Packages the tiny ``model_type`` into ``folder`` and compares the generations;
    returns the row of the table."""
    import torch

    from ..genai import package_model

    row = dict(
        model_type=model_type,
        status="failed",
        stage="config",
        reason="",
        genai_type="",
        tokens_equal="",
        new_tokens="",
    )
    begin = time.perf_counter()
    try:
        model = _tiny_decoder(model_type)
        row["stage"] = "package"
        report = package_model(model, os.path.join(folder, "pkg"), progress=False)
        row["genai_type"] = report.model_type
        vocab = model.config.get_text_config(decoder=True).vocab_size
        equal, new = [], []
        for length in PROMPTS:
            ids = torch.randint(
                3, vocab, (1, length), generator=torch.Generator().manual_seed(length)
            )
            # a model without an end of sequence token: genai stops at the padding token
            expected = _eager(model, ids, _package_eos(os.path.join(folder, "pkg")))
            row["stage"] = "generate"
            got = _genai(os.path.join(folder, "pkg"), ids)
            equal.append(got == expected)
            new.append(len(got) - length)
        row.update(
            stage="",
            tokens_equal=int(all(equal)),
            new_tokens="/".join(map(str, new)),
            status="ok" if all(equal) else "mismatch",
        )
    except Exception as e:  # one row per type, whatever fails
        row["reason"] = _reason(e)
    row["seconds"] = round(time.perf_counter() - begin, 1)
    return row


def _check_quietly(model_type: str) -> dict:
    warnings.simplefilter("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    logging.getLogger("experimental_experiment.genai").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as folder:
        return check_type(model_type, folder)


def run_type(model_type: str, timeout: float) -> dict:
    """:func:`check_type` in a new process: a crash or a hang is a row too."""
    from ._isolated import run_isolated

    result = run_isolated(_check_quietly, (model_type,), timeout)
    if result.value is not None:
        return result.value
    return dict(
        model_type=model_type,
        status="failed",
        stage=result.stage,
        reason=f"exit code {result.exitcode}",
        genai_type="",
        tokens_equal="",
        new_tokens="",
        seconds=result.seconds,
    )


def run(types: list[str], output: str, timeout: float = 300, rerun: bool = False) -> list[dict]:
    """Runs :func:`run_type` on every type, rewriting ``output`` after each one (rows
    sorted by type); types already in ``output`` are skipped (the run resumes) unless
    ``rerun``, which replaces their rows (the rows of the other types are kept)."""
    from ._isolated import run_resumable

    return run_resumable(
        types,
        output,
        "model_type",
        COLUMNS,
        lambda model_type: run_type(model_type, timeout),
        order=lambda r: r["model_type"],
        rerun=rerun,
    )


def render_table(csv_path: str) -> str:
    """The table of a run as reStructuredText: the counts per status, then one line per
    model type (status, genai's type, tokens equal, the reason of a failure)."""
    from ._isolated import read_with_counts
    from .report_format import list_table

    rows, total = read_with_counts(csv_path)
    if not total:
        return "*No result yet.*"
    body = [
        [
            r["model_type"],
            r["status"],
            r["genai_type"],
            r["new_tokens"],
            f"{r['stage']}: {r['reason'][:160]}" if r["reason"] else r["stage"],
        ]
        for r in rows
    ]
    return "\n".join(
        [
            total,
            "",
            list_table(
                ["model type", "status", "genai type", "new tokens", "stage: reason"],
                body,
                widths=[14, 8, 8, 8, 62],
                escape=True,
            ),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """The command line, see the module's documentation."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="genai_zoo.csv")
    parser.add_argument("--types", default="", help="comma separated model types")
    parser.add_argument("--limit", type=int, default=0, help="at most this many types")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--rerun", action="store_true", help="runs the types again, replacing their rows"
    )
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    types = [t for t in ns.types.split(",") if t] or causal_lm_types()
    if ns.limit:
        types = types[: ns.limit]
    rows = run(types, ns.output, ns.timeout, rerun=ns.rerun)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"genai_zoo: {len(rows)} types, {counts}, table {ns.output!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
