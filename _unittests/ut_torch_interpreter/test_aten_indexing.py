"""Indexing converters against onnxruntime and eager torch, on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

X_SHAPES = [(4, 5, 3), (6, 2, 4)]
DX = {0: "a", 1: "b", 2: "c"}
DK = {0: "k"}


def _x(shape, dtype=torch.float32):
    x = torch.randn(shape)
    return x.to(dtype) if dtype.is_floating_point else (x * 10).to(dtype)


def _idx(d, k, negative=True):
    return torch.randint(-d if negative else 0, d, (k,))


def _cast(x, dtype):
    return x.to(dtype) if dtype.is_floating_point else (x * 10).to(dtype)


def _perm_idx(shape, dim, m):
    """Indices along ``dim`` without duplicates, shape[dim] replaced by m."""
    return torch.rand(shape).argsort(dim=dim).narrow(dim, 0, m)


# ---------------------------------------------------------------- index.Tensor
INDEX = {
    "dim0": lambda x, i, j: x[i],
    "dim1": lambda x, i, j: x[:, j],
    "dim2": lambda x, i, j: x[:, :, j],
    "two_adjacent_first": lambda x, i, j: x[i, j],
    "two_adjacent_middle": lambda x, i, j: x[:, j, j],
    "two_separated": lambda x, i, j: x[i, :, j],
    "three": lambda x, i, j: x[i, j, j],
    "broadcast": lambda x, i, j: x[i[:, None], j],
    "broadcast_middle": lambda x, i, j: x[:, j[:, None], j],
    "index_2d": lambda x, i, j: x[torch.stack([i, i])],
}


def _index_inputs():
    sets = []
    for k, (a, b, c) in zip((3, 5), X_SHAPES):
        m = min(b, c)
        sets.append((_x((a, b, c)), _idx(a, k), _idx(m, k)))
    return sets


@pytest.mark.parametrize("name", sorted(INDEX))
def test_index(name):
    check_export(OpModule(INDEX[name]), _index_inputs(), dynamic_shapes=(DX, DK, DK))


MASK = {
    "full": lambda x: x[x > 0],
    "leading_two": lambda x: x[x.sum(dim=2) > 0],
    "dim1": lambda x: x[:, x[0, :, 0] > 0],
    "with_index": lambda x: x[x[:, 0, 0] > 0, 1],
}


@pytest.mark.parametrize("name", sorted(MASK))
def test_index_mask(name):
    check_export(OpModule(MASK[name]), [(_x(s),) for s in X_SHAPES], dynamic_shapes=(DX,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
def test_index_dtypes(dtype):
    sets = [
        (_x(s, torch.float32).to(dtype), i, j) for (_, i, j), s in zip(_index_inputs(), X_SHAPES)
    ]
    check_export(OpModule(lambda x, i, j: (x[i], x[:, j, j])), sets, dynamic_shapes=(DX, DK, DK))


# ---------------------------------------------------------------- index_put
def _put(indices_fn, values_fn, accumulate=False):
    def fn(x, i, j):
        # the aten op accepts None in the indices, torch.index_put does not
        return torch.ops.aten.index_put.default(
            x, list(indices_fn(x, i, j)), values_fn(x, i, j), accumulate
        )

    return fn


PUT = {
    "dim0_scalar": _put(lambda x, i, j: (i,), lambda x, i, j: x[0, 0, 0]),
    "dim0_full": _put(lambda x, i, j: (i,), lambda x, i, j: x[i] * 2),
    "dim0_row": _put(lambda x, i, j: (i,), lambda x, i, j: x[0, 0] + 1),
    "none_dim1": _put(lambda x, i, j: (None, j), lambda x, i, j: x[:, j] + 1),
    "adjacent_middle": _put(lambda x, i, j: (None, j, j), lambda x, i, j: x[:, j, j] * 3),
    "adjacent_middle_bcast": _put(lambda x, i, j: (None, j, j), lambda x, i, j: x[:, 0, 0, None]),
    "separated": _put(lambda x, i, j: (i, None, j), lambda x, i, j: x[i, :, j] - 1),
    "broadcast": _put(lambda x, i, j: (i[:, None], j), lambda x, i, j: x[i[:, None], j] * 2),
    "mask_scalar": _put(lambda x, i, j: (x > 0,), lambda x, i, j: x[0, 0, 0]),
    "mask_lead_scalar": _put(lambda x, i, j: (x[:, :, 0] > 0,), lambda x, i, j: x[0, 0, 0]),
    "mask_values": _put(lambda x, i, j: (x > 0,), lambda x, i, j: x[x > 0] * 2),
    "accumulate": _put(lambda x, i, j: (i,), lambda x, i, j: x[i] * 2, True),
    "accumulate_mask": _put(lambda x, i, j: (x > 0,), lambda x, i, j: x[0, 0, 0], True),
    "accumulate_two": _put(lambda x, i, j: (None, j, j), lambda x, i, j: x[0, 0, 0], True),
}


def _put_inputs():
    """Indices without duplicates (the order of duplicated writes is undefined)."""
    sets = []
    for k, (a, b, c) in zip((3, 2), X_SHAPES):
        m = min(b, c)
        i = torch.randperm(a)[:k] - torch.randint(0, 2, (k,)) * a
        j = torch.randperm(m)[:k] - torch.randint(0, 2, (k,)) * m
        sets.append((_x((a, b, c)), i, j))
    return sets


@pytest.mark.parametrize("name", sorted(PUT))
def test_index_put(name):
    check_export(OpModule(PUT[name]), _put_inputs(), dynamic_shapes=(DX, DK, DK))


def test_index_put_accumulate_duplicates():
    fn = _put(lambda x, i, j: (i,), lambda x, i, j: x[i] * 2, True)
    sets = [(x, torch.cat([i, i]), j) for x, i, j in _put_inputs()]
    # the duplicated index is twice as long as the other one
    check_export(OpModule(fn), sets, dynamic_shapes=(DX, {0: "k2"}, DK))


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64])
def test_index_put_dtypes(dtype):
    fn = _put(lambda x, i, j: (i,), lambda x, i, j: x[i] * 2, True)
    sets = [(x.to(dtype), i, j) for x, i, j in _put_inputs()]
    check_export(OpModule(fn), sets, dynamic_shapes=(DX, DK, DK), atol=1e-2)


def test_setitem_inplace():
    def fn(x, i, j):
        y = x.clone()
        y[i] = x[0, 0, 0]
        y[y > 1] = x[1, 0, 0]
        return y

    check_export(OpModule(fn), _put_inputs(), dynamic_shapes=(DX, DK, DK))


def test_setitem_on_view():
    # capture functionalizes in-place writes into views (index_put + slice_scatter)
    def fn(x, i, j):
        y = x.clone()
        y[:, j] = x[0, 0, 0]
        return y

    check_export(OpModule(fn), _put_inputs(), dynamic_shapes=(DX, DK, DK))


# ---------------------------------------------------------------- gather & co
def _gather_inputs(dim, m=2, unique=False):
    sets = []
    for s in X_SHAPES:
        shape = list(s)
        shape[dim] = m
        if unique:
            idx = _perm_idx(s, dim, m)
        else:
            idx = torch.randint(0, s[dim], tuple(shape))
        sets.append((_x(s), idx, _x(tuple(shape))))
    return sets


DIDX = {0: "a", 1: "m", 2: "c"}
# the index of a scatter along axis 0: its first dimension is not the input's
DIDX0 = {0: "m", 1: "b", 2: "c"}


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    sets = [(x, i) for x, i, _ in _gather_inputs(dim)]
    di = dict(DX)
    di[dim % 3] = "m"
    check_export(OpModule(lambda x, i: torch.gather(x, dim, i)), sets, dynamic_shapes=(DX, di))


def test_gather_smaller_index():
    sets = [(x, i[:-1]) for x, i, _ in _gather_inputs(1)]
    check_export(
        OpModule(lambda x, i: torch.gather(x, 1, i)),
        sets,
        dynamic_shapes=(DX, {0: "a1", 1: "m", 2: "c"}),
    )


def test_take_along_dim():
    sets = [(x, i) for x, i, _ in _gather_inputs(1)]
    fn = OpModule(lambda x, i: torch.take_along_dim(x, i.flatten()))
    check_export(fn, sets, dynamic_shapes=(DX, DIDX))


def test_take_along_dim_static():
    # with dim, torch.export specializes every dimension: static shapes only
    x, i = torch.randn(4, 5, 3), torch.randint(0, 5, (4, 2, 3))
    check_export(OpModule(lambda x, i: torch.take_along_dim(x, i, 1)), [(x, i)])
    x, i = torch.randn(4, 5, 3), torch.randint(0, 5, (1, 2, 3))
    check_export(OpModule(lambda x, i: torch.take_along_dim(x, i, -2)), [(x, i)])


def test_index_select_take():
    sets = [(x, i % x.shape[0], j % min(x.shape[1:])) for x, i, j in _index_inputs()]
    fn = OpModule(
        lambda x, i, j: (
            torch.index_select(x, 0, i),
            torch.take(x, i),
            torch.index_select(x, 2, j),
            torch.index_select(x, 1, j[0]),
        )
    )
    check_export(fn, sets, dynamic_shapes=(DX, DK, DK))


SCATTER = {
    "src": lambda x, i, s: torch.scatter(x, 1, i, s),
    "src_larger": lambda x, i, s: torch.scatter(x, 1, i[:, :1], s),
    "value": lambda x, i, s: torch.scatter(x, 1, i, 2.5),
    "reduce_add": lambda x, i, s: torch.scatter(x, 1, i, s, reduce="add"),
    "reduce_multiply": lambda x, i, s: torch.scatter(x, 1, i, s, reduce="multiply"),
}


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("name", sorted(SCATTER))
def test_scatter(name):
    check_export(
        OpModule(SCATTER[name]), _gather_inputs(1, unique=True), dynamic_shapes=(DX, DIDX, DIDX)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_scatter_add(dtype):
    sets = [(_cast(x, dtype), i, _cast(s, dtype)) for x, i, s in _gather_inputs(1, m=4)]
    check_export(
        OpModule(lambda x, i, s: torch.scatter_add(x, 1, i, s)),
        sets,
        dynamic_shapes=(DX, DIDX, DIDX),
        atol=1e-2,
    )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(reduce, include_self, dtype):
    sets = [(_cast(x, dtype), i, _cast(s, dtype)) for x, i, s in _gather_inputs(0, m=5)]

    def fn(x, i, s):
        return torch.scatter_reduce(x, 0, i, s, reduce, include_self=include_self)

    check_export(OpModule(fn), sets, dynamic_shapes=(DX, DIDX0, DIDX0))


def test_scatter_reduce_float16():
    sets = [(x.half(), i, s.half()) for x, i, s in _gather_inputs(0, m=5)]
    fn = OpModule(lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "amax"))
    check_export(fn, sets, dynamic_shapes=(DX, DIDX0, DIDX0))


# ---------------------------------------------------------------- masked & index_*
MASKED = {
    "fill_scalar": lambda x: x.masked_fill(x > 0, -1.5),
    "fill_tensor": lambda x: x.masked_fill(x > 0, x[0, 0, 0]),
    "fill_broadcast": lambda x: x.masked_fill(x[0] > 0, 2.0),
    "fill_inplace": lambda x: x.clone().masked_fill_(x > 0, 3.0),
    "scatter": lambda x: x.masked_scatter(x > 0, x * 10),
    "scatter_broadcast": lambda x: x.masked_scatter(x[:1] > 0, x * 10),
}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked(name):
    check_export(OpModule(MASKED[name]), [(_x(s),) for s in X_SHAPES], dynamic_shapes=(DX,))


def test_masked_fill_int():
    fn = OpModule(lambda x: x.masked_fill(x > 0, 7))
    check_export(fn, [(_x(s, torch.int64),) for s in X_SHAPES], dynamic_shapes=(DX,))


def _index_dim_inputs(dim):
    sets = []
    for k, s in zip((2, 1), X_SHAPES):
        idx = torch.randperm(s[dim])[:k]
        shape = list(s)
        shape[dim] = k
        sets.append((_x(s), idx, _x(tuple(shape))))
    return sets


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_fill_add_copy(dim):
    def fn(x, i, s):
        return (
            x.index_fill(dim, i, -2.0),
            x.index_fill(dim, i, x[0, 0, 0]),
            x.index_add(dim, i, s),
            x.index_add(dim, i, s, alpha=2),
            x.index_copy(dim, i, s),
        )

    ds = dict(DX)
    ds[dim] = "k"
    check_export(OpModule(fn), _index_dim_inputs(dim), dynamic_shapes=(DX, DK, ds))


def test_bfloat16_with_reference():
    def fn(x, i, j):
        y = torch.ops.aten.index_put.default(x, [None, j], x[0, 0, 0], True)
        idx = i[:, None, None].expand(-1, 2, 2)
        z = torch.scatter_add(x, 0, idx, x[:, :2, :2])
        return x[i], x[:, j, j], y, x.masked_fill(x > 0, 1.5), z

    sets = [(x.to(torch.bfloat16), i % x.shape[0], j) for x, i, j in _put_inputs()]
    check_export(
        OpModule(fn), sets, dynamic_shapes=(DX, DK, DK), use_reference=True, atol=5e-2, rtol=5e-2
    )
