"""Higher-order operators inlined by aten/misc.py: no_grad and disabled autocast blocks."""

import pytest
import torch

from experimental_experiment.ext_test_case import check_export
from experimental_experiment.torch_interpreter import UnsupportedOpError, to_onnx

DS = ({0: "batch"},)
INPUTS = [(torch.randn(2, 3),), (torch.randn(5, 3),)]


def _ops(onx) -> list[str]:
    return [n.op_type for n in onx.graph.node]


class NoGradBlock(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x.sin() * 2
            z = y + x
        return z.cos(), y


class NestedBlocks(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            y = x.exp()
            with torch.enable_grad():
                y = y * x
        with torch.autocast("cpu", enabled=False):
            z = y.sin()
        return z - 1


class EnabledAutocast(torch.nn.Module):
    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x.T


@pytest.mark.parametrize("model", [NoGradBlock, NestedBlocks])
def test_inlined_blocks(model):
    ep = torch.export.export(model(), INPUTS[0])
    graph_ops = {str(n.target) for n in ep.graph.nodes}
    assert any("wrap_with" in op for op in graph_ops), graph_ops  # the test needs a HOP
    onx = check_export(model(), INPUTS, dynamic_shapes=DS)
    assert "If" not in _ops(onx) and "Loop" not in _ops(onx)


def test_enabled_autocast_is_refused():
    with pytest.raises(UnsupportedOpError, match="autocast"):
        to_onnx(EnabledAutocast(), INPUTS[0], dynamic_shapes=DS)
