"""
.. _l-plot-exporter-recipes-onnx-exporter-modules:

torch.onnx.export, submodules and dynamic shapes
================================================

A model made of submodules, exported with :func:`torch.onnx.export` with a dynamic
batch dimension. The exported graph is flat, but every node keeps the name of the
submodule it comes from in its metadata. The same model is exported with this
package's exporter in :ref:`l-plot-exporter-recipes-custom-modules`.

The model
+++++++++
"""

import numpy as np
import onnxruntime
import torch

torch.manual_seed(0)


class Block(torch.nn.Module):
    "A linear layer followed by an activation."

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)
        self.activation = torch.nn.ReLU()

    def forward(self, x):
        return self.activation(self.linear(x))


class MLP(torch.nn.Module):
    "Two blocks and an output layer."

    def __init__(self, n_in: int, n_hidden: int, n_out: int):
        super().__init__()
        self.block1 = Block(n_in, n_hidden)
        self.block2 = Block(n_hidden, n_hidden)
        self.head = torch.nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.head(self.block2(self.block1(x)))


model = MLP(10, 16, 2).eval()
x = torch.randn(4, 10)

# %%
# Export with a dynamic batch
# +++++++++++++++++++++++++++

program = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: "batch"},), verbose=False)
onx = program.model_proto
for value in [*onx.graph.input, *onx.graph.output]:
    dims = value.type.tensor_type.shape.dim
    print(value.name, [d.dim_param or d.dim_value for d in dims])
for node in onx.graph.node:
    print(f"{node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")

# %%
# Where every node comes from
# +++++++++++++++++++++++++++
#
# The exporter stores the module path in the metadata of each node.

for node in onx.graph.node:
    meta = {p.key: p.value for p in node.metadata_props}
    print(f"{node.op_type:10s} {meta.get('namespace', '')}")

# %%
# Check with onnxruntime
# ++++++++++++++++++++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
for batch in [1, 4, 7]:
    xb = torch.randn(batch, 10)
    got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
    with torch.no_grad():
        expected = model(xb).numpy()
    print(f"batch={batch}: {got.shape}, max absolute difference {np.abs(expected - got).max():.3g}")

# %%
# The ONNX graph, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

plot_onnx_graph(onx, title="MLP exported with torch.onnx.export")
