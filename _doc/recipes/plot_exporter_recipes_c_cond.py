"""
.. _l-plot-exporter-recipes-custom-cond:

to_onnx and a test: torch.cond
==============================

:func:`torch.cond` keeps both branches of a test on a value computed by the model.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` turns it into
an ONNX ``If`` operator whose branches are subgraphs. The same model is exported with
:func:`torch.onnx.export` in :ref:`l-plot-exporter-recipes-onnx-exporter-cond`.

The model
+++++++++
"""

import numpy as np
import onnx
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import to_onnx


class ForwardWithControlFlowTest(torch.nn.Module):
    def forward(self, x):
        def identity2(x):
            return x * 2

        def neg(x):
            return -x

        return torch.cond(x.sum() > 0, identity2, neg, (x,))


class ModelWithControlFlow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(3, 2), torch.nn.Linear(2, 1), ForwardWithControlFlowTest()
        )

    def forward(self, x):
        return self.mlp(x)


model = ModelWithControlFlow().eval()
x = torch.randn(5, 3)

# %%
# The captured graph
# ++++++++++++++++++
#
# :func:`torch.export.export` keeps the two branches as two subgraphs called by
# ``torch.ops.higher_order.cond``.

ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
print(ep.graph)

# %%
# Export
# ++++++
#
# Each branch becomes a subgraph of an ``If`` node. A subgraph reads the results of
# the main graph by their names (here the output of the linear layers), so nothing
# is copied into the branches.

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
print(onnx.printer.to_text(onx.graph))

# %%
# Both branches run
# +++++++++++++++++
#
# The test is on the sum of the hidden layer, an affine function of ``x``:
# multiplying the input by 100 or -100 makes the bias negligible and takes both
# branches, on another number of rows than the one used to export.

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
xb = torch.randn(7, 3)
for xs in [xb * 100, xb * -100]:
    with torch.no_grad():
        hidden = model.mlp[1](model.mlp[0](xs))
        expected = model(xs).numpy()
    got = sess.run(None, {sess.get_inputs()[0].name: xs.numpy()})[0]
    print(
        f"sum of the hidden layer > 0: {bool(hidden.sum() > 0)}, "
        f"max absolute difference {np.abs(expected - got).max():.3g}"
    )

# %%
# The main graph and both branches
# ++++++++++++++++++++++++++++++++
#
# Drawn with :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`;
# a branch reads the results of the main graph by name (no input of its own).

import matplotlib.pyplot as plt  # noqa: E402

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

if_node = next(node for node in onx.graph.node if node.op_type == "If")
fig, axes = plt.subplots(1, 3, figsize=(11, 5), width_ratios=[2, 1, 1])
plot_onnx_graph(onx, axes[0], title="main graph")
for ax, att in zip(axes[1:], if_node.attribute):
    plot_onnx_graph(att.g, ax, title=att.name)
fig.tight_layout()
