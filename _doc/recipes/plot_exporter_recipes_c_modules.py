"""
.. _l-plot-exporter-recipes-custom-modules:

to_onnx, submodules and dynamic shapes
======================================

Real models are built from submodules. The exporter sees through them:
:func:`torch.export.export` inlines every submodule into one graph before the
conversion to ONNX. This recipe exports a small multi-layer perceptron made of
two blocks with a dynamic batch dimension, then checks the ONNX model with
:epkg:`onnxruntime` on several batch sizes. The same model is exported with
:func:`torch.onnx.export` in :ref:`l-plot-exporter-recipes-onnx-exporter-modules`.

The model
+++++++++
"""

import numpy as np
import onnx
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import to_onnx

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


model = MLP(10, 16, 2)
model.eval()
x = torch.randn(4, 10)
print(model)

# %%
# Export with a dynamic batch
# +++++++++++++++++++++++++++

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
onnx.checker.check_model(onx)
for value in [*onx.graph.input, *onx.graph.output]:
    dims = value.type.tensor_type.shape.dim
    print(value.name, [d.dim_param or d.dim_value for d in dims])
for node in onx.graph.node:
    print(f"{node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")

# %%
# Which operators the model uses:

print(sorted({node.op_type for node in onx.graph.node}))

# %%
# Check with onnxruntime
# ++++++++++++++++++++++
#
# The model runs on batch sizes other than the one used for the export.

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
input_name = sess.get_inputs()[0].name
for batch in [1, 4, 7]:
    xb = torch.randn(batch, 10)
    got = sess.run(None, {input_name: xb.numpy()})[0]
    with torch.no_grad():
        expected = model(xb).numpy()
    diff = np.abs(expected - got).max()
    print(f"batch={batch}: output shape {got.shape}, max absolute difference {diff:.3g}")
    assert diff < 1e-5, f"discrepancy {diff} for batch={batch}"

# %%
# Submodules as local functions
# +++++++++++++++++++++++++++++
#
# ``export_modules_as_functions`` keeps the structure of the model: the nodes of
# every ``Block`` instance become a call to an ONNX local function (domain
# ``local_functions``). The weights are inputs of the function, so both blocks,
# which have the same structure, share one function. ``True`` selects every child
# module of the model.

from experimental_experiment.torch_interpreter.convert.module_functions import (  # noqa: E402
    inline_functions,
)

onx_fct = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), export_modules_as_functions={Block})
print(onnx.printer.to_text(onx_fct.graph))
for f in onx_fct.functions:
    print(onnx.printer.to_text(f))

# %%
# The model with functions and the inlined model give the same results.

flat = inline_functions(onx_fct)
print("functions after inlining:", len(flat.functions), [n.op_type for n in flat.graph.node])
for onx_ in (onx_fct, flat):
    sess = onnxruntime.InferenceSession(
        onx_.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    for batch in [2, 9]:
        xb = torch.randn(batch, 10)
        got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
        with torch.no_grad():
            diff = np.abs(model(xb).numpy() - got).max()
        print(f"functions={len(onx_.functions)} batch={batch}: max absolute difference {diff:.3g}")
        assert diff < 1e-5

# %%
# Flat or with functions
# ++++++++++++++++++++++
#
# Both models drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# with ``export_modules_as_functions``, each block is one node calling a local function.

import matplotlib.pyplot as plt  # noqa: E402

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

fig, axes = plt.subplots(1, 2, figsize=(8, 5.5))
plot_onnx_graph(onx, axes[0], title="flat")
plot_onnx_graph(onx_fct, axes[1], title="one function per Block")
fig.tight_layout()
