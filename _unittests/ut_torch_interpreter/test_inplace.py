"""In-place code end to end: capture functionalizes it, the converters see only
functional operators (select_scatter, slice_scatter, index_put, ...).

Eager torch runs on a fresh copy of the model and of the inputs for every input set:
the mutations of buffers or inputs would otherwise change the expected values.
"""

import copy

import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, flatten_tensors, run_onnx
from experimental_experiment.torch_interpreter import to_onnx

Dim = torch.export.Dim


class Fn(torch.nn.Module):
    """``fn(module, *args)`` as a module, with optional buffers."""

    def __init__(self, fn, **buffers):
        super().__init__()
        self.fn = fn
        for name, value in buffers.items():
            self.register_buffer(name, value)

    def forward(self, *args):
        return self.fn(self, *args)


def check(model, sets, dynamic_shapes=None, atol=1e-4):
    """Exports with ``sets[0]``, compares every set with eager torch."""
    clones = [tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in s) for s in sets]
    onx = to_onnx(copy.deepcopy(model), clones[0], dynamic_shapes=dynamic_shapes)
    for k, args in enumerate(sets):
        with torch.no_grad():
            expected = flatten_tensors(
                copy.deepcopy(model)(
                    *[a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                )
            )
        got = run_onnx(onx, flatten_tensors(args))
        assert len(got) == len(expected)
        for i, (e, r) in enumerate(zip(expected, got)):
            assert_close(e, r, atol, 1e-3, msg=f"input set {k}, output {i}:")
    return onx


def _ops(onx):
    return {n.op_type for n in onx.graph.node}


def test_setitem_ellipsis_index_tensor():
    # the seed example: x[..., kv_index] = update
    def fn(m, x, update, kv_index):
        x = x.clone()
        x[..., kv_index] = update
        return x

    sets = [
        (torch.randn(4, 4, 10), torch.randn(1, 1, 2), torch.tensor([1, 2])),
        (torch.randn(5, 3, 10), torch.randn(1, 1, 2), torch.tensor([3, 7])),
    ]
    check(Fn(fn), sets, ({0: "batch", 1: "n"}, None, None))


@pytest.mark.parametrize("index", [1, -1])
def test_setitem_ellipsis_int(index):
    def fn(m, x, y):
        x = x.clone()
        x[..., index] = y
        return x

    sets = [(torch.randn(3, 4, 5), torch.randn(3, 4)), (torch.randn(2, 6, 5), torch.randn(2, 6))]
    onx = check(Fn(fn), sets, ({0: "batch", 1: "n"}, {0: "batch", 1: "n"}))
    assert "ScatterElements" in _ops(onx)


def test_setitem_ellipsis_from_itself():
    def fn(m, x):
        x = x.clone()
        x[..., -1] = x[..., 0] * 2
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


@pytest.mark.parametrize("case", ["head", "tail", "middle_step"])
def test_setitem_slice_scalar(case):
    def fn(m, x):
        x = x.clone()
        if case == "head":
            x[:, :2] = 0
        elif case == "tail":
            x[:, -2:] = 3
        else:
            x[:, 1:5:2] = -1
        return x

    # torch specializes a dimension equal to the slice bounds: min keeps it dynamic
    sets = [(torch.randn(3, 6),), (torch.randn(5, 9),)]
    check(Fn(fn), sets, ({0: Dim("batch"), 1: Dim("n", min=6)},))


def test_setitem_slice_tensor_row():
    def fn(m, x):
        x = x.clone()
        x[0, 1:3] = torch.tensor([1.0, 2.0])
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: Dim("batch"), 1: Dim("n", min=4)},))


def test_setitem_select_add():
    def fn(m, x):
        x = x.clone()
        x[:, 1] += 2
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


def test_setitem_mask():
    def fn(m, x):
        x = x.clone()
        x[x > 0] = 1
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_(accumulate):
    def fn(m, x, i, v):
        x = x.clone()
        x.index_put_((i,), v, accumulate=accumulate)
        return x

    sets = [
        (torch.randn(5, 4), torch.tensor([0, 2]), torch.randn(2, 4)),
        (torch.randn(7, 3), torch.tensor([6, 1, 3]), torch.randn(3, 3)),
    ]
    check(Fn(fn), sets, ({0: "batch", 1: "n"}, {0: "k"}, {0: "k", 1: "n"}))


def test_masked_fill_():
    def fn(m, x):
        x = x.clone()
        x.masked_fill_(x > 0, 2.0)
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


def test_iadd_on_clone():
    def fn(m, x):
        y = x.clone()
        y += 1
        y.mul_(2)
        y.clamp_(min=0)
        return y

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


def test_iadd_on_input():
    # the new value of the mutated input is an extra output, x_updated
    def fn(m, x):
        x += 1
        return x * 2

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    onx = to_onnx(Fn(fn), (sets[0][0].clone(),), dynamic_shapes=({0: "batch", 1: "n"},))
    assert [o.name for o in onx.graph.output] == ["output_0", "args_0_updated"]
    for (x,) in sets:
        got = run_onnx(onx, [x])
        assert_close((x + 1) * 2, got[0], 1e-5, 1e-5)
        assert_close(x + 1, got[1], 1e-5, 1e-5)


def test_copy_into_slice():
    def fn(m, x, y):
        x = x.clone()
        x[:2].copy_(y)
        return x

    sets = [(torch.randn(3, 4), torch.randn(2, 4)), (torch.randn(5, 7), torch.randn(2, 7))]
    check(Fn(fn), sets, ({0: Dim("batch", min=3), 1: Dim("n")}, {1: Dim("n")}))


def test_zero_slice():
    def fn(m, x):
        x = x.clone()
        x[1:].zero_()
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


def test_setitem_on_transposed_view():
    def fn(m, x, v):
        x = x.clone()
        x.transpose(0, 1)[0] = v
        return x

    sets = [(torch.randn(3, 4), torch.randn(3)), (torch.randn(5, 7), torch.randn(5))]
    check(Fn(fn), sets, ({0: "batch", 1: "n"}, {0: "batch"}))


def test_setitem_on_flat_view():
    def fn(m, x):
        x = x.clone()
        x.view(-1)[2] = 1
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: Dim("batch", min=2), 1: Dim("n", min=2)},))


def test_fill_diagonal_():
    def fn(m, x):
        x = x.clone()
        x.fill_diagonal_(3.0)
        return x

    # fill_diagonal_ specializes the shape: static
    check(Fn(fn), [(torch.randn(3, 4),)])


def test_diagonal_fill_():
    def fn(m, x):
        x = x.clone()
        x.diagonal(1).fill_(0)
        return x

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check(Fn(fn), sets, ({0: "batch", 1: "n"},))


def test_kv_cache_update():
    def fn(m, cache, new):
        n = new.shape[2]
        p = cache.shape[2] - n
        cache = cache.clone()
        cache[:, :, p : p + n] = new
        return cache

    sets = [
        (torch.randn(2, 3, 8, 4), torch.randn(2, 3, 2, 4)),
        (torch.randn(2, 3, 11, 4), torch.randn(2, 3, 3, 4)),
    ]
    check(Fn(fn), sets, ({2: Dim("s", min=4)}, {2: Dim("m", min=1, max=3)}))


def check_state(model, sets, dynamic_shapes, buffers):
    """Like check, the mutated buffers are extra outputs ``<buffer>_updated`` compared
    with the buffers of the eager model after the call."""
    onx = to_onnx(copy.deepcopy(model), sets[0], dynamic_shapes=dynamic_shapes)
    names = [o.name for o in onx.graph.output]
    assert names[-len(buffers) :] == [f"{b}_updated" for b in buffers], names
    for k, args in enumerate(sets):
        eager = copy.deepcopy(model)
        with torch.no_grad():
            expected = flatten_tensors(eager(*args))
        state = dict(eager.named_buffers())
        expected += [state[b] for b in buffers]
        got = run_onnx(onx, flatten_tensors(args))
        assert len(got) == len(expected), names
        for i, (e, r) in enumerate(zip(expected, got)):
            assert_close(e, r, 1e-4, 1e-3, msg=f"input set {k}, output {names[i]}:")
    return onx


def test_batchnorm_training():
    bn = torch.nn.BatchNorm2d(3)
    bn.train()
    sets = [(torch.randn(2, 3, 4, 5),), (torch.randn(4, 3, 6, 2),)]
    check_state(
        bn,
        sets,
        ({0: "batch", 2: "h", 3: "w"},),
        ["running_mean", "running_var", "num_batches_tracked"],
    )


def test_buffer_counter():
    # self.count += 1 then used: the new count is the output count_updated
    def fn(m, x):
        m.count += 1
        return x * m.count

    sets = [(torch.randn(3, 4),), (torch.randn(5, 7),)]
    check_state(Fn(fn, count=torch.tensor(2.0)), sets, ({0: "batch", 1: "n"},), ["count"])


def test_buffer_add_():
    def fn(m, x):
        m.count.add_(1)
        return x + m.count

    sets = [(torch.randn(3, 4),), (torch.randn(5, 4),)]
    check_state(Fn(fn, count=torch.zeros(1)), sets, ({0: "batch"},), ["count"])


def test_buffer_copy_():
    def fn(m, x):
        m.buf.copy_(x.mean(0))
        return x - m.buf

    sets = [(torch.randn(3, 4),), (torch.randn(5, 4),)]
    check_state(Fn(fn, buf=torch.zeros(4)), sets, ({0: "batch"},), ["buf"])


def test_buffer_kv_cache_index_copy_():
    # a static cache updated at given positions, as transformers' StaticCache does
    def fn(m, k, pos):
        m.cache.index_copy_(1, pos, k)
        return m.cache.sum(dim=1)

    sets = [
        (torch.randn(2, 3, 4), torch.tensor([0, 1, 2])),
        (torch.randn(2, 2, 4), torch.tensor([5, 3])),
    ]
    check_state(Fn(fn, cache=torch.zeros(2, 8, 4)), sets, ({1: "seq"}, {0: "seq"}), ["cache"])


def test_submodule_buffer_updated_name():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(1))

        def forward(self, x):
            self.n.add_(1)
            return x * self.n

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.counter = Counter()

        def forward(self, x):
            return self.counter(x) + 1

    sets = [(torch.randn(3, 4),), (torch.randn(5, 4),)]
    check_state(Model(), sets, ({0: "batch"},), ["counter.n"])


def test_exported_program_with_mutations():
    # an ExportedProgram given to to_onnx is functionalized as a captured model is
    def fn(m, x):
        x = x.clone()
        x[..., 1] = 0
        return x

    ep = torch.export.export(Fn(fn), (torch.randn(3, 4),))
    x = torch.randn(3, 4)
    got = run_onnx(to_onnx(ep), [x])[0]
    assert_close(fn(None, x), got, 0, 0)
