"""The genai zoo: one row per model type, a package generating the eager tokens is
``ok``, a type failing anywhere is a row with its stage and reason."""

import csv

import pytest

pytest.importorskip("onnxruntime_genai")

from experimental_experiment.bench.genai_zoo import causal_lm_types, run  # noqa: E402


def test_causal_lm_types():
    types = causal_lm_types()
    assert "llama" in types and "bert" not in types


def test_run_writes_rows(tmp_path):
    output = str(tmp_path / "genai.csv")
    rows = run(["llama", "no_such_type"], output, timeout=600)
    by_type = {r["model_type"]: r for r in rows}
    assert by_type["llama"]["status"] == "ok", by_type["llama"]
    assert by_type["llama"]["tokens_equal"] == 1
    assert by_type["no_such_type"]["status"] == "failed"
    assert by_type["no_such_type"]["stage"] == "config"
    with open(output) as f:
        assert [r["model_type"] for r in csv.DictReader(f)] == ["llama", "no_such_type"]
    # resumed: nothing runs again
    assert len(run(["llama"], output)) == 2


def test_rerun_replaces_the_rows_of_its_types(tmp_path):
    from experimental_experiment.bench.genai_zoo import COLUMNS, main

    output = tmp_path / "genai.csv"
    with open(output, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for name in ("kept_type", "no_such_type"):
            writer.writerow([name, "ok"] + [""] * (len(COLUMNS) - 2))
    assert main(["--output", str(output), "--types", "no_such_type"]) == 0
    with open(output) as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok", "ok"]  # skipped
    assert main(["--output", str(output), "--types", "no_such_type", "--rerun"]) == 0
    with open(output) as f:
        rows = {r["model_type"]: r for r in csv.DictReader(f)}
    assert rows["kept_type"]["status"] == "ok"
    assert (rows["no_such_type"]["status"], rows["no_such_type"]["stage"]) == ("failed", "config")


def test_eager_stops_where_the_package_stops(tmp_path):
    """A model without an end of sequence token: genai stops at the package's (the
    padding token), eager generation is compared up to the same token."""
    import json

    import torch

    from experimental_experiment.bench.genai_zoo import _eager, _package_eos
    from experimental_experiment.torch_models.llm_helper import build_causal_lm, get_tiny_config

    (tmp_path / "genai_config.json").write_text(json.dumps(dict(model=dict(eos_token_id=7))))
    assert _package_eos(str(tmp_path)) == [7]
    model = build_causal_lm(get_tiny_config("llama"), seed=0)
    ids = torch.tensor([[5, 6, 8]])
    free = _eager(model, ids, eos=[999])
    stop = free[4]  # the second new token
    assert _eager(model, ids, eos=[stop]) == free[:4]


def test_render_table(tmp_path):
    from experimental_experiment.bench.genai_zoo import COLUMNS, render_table

    assert render_table(str(tmp_path / "none.csv")) == "*No result yet.*"
    path = tmp_path / "g.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerow(
            dict(
                model_type="llama",
                status="ok",
                stage="",
                reason="",
                genai_type="llama",
                tokens_equal=1,
                new_tokens="16/16",
                seconds=1,
            )
        )
        writer.writerow(
            dict(
                model_type="mamba",
                status="failed",
                stage="package",
                reason="NotADecoderError: no cache",
                genai_type="",
                tokens_equal="",
                new_tokens="",
                seconds=1,
            )
        )
    text = render_table(str(path))
    assert text.startswith("2 model types: 1 failed, 1 ok.")
    assert "package: NotADecoderError: no cache" in text
