"""Merging a partial rerun of the export-time benchmark into its CSV."""

from experimental_experiment.bench.export_time import merge_rows


def test_merge_replaces_measured_rows_and_keeps_the_others():
    old = [
        dict(model="vit", exporter="to_onnx", seconds="3"),
        dict(model="vit", exporter="torch.onnx", seconds="6"),
        dict(model="swin", exporter="to_onnx", seconds="22"),
    ]
    new = [
        dict(model="swin", exporter="to_onnx", seconds="19"),
        dict(model="resnet", exporter="to_onnx", seconds="2"),
    ]
    got = merge_rows(old, new)
    assert [(r["model"], r["exporter"], r["seconds"]) for r in got] == [
        ("vit", "to_onnx", "3"),
        ("vit", "torch.onnx", "6"),
        ("swin", "to_onnx", "19"),
        ("resnet", "to_onnx", "2"),
    ]


def test_median_row_keeps_the_middle_run_and_counts_the_successes():
    from experimental_experiment.bench.export_time import median_row

    runs = [dict(model="m", exporter="e", seconds=s) for s in (3.0, 1.0, 2.0)]
    runs.append(dict(model="m", exporter="e", error="timeout after 9 s"))
    row = median_row(runs)
    assert row["seconds"] == 2.0 and row["runs"] == 3
    assert (
        median_row([dict(model="m", exporter="e", seconds=s) for s in (4.0, 1.0)])["seconds"] == 1.0
    )  # lower middle
    failed = median_row([dict(model="m", exporter="e", error="crash: x")])
    assert failed["error"] == "crash: x" and failed["runs"] == 0
