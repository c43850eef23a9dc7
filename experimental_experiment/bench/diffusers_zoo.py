"""Runs every diffusers model class
(:mod:`experimental_experiment.bench.diffusers_classes`) through ``to_onnx`` with
dynamic batch, latent height and width, frames and text sequence, and checks the ONNX
model with onnxruntime against eager on a second size; writes a CSV.

.. code-block:: bash

    python -m experimental_experiment.bench.diffusers_zoo \\
        --output _doc/bench/zoo_diffusers.csv [--classes FluxTransformer2DModel,...] \\
        [--timeout 180] [--jobs 2] [--rerun] [--failed]

Each case runs in a forked process with a CPU time limit (the zoo's runner
``run_cases``). A class that cannot be built with
a tiny configuration or run eagerly gets the status ``skip`` and its reason; a case that
fails to export or to match gets ``fail``, its stage and cause.
"""

from __future__ import annotations

import argparse
import csv
import os

from .diffusers_cases import build_class_case
from .diffusers_classes import (
    FAIL_CAUSES,
    SQUARE,
    STATIC_BATCH,
    STATIC_FRAMES,
    STATIC_SIZE,
    list_diffusers_cases,
)

FIELDS = [
    "class",
    "kind",
    "status",
    "stage",
    "cause",
    "export_time",
    "nodes",
    "max_diff",
    "error",
    "wall_time",
]


def to_row(zoo_row: dict) -> dict:
    """A row of ``FIELDS`` from a row of the zoo's runner (a failure while building
    the case or running it eagerly becomes ``skip``)."""
    row = {"class": zoo_row["model_type"], "kind": zoo_row["head"]}
    for key in FIELDS[2:]:
        row[key] = zoo_row.get(key, "")
    if row["status"] == "pass":
        tables = (STATIC_FRAMES, STATIC_BATCH, STATIC_SIZE, SQUARE)
        static = [d[row["class"]] for d in tables if row["class"] in d]
        if static:
            row["cause"] = "; ".join(static)
    if row["status"] == "fail" and row["class"] in FAIL_CAUSES:
        row["cause"] = f"{row['cause']}: {FAIL_CAUSES[row['class']]}"
    if row["status"] == "fail" and row["stage"] == "config":
        row["status"] = "skip"
        error = row["error"].split(" <- ")[0]
        row["cause"] = error.replace("DiffusersCaseError: ", "")[:200]
    return row


def read_rows(path: str) -> list[dict]:
    """The rows of the CSV (empty when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("status")]


def write_rows(path: str, rows: list[dict]) -> None:
    """Writes the CSV atomically, rows sorted by class."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for r in sorted(rows, key=lambda r: r["class"]):
            writer.writerow({k: r.get(k, "") for k in FIELDS})
    os.replace(tmp, path)


def summary(rows: list[dict]) -> dict[str, int | float]:
    """Counts of pass, fail, skip and the pass rate over the classes that run eagerly."""
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "fail", "skip")}
    ran = counts["pass"] + counts["fail"]
    return dict(counts, total=len(rows), rate=counts["pass"] / ran if ran else 0.0)


def _not_run(rows: list[dict]) -> list[str]:
    """The cases diffusers lists that the CSV has no row for."""
    from .zoo_diffusers import diffusers_available

    if not diffusers_available():
        return []
    done = {r["class"] for r in rows}
    return [c.model_type for c in list_diffusers_cases() if c.model_type not in done]


def render_diffusers(csv_path: str) -> str:
    """The pass rate (over the classes that run eagerly) and the table of every class,
    as reStructuredText, from the CSV written by ``main``."""
    from .report_format import cell, list_table

    rows = read_rows(csv_path)
    if not rows:
        return "*No benchmark result yet.*"
    s = summary(rows)
    head = (
        f"``to_onnx`` passes **{s['pass']} / {s['pass'] + s['fail']}** diffusers cases "
        f"that run eagerly with a tiny configuration ({100 * s['rate']:.0f}%); "
        f"{s['skip']} of the {s['total']} cases are skipped (reason in the table)."
    )
    kinds = sorted({r["kind"] for r in rows})
    by_kind = [
        [k]
        + [
            str(sum(r["kind"] == k and r["status"] == st for r in rows))
            for st in ("pass", "fail", "skip")
        ]
        for k in kinds
    ]
    body = [
        [
            f"``{r['class']}``",
            r["kind"],
            r["status"],
            r["stage"],
            cell(r["cause"]),
            r["export_time"],
            r["nodes"],
            r["max_diff"],
        ]
        for r in rows
    ]
    missing = _not_run(rows)
    if missing:
        head += (
            f" {len(missing)} cases listed by diffusers are not in the file yet "
            f"(the run was stopped before them): {cell(', '.join(missing))}."
        )
    return (
        "\n\n".join(
            [
                head,
                list_table(["kind", "pass", "fail", "skip"], by_kind),
                list_table(
                    [
                        "class",
                        "kind",
                        "status",
                        "stage",
                        "cause",
                        "export time (s)",
                        "nodes",
                        "max diff",
                    ],
                    body,
                    escape=False,
                ),
            ]
        )
        + "\n"
    )


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="diffusers_zoo", description="exports every diffusers model class"
    )
    parser.add_argument("--output", default=os.path.join("_doc", "bench", "zoo_diffusers.csv"))
    parser.add_argument(
        "--classes", default="", help="comma separated class names or cases (Class.decode)"
    )
    parser.add_argument("--timeout", type=float, default=180, help="CPU seconds per case")
    parser.add_argument("--atol", type=float, default=1e-3)
    parser.add_argument("--max-memory", type=float, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--rerun", action="store_true", help="run the selected cases again")
    parser.add_argument(
        "--failed", action="store_true", help="only the cases without the status pass"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Runs the cases not yet in the CSV (all of them with ``--rerun``)."""
    import logging

    import torch  # noqa: F401  (imported before forking: children start fast)

    from ..torch_interpreter import to_onnx  # noqa: F401
    from .zoo import run_cases

    args = _parse(argv)
    cases = list_diffusers_cases(args.classes.split(",") if args.classes else None)
    rows = read_rows(args.output)
    if args.failed:
        bad = {r["class"] for r in rows if r["status"] != "pass"}
        cases = [c for c in cases if c.model_type in bad]
    done = set() if args.rerun or args.failed else {r["class"] for r in rows}
    todo = [(c, "to_onnx") for c in cases if c.model_type not in done]
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    log = logging.getLogger(__name__)
    for zoo_row in run_cases(
        todo,
        jobs=max(args.jobs, 1),
        timeout=args.timeout,
        atol=args.atol,
        max_memory=args.max_memory,
        build=build_class_case,
    ):
        row = to_row(zoo_row)
        rows = [r for r in rows if r["class"] != row["class"]] + [row]
        write_rows(args.output, rows)
        log.warning("%s %s %s", row["class"], row["status"], row["cause"])
    log.warning("summary %s", summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
