"""The zoo's dashboard: reStructuredText rendered from a CSV is valid (docutils stops at
the first warning) and counts what the CSV holds."""

import json

import pytest

docutils_core = pytest.importorskip("docutils.core", reason="docutils comes with sphinx")

from experimental_experiment.bench.zoo import cause_bucket, write_rows  # noqa: E402
from experimental_experiment.bench.zoo_report import (  # noqa: E402
    load,
    render_causes,
    render_failures,
    render_table,
    render_totals,
)

ROWS = [
    dict(
        model_type="llama",
        head="causal-lm",
        model_class="LlamaForCausalLM",
        exporter="to_onnx",
        cache=1,
        status="pass",
        export_time=1.5,
        nodes=160,
        max_diff="2e-07",
        wall_time=3.0,
    ),
    dict(
        model_type="llama",
        head="causal-lm",
        model_class="LlamaForCausalLM",
        exporter="torch.onnx",
        cache=1,
        status="fail",
        stage="conversion",
        cause="conversion of aten.foo.default",
        error="UnsupportedOpError: `aten.foo` *x* |y|",
    ),
    dict(
        model_type="my_bert",
        head="masked-lm",
        model_class="",
        exporter="to_onnx",
        status="fail",
        stage="config",
        cause="config: KeyError: '…'",
        error="KeyError: 'a_b'",
    ),
]


def _render(tmp_path):
    path = tmp_path / "zoo.csv"
    write_rows(str(path), ROWS)
    (tmp_path / "zoo.json").write_text(
        json.dumps(dict(date="2026-01-01 00:00 UTC", listed=345, versions={"torch": "2.13"}))
    )
    rows, meta = load(str(path))
    return rows, meta


def _check_rst(text):
    docutils_core.publish_doctree(text, settings_overrides={"halt_level": 2, "report_level": 2})


def test_totals(tmp_path):
    rows, meta = _render(tmp_path)
    text = render_totals(rows, meta)
    _check_rst(text)
    assert "2 model types tried out of 345 listed" in text
    assert "      - 1 / 2 (1 / 1 built)" in text  # to_onnx, all heads, my_bert is not built
    assert "2026-01-01" in text and "torch 2.13" in text
    assert "summed over 1 cases (two run at once with ``--jobs 2``), median 3.0 s per case" in text


def test_causes_and_table(tmp_path):
    rows, _ = _render(tmp_path)
    causes, table = render_causes(rows), render_table(rows)
    _check_rst(causes)
    _check_rst(table)
    assert "conversion of aten.foo.default" in causes.replace("\\", "")
    assert "causal-lm (1 model types)" in table and "masked-lm (1 model types)" in table
    # time (s) and nodes per exporter, the largest difference in the last column
    assert "      - 1.50\n      - 160\n" in table and "2.00e-07" in table


def test_failures_keep_digits_and_full_error():
    error = (
        "ImportError: LayoutLMv2Model requires the detectron2 library but it was not "
        "found in your environment. Check out the instructions on the installation "
        "page of its repository and follow the ones that match your environment."
    )
    rows = [
        dict(
            model_type="layoutlmv2",
            head="sequence-classification",
            model_class="",
            exporter=e,
            cache="",
            status="fail",
            stage="config",
            cause=cause_bucket("config", error),
            error=error,
            export_time="",
            nodes="",
            max_diff="",
            wall_time="1.2",
        )
        for e in ("to_onnx", "torch.onnx")
    ]
    rows.append(
        dict(
            rows[0],
            model_type="llama",
            status="pass",
            stage="",
            cause="",
            error="",
            export_time="3.916",
            nodes="238",
            max_diff="1.24e-06",
        )
    )
    rows.append(dict(rows[0], model_type="xlnet", error="RuntimeError: aten.sub 1"))
    rows.append(dict(rows[1], model_type="xlnet", error="ValueError: 2 inconsistencies"))
    text = render_failures(rows)
    _check_rst(text)
    # two errors, two paragraphs of the same cell
    assert "      - to\\_onnx: RuntimeError: aten.sub 1\n\n        torch.onnx: ValueError" in text
    assert "LayoutLMv2Model requires the detectron2 library" in text
    assert "match your environment." in text and "llama" not in text
    assert "LayoutLMvN" not in render_causes(rows)
    table = render_table(rows)
    assert "      - 3.92\n      - 238\n" in table and "1.24e-06" in table


def test_transformers_rows_skip_and_runs(tmp_path):
    from experimental_experiment.bench.zoo import write_meta

    rows = [
        *ROWS,
        dict(
            model_type="llama",
            head="causal-lm",
            model_class="LlamaForCausalLM",
            exporter="transformers",
            cache=1,
            status="pass",
            export_time=6.0,
            nodes=189,
            max_diff="2e-07",
            wall_time=8.0,
        ),
        dict(
            model_type="my_bert",
            head="masked-lm",
            model_class="",
            exporter="transformers",
            status="skip",
            stage="refused",
            cause="refused by the exporter",
            error="TransformersExportRefusedError: ValueError: Found 'labels'",
        ),
    ]
    path = tmp_path / "zoo.csv"
    write_rows(str(path), rows)
    meta_path = str(tmp_path / "zoo.json")
    (tmp_path / "zoo.json").write_text(
        json.dumps(dict(date="2026-01-01 00:00 UTC", commit="a" * 40, listed=345, versions={}))
    )
    # a run of transformers' exporter alone dates its rows, keeps the others' date
    write_meta(meta_path, 345, ["transformers"], ["to_onnx", "torch.onnx"], commit="b" * 40)
    rows, meta = load(str(path))
    assert meta["runs"]["to_onnx"] == dict(date="2026-01-01 00:00 UTC", commit="a" * 40)
    assert meta["runs"]["transformers"]["commit"] == "b" * 40
    totals = render_totals(rows, meta)
    _check_rst(totals)
    assert "``to_onnx`` 2026-01-01 00:00 UTC (commit ``aaaaaaaaaa``)" in totals
    assert "Refused before tracing (status ``skip``, not counted): ``transformers`` 1." in totals
    # the skip row is in neither the tried cases nor the failures
    assert "      - 1 / 1 (1 / 1 built)\n" in totals  # transformers, all heads
    assert "refused" not in render_causes(rows)
    only = [r for r in rows if r["exporter"] == "transformers"]
    assert render_failures(only) == "No failure."
    table = render_table(rows)
    _check_rst(table)
    assert "transformers (s)" in table and "      - 6.00\n      - 189\n" in table


def test_genai_column_only_where_a_type_was_packaged(tmp_path):
    from experimental_experiment.bench.zoo_report import genai_column

    assert genai_column(str(tmp_path / "none.csv")) == {}
    path = tmp_path / "genai_zoo.csv"
    path.write_text(
        "model_type,status,stage,reason,genai_type,tokens_equal,new_tokens,seconds\n"
        "llama,failed,generate,RuntimeError: x,llama,0,,1.0\n"
    )
    genai = genai_column(str(path))
    assert genai == {"llama": "failed (generate)"}
    rows, _ = _render(tmp_path)
    table = render_table(rows, genai=genai)
    _check_rst(table)
    causal, masked = table.split(".. rubric:: masked-lm")
    # the causal-lm section has the column and llama's cell, the masked-lm one has neither
    assert "- genai package" in causal and "- failed (generate)" in causal
    assert "genai package" not in masked
