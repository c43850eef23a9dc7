"""
.. _l-plot-exporter-recipes-onnx-exporter-cond:

torch.onnx.export and a test: torch.cond
========================================

A python ``if`` on a value computed by the model cannot be exported: the exporter
would only see the branch taken by the example inputs (see
:ref:`l-plot-exporter-exporter-draft_export`). :func:`torch.cond` keeps both branches;
:func:`torch.onnx.export` turns it into an ONNX ``If`` operator.
The same model is exported with this package's exporter in
:ref:`l-plot-exporter-recipes-custom-cond`.

The model
+++++++++
"""

import numpy as np
import onnxruntime
import torch


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
print(model(x))

# %%
# Export
# ++++++

program = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: "batch"},), verbose=False)
onx = program.model_proto
for node in onx.graph.node:
    print(node.op_type, [att.name for att in node.attribute])

# %%
# The two branches are subgraphs of the ``If`` node.

if_node = next(node for node in onx.graph.node if node.op_type == "If")
for att in if_node.attribute:
    print(att.name, [node.op_type for node in att.g.node])

# %%
# Both branches run
# +++++++++++++++++
#
# The test is on the sum of the hidden layer, an affine function of ``x``:
# multiplying the input by 100 or -100 makes the bias negligible and takes both branches.

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
