"""Creation converters against onnxruntime and eager torch, on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

DS = ({0: "batch", 1: "n"},)
SHAPES = [(2, 3), (5, 4)]


def _inputs(dtype=torch.float32):
    return [(torch.randn(s).to(dtype),) for s in SHAPES]


CASES = {
    "zeros": lambda x: torch.zeros(x.shape[0], 3) + x.sum(),
    "zeros_dyn": lambda x: torch.zeros(x.shape[0], x.shape[1]) + x,
    "ones_int": lambda x: torch.ones(x.shape[1], dtype=torch.int64) + x.shape[0],
    "empty": lambda x: torch.empty(x.shape[0], 2).fill_(2.0),
    "full": lambda x: torch.full((x.shape[0], 2), 1.5) + x[:, :1],
    "full_int": lambda x: torch.full((x.shape[0], x.shape[1]), 7),
    "full_bool": lambda x: torch.full((x.shape[1],), True),
    "full_symint": lambda x: torch.full((2,), x.shape[0]),
    "zeros_like": lambda x: torch.zeros_like(x) + x,
    "ones_like": lambda x: torch.ones_like(x) * 2 + x,
    "ones_like_dtype": lambda x: torch.ones_like(x, dtype=torch.int64),
    "full_like": lambda x: torch.full_like(x, 3.5) - x,
    "full_like_int": lambda x: torch.full_like(x, 2, dtype=torch.int32),
    "empty_like": lambda x: torch.empty_like(x, dtype=torch.int64).fill_(4),
    "new_zeros": lambda x: x.new_zeros(x.shape) + x,
    "new_ones": lambda x: x.new_ones((x.shape[0], 2)),
    "new_full": lambda x: x.new_full((3, x.shape[1]), -2.0),
    "new_empty": lambda x: x.new_empty((x.shape[1],)).fill_(-1),
    "scalar_tensor": lambda x: torch.scalar_tensor(3.0) + x,
    "scalar_tensor_int": lambda x: torch.scalar_tensor(3, dtype=torch.int64) + x.shape[0],
    "arange": lambda x: torch.arange(x.shape[1]),
    "arange_float": lambda x: torch.arange(x.shape[1], dtype=torch.float32) + x,
    "arange_start": lambda x: torch.arange(1, x.shape[0] + 1),
    "arange_step": lambda x: torch.arange(2, x.shape[0] * 3, 2),
    "arange_step_float": lambda x: torch.arange(0.5, x.shape[1], 0.25),
    "arange_static": lambda x: torch.arange(0, 1, 0.1) + x.sum(),
    "arange_neg_step": lambda x: torch.arange(x.shape[0], 0, -1),
    "fill_": lambda x: torch.empty_like(x).fill_(3.0) + x,
    "fill_tensor": lambda x: torch.zeros_like(x).fill_(x[0, 0]),
    "linspace": lambda x: torch.linspace(0, 1, 5) + x.sum(),
    "linspace_odd": lambda x: torch.linspace(-3.5, 2.0, 7) * x.sum(),
    "linspace_one": lambda x: torch.linspace(2.0, 3.0, 1) * x.sum(),
    "linspace_int": lambda x: torch.linspace(0, 10, 4, dtype=torch.int64) + x.shape[0],
    "eye": lambda x: torch.eye(x.shape[0]),
    "eye_m": lambda x: torch.eye(x.shape[0], x.shape[1], dtype=torch.int64),
    "eye_static": lambda x: torch.eye(3) + x.sum(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_creation(name):
    check_export(OpModule(CASES[name]), _inputs(), dynamic_shapes=DS)


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
def test_creation_dtypes(dtype):
    def fn(x):
        z = torch.zeros((x.shape[0], 2), dtype=dtype)
        o = torch.ones_like(x, dtype=dtype)
        f = torch.full((x.shape[1],), 1, dtype=dtype)
        return z, o, f

    check_export(OpModule(fn), _inputs(), dynamic_shapes=DS)


def test_like_keeps_dtype():
    fn = OpModule(lambda x: (torch.zeros_like(x), torch.full_like(x, 3), x.new_ones(2)))
    check_export(fn, _inputs(torch.int64), dynamic_shapes=DS)


def test_bfloat16_with_reference():
    def fn(x):
        return torch.full_like(x, 1.5) + torch.arange(x.shape[1], dtype=torch.bfloat16)

    check_export(
        OpModule(fn), _inputs(torch.bfloat16), dynamic_shapes=DS, use_reference=True, atol=1e-2
    )


def test_fill_inplace_on_view():
    # capture functionalizes in-place ops on views (select_scatter), so this exports
    def fn(x):
        y = x.clone()
        y[0].fill_(1.0)
        return y

    check_export(OpModule(fn), _inputs(), dynamic_shapes=DS)
