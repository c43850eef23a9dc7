"""forward(self, *xs) and forward(self, x, **kwargs): dynamic_shapes as torch.export
documents them (grouped) and flattened, checked in onnxruntime on two sizes."""

import pytest
import torch

from experimental_experiment.runtime import flatten_tensors, run_onnx
from experimental_experiment.torch_interpreter import InvalidArgumentError, to_onnx
from experimental_experiment.torch_interpreter.capture.dynamic_shapes import grouped_dynamic_shapes


class Star(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] + xs[1] * xs[2].sum(dim=0, keepdim=True)


class NamedAndStar(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, *rest):
        out = self.lin(x)
        for r in rest:
            out = out * torch.sigmoid(r)
        return out


class Kwargs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, scale=None, **kwargs):
        return self.lin(x) * scale + kwargs["bias"] - kwargs["shift"].mean()


def _check(model, make, dynamic_shapes, sizes=(3, 5)):
    """Exports with make(sizes[0]), compares onnxruntime to eager on every size."""
    args, kwargs = make(sizes[0])
    onx = to_onnx(model, args, kwargs, dynamic_shapes=dynamic_shapes)
    for n in sizes:
        a, kw = make(n)
        with torch.no_grad():
            expected = flatten_tensors(model(*a, **kw))
        got = run_onnx(onx, flatten_tensors((a, kw)))
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-5)
    return onx


def _dims(onx):
    return {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in onx.graph.input
    }


def _star(n):
    return tuple(torch.randn(n, 4) for _ in range(3)), {}


@pytest.mark.parametrize(
    "ds",
    [
        {"xs": ({0: "batch"}, {0: "batch"}, {0: "batch"})},  # torch.export's dict
        (({0: "batch"}, {0: "batch"}, {0: "batch"}),),  # torch.export's tuple
        ({0: "batch"}, {0: "batch"}, {0: "batch"}),  # one spec per tensor
        {"xs_0": {0: "batch"}, "xs_1": {0: "batch"}, "xs_2": {0: "batch"}},  # flattened names
        {"xs": [{0: torch.export.Dim("batch")}] * 3},  # Dim objects, a list
    ],
)
def test_star_args(ds):
    onx = _check(Star(), _star, ds)
    assert _dims(onx) == {f"xs_{i}": ["batch", 4] for i in range(3)}


def test_named_and_star():
    def make(n):
        return (torch.randn(n, 4), torch.randn(n, 4), torch.randn(1, 4)), {}

    ds = {"x": {0: "batch"}, "rest": ({0: "batch"}, None)}
    onx = _check(NamedAndStar(), make, ds)
    assert _dims(onx)["x"] == ["batch", 4]
    assert _dims(onx)["rest_1"] == [1, 4]


def test_star_single_value():
    # one value in *xs: the tuple form ({0: ...},) and the flat form {0: ...} are both
    # a tuple of one entry; the grouped one is recognized by its inner tuple
    def make(n):
        return (torch.randn(n, 4), torch.randn(n, 4)), {}

    for ds in [({0: "b"}, ({0: "b"},)), ({0: "b"}, {0: "b"})]:
        onx = _check(NamedAndStar(), make, ds)
        assert _dims(onx)["rest_0"] == ["b", 4]


def _kwargs(n):
    return (torch.randn(n, 4),), dict(
        scale=torch.tensor(2.0), bias=torch.randn(n, 4), shift=torch.randn(n + 1)
    )


@pytest.mark.parametrize(
    "ds",
    [
        # torch.export's documented form (torch 2.13 cannot capture it by itself)
        {"x": {0: "batch"}, "scale": None, "kwargs": {"bias": {0: "batch"}, "shift": {0: "s"}}},
        {"x": {0: "batch"}, "bias": {0: "batch"}, "shift": {0: "s"}},  # flattened
        ({0: "batch"}, None, {"bias": {0: "batch"}, "shift": {0: "s"}}),  # torch's tuple
        ({0: "batch"}, None, {0: "batch"}, {0: "s"}),  # one per value
    ],
)
def test_kwargs(ds):
    model = Kwargs()
    onx = _check(model, _kwargs, ds)
    assert _dims(onx) == {"x": ["batch", 4], "scale": [], "bias": ["batch", 4], "shift": ["s"]}
    assert "forward" not in model.__dict__  # the capture put the signature back


def test_kwargs_static():
    onx = _check(Kwargs(), _kwargs, None, sizes=(3,))
    assert _dims(onx)["bias"] == [3, 4]


def test_bad_names():
    args, kwargs = _kwargs(3)
    with pytest.raises(InvalidArgumentError, match=r"\['other'\] are not arguments"):
        grouped_dynamic_shapes({"other": {0: "b"}}, Kwargs(), args, kwargs)
    with pytest.raises(InvalidArgumentError, match="keyed by the keywords"):
        grouped_dynamic_shapes({"kwargs": {"nope": {0: "b"}}}, Kwargs(), args, kwargs)
    star, _ = _star(3)
    with pytest.raises(InvalidArgumentError, match="both grouped"):
        grouped_dynamic_shapes({"xs": (None,) * 3, "xs_0": {0: "b"}}, Star(), star, {})
    with pytest.raises(InvalidArgumentError, match="has 2 elements"):
        grouped_dynamic_shapes(({0: "b"}, {0: "b"}), Star(), star, {})


def test_kwargs_strict_capture():
    from experimental_experiment.torch_interpreter import ExportOptions

    model = Kwargs()
    ds = {"x": {0: "batch"}, "kwargs": {"bias": {0: "batch"}, "shift": {0: "s"}}}
    onx = to_onnx(model, *_kwargs(3), dynamic_shapes=ds, export_options=ExportOptions(strict=True))
    assert _dims(onx)["bias"] == ["batch", 4]
    for n in (3, 5):
        a, kw = _kwargs(n)
        with torch.no_grad():
            expected = model(*a, **kw)
        got = run_onnx(onx, flatten_tensors((a, kw)))[0]
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-5)
