"""Piece-by-piece export of a model with one unexportable submodule."""

import torch

from experimental_experiment.investigate.piece_by_piece import (
    export_piece_by_piece,
    infer_dynamic_shapes,
)


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a branch on a value: torch.export cannot capture it
            return x * 2
        return x - 1


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.bad = DataDependent()
        self.b = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.bad(self.a(x)))


def test_one_unexportable_submodule():
    torch.manual_seed(0)
    calls = [((torch.randn(2, 4),), {}), ((torch.randn(5, 4),), {})]
    report = export_piece_by_piece(Model(), calls)
    paths = [p.path for p in report.pieces]
    # leaves first, the model last
    assert paths.index("b.0") < paths.index("b") and paths[-1] == ""
    bad = report["bad"]
    assert (bad.status, bad.non_strict, bad.strict) == ("failed", False, False)
    assert "data-dependent" in bad.error.lower() or "guard" in bad.error.lower()
    assert report[""].status == "failed"  # contains the bad piece
    for path in ["a", "b", "b.0", "b.1"]:
        piece = report[path]
        assert piece.status == "ok", (path, piece.error)
        assert piece.max_abs_diff < 1e-5  # onnxruntime matches eager on both calls
    assert report["a"].dynamic_shapes == ({0: torch.export.Dim.AUTO},)
    assert report["unused"].status == "not called"
    table = report.to_markdown()
    assert "| bad | DataDependent | failed | no | no |" in table


def test_infer_dynamic_shapes():
    calls = [
        ((torch.zeros(2, 3, 4), 1), {"y": torch.zeros(2)}),
        ((torch.zeros(2, 5, 4), 1), {"y": torch.zeros(2)}),
    ]
    args_ds, kwargs_ds = infer_dynamic_shapes(calls)
    assert args_ds == ({1: torch.export.Dim.AUTO}, None)
    assert kwargs_ds == {"y": None}
