"""
.. _l-plot-exporter-recipes-custom-pdist:

to_onnx and a loop: scan for pairwise distances
===============================================

``scan`` (from ``torch._higher_order_ops.scan``) keeps a loop over the rows of a
tensor in the exported graph, whatever the number of rows.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` turns
``torch.ops.higher_order.scan`` into an ONNX ``Scan`` operator.
The same model is exported with :func:`torch.onnx.export` in
:ref:`l-plot-exporter-recipes-onnx-exporter-pdist`.

The model
+++++++++
"""

import numpy as np
import onnx
import onnxruntime
import torch
from torch._higher_order_ops.scan import scan

from experimental_experiment.torch_interpreter import to_onnx


def dist(y: torch.Tensor, scanned_x: torch.Tensor):
    sub = y - scanned_x.reshape((1, -1))
    sq = sub * sub
    rd = torch.sqrt(sq.sum(dim=1))
    # the state is returned unchanged, a clone avoids an alias
    return y.clone(), rd


class ModuleWithControlFlowLoop(torch.nn.Module):
    def forward(self, x, y):
        _carry, out = scan(dist, y, x, dim=0)
        return out


model = ModuleWithControlFlowLoop().eval()
x, y = torch.randn(3, 4), torch.randn(5, 4)
expected = model(x, y)
print(expected.shape, torch.abs(expected - torch.cdist(x, y)).max().item())

# %%
# The captured graph
# ++++++++++++++++++
#
# The body of the loop is a subgraph called by ``torch.ops.higher_order.scan``.

DYN = torch.export.Dim.DYNAMIC
ep = torch.export.export(model, (x, y), dynamic_shapes=({0: DYN}, {0: DYN}))
print(ep.graph)

# %%
# Export
# ++++++
#
# The body becomes the subgraph of an ONNX ``Scan``: the carried state ``y`` is a
# state variable of the Scan, the rows of ``x`` its scanned input, and the distances
# of every iteration are stacked into the output.

onx = to_onnx(model, (x, y), dynamic_shapes=({0: "n"}, {0: "m"}))
print(onnx.printer.to_text(onx.graph))

# %%
# Check with other numbers of rows
# ++++++++++++++++++++++++++++++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()]
for n, m in [(2, 3), (6, 1), (4, 9)]:
    xb, yb = torch.randn(n, 4), torch.randn(m, 4)
    got = sess.run(None, dict(zip(names, [xb.numpy(), yb.numpy()])))[0]
    print(f"{n}x{m}: max absolute difference {np.abs(got - torch.cdist(xb, yb).numpy()).max():.3g}")

# %%
# The main graph and the loop body
# ++++++++++++++++++++++++++++++++
#
# Drawn with :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the body of ``Scan`` computes the distances of one row of ``x`` to every row of ``y``.

import matplotlib.pyplot as plt  # noqa: E402

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

scan_node = next(node for node in onx.graph.node if node.op_type == "Scan")
body = next(att.g for att in scan_node.attribute if att.name == "body")
fig, axes = plt.subplots(1, 2, figsize=(9, 5.5))
plot_onnx_graph(onx, axes[0], title="main graph")
plot_onnx_graph(body, axes[1], title="body of Scan")
fig.tight_layout()
