"""Sorting converters (topk, sort, cumsum, tril, nonzero...) on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

SHAPES = [(4, 5), (6, 3)]
DS = ({0: "a", 1: "b"},)


def _distinct(dtype=torch.float32):
    """Values without ties: the order of equal values may differ."""
    return [(torch.randperm(s[0] * s[1]).reshape(s).to(dtype) - 7,) for s in SHAPES]


CASES = {
    "topk": lambda x: torch.topk(x, 2),
    "topk_dim0_smallest": lambda x: torch.topk(x, 3, dim=0, largest=False),
    "topk_symint": lambda x: torch.topk(x, x.shape[1] - 1),
    "sort": lambda x: torch.sort(x),
    "sort_desc_dim0": lambda x: torch.sort(x, dim=0, descending=True),
    "sort_stable": lambda x: torch.sort(x, stable=True, dim=-1),
    "argsort": lambda x: torch.argsort(x, dim=0, descending=True),
    "argsort_stable": lambda x: torch.argsort(x, stable=True),
    "msort": torch.msort,
    "kthvalue": lambda x: torch.kthvalue(x, 2),
    "kthvalue_keepdim": lambda x: torch.kthvalue(x, 3, dim=0, keepdim=True),
    "cumsum": lambda x: torch.cumsum(x, 1),
    "cumsum_dtype": lambda x: torch.cumsum(x, 0, dtype=torch.float64),
    "tril": lambda x: torch.tril(x),
    "triu_diag": lambda x: torch.triu(x, 1) + torch.tril(x, -1),
    "nonzero": lambda x: torch.nonzero(x > 0),
    "argwhere": lambda x: torch.argwhere(x),
    "where_one": lambda x: torch.where(x > 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sorting(name):
    check_export(OpModule(CASES[name]), _distinct(), dynamic_shapes=DS)


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.int32])
def test_sorting_dtypes(dtype):
    def fn(x):
        return torch.topk(x, 2), torch.sort(x, dim=0), torch.cumsum(x, 1), torch.triu(x)

    check_export(OpModule(fn), _distinct(dtype), dynamic_shapes=DS)


def test_bool_inputs():
    def fn(x):
        m = x > 0
        return torch.cumsum(m, 0), torch.tril(m), torch.nonzero(m)

    check_export(OpModule(fn), _distinct(), dynamic_shapes=DS)


def test_ties_are_stable():
    x = torch.tensor([[3.0, 1.0, 3.0, 1.0, 2.0, 3.0], [1.0, 1.0, 0.0, 1.0, 0.0, 2.0]])
    fn = OpModule(
        lambda x: (torch.sort(x, stable=True), torch.sort(x, descending=True, stable=True))
    )
    check_export(fn, [(x,), (x.repeat(2, 2),)], dynamic_shapes=DS)
