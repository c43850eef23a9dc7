"""torch.vmap inside forward: closures, nested vmap, in_dims/out_dims, checked in
onnxruntime against eager on two sizes of the batched dimension."""

import pytest
import torch

from experimental_experiment.runtime import run_onnx
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.capture.capture import has_batching


class Closure(torch.nn.Module):
    """vmap over a function reading a parameter of the module (a closure)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, y):
        def f(a, b):
            return (a * self.w).sum() + b

        return torch.vmap(f)(x, y)


class Nested(torch.nn.Module):
    """Pairwise squared distances with two nested vmaps."""

    def forward(self, x, y):
        def dist(a, b):
            return ((a - b) ** 2).sum()

        inner = torch.vmap(dist, in_dims=(None, 0))
        return torch.vmap(inner, in_dims=(0, None))(x, y)


class InOutDims(torch.nn.Module):
    """Batched on axis 1 of x, x's batch moved to axis 1 of the output, y shared."""

    def forward(self, x, y):
        def f(a, b):
            return torch.nn.functional.softmax(a @ b, dim=-1), a.mean()

        return torch.vmap(f, in_dims=(1, None), out_dims=(1, 0))(x, y)


class Linear(torch.nn.Module):
    """torch.func.vmap of a functional call of a Linear (per-sample model)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        def f(row):
            return torch.relu(self.lin(row)) * row.sum()

        return torch.func.vmap(f)(x)


# name -> (model, inputs for a batch size, dynamic_shapes, strict capture needed)
CASES = {
    "closure": (
        Closure,
        lambda n: (torch.randn(n, 4), torch.randn(n)),
        ({0: "batch"}, {0: "batch"}),
        False,
    ),
    "nested": (
        Nested,
        lambda n: (torch.randn(n, 4), torch.randn(n + 2, 4)),
        ({0: "n"}, {0: "m"}),
        False,
    ),
    # torch.export non-strict fails on in_dims/out_dims != 0 ("We found a fake tensor
    # in the exported program constant's list"), strict captures it: to_onnx retries
    # strict by itself on that error
    "in_out_dims": (
        InOutDims,
        lambda n: (torch.randn(3, n, 4), torch.randn(4, 5)),
        ({1: "batch"}, None),
        True,
    ),
    "linear": (Linear, lambda n: (torch.randn(n, 4),), ({0: "batch"},), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap(name):
    cls, make, ds, strict = CASES[name]
    model = cls().eval()
    ep = torch.export.export(model, make(3), strict=strict)
    assert has_batching(ep)  # the capture keeps torch.vmap's calls
    onx = to_onnx(model, make(3), dynamic_shapes=ds)  # default ExportOptions
    for n in (3, 6):
        inputs = make(n)
        with torch.no_grad():
            expected = model(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = run_onnx(onx, list(inputs))
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-5, rtol=1e-5)
