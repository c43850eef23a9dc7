"""The multimodal benchmark's table on the zoo page (bench.multimodal.render_table)."""

import csv
import os

from experimental_experiment.bench.multimodal import FIELDS, render_table


def test_render_table_splits_passes_and_failures(tmp_path):
    assert render_table(str(tmp_path / "none.csv")) == "*No result yet.*"
    path = tmp_path / "multimodal.csv"
    rows = [
        dict(type="llava", parts="vision+merge+decoder", equal_tokens=8, margin="0.5",
             max_abs_diff="2e-05", export_time="2.2", status="pass", reason=""),
        dict(type="blip", parts="", equal_tokens=0, margin="", max_abs_diff="",
             export_time="", status="eager-fail", reason="MultimodalPartsError: no image token"),
    ]  # fmt: skip
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    text = render_table(str(path))
    assert text.startswith("2 model types: 1 eager-fail, 1 pass.")
    passes, failures = text.split(".. list-table::")[1:]
    assert "vision + merge + decoder" in passes and "8 / 8" in passes and "blip" not in passes
    assert "no image token" in failures and "llava" not in failures


def test_run_isolates_resumes_and_reruns(tmp_path):
    from experimental_experiment.bench.multimodal import run

    path = str(tmp_path / "multimodal.csv")
    rows = run(["no_such_type"], path, timeout=120)
    assert [(r["type"], r["status"]) for r in rows] == [("no_such_type", "eager-fail")]
    before = os.path.getmtime(path)
    run(["no_such_type"], path, timeout=120)  # already there: not run again
    assert os.path.getmtime(path) == before
    rows = run(["no_such_type"], path, timeout=0.01, rerun=True)  # replaced: a timeout row
    assert [(r["type"], r["status"]) for r in rows] == [("no_such_type", "fail")]
    assert rows[0]["reason"].startswith("timeout after"), rows[0]["reason"]
