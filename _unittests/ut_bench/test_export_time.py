"""Merging a partial rerun of the export-time benchmark into its CSV."""

from experimental_experiment.bench.export_time import merge_rows


def test_merge_replaces_measured_rows_and_keeps_the_others():
    old = [dict(model="vit", exporter="to_onnx", seconds="3"),
           dict(model="vit", exporter="torch.onnx", seconds="6"),
           dict(model="swin", exporter="to_onnx", seconds="22")]
    new = [dict(model="swin", exporter="to_onnx", seconds="19"),
           dict(model="resnet", exporter="to_onnx", seconds="2")]
    got = merge_rows(old, new)
    assert [(r["model"], r["exporter"], r["seconds"]) for r in got] == [
        ("vit", "to_onnx", "3"), ("vit", "torch.onnx", "6"), ("swin", "to_onnx", "19"),
        ("resnet", "to_onnx", "2")]
