"""transformers' own OnnxExporter as the zoo's third exporter: a causal LM with a cache
and a masked LM export with dynamic shapes and pass the onnxruntime check on two sizes
(inputs and outputs matched by name), a case the exporter refuses before tracing is a
``skip`` row, not a failure."""

import copy

import pytest
import torch

from experimental_experiment.bench import zoo
from experimental_experiment.bench.zoo_cases import ZooCase, build_case
from experimental_experiment.bench.zoo_transformers import (
    TransformersExportRefusedError,
    export_transformers,
    refused_before_tracing,
    transformers_dynamic_shapes,
)

pytest.importorskip("transformers.exporters")


@pytest.fixture(scope="module")
def llama():
    data = build_case(ZooCase("llama", "causal-lm"))
    onx = export_transformers(data["model"], data["inputs"], data["dynamic_shapes"])
    return data, onx


def test_cache_dynamic_shapes_follow_transformers_order(llama):
    data, _ = llama
    ds = transformers_dynamic_shapes(data["model"], data["inputs"], data["dynamic_shapes"])
    # transformers flattens a DynamicCache layer by layer (keys, values), the zoo keys
    # first: 4 tensors, batch and past dynamic on each
    assert len(ds["past_key_values"]) == 4
    assert all(sorted(d) == [0, 2] for d in ds["past_key_values"])
    assert ds["input_ids"] == {0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC}


def test_llama_with_cache_passes_on_two_sizes(llama):
    data, onx = llama
    names = [i.name for i in onx.graph.input]
    assert "input.past_key_values.layers.0.keys" in names, names
    assert len(onx.graph.node) > 0
    # the check inputs (batch 3, 4 tokens, 7 cached) and the export sizes (2, 3, 5)
    assert zoo._check(data, onx, 1e-3, by_name=True).max_diff <= 1e-3
    same = dict(data, check_inputs=copy.deepcopy(data["inputs"]))
    assert zoo._check(same, onx, 1e-3, by_name=True).max_diff <= 1e-3
    # fed by position, the cache tensors come in another order: the check needs names
    with pytest.raises(AssertionError, match="max absolute difference"):
        zoo._check(data, onx, 1e-3)


def test_bert_row_passes():
    row = zoo.run_case_inline(ZooCase("bert", "masked-lm"), "transformers")
    assert row["status"] == "pass", row
    assert row["exporter"] == "transformers" and row["nodes"] > 0
    assert float(row["max_diff"]) <= 1e-3 and row["export_time"] > 0


def _with_labels(case):
    data = build_case(ZooCase("bert", "masked-lm"))
    data["inputs"]["labels"] = data["inputs"]["input_ids"].clone()
    return data


def test_refused_case_is_a_skip_row(monkeypatch):
    monkeypatch.setattr(zoo, "build_case", _with_labels)
    row = zoo.run_case_inline(ZooCase("bert", "masked-lm"), "transformers")
    assert (row["status"], row["stage"]) == ("skip", "refused"), row
    assert "labels" in row["error"] and row["error"].startswith("TransformersExportRefusedError")
    assert not row.get("export_time")


def test_failure_during_tracing_is_not_a_refusal():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # a branch on the data: torch.export fails
                return x + 1
            return x - 1

    with pytest.raises(Exception) as info:
        export_transformers(DataDependent(), {"x": torch.randn(2, 3)}, {"x": {0: "batch"}})
    assert not isinstance(info.value, TransformersExportRefusedError)
    assert not refused_before_tracing(info.value)


def test_skip_rows_are_not_failures(tmp_path):
    rows = [
        dict(
            model_type="bert",
            head="masked-lm",
            exporter="transformers",
            status="skip",
            stage="refused",
            cause="refused by the exporter",
            error="x",
        )
    ]
    zoo.write_rows(str(tmp_path / "zoo.csv"), rows)
    code = zoo.main(
        [
            "--output",
            str(tmp_path / "zoo.csv"),
            "--types",
            "bert",
            "--exporters",
            "transformers",
            "--strict",
            "--failed",
        ]
    )
    assert code == 0  # --failed selects no type, --strict sees no failure
    assert zoo.read_rows(str(tmp_path / "zoo.csv"))[0]["status"] == "skip"
