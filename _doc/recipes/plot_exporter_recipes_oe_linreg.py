"""
.. _l-plot-torch-linreg-101-oe:

torch.onnx.export and a linear regression
=========================================

The simplest export with :func:`torch.onnx.export`: a linear regression with a
dynamic batch dimension. The same model is exported with this package's exporter
in :ref:`l-plot-torch-linreg-101`.

The model
+++++++++
"""

import numpy as np
import onnx
import onnxruntime
import torch

torch.manual_seed(0)


class LinearRegression(torch.nn.Module):
    def __init__(self, n_features: int):
        super().__init__()
        self.linear = torch.nn.Linear(n_features, 1)

    def forward(self, x):
        return self.linear(x)


model = LinearRegression(3).eval()
x = torch.randn(5, 3)

# %%
# Export
# ++++++
#
# ``dynamo=True`` selects the exporter built on :func:`torch.export.export`.
# ``dynamic_shapes`` takes the same form as for :func:`torch.export.export`;
# a string names the dimension in the ONNX model.

program = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: "batch"},), verbose=False)
onx = program.model_proto
onnx.checker.check_model(onx)
print(onnx.printer.to_text(onx))

# %%
# Run with onnxruntime on another batch size
# ++++++++++++++++++++++++++++++++++++++++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
x11 = torch.randn(11, 3)
got = sess.run(None, {sess.get_inputs()[0].name: x11.numpy()})[0]
with torch.no_grad():
    expected = model(x11).numpy()
print("shape:", got.shape, "max absolute difference:", np.abs(expected - got).max())

# %%
# The returned :class:`torch.onnx.ONNXProgram` can also run the model itself
# (it uses onnxruntime) and save it.

print(program(x11)[0].shape)

# %%
# Both runtimes predict the same values on the 11 rows:

import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(5, 4))
ax.plot(expected[:, 0], expected[:, 0], "-", color="#bbbbbb", label="y = x")
ax.plot(expected[:, 0], got[:, 0], "o", label="onnxruntime")
ax.set_xlabel("prediction of torch")
ax.set_ylabel("prediction of onnxruntime")
ax.set_title("torch.onnx.export, 11 rows")
ax.legend()
