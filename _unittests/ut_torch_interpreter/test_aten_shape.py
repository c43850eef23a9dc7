"""Shape, view, split/cat and conversion converters, exported with dynamic shapes and
checked on two input shapes against eager torch."""

import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx

DS2 = ({0: "batch", 1: "n"},)
DS0 = ({0: "batch"},)


def _sets(*shapes_per_set, dtype=torch.float32):
    """One tuple of tensors per shape set: _sets([(2, 3)], [(5, 4)])."""
    out = []
    for shapes in shapes_per_set:
        args = []
        for s in shapes:
            if dtype == torch.bool:
                args.append(torch.rand(s) > 0.5)
            elif dtype.is_floating_point:
                args.append(torch.randn(s).to(dtype))
            else:
                args.append(torch.randint(-9, 9, s, dtype=dtype))
        out.append(tuple(args))
    return out


def _ops(onx):
    return [n.op_type for n in onx.graph.node]


# one input of shape (batch, n) with n even; both dims dynamic
VIEWS = {
    "view_mul": lambda x: x.view(x.shape[0] * 2, -1),
    "view_copy_dims": lambda x: x.view(x.shape[0], x.shape[1] // 2, 2),
    "view_back": lambda x: x.view(-1, 2).view(x.shape),
    "reshape_m1": lambda x: x.reshape(-1),
    "reshape_static_last": lambda x: x.reshape(x.shape[0], -1, 2),
    "flatten": lambda x: x[:, None, :, None].flatten(1),
    "flatten_mid": lambda x: x[:, None, :, None].flatten(1, 2),
    "flatten_all": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (-1, 2)),
    "unflatten_sym": lambda x: x.unflatten(1, (x.shape[1] // 2, 2)),
    "permute": lambda x: x[:, :, None].permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 1),
    "transpose_neg": lambda x: x[None].transpose(-1, -3),
    "movedim": lambda x: x[:, :, None].movedim(0, -1),
    "movedim_list": lambda x: x[:, :, None].movedim((0, 1), (2, 0)),
    "expand_m1": lambda x: x[:, None].expand(-1, 3, -1),
    "expand_sym": lambda x: x[:1].expand(x.shape[0], -1),
    "expand_new_dims": lambda x: x.expand(2, 3, *x.shape),
    "expand_as": lambda x: x[:1, :].expand_as(x),
    "squeeze": lambda x: x[:, None, :, None].squeeze(),
    "squeeze_dim": lambda x: x[:, None].squeeze(1),
    "squeeze_dim_noop": lambda x: x.squeeze(0),
    "squeeze_dims": lambda x: x[None, :, None].squeeze((0, 2)),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "unsqueeze_neg": lambda x: x.unsqueeze(-1),
    "repeat": lambda x: x.repeat(2, 3),
    "repeat_more": lambda x: x.repeat(2, 1, 3),
    "tile": lambda x: x.tile((2,)),
    "flip": lambda x: x.flip(0),
    "flip2": lambda x: x.flip((0, -1)),
    "roll": lambda x: x.roll(1, 0),
    "roll_neg2": lambda x: x.roll((-3, 2), (1, 0)),
    "roll_flat": lambda x: x.roll(5),
    "t": lambda x: x.t(),
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "clone": lambda x: x.clone() + 1,
    "detach": lambda x: x.detach() * 2,
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(name):
    check_export(OpModule(VIEWS[name]), _sets([(2, 4)], [(5, 6)]), dynamic_shapes=DS2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize(
    "name", ["view_copy_dims", "permute", "expand_sym", "flip", "roll_neg2", "repeat"]
)
def test_views_dtypes(name, dtype):
    check_export(OpModule(VIEWS[name]), _sets([(2, 4)], [(5, 6)], dtype=dtype), dynamic_shapes=DS2)


def test_views_bfloat16():
    fn = lambda x: x.view(x.shape[0], -1, 2).transpose(0, 1).flatten(1)  # noqa: E731
    check_export(
        OpModule(fn),
        _sets([(2, 4)], [(5, 6)], dtype=torch.bfloat16),
        dynamic_shapes=DS2,
        use_reference=True,
    )


def test_view_shapes_are_constant():
    # the dynamic dims equal to the input's become 0, the last one -1
    fn = lambda x: x.view(x.shape[0], x.shape[1] // 2, 2)  # noqa: E731
    onx = check_export(OpModule(fn), _sets([(2, 4)], [(5, 6)]), dynamic_shapes=DS2)
    assert _ops(onx) == ["Reshape"], _ops(onx)
    shape = next(i for i in onx.graph.initializer if i.name == onx.graph.node[0].input[1])
    assert onnx.numpy_helper.to_array(shape).tolist() == [0, -1, 2]


def test_view_zero_dim():
    check_export(
        OpModule(lambda x: x.view(0, 3, x.shape[1])),
        [(torch.zeros(0, 4),), (torch.zeros(0, 7),)],
        dynamic_shapes=({1: "n"},),
    )


SLICES = {
    "slice_end_sym": lambda x: x[:, : x.shape[1] // 2],
    "slice_start_sym": lambda x: x[x.shape[0] - 1 :],
    "slice_both_sym": lambda x: x[:, x.shape[1] // 4 : x.shape[1] - 1],
    "slice_neg": lambda x: x[1:-1, -3:],
    "slice_step": lambda x: x[::2, 1::3],
    "slice_full": lambda x: x[:, :] + 1,
    "slice_none_end": lambda x: torch.ops.aten.slice.Tensor(x, 1, 1, None),
    "slice_huge_end": lambda x: torch.ops.aten.slice.Tensor(x, 1, 2, 9223372036854775807),
    "select": lambda x: x[:, 1],
    "select_neg": lambda x: x[-1],
    "select_sym": lambda x: x[x.shape[0] - 2],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "narrow_neg": lambda x: x.narrow(1, -2, 2),
    "narrow_sym": lambda x: x.narrow(0, 1, x.shape[0] - 1),
    "narrow_sym0": lambda x: x.narrow(1, 0, x.shape[1] // 2),
    "cat": lambda x: torch.cat([x, x * 2], dim=1),
    "cat_neg": lambda x: torch.cat([x, x[:1]], dim=-2),
    "cat_sym": lambda x: torch.cat([x[: x.shape[0] // 2], x], 0),
    "cat_promote": lambda x: torch.cat([x, (x > 0).to(torch.int64)], 0),
    "stack": lambda x: torch.stack([x, x + 1, x * 2], 1),
    "stack_neg": lambda x: torch.stack([x, x + 1], -1),
    "split_sizes_sym": lambda x: x.split([x.shape[0] - 1, 1], dim=0),
    "split_sizes_sym2": lambda x: x.split([2, x.shape[1] - 2], dim=1),
}
# splits on a static dim
SPLITS = {
    "split": lambda x: x.split(3, dim=1),
    "split_uneven": lambda x: x.split(4, dim=-1),
    "split_sizes": lambda x: x.split([1, 5], dim=1),
    "chunk": lambda x: x.chunk(2, dim=1),
    "unbind": lambda x: x[:, :3].unbind(1),
    "unbind_one": lambda x: x[:, :1].unbind(1),
    "tensor_split": lambda x: x.tensor_split(4, dim=1),
}


@pytest.mark.parametrize("name", sorted(SLICES))
def test_slices(name):
    check_export(OpModule(SLICES[name]), _sets([(4, 6)], [(7, 8)]), dynamic_shapes=DS2)


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_splits(name):
    check_export(OpModule(SPLITS[name]), _sets([(4, 6)], [(7, 6)]), dynamic_shapes=DS0)


@pytest.mark.parametrize(
    "name", ["slice_end_sym", "select_sym", "cat", "stack", "split_sizes_sym2"]
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.bool])
def test_slices_dtypes(name, dtype):
    fn = SLICES[name]
    if dtype == torch.bool and name in ("cat", "stack"):
        fn = lambda x: torch.stack([x, ~x], 1)  # noqa: E731
    check_export(OpModule(fn), _sets([(4, 6)], [(7, 8)], dtype=dtype), dynamic_shapes=DS2)


SPLITS_DYNAMIC_AXIS = {
    "split": (lambda x: x.split(2, dim=0), 4, 3),
    "chunk2": (lambda x: x.chunk(2, dim=0), 4, 3),
    "chunk3": (lambda x: x.chunk(3, dim=0), 6, 8),  # as many outputs as chunks
    "chunk4": (lambda x: x.chunk(4, dim=0), 6, 5),  # fewer outputs than chunks
    "tensor_split": (lambda x: x.tensor_split(3, dim=0), 4, 8),
    "unflatten": (lambda x: x.unflatten(0, (2, -1)).sum(0), 4, 8),
}


@pytest.mark.parametrize("name", sorted(SPLITS_DYNAMIC_AXIS))
def test_split_dynamic_axis(name):
    # the number of outputs is guarded by torch: both shapes give as many parts
    fn, d1, d2 = SPLITS_DYNAMIC_AXIS[name]
    check_export(OpModule(fn), _sets([(d1, 3)], [(d2, 3)]), dynamic_shapes=DS0)


def test_cat_skips_empty_1d():
    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, torch.tensor([]), y], dim=0)

    inputs = [(torch.randn(2, 3), torch.randn(4, 3)), (torch.randn(5, 3), torch.randn(1, 3))]
    onx = check_export(M(), inputs, dynamic_shapes=({0: "a"}, {0: "b"}))
    assert _ops(onx).count("Concat") == 1


def test_two_inputs_cat_dynamic():
    fn = lambda x, y: torch.cat([x, y], dim=1)  # noqa: E731
    check_export(
        OpModule(fn),
        _sets([(2, 3), (2, 4)], [(5, 1), (5, 7)]),
        dynamic_shapes=({0: "batch", 1: "n"}, {0: "batch", 1: "m"}),
    )


CONVERSIONS = {
    "to_int": lambda x: (x * 3).to(torch.int64),
    "to_half": lambda x: x.to(torch.float16),
    "to_double": lambda x: x.double(),
    "to_same": lambda x: x.to(torch.float32) + 1,
    "to_copy": lambda x: x.to(dtype=torch.float16, copy=True),
    "to_bool": lambda x: x.bool(),
    "type_as": lambda x: x.to(torch.int32).type_as(x) * 2,
    "to_other": lambda x: (x > 0).to(x),
    "_to_copy": lambda x: torch.ops.aten._to_copy(x, dtype=torch.int32),
    "alias": lambda x: torch.ops.aten.alias(x) + 1,
    "lift_fresh_copy": lambda x: torch.ops.aten.lift_fresh_copy(x) + 1,
    "copy": lambda x: torch.ops.aten.copy(x, (x[:1] * 2).to(torch.int64)),
    "copy_same": lambda x: torch.ops.aten.copy(x, x * 2),
    "const_tensor": lambda x: x + torch.tensor([1.0, 2.0, 3.0]),
}


@pytest.mark.parametrize("name", sorted(CONVERSIONS))
def test_conversions(name):
    check_export(OpModule(CONVERSIONS[name]), _sets([(2, 3)], [(5, 3)]), dynamic_shapes=DS0)


def test_conversion_from_int():
    check_export(
        OpModule(lambda x: x.float() / 2),
        _sets([(2, 3)], [(5, 3)], dtype=torch.int64),
        dynamic_shapes=DS0,
    )


def test_assert_tensor_metadata_leaves_no_node():
    onx = to_onnx(
        OpModule(lambda x: x.to(torch.float32) * 2), (torch.randn(2, 3),), dynamic_shapes=DS0
    )
    assert "Cast" not in _ops(onx) and "Mul" in _ops(onx), _ops(onx)


def test_no_baked_dims():
    # no constant of the graph holds the sizes of the first shape (7 x 10)
    fn = lambda x: torch.cat([x.view(x.shape[0] * 2, -1), x.reshape(-1, 5)], 0)  # noqa: E731
    onx = check_export(OpModule(fn), _sets([(7, 10)], [(3, 10)]), dynamic_shapes=DS0)
    for init in onx.graph.initializer:
        values = onnx.numpy_helper.to_array(init).reshape(-1).tolist()
        assert not {7, 14, 70} & set(values), (init.name, values)


REPEAT_INTERLEAVE = {
    "dim0": lambda x: x.repeat_interleave(2, dim=0),
    "dim1": lambda x: x.repeat_interleave(3, dim=1),
    "dim_neg": lambda x: x[:, None].repeat_interleave(2, dim=-1),
    "mid": lambda x: x[:, None].repeat_interleave(3, dim=1),
    "flat": lambda x: x.repeat_interleave(2),
    "one": lambda x: x.repeat_interleave(1, dim=1),
    "sym": lambda x: x[:, :1].repeat_interleave(x.shape[0], dim=1),
}


@pytest.mark.parametrize("name", sorted(REPEAT_INTERLEAVE))
def test_repeat_interleave(name):
    onx = check_export(
        OpModule(REPEAT_INTERLEAVE[name]), _sets([(2, 4)], [(5, 6)]), dynamic_shapes=DS2
    )
    if name != "one":  # a Tile from the converter, not torch's decomposition (Gather)
        assert "Tile" in _ops(onx), _ops(onx)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("name", ["dim1", "flat"])
def test_repeat_interleave_dtypes(name, dtype):
    # onnxruntime's CPU has no bfloat16 Tile (nor Expand): the reference evaluator runs it
    check_export(
        OpModule(REPEAT_INTERLEAVE[name]),
        _sets([(2, 4)], [(5, 6)], dtype=dtype),
        dynamic_shapes=DS2,
        use_reference=dtype == torch.bfloat16,
    )


# repeat_interleave with the repeats as a tensor input: the output size depends on them

RI_REPEATS = {
    "dim0": (lambda x, r: x.repeat_interleave(r, dim=0) * 2, lambda n: torch.randint(0, 4, (n,))),
    "flat": (lambda x, r: torch.repeat_interleave(r), lambda n: torch.randint(0, 4, (n,))),
    "zeros": (
        lambda x, r: x.repeat_interleave(r, dim=0),
        lambda n: torch.zeros(n, dtype=torch.int64),
    ),
}


@pytest.mark.parametrize("name", sorted(RI_REPEATS))
def test_repeat_interleave_tensor_repeats(name):
    """aten.repeat_interleave.Tensor (torch's decomposition of repeat_interleave with a
    tensor of repeats, the ragged grids of Qwen3-VL's vision tower): two shapes, one
    export."""
    fn, repeats = RI_REPEATS[name]
    torch.manual_seed(0)
    sets = [(torch.randn(4, 3), repeats(4)), (torch.randn(7, 5), repeats(7))]
    sets[0][1][0] = 2  # a non-empty output for the example
    onx = check_export(OpModule(fn), sets, dynamic_shapes=({0: "n", 1: "m"}, {0: "n"}))
    assert "CumSum" in _ops(onx), _ops(onx)


# tensor_split with the split indices as a tensor input: sizes depend on their values

TS_INDICES = [
    torch.tensor([1, 3, 4]),
    torch.tensor([4, 2, 5]),
    torch.tensor([-2, 0, 9]),
    torch.tensor([0, 0, 6]),
]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_tensor_split_tensor_indices(dim):
    """Ordered, decreasing (an empty piece), negative, out of range, repeated indices,
    on two dynamic shapes: one export, every index tensor."""
    fn = OpModule(lambda x, idx: torch.tensor_split(x, idx, dim))
    sets = [(torch.randn(6, 7, 5), idx) for idx in TS_INDICES]
    sets += [(torch.randn(3, 9, 4), idx) for idx in TS_INDICES]
    check_export(fn, sets, dynamic_shapes=({0: "a", 1: "b", 2: "c"}, {}))


def test_tensor_split_storage_offset():
    """The storage offset of each piece (a SymInt torch checks) is the start of its
    slice, wrapped and clamped, times the stride of the split axis."""

    def fn(x, idx):
        pieces = torch.tensor_split(x, idx, 1)
        return tuple(torch.full((1,), p.storage_offset(), dtype=torch.int64) for p in pieces)

    sets = [(torch.randn(4, 7, 3), idx) for idx in TS_INDICES]
    onx = check_export(OpModule(fn), sets, dynamic_shapes=({0: "a", 1: "b"}, {}))
    assert len(onx.graph.output) == 4


def test_tensor_split_tensor_sections_unsupported():
    from experimental_experiment.torch_interpreter import UnsupportedOpError
    from experimental_experiment.torch_interpreter.convert.aten.split_cat import (
        aten_tensor_split_tensor,
    )

    class G:
        def get_rank(self, name):
            return 0

    with pytest.raises(UnsupportedOpError, match="number of sections is a 0-D tensor"):
        aten_tensor_split_tensor(G(), "x", "n", 0, ctx=None)
