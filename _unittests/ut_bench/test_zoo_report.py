"""The zoo's dashboard: reStructuredText rendered from a CSV is valid (docutils stops at
the first warning) and counts what the CSV holds."""

import json

import pytest

docutils_core = pytest.importorskip("docutils.core", reason="docutils comes with sphinx")

from experimental_experiment.bench.zoo import write_rows  # noqa: E402
from experimental_experiment.bench.zoo_report import (  # noqa: E402
    load,
    render_causes,
    render_table,
    render_totals,
)

ROWS = [
    dict(model_type="llama", head="causal-lm", model_class="LlamaForCausalLM",
         exporter="to_onnx", cache=1, status="pass", export_time=1.5, nodes=160,
         max_diff="2e-07", wall_time=3.0),
    dict(model_type="llama", head="causal-lm", model_class="LlamaForCausalLM",
         exporter="torch.onnx", cache=1, status="fail", stage="conversion",
         cause="conversion of aten.foo.default", error="UnsupportedOpError: `aten.foo` *x* |y|"),
    dict(model_type="my_bert", head="masked-lm", model_class="", exporter="to_onnx",
         status="fail", stage="config", cause="config: KeyError: '…'", error="KeyError: 'a_b'"),
]


def _render(tmp_path):
    path = tmp_path / "zoo.csv"
    write_rows(str(path), ROWS)
    (tmp_path / "zoo.json").write_text(json.dumps(dict(
        date="2026-01-01 00:00 UTC", listed=345, versions={"torch": "2.13"})))
    rows, meta = load(str(path))
    return rows, meta


def _check_rst(text):
    docutils_core.publish_doctree(text, settings_overrides={
        "halt_level": 2, "report_level": 2})


def test_totals(tmp_path):
    rows, meta = _render(tmp_path)
    text = render_totals(rows, meta)
    _check_rst(text)
    assert "2 model types tried out of 345 listed" in text
    assert "      - 1 / 2 (1 / 1 built)" in text  # to_onnx, all heads, my_bert is not built
    assert "2026-01-01" in text and "torch 2.13" in text
    assert "for 1 cases, median 3.0 s per case" in text


def test_causes_and_table(tmp_path):
    rows, _ = _render(tmp_path)
    causes, table = render_causes(rows), render_table(rows)
    _check_rst(causes)
    _check_rst(table)
    assert "conversion of aten.foo.default" in causes.replace("\\", "")
    assert "causal-lm (1 model types)" in table and "masked-lm (1 model types)" in table
    assert "pass (1.5 s, 160 nodes, diff 2e-07)" in table
