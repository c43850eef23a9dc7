"""
.. _l-plot-exporter-recipes-onnx-exporter-custom-ops-fct:

torch.onnx.export and a custom operator
=======================================

A model may call a function torch cannot trace: a call to another library,
code written with numpy, a kernel written in C++. Declared as a custom operator
with :func:`torch.library.custom_op`, it appears as a single node in the exported
graph. :func:`torch.onnx.export` then needs a translation of that operator into
ONNX, given with ``custom_translation_table`` as a function written with the
operators of :epkg:`onnxscript`.
The same model is exported with this package's exporter in
:ref:`l-plot-exporter-recipes-custom-custom-ops-fct`.

The custom operator
+++++++++++++++++++

The implementation uses numpy, which torch cannot trace. ``register_fake`` tells
the exporter the shape and type of the result without running it.
"""

import numpy as np
import onnxruntime
import torch
from onnxscript import opset18 as op


@torch.library.custom_op("mylib::numpy_scaled_tanh", mutates_args=())
def numpy_scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.from_numpy(np.tanh(x.detach().numpy()) * scale)


@numpy_scaled_tanh.register_fake
def _(x, scale):
    return torch.empty_like(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return numpy_scaled_tanh(self.linear(x), 2.0)


model = Model().eval()
x = torch.randn(3, 4)
print(model(x))

# %%
# The captured graph has one node for the custom operator.

ep = torch.export.export(model, (x,))
print(ep.graph)

# %%
# The translation to ONNX
# +++++++++++++++++++++++
#
# A function with the same arguments as the operator, written with onnxscript's
# operators: the exporter calls it with symbolic values and records the nodes.


def scaled_tanh_onnx(x, scale: float):
    return op.Mul(op.Tanh(x), op.CastLike(scale, x))


program = torch.onnx.export(
    model,
    (x,),
    dynamo=True,
    dynamic_shapes=({0: "batch"},),
    custom_translation_table={torch.ops.mylib.numpy_scaled_tanh.default: scaled_tanh_onnx},
    verbose=False,
)
onx = program.model_proto
print([node.op_type for node in onx.graph.node])

# %%
# Check
# +++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
xb = torch.randn(6, 4)
got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
with torch.no_grad():
    expected = model(xb).numpy()
print("max absolute difference:", np.abs(got - expected).max())

# %%
# The ONNX graph, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the custom operator became ``Tanh`` and ``Mul``.

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

plot_onnx_graph(onx, title="torch.onnx.export with a custom translation")
