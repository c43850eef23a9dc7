"""
.. _l-plot-torch-linreg-101:

Export a linear regression to ONNX
==================================

A linear regression is the smallest model worth exporting: one
:class:`torch.nn.Linear` layer. The example exports it with a dynamic batch
dimension, looks at the ONNX graph, runs it with :epkg:`onnxruntime` on a batch
size the export never saw, and compares the results with :epkg:`pytorch`.

The model
+++++++++
"""

import numpy as np
import onnx
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import to_onnx

torch.manual_seed(0)


class LinearRegression(torch.nn.Module):
    def __init__(self, n_features: int):
        super().__init__()
        self.linear = torch.nn.Linear(n_features, 1)

    def forward(self, x):
        return self.linear(x)


model = LinearRegression(3)
model.eval()
x = torch.randn(5, 3)
print("expected shape:", model(x).shape)

# %%
# Export
# ++++++
#
# The first dimension of ``x`` is the batch size. ``dynamic_shapes`` tells the
# exporter it may change: the ONNX input gets a symbolic dimension named
# ``batch`` instead of ``5``.

onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
onnx.checker.check_model(onx)

# %%
# The graph
# +++++++++
#
# Inputs and outputs are typed: element type and shape, with ``batch``
# as a symbolic dimension.


def shape_of(value: onnx.ValueInfoProto) -> list:
    "Returns the shape of an input or an output, symbolic dimensions as names."
    dims = value.type.tensor_type.shape.dim
    return [d.dim_param if d.dim_param else d.dim_value for d in dims]


for value in onx.graph.input:
    elem_type = onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type)
    print("input: ", value.name, elem_type, shape_of(value))
for value in onx.graph.output:
    elem_type = onnx.TensorProto.DataType.Name(value.type.tensor_type.elem_type)
    print("output:", value.name, elem_type, shape_of(value))

# %%
# The weights are stored as initializers.

for init in onx.graph.initializer:
    print("initializer:", init.name, list(init.dims))

# %%
# And the nodes, what the linear layer became in ONNX.

for node in onx.graph.node:
    print(f"{node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")

# %%
# The whole model in text form:

print(onnx.printer.to_text(onx))

# %%
# Run with onnxruntime
# ++++++++++++++++++++
#
# The model runs on a batch of 11 rows although it was exported with 5.

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
x11 = torch.randn(11, 3)
input_name = sess.get_inputs()[0].name
got = sess.run(None, {input_name: x11.numpy()})[0]
print("onnxruntime:", got.shape)

# %%
# Compare with torch
# ++++++++++++++++++

with torch.no_grad():
    expected = model(x11).numpy()
diff = np.abs(expected - got).max()
print(f"max absolute difference: {diff:.3g}")
assert diff < 1e-5, f"discrepancy {diff}"

# %%
# Both runtimes predict the same values on the 11 rows:

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(5, 4))
ax.plot(expected[:, 0], expected[:, 0], "-", color="#bbbbbb", label="y = x")
ax.plot(expected[:, 0], got[:, 0], "o", label="onnxruntime")
ax.set_xlabel("prediction of torch")
ax.set_ylabel("prediction of onnxruntime")
ax.set_title(f"11 rows, max absolute difference {diff:.1e}")
ax.legend()
