"""Exports the image-text-to-text models of transformers part by part (vision encoder,
embedding merge, decoder with a cache), generates 8 greedy tokens with the parts
chained in onnxruntime and compares them with eager ``generate``; writes
``_doc/bench/multimodal.csv`` (one row per type, written after each type; every type
runs in its own process, a crash or a timeout is a ``fail`` row; the run resumes where
it stopped, ``--rerun`` replaces the rows of the types given).
Status: ``pass`` (8 equal tokens), ``mismatch``, ``fail`` (an export or onnxruntime
error), ``eager-fail`` (the tiny model or its eager generation fails before any export:
a configuration the generic shrinking breaks, an image layout not handled here).

.. code-block:: bash

    python -m experimental_experiment.bench.multimodal --types qwen2_5_vl,llava --rerun
"""

from __future__ import annotations

import argparse
import os
from typing import Any

FIELDS = [
    "type",
    "parts",
    "equal_tokens",
    "margin",
    "max_abs_diff",
    "export_time",
    "status",
    "reason",
]


def run_type(model_type: str, steps: int = 8) -> dict[str, Any]:
    """One row of the table; never raises."""
    from ..torch_models.multimodal.cases import build_multimodal
    from ..torch_models.multimodal.export import ExportedParts, export_parts
    from ..torch_models.multimodal.families import (
        is_cross_attention_lm,
        is_image_seq2seq,
        is_prefill_merging,
    )
    from ..torch_models.multimodal.prefix import (
        build_prefill,
        check_prefill_generation,
        export_prefill_parts,
    )
    from ..torch_models.multimodal.run import check_generation, eager_generate
    from ..torch_models.multimodal.seq2seq import (
        build_cross_attention,
        build_image_seq2seq,
        check_cross_attention_generation,
        export_cross_attention_parts,
    )
    from ..torch_models.multimodal.speech import (
        SPEECH_TYPES,
        build_speech,
        check_speech_generation,
        export_speech_parts,
    )

    row: dict[str, Any] = dict(type=model_type, parts="", equal_tokens=0)
    parts = ExportedParts()
    # encoder-decoder models: an encoder part, a decoder part with cross-attention
    seq2seq = model_type in SPEECH_TYPES or is_image_seq2seq(model_type)
    cross = is_cross_attention_lm(model_type)  # Mllama: the image states at every step
    prefill = is_prefill_merging(model_type)  # GIT, Kosmos-2: the image in the forward
    try:  # the tiny model and eager generation, before any export
        if model_type in SPEECH_TYPES:
            case: Any = build_speech(model_type)
        elif seq2seq:
            case = build_image_seq2seq(model_type)
        elif cross:
            case = build_cross_attention(model_type)
        elif prefill:
            case = build_prefill(model_type)
        else:
            case = build_multimodal(model_type)
            eager_generate(case, steps=1)
    except Exception as e:
        text = str(e).strip().splitlines()
        row.update(
            status="eager-fail", reason=f"{type(e).__name__}: {text[0][:160] if text else ''}"
        )
        return row
    try:
        if seq2seq:
            parts = export_speech_parts(case)
            report = check_speech_generation(case, parts, steps=steps)
        elif cross:
            parts = export_cross_attention_parts(case)
            report = check_cross_attention_generation(case, parts, steps=steps)
        elif prefill:
            parts = export_prefill_parts(case)
            report = check_prefill_generation(case, parts, steps=steps)
        else:
            parts = export_parts(case)
            report = check_generation(case, parts, steps=steps)
        row.update(
            equal_tokens=report["equal_tokens"],
            margin=f"{report['margin']:.3g}",
            max_abs_diff=f"{report['max_abs_diff']:.3g}",
        )
        row["status"] = "pass" if report["same"] else "mismatch"
    except Exception as e:  # the table records the failure
        row["status"] = "fail"
        text = [t.strip() for t in str(e).strip().splitlines()[:3]]  # the op, the cause
        row["reason"] = f"{type(e).__name__}: {' '.join(text)[:240]}"
    row["parts"] = "+".join(parts.models)
    row["export_time"] = round(sum(parts.times.values()), 1)
    return row


def render_table(csv_path: str) -> str:
    """The table of a run as reStructuredText: the counts per status, the types that
    pass (parts, equal tokens, margin, max difference, export time), then the others
    with their reason."""
    from ._isolated import read_with_counts
    from .report_format import list_table

    rows, total = read_with_counts(csv_path)
    if not total:
        return "*No result yet.*"
    passed = [r for r in rows if r["status"] == "pass"]
    others = [r for r in rows if r["status"] != "pass"]
    return "\n".join(
        [
            total,
            "",
            list_table(
                ["model type", "parts", "equal tokens", "margin", "max abs diff", "export (s)"],
                [
                    [
                        r["type"],
                        r["parts"].replace("+", " + "),
                        f"{r['equal_tokens']} / 8",
                        r["margin"],
                        r["max_abs_diff"],
                        r["export_time"],
                    ]
                    for r in passed
                ],
                escape=True,
            ),
            "",
            list_table(
                ["model type", "status", "reason"],
                [[r["type"], r["status"], r["reason"][:240]] for r in others],
                widths=[16, 10, 74],
                escape=True,
            ),
        ]
    )


def _parse(argv):
    from ..torch_models.multimodal.cases import list_types
    from ..torch_models.multimodal.speech import SPEECH_TYPES

    parser = argparse.ArgumentParser(
        prog="multimodal", description="exports multimodal models part by part, writes a table"
    )
    parser.add_argument(
        "--types",
        default=",".join(list(SPEECH_TYPES) + list_types()),
        help="comma separated model types",
    )
    parser.add_argument("--output", default=os.path.join("_doc", "bench", "multimodal.csv"))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per type")
    parser.add_argument(
        "--rerun", action="store_true", help="replace the rows of types already in --output"
    )
    return parser.parse_args(argv)


def _run_quietly(model_type: str) -> dict[str, Any]:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    return run_type(model_type)


def run_isolated_type(model_type: str, timeout: float) -> dict[str, Any]:
    """:func:`run_type` in a new process: a crash or a hang is a ``fail`` row."""
    from ._isolated import run_isolated

    result = run_isolated(_run_quietly, (model_type,), timeout)
    if result.value is not None:
        return result.value
    return dict(
        type=model_type,
        status="fail",
        reason=f"{result.stage} after {result.seconds:.0f} s (exit code {result.exitcode})",
    )


def run(types: list[str], output: str, timeout: float = 900, rerun: bool = False) -> list[dict]:
    """Runs every type in its own process (:func:`run_isolated_type`), resumable: see
    ``bench._isolated.run_resumable``. The passing types come first, Whisper leading
    them, then by name."""
    from ._isolated import run_resumable

    return run_resumable(
        types,
        output,
        "type",
        FIELDS,
        lambda model_type: run_isolated_type(model_type, timeout),
        order=lambda r: (r["status"] != "pass", r["type"] != "whisper", r["type"]),
        rerun=rerun,
    )


def main(argv: list[str] | None = None) -> int:
    """Writes the table, one row per type; returns 0."""
    args = _parse(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    run(args.types.split(","), args.output, args.timeout, rerun=args.rerun)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
