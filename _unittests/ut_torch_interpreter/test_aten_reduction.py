"""Reduction converters against onnxruntime and eager torch, on two dynamic shapes."""

import math

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx

DS = ({0: "a", 1: "b", 2: "c"},)
SHAPES = [(2, 3, 4), (5, 2, 3)]
F32, F16, I64, BOOL = torch.float32, torch.float16, torch.int64, torch.bool


def _inputs(dtype, *, low=-5, high=6, shapes=SHAPES):
    """One input per shape; small integers so that ties and zeros occur."""
    sets = []
    for shape in shapes:
        if dtype.is_floating_point:
            t = torch.randn(shape).to(dtype)
        elif dtype == BOOL:
            t = torch.rand(shape) > 0.5
        else:
            t = torch.randint(low, high, shape, dtype=dtype)
        sets.append((t,))
    return sets


def _check(fn, dtype, *, inputs=None, **kwargs):
    tol = 1e-2 if dtype in (F16, torch.bfloat16) else 1e-4
    return check_export(
        OpModule(fn), inputs or _inputs(dtype), dynamic_shapes=DS, atol=tol, rtol=tol, **kwargs
    )


# ops taking every dtype: name -> function
ANY_DTYPE = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(dim=1),
    "sum_dims_keep": lambda x: x.sum(dim=(0, -1), keepdim=True),
    "sum_none": lambda x: torch.sum(x, dim=None),
    "sum_empty_keep": lambda x: torch.sum(x, dim=[], keepdim=True),
    "amax": lambda x: x.amax(-1),
    "amax_all": lambda x: x.amax(),
    "amin_keep": lambda x: x.amin((0, 2), keepdim=True),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_dim": lambda x: x.max(1),
    "max_dim_keep": lambda x: x.max(-1, keepdim=True),
    "min_dim": lambda x: x.min(0),
    "min_dim_keep": lambda x: x.min(-2, keepdim=True),
    "argmax": lambda x: x.argmax(),
    "argmax_keep": lambda x: x.argmax(keepdim=True),
    "argmax_dim": lambda x: x.argmax(-1),
    "argmin_dim_keep": lambda x: x.argmin(1, keepdim=True),
    "argmin": lambda x: x.argmin(),
    "aminmax": lambda x: torch.aminmax(x, dim=1),
    "aminmax_all": lambda x: torch.aminmax(x, keepdim=True),
    "all": lambda x: x.all(),
    "all_dim": lambda x: x.all(1),
    "all_dims_keep": lambda x: torch.all(x, dim=(0, 2), keepdim=True),
    "any": lambda x: x.any(),
    "any_dim_keep": lambda x: x.any(-1, keepdim=True),
    "any_dims": lambda x: torch.any(x, dim=(1, 2)),
    "count_nonzero": lambda x: torch.count_nonzero(x),
    "count_nonzero_dim": lambda x: torch.count_nonzero(x, 1),
    "count_nonzero_dims": lambda x: torch.count_nonzero(x, (0, -1)),
}
# bool has no ordering for argmax/argmin in torch, nor aminmax
NO_BOOL = {
    "argmax",
    "argmax_keep",
    "argmax_dim",
    "argmin_dim_keep",
    "argmin",
    "aminmax",
    "aminmax_all",
}


@pytest.mark.parametrize("name", sorted(ANY_DTYPE))
@pytest.mark.parametrize("dtype", [F32, F16, I64, BOOL])
def test_any_dtype(name, dtype):
    if dtype == BOOL and name in NO_BOOL:
        pytest.skip(f"torch does not implement {name} on bool")
    _check(ANY_DTYPE[name], dtype)


FLOAT_ONLY = {
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(1),
    "mean_dims_keep": lambda x: x.mean((0, -1), keepdim=True),
    "mean_empty": lambda x: x.mean([]),
    "var": lambda x: x.var(),
    "var_dim": lambda x: x.var(1),
    "var_dims_keep_biased": lambda x: torch.var(x, dim=(0, 2), correction=0, keepdim=True),
    "var_correction2": lambda x: torch.var(x, dim=-1, correction=2),
    "std": lambda x: x.std(),
    "std_dim_biased": lambda x: x.std(1, unbiased=False),
    "std_keep": lambda x: x.std((1, 2), keepdim=True),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "var_mean_all": lambda x: torch.var_mean(x, correction=0),
    "std_mean_keep": lambda x: torch.std_mean(x, (0, -1), keepdim=True),
    "logsumexp": lambda x: x.logsumexp(1),
    "logsumexp_large": lambda x: (x * 100).logsumexp((0, 2), keepdim=True),
    "prod": lambda x: (x * 0.1 + 1).prod(),
    "prod_dim": lambda x: x.prod(1),
    "prod_dim_keep": lambda x: x.prod(-1, keepdim=True),
    "nansum": lambda x: torch.where(x > 1, float("nan"), x).nansum(1),
    "nanmean": lambda x: torch.where(x > 1, float("nan"), x).nanmean((0, 2)),
}


@pytest.mark.parametrize("name", sorted(FLOAT_ONLY))
@pytest.mark.parametrize("dtype", [F32, F16])
def test_float(name, dtype):
    _check(FLOAT_ONLY[name], dtype)


NORMS = {
    "l2": lambda x: torch.linalg.vector_norm(x),
    "l2_dim": lambda x: torch.linalg.vector_norm(x, dim=1),
    "l1_keep": lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2), keepdim=True),
    "linf": lambda x: torch.linalg.vector_norm(x, math.inf, dim=-1),
    "lminf": lambda x: torch.linalg.vector_norm(x, -math.inf, dim=1),
    "l0": lambda x: torch.linalg.vector_norm(torch.where(x > 0, x, 0.0), 0, dim=-1),
    "l3": lambda x: torch.linalg.vector_norm(x, 3, dim=(1, 2)),
    "l05": lambda x: torch.linalg.vector_norm(x, 0.5),
    "norm_p1": lambda x: x.norm(p=1, dim=1),
    "norm_fro": lambda x: torch.norm(x, p="fro"),
    "norm_scalaropt_dim": lambda x: torch.ops.aten.norm.ScalarOpt_dim(x, 3, [1]),
    "norm_scalar": lambda x: torch.ops.aten.norm.Scalar(x, 1),
    "linalg_norm_vec": lambda x: torch.linalg.norm(x, dim=1),
    "linalg_norm_fro": lambda x: torch.linalg.norm(x, dim=(0, 1)),
}


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("dtype", [F32, F16])
def test_norm(name, dtype):
    _check(NORMS[name], dtype)


# induced matrix norms: torch's meta function specializes every dim but the one summed
# first (name -> (function, dynamic dim))
MATRIX_NORMS = {
    "linalg_norm_1": (lambda x: torch.linalg.norm(x, ord=1, dim=(0, 2)), 0),
    "linalg_norm_inf_keep": (
        lambda x: torch.linalg.norm(x, ord=math.inf, dim=(1, 2), keepdim=True),
        2,
    ),
    "linalg_norm_m1": (lambda x: torch.linalg.norm(x, ord=-1, dim=(2, 0)), 2),
    "linalg_norm_minf": (lambda x: torch.linalg.norm(x, ord=-math.inf, dim=(-1, -2)), 1),
}


@pytest.mark.parametrize("name", sorted(MATRIX_NORMS))
def test_matrix_norm(name):
    fn, dyn = MATRIX_NORMS[name]
    shapes = [(2, 3, 4), tuple(5 if i == dyn else d for i, d in enumerate((2, 3, 4)))]
    check_export(OpModule(fn), _inputs(F32, shapes=shapes), dynamic_shapes=({dyn: "a"},))


DTYPE_ARG = {
    "sum_int_to_float": (I64, lambda x: x.sum(1, dtype=torch.float32)),
    "sum_f16_to_f32": (F16, lambda x: x.sum(dtype=torch.float32)),
    "sum_bool_keep": (BOOL, lambda x: x.sum(-1, keepdim=True)),
    "sum_int32": (torch.int32, lambda x: x.sum(0)),
    "sum_f64": (F32, lambda x: x.sum(dtype=torch.float64)),
    "mean_int_dtype": (I64, lambda x: x.mean((1, 2), dtype=torch.float32)),
    "prod_int": (I64, lambda x: x.prod(1)),
    "prod_bool": (BOOL, lambda x: x.prod()),
    "norm_dtype": (F16, lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float32)),
    "logsumexp_int": (I64, lambda x: x.logsumexp(1)),
    "all_uint8": (torch.uint8, lambda x: x.all(1)),
    "max_int32": (torch.int32, lambda x: x.max(-1)),
    "argmax_int16": (torch.int16, lambda x: x.argmax(1)),
}


@pytest.mark.parametrize("name", sorted(DTYPE_ARG))
def test_dtypes(name):
    dtype, fn = DTYPE_ARG[name]
    inputs = _inputs(dtype, low=0 if dtype == torch.uint8 else -5)
    _check(fn, dtype, inputs=inputs)


BF16 = {
    "sum": lambda x: x.sum(1),
    "mean": lambda x: x.mean((0, 2), keepdim=True),
    "amax": lambda x: x.amax(1),
    "max_dim": lambda x: x.max(-1),
    "argmin": lambda x: x.argmin(0),
    "var": lambda x: x.var(1),
    "norm": lambda x: torch.linalg.vector_norm(x, dim=-1),
    "logsumexp": lambda x: x.logsumexp(1),
}


@pytest.mark.parametrize("name", sorted(BF16))
def test_bfloat16(name):
    _check(BF16[name], torch.bfloat16, use_reference=True)


def test_var_static_shape():
    """Static dims: the element count becomes a constant, no Shape node."""
    x = torch.randn(3, 4, 5)
    onx = check_export(OpModule(lambda x: torch.var(x, dim=(0, 2), correction=1)), [(x,)])
    assert "Shape" not in {n.op_type for n in onx.graph.node}


def test_var_dynamic_count():
    """Dynamic reduced dims: the count comes from Shape, never a baked-in constant."""
    onx = _check(lambda x: torch.var(x, dim=(0, 2)), F32)
    ops = {n.op_type for n in onx.graph.node}
    assert "Shape" in ops or "Size" in ops


def test_scalar_input_reductions():
    """0-D tensors: dim 0 and -1 are allowed by torch, ONNX reduces nothing."""

    def fn(x):
        s = x.sum()
        v, i = s.max(0)
        return v, i, s.argmax(), s.sum(-1, keepdim=True), s.amax(0)

    _check(fn, F32)


def test_nan_propagates_in_sum_and_any():
    def fn(x):
        y = torch.where(x > 1, float("nan"), x)
        return y.sum(1), y.any(1), torch.count_nonzero(y, 1)

    _check(fn, F32)


def test_output_shapes_are_symbolic():
    """keepdim=False drops the reduced dims; the others keep their dynamic names."""
    onx = to_onnx(OpModule(lambda x: x.sum(1)), (torch.randn(2, 3, 4),), dynamic_shapes=DS)
    dims = onx.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["a", "c"]


def test_linalg_norm_nuc_unsupported():
    with pytest.raises(Exception, match="SVD"):
        to_onnx(
            OpModule(lambda x: torch.linalg.norm(x, ord=2, dim=(0, 1))), (torch.randn(3, 4, 5),)
        )


@pytest.mark.parametrize("fn", ["any", "all", "any_all", "is_all_true", "is_any_true"])
def test_all_any_over_an_empty_axis(fn):
    """any over nothing is False, all over nothing is True (a cast of ONNX's reduction
    of an empty set to bool gives True for both)."""
    fns = {
        "any": lambda x: torch.any(x > 0, dim=1),
        "all": lambda x: torch.all(x > 0, dim=1),
        "any_all": lambda x: (torch.any(x > 0), torch.all(x > 0)),
        "is_all_true": lambda x: torch.ops.aten._is_all_true(x > 0),
        "is_any_true": lambda x: torch.ops.aten._is_any_true(x > 0),
    }
    check_export(
        OpModule(fns[fn]),
        [(torch.randn(2, 3),), (torch.randn(2, 0),), (torch.randn(3, 5),)],
        dynamic_shapes=({0: "b", 1: "n"},),
    )


# histogram


# torch.export cannot trace histogram with dynamic shapes (no meta kernel): one export
# per shape
HIST_INPUTS = [(torch.randn(3, 4), torch.rand(3, 4)), (torch.randn(5, 7), torch.rand(5, 7))]


def _check_each(fn, inputs):
    for args in inputs:
        check_export(OpModule(fn), [args])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(bins=5),
        dict(bins=4, range=(-1.0, 1.5)),
        dict(bins=3, density=True),
        dict(bins=6, range=(0.5, 0.5)),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_bin_count(kwargs, weighted):
    """Counts (or weights) per bin and torch's bin edges, the range from the data or given."""

    def fn(x, w):
        return torch.histogram(x, weight=w if weighted else None, **kwargs)

    _check_each(fn, HIST_INPUTS)


def test_histogram_edges_and_ties():
    """Elements on an edge go right, the last edge belongs to the last bin, the elements
    outside the range (NaN too) are dropped, a constant input gets a range of 1."""
    x = torch.tensor([0.0, 1.0, 2.0, 2.0, 4.0, -1.0, 5.0, float("nan")])
    check_export(OpModule(lambda x: torch.histogram(x, bins=4, range=(0.0, 4.0))), [(x,)])
    _check_each(
        lambda x: torch.histogram(x, bins=3), [(torch.full((4,), 2.0),), (torch.full((6,), -3.0),)]
    )


@pytest.mark.parametrize("density", [False, True])
def test_histogram_bin_edges(density):
    """Given (uneven) edges, weighted or not."""
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0])

    def fn(x, w):
        return torch.histogram(x, edges, weight=w, density=density)

    _check_each(fn, HIST_INPUTS)


def test_histogram_dynamic_bin_count_unsupported():
    """The converter refuses a bin count that is not a Python int (the output size would
    depend on the data); torch.export never produces one today, so call it directly."""
    from experimental_experiment.torch_interpreter import UnsupportedOpError
    from experimental_experiment.torch_interpreter.convert.aten.histogram import (
        aten_histogram_bin_ct,
    )

    with pytest.raises(UnsupportedOpError, match="number of bins is dynamic"):
        aten_histogram_bin_ct(None, "x", "n")


def test_histogram_empty_input():
    """No value: torch's range is [0, 1], every bin is empty."""
    _check_each(lambda x: torch.histogram(x, bins=4), [(torch.empty(0),), (torch.empty(2, 0),)])


DD_INPUTS = [(torch.randn(7, 2), torch.rand(7)), (torch.randn(4, 3, 2), torch.rand(4, 3))]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(bins=[3, 4]),
        dict(bins=[2, 5], range=[-1.0, 1.0, 0.0, 2.0]),
        dict(bins=[3, 3], density=True),
        dict(bins=[2, 2], range=[1.0, 1.0, -1.0, 1.0]),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_histogramdd_bin_counts(kwargs, weighted):
    def fn(x, w):
        return torch.histogramdd(x, weight=w if weighted else None, **kwargs)

    _check_each(fn, DD_INPUTS)


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd_bin_edges(density):
    ex, ey = torch.tensor([-2.0, -0.5, 0.0, 1.0, 3.0]), torch.tensor([-1.0, 0.5, 2.0])

    def fn(x, w):
        return torch.histogramdd(x, [ex, ey], weight=w, density=density)

    _check_each(fn, DD_INPUTS)


def test_histogram_dropped_weights():
    """The weight of a dropped element (outside the range) is never read, even NaN."""
    x = torch.tensor([0.5, 1.5, 9.0, 2.5, -4.0, 1.0])
    w = torch.tensor([1.0, 2.0, float("nan"), 0.5, float("inf"), 3.0])
    fn = OpModule(lambda x, w: torch.histogram(x, bins=3, range=(0.0, 3.0), weight=w))
    check_export(fn, [(x, w)])
