"""In-place operators made functional in the FX graph (inplace_ops.py): the cases it
rewrites give the eager values in onnxruntime on two sizes, the cases it refuses say
why and leave the graph untouched (the full functionalization then runs)."""

import pytest
import torch

from experimental_experiment.ext_test_case import check_export
from experimental_experiment.torch_interpreter.capture.capture import has_mutations
from experimental_experiment.torch_interpreter.capture.inplace_ops import functionalize_in_place

DYN = torch.export.Dim.DYNAMIC


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, y=None):
        return self.fn(x) if y is None else self.fn(x, y)


def _rewrite(fn, args, dynamic_shapes=None):
    ep = torch.export.export(Fn(fn), args, dynamic_shapes=dynamic_shapes, strict=False)
    before = ep.graph_module.code
    result = functionalize_in_place(ep.graph_module)
    return ep, result, before


def _window_mask(x):
    # the shifted-window mask of Swin: img_mask[:, h, w, :] = cnt in two loops
    b, hh, ww, _ = x.shape
    mask = torch.zeros((1, hh, ww, 1), dtype=x.dtype)
    cnt = 0
    for h in (slice(0, -4), slice(-4, -2), slice(-2, None)):
        for w in (slice(0, -4), slice(-4, -2), slice(-2, None)):
            mask[:, h, w, :] = cnt
            cnt += 1
    return x + mask


def _relu_inplace(x):
    y = torch.nn.functional.conv2d(x, torch.ones(4, 3, 3, 3) / 27)
    return torch.relu_(y) * 2


def _nested_views(x):
    y = x * 1.5
    y[:, 1:3][:, 0] += 1  # select of a slice
    y[0].mul_(3)
    return y - x


def _chained(x):
    y = x + 1
    z = y.add_(2)  # z aliases y
    z.mul_(3)
    return y, z


# write-backs: one per view level of each change, whole slices (x[:]) excepted.
# _window_mask: 9 fills through slice(slice(mask)); _nested_views: `+=` is add_ then
# copy_ (setitem), each through select(x[:](slice(x[:](y)))) as torch.export records
# y[:, 1:3][:, 0], then y[0].mul_
@pytest.mark.parametrize(
    "fn,writes",
    [(_window_mask, 9 * 2), (_nested_views, 2 + 2 + 1), (_relu_inplace, 0), (_chained, 0)],
)
def test_rewritten_cases_match_eager(fn, writes):
    args = (torch.randn(2, 8, 9, 3),)
    ds = ({0: DYN, 1: DYN, 2: DYN},) if fn is not _relu_inplace else ({0: DYN, 2: DYN, 3: DYN},)
    if fn is _relu_inplace:
        args = (torch.randn(2, 3, 8, 9),)
    ep, result, _ = _rewrite(fn, args, ds)
    assert result.reason is None, result.reason
    assert result.write_backs == writes
    assert not has_mutations(ep)
    # the rewritten program computes what eager computes, on other sizes too
    other = (torch.randn(3, *args[0].shape[1:-1], args[0].shape[-1]),)
    for inputs in (args, other):
        expected, got = fn(inputs[0].clone()), ep.module()(inputs[0].clone())
        torch.testing.assert_close(got, expected)
    names = ({0: "b", 1: "h", 2: "w"},) if fn is not _relu_inplace else ({0: "b", 2: "h", 3: "w"},)
    second = (
        (torch.randn(3, 11, 7, args[0].shape[-1]),)
        if fn is not _relu_inplace
        else (torch.randn(1, 3, 11, 7),)
    )
    check_export(Fn(fn), [args, second], dynamic_shapes=names)


def _changes_input(x):
    x.add_(1)
    return x * 2


def _stale_view(x):
    y = x * 2
    v = y[0]  # a view created before y changes ...
    y.mul_(3)
    return v + 1  # ... and read after: it sees the new values


def _through_transpose(x):
    y = x * 2
    y.t().add_(1)
    return y


@pytest.mark.parametrize(
    "fn,reason",
    [
        (_changes_input, "an input, a buffer or a parameter"),
        (_stale_view, "a view of mul, is read after"),
        (_through_transpose, "a view made by aten.t.default"),
    ],
)
def test_refused_cases_keep_the_graph_and_still_export(fn, reason):
    args = (torch.randn(4, 5),)
    ep, result, before = _rewrite(fn, args)
    assert result.reason is not None and reason in result.reason, result.reason
    assert ep.graph_module.code == before  # untouched
    if fn is not _changes_input:  # (an input changed: test_inplace.py checks it end to end)
        check_export(Fn(fn), [args, (torch.randn(4, 5),)])


def test_promoting_functional_form_is_refused():
    def fn(x, y):
        z = x * 1
        z.add_(y)  # float16 += float32 stays float16; add would give float32
        return z

    args = (torch.randn(3, 4).half(), torch.randn(3, 4))
    ep, result, _ = _rewrite(fn, args)
    assert result.reason is not None and "another dtype" in result.reason


def test_graph_output_is_the_new_value():
    def fn(x):
        y = torch.zeros_like(x)
        y[:, :2] = x[:, :2]
        return y

    ep, result, _ = _rewrite(fn, (torch.randn(3, 5),), ({0: DYN},))
    assert result.reason is None and result.write_backs == 1  # y[:] is not written back
    check_export(Fn(fn), [(torch.randn(3, 5),), (torch.randn(6, 5),)], dynamic_shapes=({0: "b"},))
