"""Nested inputs and outputs: tuples, lists, dicts, None, python scalars and
pytree-registered classes; the ONNX inputs get readable flattened names."""

import dataclasses

import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, flatten_tensors, run_onnx
from experimental_experiment.torch_interpreter import to_onnx


class Cache:
    """A user class registered in torch's pytree (like a KV cache)."""

    def __init__(self, keys, values):
        self.keys, self.values = keys, values


torch.utils._pytree.register_pytree_node(
    Cache,
    lambda c: ([c.keys, c.values], None),
    lambda xs, _: Cache(xs[0], xs[1]),
    serialized_type_name="h4test.Cache",
    flatten_with_keys_fn=lambda c: (
        [
            (torch.utils._pytree.GetAttrKey("keys"), c.keys),
            (torch.utils._pytree.GetAttrKey("values"), c.values),
        ],
        None,
    ),
)


@dataclasses.dataclass
class Pair:
    first: torch.Tensor
    second: torch.Tensor


torch.export.register_dataclass(Pair, serialized_type_name="h4test.Pair")


def _names(onx):
    return [i.name for i in onx.graph.input]


def _dims(onx):
    return [
        [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onx.graph.input
    ]


def check(model, sets, dynamic_shapes):
    """Exports with sets[0] (args, kwargs), runs every set, compares with eager."""
    args, kwargs = sets[0]
    onx = to_onnx(model, args, kwargs, dynamic_shapes=dynamic_shapes)
    for k, (a, kw) in enumerate(sets):
        with torch.no_grad():
            expected = flatten_tensors(model(*a, **kw))
        got = run_onnx(onx, flatten_tensors((a, kw)))
        assert len(got) == len(expected)
        for i, (e, r) in enumerate(zip(expected, got)):
            assert_close(e, r, 1e-5, 1e-5, msg=f"set {k} output {i}")
    return onx


class Nested(torch.nn.Module):
    def forward(self, x, pair, d, none=None, n=3, f=0.5, cache=None):
        r = x + pair[0] * pair[1] + d["a"] - d["b"][0] * n * f
        return {"out": r, "list": [cache.keys[0] + 1, cache.values[1] * 2]}, (r.sum(),)


def _nested(batch, c):
    def t(*s):
        return torch.randn(*s)

    args = (t(batch, 4), (t(batch, 4), t(batch, 4)), {"a": t(batch, 4), "b": [t(batch, 4)]})
    kwargs = dict(none=None, n=3, f=0.5, cache=Cache([t(c, 5)], [t(c, 5), t(c, 5)]))
    return args, kwargs


def test_nested_everything():
    ds = dict(
        x={0: "batch"},
        pair=({0: "batch"}, {0: "batch"}),
        d={"a": {0: "batch"}, "b": [{0: "batch"}]},
        none=None,
        n=None,
        f=None,
        cache=[[{0: "c"}], [{0: "c"}, {0: "c"}]],
    )
    onx = check(Nested(), [_nested(3, 2), _nested(5, 4)], ds)
    assert _names(onx) == [
        "x",
        "pair_0",
        "pair_1",
        "d_a",
        "d_b_0",
        "cache_keys_0",
        "cache_values_0",
        "cache_values_1",
    ]
    assert _dims(onx) == [["batch", 4]] * 5 + [["c", 5]] * 3
    assert len(onx.graph.output) == 4


def test_python_scalars_are_constants():
    class Model(torch.nn.Module):
        def forward(self, x, n: int, f: float, flag: bool):
            return x * n + f if flag else x

    sets = [((torch.randn(3, 4), 2, 0.5, True), {}), ((torch.randn(6, 4), 2, 0.5, True), {})]
    onx = to_onnx(Model(), sets[0][0], dynamic_shapes=({0: "batch"}, None, None, None))
    assert _names(onx) == ["x"]
    for a, _ in sets:
        assert_close(Model()(*a), run_onnx(onx, [a[0]])[0], 1e-6, 1e-6)


def test_none_in_list_and_dict():
    class Model(torch.nn.Module):
        def forward(self, xs, d):
            return xs[0] + (d["bias"] if d["maybe"] is None else d["maybe"])

    def make(b):
        return ([torch.randn(b, 3), None], {"bias": torch.randn(b, 3), "maybe": None}), {}

    ds = ([{0: "batch"}, None], {"bias": {0: "batch"}, "maybe": None})
    onx = check(Model(), [make(2), make(5)], ds)
    assert _names(onx) == ["xs_0", "d_bias"]


def test_dataclass_input_and_output():
    class Model(torch.nn.Module):
        def forward(self, p: Pair):
            return Pair(p.first + p.second, p.first * p.second)

    def make(b):
        return (Pair(torch.randn(b, 3), torch.randn(b, 3)),), {}

    # torch wants the specs of a dataclass as a list, in the order of its fields
    onx = check(Model(), [make(2), make(6)], ([{0: "batch"}, {0: "batch"}],))
    assert _names(onx) == ["p_first", "p_second"]
    assert len(onx.graph.output) == 2


@pytest.mark.parametrize("kind", [list, tuple])
def test_list_of_many(kind):
    class Model(torch.nn.Module):
        def forward(self, xs):
            return torch.stack(list(xs)).sum(0)

    def make(b):
        return (kind(torch.randn(b, 2) for _ in range(3)),), {}

    onx = check(Model(), [make(3), make(7)], (kind({0: "batch"} for _ in range(3)),))
    assert _names(onx) == ["xs_0", "xs_1", "xs_2"]


def test_kwargs_only():
    class Model(torch.nn.Module):
        def forward(self, *, input_ids, mask=None):
            return input_ids * 2 if mask is None else input_ids * mask

    def make(b):
        return (), {"input_ids": torch.randn(b, 3), "mask": torch.randn(b, 3)}

    onx = check(Model(), [make(2), make(4)], {"input_ids": {0: "b"}, "mask": {0: "b"}})
    assert _names(onx) == ["input_ids", "mask"]
