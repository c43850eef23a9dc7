"""select/slice/diagonal scatter, diagonal, as_strided, unfold, zero, item against
onnxruntime and eager torch, on two shapes; the scatters are also checked through the
in-place code functionalization turns into them."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.errors import UnsupportedOpError

aten = torch.ops.aten
DIMS2 = {0: "batch", 1: "n"}
DIMS3 = {0: "batch", 1: "n", 2: "m"}


def _rand(shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(-5, 6, shape, dtype=dtype)


def _tol(dtype):
    return {"atol": 1e-2} if dtype == torch.float16 else {}


# select_scatter


@pytest.mark.parametrize("dim,index", [(0, 1), (1, 0), (1, -1), (-1, 2), (2, -3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_select_scatter(dim, index, dtype):
    def fn(x, y):
        return aten.select_scatter(x, y, dim, index)

    sets = []
    for shape in [(3, 4, 5), (4, 6, 7)]:
        x = _rand(shape, dtype)
        sets.append((x, _rand(x.select(dim, index).shape, dtype)))
    ds = {0: "batch", 1: "n", 2: "m"}
    src_ds = {i: v for i, v in enumerate(d for k, d in ds.items() if k != dim % 3)}
    check_export(OpModule(fn), sets, dynamic_shapes=(ds, src_ds), **_tol(dtype))


def test_select_scatter_symint_index():
    # the index is a dynamic dimension: x[:, n - 1] = y with n the size of another input
    def fn(x, y, z):
        return aten.select_scatter(x, y, 1, z.shape[0] - 1)

    sets = [
        (torch.randn(3, 6), torch.randn(3), torch.randn(2)),
        (torch.randn(5, 6), torch.randn(5), torch.randn(4)),
    ]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: "k"}))


# slice_scatter

SLICES = {
    "head": (1, None, 2, 1),
    "tail_none": (1, 2, None, 1),
    "tail_huge": (1, 2, 2**63 - 1, 1),
    "negative": (1, -3, -1, 1),
    "negative_to_end": (1, -2, None, 1),
    "middle": (1, 1, 3, 1),
    "all": (1, None, None, 1),
    "step2": (1, 1, None, 2),
    "step3_neg": (1, -5, -1, 3),
    "dim0": (0, 1, 3, 1),
    "dim0_step": (0, 0, None, 2),
}


@pytest.mark.parametrize("name", sorted(SLICES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_slice_scatter(name, dtype):
    dim, start, end, step = SLICES[name]

    def fn(x, y):
        return aten.slice_scatter(x, y, dim, start, end, step)

    sets = []
    for shape in [(4, 6), (6, 9)]:
        x = _rand(shape, dtype)
        s = aten.slice(x, dim, start, end, step)
        sets.append((x, _rand(s.shape, dtype)))
    # the size of src along dim derives from x: torch.export infers it (AUTO)
    auto = torch.export.Dim.AUTO
    check_export(OpModule(fn), sets, dynamic_shapes=(DIMS2, {0: auto, 1: auto}), **_tol(dtype))


def test_slice_scatter_symint_bounds():
    # the cache update of a decoder: cache[:, :, p:p + n] = new, p = size - n
    def fn(cache, new):
        n = new.shape[2]
        p = cache.shape[2] - n
        cache = cache.clone()
        cache[:, :, p : p + n] = new
        return cache

    sets = [
        (torch.randn(2, 3, 8, 4), torch.randn(2, 3, 2, 4)),
        (torch.randn(2, 3, 11, 4), torch.randn(2, 3, 3, 4)),
    ]
    ds = ({2: torch.export.Dim("s", min=4)}, {2: torch.export.Dim("m", min=1, max=3)})
    onx = check_export(OpModule(fn), sets, dynamic_shapes=ds)
    assert "Concat" in {n.op_type for n in onx.graph.node}


def test_scatter_bfloat16():
    # onnxruntime has no bfloat16 kernels for these: the reference evaluator
    def fn(x, y, z):
        x = aten.select_scatter(x, y, 1, -1)
        return aten.slice_scatter(x, z, 0, 1, None, 2)

    sets = []
    for n in (5, 8):
        x = torch.randn(n, 4).to(torch.bfloat16)
        sets.append(
            (
                x,
                torch.randn(n).to(torch.bfloat16),
                torch.randn(len(range(1, n, 2)), 4).to(torch.bfloat16),
            )
        )
    auto = torch.export.Dim.AUTO
    check_export(
        OpModule(fn),
        sets,
        dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: auto}),
        use_reference=True,
        atol=1e-2,
    )


# diagonal and diagonal_scatter

DIAGONALS = [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (-2, -1, -2), (1, 2, 0)]


@pytest.mark.parametrize("offset,dim1,dim2", DIAGONALS)
@pytest.mark.parametrize("dynamic", [False, True])
def test_diagonal(offset, dim1, dim2, dynamic):
    def fn(x):
        return torch.diagonal(x, offset, dim1, dim2)

    sets = [(torch.randn(3, 4, 5),), (torch.randn(5, 4, 3),)]
    if dynamic:
        check_export(OpModule(fn), sets, dynamic_shapes=(DIMS3,))
    else:
        check_export(OpModule(fn), sets[:1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
def test_diagonal_dtypes(dtype):
    sets = [(_rand((3, 4), dtype),), (_rand((6, 2), dtype),)]
    check_export(OpModule(lambda x: torch.diagonal(x, 1)), sets, dynamic_shapes=(DIMS2,))


@pytest.mark.parametrize("offset,dim1,dim2", DIAGONALS)
@pytest.mark.parametrize("dynamic", [False, True])
def test_diagonal_scatter(offset, dim1, dim2, dynamic):
    def fn(x, y):
        return torch.diagonal_scatter(x, y, offset, dim1, dim2)

    sets = []
    for shape in [(3, 4, 5), (5, 4, 3)]:
        x = torch.randn(shape)
        sets.append((x, torch.randn(torch.diagonal(x, offset, dim1, dim2).shape)))
    if dynamic:
        r = [d % 3 for d in (dim1, dim2)]
        rest = [d for d in range(3) if d not in r]
        src_ds = {0: ("batch", "n", "m")[rest[0]], 1: "k"}
        check_export(OpModule(fn), sets, dynamic_shapes=(DIMS3, src_ds))
    else:
        check_export(OpModule(fn), sets[:1])


# unfold


@pytest.mark.parametrize("dim,size,step", [(1, 2, 1), (1, 3, 2), (0, 2, 2), (-1, 1, 1)])
def test_unfold(dim, size, step):
    sets = [(torch.randn(4, 6, 3),), (torch.randn(6, 9, 5),)]
    check_export(OpModule(lambda x: x.unfold(dim, size, step)), sets, dynamic_shapes=(DIMS3,))


def test_unfold_static():
    check_export(OpModule(lambda x: x.unfold(1, 3, 2)), [(torch.randn(2, 7),)])


# as_strided


def test_as_strided_reshape():
    def fn(x):
        return torch.as_strided(
            x, (x.shape[0], 2, x.shape[1] // 2), (x.shape[1], x.shape[1] // 2, 1)
        )

    sets = [(torch.randn(3, 6),), (torch.randn(5, 6),)]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"},))


def test_as_strided_static_gather():
    def fn(x):
        return torch.as_strided(x, (3, 2), (1, 2), 1)

    check_export(OpModule(fn), [(torch.randn(3, 4),)])


def test_as_strided_refused():
    def fn(x):
        return torch.as_strided(x.transpose(0, 1), (2, 2), (1, 2))

    with pytest.raises(UnsupportedOpError, match="not contiguous"):
        to_onnx(OpModule(fn), (torch.randn(3, 4),))


def test_as_strided_dynamic_refused():
    def fn(x):
        return torch.as_strided(x, (2, 2), (1, 2))

    with pytest.raises(UnsupportedOpError, match="dynamic"):
        to_onnx(OpModule(fn), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},))


def test_as_strided_scatter_static():
    def fn(x, y):
        # a transposed 2x2 block (positions must not overlap: the order is undefined)
        return torch.as_strided_scatter(x, y, (2, 2), (1, 4), 1)

    check_export(OpModule(fn), [(torch.randn(3, 4), torch.randn(2, 2))])


def test_as_strided_scatter_reshape():
    def fn(x, y):
        return torch.as_strided_scatter(x, y, (x.shape[0] * 2, 3), (3, 1))

    sets = [(torch.randn(3, 6), torch.randn(6, 3)), (torch.randn(5, 6), torch.randn(10, 3))]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"}, {0: "batch2"}))


# zero, item


def test_zero():
    def fn(x):
        x = x.clone()
        x[1:].zero_()
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 2),)]
    check_export(OpModule(fn), sets, dynamic_shapes=(DIMS2,))


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.float64, torch.int64, torch.int32]
)
def test_item(dtype):
    def fn(x):
        return x * x[0, 0].item()

    sets = [(_rand((3, 4), dtype),), (_rand((5, 2), dtype),)]
    check_export(OpModule(fn), sets, dynamic_shapes=(DIMS2,), **_tol(dtype))


def test_item_as_size():
    def fn(x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return x[:k] * 2

    sets = [(torch.randn(4, 3), torch.tensor(2)), (torch.randn(6, 3), torch.tensor(5))]
    check_export(OpModule(fn), sets, dynamic_shapes=({0: "batch"}, None))
