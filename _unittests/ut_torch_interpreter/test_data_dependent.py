"""Data-dependent shapes: nonzero, boolean masks, .item() with torch._check, unique,
topk with a dynamic or unbacked k; each exported once, run on two sizes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

FLOATS = [(torch.randn(4, 3),), (torch.randn(7, 3),)]
DS = ({0: "batch"},)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("nonzero", lambda x: torch.nonzero(x > 0)),
        ("nonzero_as_tuple", lambda x: torch.nonzero(x > 0, as_tuple=True)[1]),
        ("where_1arg", lambda x: torch.where(x > 0)),
        ("mask", lambda x: x[x > 0]),
        ("mask_rows", lambda x: x[x[:, 0] > 0]),
        ("mask_then_ops", lambda x: (x[x > 0] * 2).sum() + x[x < 0].numel()),
        ("masked_select", lambda x: torch.masked_select(x, x > 0)),
        ("masked_select_broadcast", lambda x: torch.masked_select(x, x[:1] > 0)),
    ],
)
def test_masks(name, fn):
    onx = check_export(OpModule(fn), FLOATS, dynamic_shapes=DS)
    if name == "nonzero":
        dim = onx.graph.output[0].type.tensor_type.shape.dim[0]
        assert not dim.HasField("dim_value"), "the number of nonzero elements is baked in"


def test_nonzero_3d_int():
    sets = [(torch.randint(0, 3, (2, 3, 4)),), (torch.randint(0, 3, (5, 3, 2)),)]
    check_export(OpModule(torch.nonzero), sets, dynamic_shapes=({0: "a", 2: "b"},))


INTS = [(torch.tensor([3, 1, 3, 2]),), (torch.tensor([5, 5, 1, 0, 2, 9, 1]),)]


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"return_inverse": True},
        {"return_counts": True},
        {"return_inverse": True, "return_counts": True},
    ],
)
def test_unique(kw):
    check_export(OpModule(lambda x: torch.unique(x, **kw)), INTS, dynamic_shapes=({0: "n"},))


def test_unique_float_2d_inverse():
    sets = [
        (torch.tensor([[1.0, 2.0], [2.0, 1.0], [3.0, 1.0]]),),
        (torch.tensor([[4.0, 4.0], [0.5, 2.0], [2.0, 0.5], [4.0, 0.5]]),),
    ]
    check_export(
        OpModule(lambda x: torch.unique(x, return_inverse=True)), sets, dynamic_shapes=({0: "n"},)
    )


def test_unique_dim():
    sets = [
        (torch.tensor([[1, 2], [1, 2], [0, 5]]),),
        (torch.tensor([[4, 4], [0, 1], [4, 4], [0, 1], [9, 9]]),),
    ]
    check_export(
        OpModule(lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True)),
        sets,
        dynamic_shapes=({0: "n"},),
    )


def test_unique_then_ops():
    # the number of unique values flows into later shapes
    check_export(
        OpModule(lambda x: torch.unique(x).float().mean() + torch.unique(x).numel()),
        INTS,
        dynamic_shapes=({0: "n"},),
    )


class ItemSlice(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        return x[:k] * 2


class ItemTopk(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        return torch.topk(x, k, dim=0)


class ItemZeros(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check_is_size(k)
        return torch.zeros((k, x.shape[1])) + x.sum()


@pytest.mark.parametrize("cls", [ItemSlice, ItemTopk, ItemZeros])
def test_item_with_check(cls):
    sets = [(torch.randn(5, 3), torch.tensor(2)), (torch.randn(8, 3), torch.tensor(6))]
    check_export(cls(), sets, dynamic_shapes=({0: "batch"}, None))


def test_topk_dynamic_k():
    fn = OpModule(lambda x: torch.topk(x, x.shape[0] // 2, dim=0))
    check_export(fn, [(torch.randn(4, 3),), (torch.randn(9, 3),)], dynamic_shapes=DS)


def test_topk_k_from_nonzero():
    # k is the number of positive values: an unbacked size
    def fn(x):
        k = (x > 0).sum().item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return torch.topk(x, k).values

    sets = [(torch.tensor([1.0, -2.0, 3.0, 0.5]),), (torch.tensor([-1.0, 4.0, -3.0, 2.0, 7.0]),)]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "n"},))
