"""The control-flow benchmark: counts of nodes inside bodies, checked against eager."""

import pytest

from experimental_experiment.bench.control_flow import COLUMNS, main, run_case


@pytest.mark.parametrize("name", ["scan", "local functions"])
def test_bodies_shrink(name):
    row = run_case(name, "to_onnx")
    assert row["status"] == "pass", row
    # scan: Unsqueeze/Squeeze, * 1.0 and arange(3) * 2 go, two Add and a Mul stay;
    # functions: * 1.0, two transposes and arange(3) * 2 go, Constant + Gemm + Add stay
    assert row["body_nodes"] == 3 and row["body_nodes_raw"] > 3, row


def test_csv(tmp_path):
    out = tmp_path / "cf.csv"
    assert main(["--output", str(out), "--exporter", "to_onnx"]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 6
    assert all(",to_onnx,pass," in line for line in lines[1:]), lines
