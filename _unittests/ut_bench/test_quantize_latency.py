"""The quantization benchmark in its small mode (a tiny Llama, a cache of 8, one timed
step): every variant present, sizes and errors consistent; no timing is asserted."""

import csv

from experimental_experiment.bench.quantize_latency import COLUMNS, VARIANTS, main, run


def test_tiny_rows():
    rows = run("tiny", past=8, threads=1, repeat=1)
    assert [r["variant"] for r in rows] == list(VARIANTS)
    fp32 = rows[0]
    assert fp32["variant"] == "fp32" and fp32["rel_l2"] == 0 and fp32["size_ratio"] == 1
    by_name = {r["variant"]: r for r in rows}
    for r in rows[1:]:
        assert r["bytes"] < fp32["bytes"], r
        assert 0 < r["rel_l2"] < 0.3, r
        assert r["quantize_s"] > 0 and r["latency_ms"] > 0
    # the head and the embeddings quantized too: a smaller file
    assert by_name["int4 b32 acc4 head+emb"]["bytes"] < by_name["int4 b32 acc4"]["bytes"]
    assert by_name["int8"]["rel_l2"] < by_name["int4 b32"]["rel_l2"]


def test_cli_csv(tmp_path, capsys):
    out = tmp_path / "q.csv"
    assert (
        main(
            [
                "--size",
                "tiny",
                "--past",
                "8",
                "--repeat",
                "1",
                "--variants",
                "fp32,int8",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert "| tiny | int8 |" in capsys.readouterr().out
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["variant"] for r in rows] == ["fp32", "int8"]
    assert list(rows[0]) == list(COLUMNS)
