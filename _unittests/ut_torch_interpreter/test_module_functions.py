"""Submodules exported as ONNX local functions, and inlined back."""

import onnx
import pytest
import torch

from experimental_experiment.ext_test_case import assert_close, run_onnx
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.convert.module_functions import inline_functions


class Block(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block1 = Block(4, 8)
        self.block2 = Block(8, 8)
        self.block3 = Block(8, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.block3(self.block2(self.block1(x))))


SETS = [(torch.randn(3, 4),), (torch.randn(7, 4),)]
DS = ({0: "batch"},)


def _check(model, onx):
    onnx.checker.check_model(onx, full_check=True)
    for (x,) in SETS:
        with torch.no_grad():
            expected = model(x)
        assert_close(expected, run_onnx(onx, [x])[0], 1e-5, 1e-4)


def _calls(onx):
    return [(n.domain, n.op_type) for n in onx.graph.node if n.domain == "local_functions"]


@pytest.mark.parametrize("selected", [{Block}, {"Block"}])
def test_blocks_as_functions(selected):
    model = MLP().eval()
    onx = to_onnx(model, SETS[0], dynamic_shapes=DS, export_modules_as_functions=selected)
    # block2 and block3 have the same structure (weights are inputs): one function;
    # block1 has another input size but the same graph: the same function too
    assert _calls(onx) == [("local_functions", "Block")] * 3
    assert [f.name for f in onx.functions] == ["Block"]
    assert {n.op_type for n in onx.graph.node} == {"Block", "Gemm"}
    # the weights stay initializers of the main graph, given to each call
    call = onx.graph.node[0]
    assert "block1.linear.weight" in call.input or any("block1" in i for i in call.input), list(
        call.input
    )
    _check(model, onx)
    flat = inline_functions(onx)
    assert not flat.functions and "Block" not in {n.op_type for n in flat.graph.node}
    _check(model, flat)


def test_every_child_as_function():
    model = MLP().eval()
    onx = to_onnx(model, SETS[0], dynamic_shapes=DS, export_modules_as_functions=True)
    names = [op for _, op in _calls(onx)]
    assert names == ["Block", "Block", "Block", "Linear"], names
    _check(model, onx)
    _check(model, inline_functions(onx))


def test_different_structures_make_two_functions():
    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Block(4, 4)
            self.b = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sigmoid())

        def forward(self, x):
            return self.b(self.a(x)) + self.a(x * 2)

    model = Other().eval()
    onx = to_onnx(model, SETS[0], dynamic_shapes=DS, export_modules_as_functions=True)
    assert sorted(f.name for f in onx.functions) == ["Block", "Sequential"]
    assert len(_calls(onx)) == 3  # a is called twice
    _check(model, onx)


def test_no_functions_by_default():
    onx = to_onnx(MLP(), SETS[0], dynamic_shapes=DS)
    assert not onx.functions and not _calls(onx)
