"""bench/constructs.write_csv: the CSV the documentation page reads, written atomically."""

import csv
import os

import pytest

from experimental_experiment.bench.constructs import COLUMNS, write_csv


def test_write_csv(tmp_path):
    rows = [dict.fromkeys(COLUMNS, "x") | {"detail": "uses `vmap`"}, dict.fromkeys(COLUMNS, "")]
    path = tmp_path / "sub" / "rows.csv"
    write_csv(rows, str(path))
    with open(path, newline="", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert [r["construct"] for r in got] == ["x", ""]
    assert got[0]["detail"] == "``uses 'vmap'``" and got[1]["detail"] == ""
    assert os.listdir(path.parent) == ["rows.csv"]  # no temporary file left


def test_write_csv_failure_leaves_nothing(tmp_path):
    path = tmp_path / "rows.csv"
    with pytest.raises(KeyError):
        write_csv([{"construct": "x"}], str(path))  # no "detail": fails while formatting
    assert os.listdir(tmp_path) == []
