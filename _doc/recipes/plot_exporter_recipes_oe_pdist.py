"""
.. _l-plot-exporter-recipes-onnx-exporter-pdist:

torch.onnx.export and a loop: scan for pairwise distances
=========================================================

The pairwise distances between the rows of two matrices can be computed
row by row: a loop over the rows of the first matrix. A python loop would be
unrolled by the exporter, with a number of iterations fixed to the example's.
``scan`` (from ``torch._higher_order_ops.scan``) keeps the loop, whatever the number
of rows: :func:`torch.onnx.export` turns it into an ONNX ``Scan`` operator.
The same model is exported with this package's exporter in
:ref:`l-plot-exporter-recipes-custom-pdist`.

The model
+++++++++
"""

import numpy as np
import onnxruntime
import torch
from torch._higher_order_ops.scan import scan


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
# Export
# ++++++

DYN = torch.export.Dim.DYNAMIC
program = torch.onnx.export(
    model, (x, y), dynamo=True, dynamic_shapes=({0: DYN}, {0: DYN}), verbose=False
)
onx = program.model_proto
print([node.op_type for node in onx.graph.node])

# %%
# Check with other numbers of rows
# ++++++++++++++++++++++++++++++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()]
for n, m in [(2, 3), (6, 1), (4, 9)]:
    xb, yb = torch.randn(n, 4), torch.randn(m, 4)
    got = sess.run(None, dict(zip(names, [xb.numpy(), yb.numpy()])))[0]
    print(
        f"{n}x{m}: {got.shape}, max absolute difference "
        f"{np.abs(got - torch.cdist(xb, yb).numpy()).max():.3g}"
    )

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
