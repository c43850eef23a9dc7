"""Exports the image-text-to-text models of transformers part by part (vision encoder,
embedding merge, decoder with a cache), generates 8 greedy tokens with the parts
chained in onnxruntime and compares them with eager ``generate``; writes
``_doc/bench/multimodal.csv`` (one row per type, written after each type).
Status: ``pass`` (8 equal tokens), ``mismatch``, ``fail`` (an export or onnxruntime
error), ``eager-fail`` (the tiny model or its eager generation fails before any export:
a configuration the generic shrinking breaks, an image layout not handled here).

.. code-block:: bash

    python -m experimental_experiment.bench.multimodal --types qwen2_5_vl,llava
"""

from __future__ import annotations

import argparse
import csv
import os
import time
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
    from ..torch_models.multimodal.prefix import (
        build_prefill,
        check_prefill_generation,
        export_prefill_parts,
        is_prefill_merging,
    )
    from ..torch_models.multimodal.run import check_generation, eager_generate
    from ..torch_models.multimodal.seq2seq import (
        build_cross_attention,
        build_image_seq2seq,
        check_cross_attention_generation,
        export_cross_attention_parts,
        is_cross_attention_lm,
        is_image_seq2seq,
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Writes the table, one row per type; returns 0."""
    import logging

    args = _parse(argv)
    logging.disable(logging.WARNING)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for model_type in args.types.split(","):
            begin = time.perf_counter()
            row = run_type(model_type)
            writer.writerow({k: row.get(k, "") for k in FIELDS})
            f.flush()
            logging.getLogger(__name__).info(
                "%s %s in %.1fs", model_type, row["status"], time.perf_counter() - begin
            )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
