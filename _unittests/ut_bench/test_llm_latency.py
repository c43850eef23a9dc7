"""The LLM latency benchmark in its small mode: a tiny Llama, a prefill of 8 tokens and a
decoding step with a cache of 16, every exporter checked against eager; the profile
aggregation on hand-made events; the builder column skipped with a reason when
onnxruntime-genai cannot be imported."""

import csv
import importlib.util
import os

import numpy as np
import pytest

from experimental_experiment.bench import llm_exporters as lx
from experimental_experiment.bench.llm_latency import aggregate_profile, main, run

GENAI = os.environ.get("GENAI_PATH")


def test_small_grid_matches_eager():
    rows, prof = run(
        ["tiny"],
        ["to_onnx default", "to_onnx default+onnxruntime", "eager"],
        [1],
        prefill=8,
        past=16,
        repeat=2,
    )
    assert [(r["phase"], r["past"]) for r in rows[::3]] == [("prefill", 0), ("decode", 16)]
    for r in rows:
        assert r["error"] == "", r
        assert r["latency_ms"] > 0
        assert r["max_abs_diff"] < 1e-4, r
        if r["exporter"] != "eager":
            assert r["nodes"] > 10 and r["kernels"] > 10 and r["export_s"] > 0
    assert {p["exporter"] for p in prof} == {"to_onnx default", "to_onnx default+onnxruntime"}
    matmul = [p for p in prof if p["op_type"] == "MatMul" and p["phase"] == "decode"]
    # 2 layers: q, k, v, o, gate, up, down, two attention products, and the head;
    # GroupQueryAttention takes the attention products, q, k, v are packed in one
    least = {"to_onnx default": 2 * 7 + 1, "to_onnx default+onnxruntime": 2 * 5 + 1}
    assert matmul and all(p["calls"] >= least[p["exporter"]] for p in matmul)


def test_cli_writes_both_csv(tmp_path):
    out, pout = tmp_path / "lat.csv", tmp_path / "prof.csv"
    assert (
        main(
            [
                "--sizes",
                "tiny",
                "--exporters",
                "to_onnx default,eager",
                "--threads",
                "1",
                "--prefill",
                "4",
                "--past",
                "8",
                "--repeat",
                "1",
                "--output",
                str(out),
                "--profile-output",
                str(pout),
            ]
        )
        == 0
    )
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["exporter"] for r in rows} == {"to_onnx default", "eager"}
    with open(pout) as f:
        assert {"MatMul", "Softmax"} <= {r["op_type"] for r in csv.DictReader(f)}


def test_unknown_exporter_is_refused():
    with pytest.raises(SystemExit):
        main(["--sizes", "tiny", "--exporters", "onnxscript"])


def test_aggregate_profile_median_per_run():
    def node(ts, op, dur):
        return {
            "cat": "Node",
            "name": f"n_{op}_kernel_time",
            "ts": ts,
            "dur": dur,
            "args": {"op_name": op},
        }

    def run_event(ts):
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": 5}

    events = [
        run_event(0),
        node(1, "MatMul", 1000),  # warm-up run, left out
        run_event(10),
        node(11, "MatMul", 10),
        node(12, "Add", 4),
        node(13, "Add", 4),
        run_event(20),
        node(21, "MatMul", 30),
        node(22, "Add", 4),
        node(23, "Add", 4),
        run_event(30),
        node(31, "MatMul", 20),
        node(32, "Add", 6),
        node(33, "Add", 6),
        {"cat": "Node", "name": "n_fence_before", "ts": 34, "dur": 99},
    ]
    summary, kernels = aggregate_profile(events, runs=3)
    assert summary["MatMul"] == (1, pytest.approx(0.020))
    assert summary["Add"] == (2, pytest.approx(0.008))
    assert kernels == 3


def test_session_feeds_by_name_and_order():
    feeds = {"input_ids": 1, "attention_mask": 2, "position_ids": 3, "key_0": 4, "value_0": 5}
    builder = lx.session_feeds(
        ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"],
        feeds,
        1,
    )
    assert builder == {
        "input_ids": 1,
        "attention_mask": 2,
        "past_key_values.0.key": 4,
        "past_key_values.0.value": 5,
    }
    ours = lx.session_feeds(["a", "b", "c", "d", "e"], feeds, 1)
    assert list(ours.values()) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="unexpected inputs"):
        lx.session_feeds(["a", "b"], feeds, 1)


def test_make_feeds_shapes():
    config, _ = lx.make_llama("tiny")
    feeds = lx.make_feeds(config, 2, 3, 5)
    assert feeds["attention_mask"].shape == (2, 8)
    assert feeds["position_ids"].tolist() == [[5, 6, 7]] * 2
    assert feeds["key_1"].shape == (2, 2, 5, 16) and feeds["key_1"].dtype == np.float32


@pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime_genai") is not None,
    reason="onnxruntime_genai is importable here, nothing to skip",
)
def test_builder_skipped_with_reason():
    rows, _ = run(
        ["tiny"],
        ["builder", "eager"],
        [1],
        prefill=4,
        past=4,
        repeat=1,
        genai_path=None,
        profile=False,
    )
    builder = [r for r in rows if r["exporter"] == "builder"]
    assert builder and all(
        r["error"].startswith("skipped: onnxruntime-genai's builder is not importable")
        for r in builder
    )
    assert all(r["latency_ms"] is None for r in builder)


@pytest.mark.skipif(
    not GENAI, reason="GENAI_PATH (a pip --target folder holding onnxruntime-genai) is not set"
)
def test_builder_matches_eager():
    rows, _ = run(
        ["tiny"],
        ["builder", "eager"],
        [1],
        prefill=8,
        past=16,
        repeat=1,
        genai_path=GENAI,
        profile=False,
    )
    for r in rows:
        assert r["error"] == "" and r["max_abs_diff"] < 1e-4, r
