"""Matrix product converters (einsum), exported with a dynamic batch and checked in
onnxruntime against eager torch on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

DS = ({0: "batch"}, {0: "batch"})

# equation -> shapes of both inputs for a batch of size b
EINSUMS = {
    "bij,bjk->bik": lambda b: [(b, 3, 4), (b, 4, 5)],
    "...ij,...jk->...ik": lambda b: [(b, 2, 3, 4), (b, 2, 4, 5)],
    "bhqd,bhkd->bhqk": lambda b: [(b, 2, 3, 4), (b, 2, 5, 4)],
    "bi,bi->b": lambda b: [(b, 3), (b, 3)],
    "bi,bj->bij": lambda b: [(b, 3), (b, 4)],
    "bij,bkj": lambda b: [(b, 3, 4), (b, 5, 4)],  # implicit output
    "bIj, bjK -> bIK": lambda b: [(b, 3, 4), (b, 4, 5)],  # upper case and spaces
}


def _inputs(shapes, dtype):
    if dtype.is_floating_point:
        return tuple(torch.randn(s).to(dtype) for s in shapes)
    return tuple(torch.randint(-5, 5, s, dtype=dtype) for s in shapes)


def _check_einsum(eq, dtype, atol=1e-4):
    fn = lambda x, y: torch.einsum(eq, x, y)  # noqa: E731
    sets = [_inputs(EINSUMS[eq](b), dtype) for b in (2, 5)]
    onx = check_export(OpModule(fn), sets, dynamic_shapes=DS, atol=atol, rtol=atol)
    ops = [n.op_type for n in onx.graph.node]
    assert "Einsum" in ops, ops


@pytest.mark.parametrize("eq", sorted(EINSUMS))
def test_einsum(eq):
    _check_einsum(eq, torch.float32)


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.float64]
)
@pytest.mark.parametrize("eq", ["bij,bjk->bik", "bi,bj->bij"])
def test_einsum_dtypes(eq, dtype):
    atol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-4)
    _check_einsum(eq, dtype, atol=atol)


def test_einsum_one_input():
    def fn(x):
        return torch.einsum("bij->bji", x) + torch.einsum("bii->b", x)[:, None, None]

    sets = [(torch.randn(b, 3, 3),) for b in (2, 5)]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"},))


def test_einsum_three_inputs():
    fn = lambda x, y, z: torch.einsum("bi,bj,bk->bijk", x, y, z)  # noqa: E731
    sets = [(torch.randn(b, 2), torch.randn(b, 3), torch.randn(b, 4)) for b in (2, 5)]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"},) * 3)
