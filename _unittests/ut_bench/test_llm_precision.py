"""The precision/runtime grid in its small mode: a tiny Llama packaged in float32 and int4
by this package and by onnxruntime-genai's builder, run by genai and by an
InferenceSession; the ratios to the builder; the peak memory probe."""

import csv
import os
import subprocess
import sys

import pytest

from experimental_experiment.bench import llm_precision as lp

og = pytest.importorskip("onnxruntime_genai")


def test_tiny_grid_every_runner(tmp_path):
    rows, prof = lp.run(
        ["tiny"], [1], prefill=8, past=16, repeat=1, precisions=["int4 acc4"], folder=str(tmp_path)
    )
    # 2 phases x 2 exporters x 2 runtimes (float32: test_cli_writes_csv)
    assert len(rows) == 8
    for r in rows:
        assert r["error"] == "", r
        assert r["latency_ms"] > 0 and r["disk_mb"] > 0 and r["peak_rss_mb"] > 30, r
        assert r["vs_builder"] > 0 and r["disk_vs_builder"] > 0
        if r["exporter"] == "builder":
            assert r["vs_builder"] == 1
        if r["runtime"] == "InferenceSession":
            assert r["max_abs_diff"] < 1.0, r
    assert {r["accuracy_level"] for r in rows} == {4}
    # both quantize every MatMul, the head included: the same order of size on disk
    assert all(0.7 < r["disk_vs_builder"] < 1.3 for r in rows), rows
    assert {p["exporter"] for p in prof} == {"ours", "builder"}
    assert {p["phase"] for p in prof} == {"decode"}
    assert any(p["op_type"] == "MatMulNBits" for p in prof)


def test_add_ratios_same_cell_and_runtime():
    def row(exporter, runtime, ms, threads=1):
        return dict(
            size="s",
            phase="decode",
            threads=threads,
            precision="int4 acc4",
            exporter=exporter,
            runtime=runtime,
            latency_ms=ms,
            peak_rss_mb=100.0,
            disk_mb=None,
        )

    rows = [
        row("ours", "genai", 3.0),
        row("builder", "genai", 2.0),
        row("ours", "InferenceSession", 4.0),
        row("builder", "InferenceSession", 8.0),
        row("ours", "genai", 5.0, threads=2),
    ]
    lp.add_ratios(rows)
    assert [r["vs_builder"] for r in rows] == [1.5, 1.0, 0.5, 1.0, None]
    assert rows[0]["rss_vs_builder"] == 1.0 and rows[0]["disk_vs_builder"] is None


def test_rss_probe_reports_its_own_peak(tmp_path):
    # VmHWM restarts at exec: a probe of a missing folder fails, a python process
    # started from this (larger) one reports far less than this one's peak
    code = "import runpy, sys; m = runpy.run_path(sys.argv[1]); print(m['_vm_hwm_mb']())"
    out = subprocess.run(
        [sys.executable, "-c", code, lp._PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert 1 < float(out) < 200
    assert lp.peak_rss_mb("genai", str(tmp_path / "missing"), 1, 4) is None


def test_cli_refuses_unknown_precision():
    with pytest.raises(SystemExit):
        lp.main(["--sizes", "tiny", "--precisions", "int3"])


def test_cli_writes_csv(tmp_path):
    out = tmp_path / "p.csv"
    assert (
        lp.main(
            [
                "--sizes",
                "tiny",
                "--precisions",
                "fp32",
                "--runtimes",
                "genai",
                "--threads",
                "1",
                "--prefill",
                "4",
                "--past",
                "8",
                "--repeat",
                "1",
                "--no-rss",
                "--profile",
                "",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [(r["phase"], r["exporter"], r["runtime"]) for r in rows] == [
        ("prefill", "ours", "genai"),
        ("prefill", "builder", "genai"),
        ("decode", "ours", "genai"),
        ("decode", "builder", "genai"),
    ]
    assert os.path.getsize(out) > 100
