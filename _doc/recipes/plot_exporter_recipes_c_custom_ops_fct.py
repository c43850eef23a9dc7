"""
.. _l-plot-exporter-recipes-custom-custom-ops-fct:

to_onnx and a custom operator
=============================

A function torch cannot trace, declared as a custom operator with
:func:`torch.library.custom_op`, is one node of the exported graph.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` needs a
converter for it, given through a
:class:`Dispatcher <experimental_experiment.torch_interpreter.Dispatcher>`:
a python function receiving the graph builder ``g`` and the arguments of the
operator (tensors as the names of ONNX results), adding nodes with
``g.op.<OnnxOperator>(...)`` and returning the name of the result.
The same model is exported with :func:`torch.onnx.export` in
:ref:`l-plot-exporter-recipes-onnx-exporter-custom-ops-fct`.

The custom operator
+++++++++++++++++++
"""

import os

import numpy as np
import onnx
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import Dispatcher, ExportError, to_onnx


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

# %%
# Without a converter
# +++++++++++++++++++
#
# The exporter stops and says which operator has no converter and where the
# model calls it.

try:
    to_onnx(model, (x,))
except ExportError as e:
    # the message names the operator and the line calling it (path made relative)
    print(f"{type(e).__name__}: {str(e).replace(os.getcwd() + os.sep, '')}")

# %%
# With a converter
# ++++++++++++++++
#
# The python float ``scale`` arrives as a float; given to ``g.op.Mul`` it becomes
# a constant of the type of the other input. The converter does not declare the
# type or the shape of its result: the exporter takes them from the captured graph.


def convert_scaled_tanh(g, x: str, scale: float) -> str:
    return g.op.Mul(g.op.Tanh(x), scale)


dispatcher = Dispatcher({torch.ops.mylib.numpy_scaled_tanh.default: convert_scaled_tanh})
onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), dispatcher=dispatcher)
print(onnx.printer.to_text(onx.graph))

# %%
# Check
# +++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
xb = torch.randn(6, 4)
got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
with torch.no_grad():
    expected = model(xb).numpy()
print("max absolute difference:", np.abs(got - expected).max())
assert np.abs(got - expected).max() < 1e-5

# %%
# The converter as an ONNX function
# +++++++++++++++++++++++++++++++++
#
# The translation may also be a local function of a custom domain, kept as one node
# in the model: the converter registers it with ``g.add_function`` and calls it.
# The dispatcher also accepts the operator's name or the object ``custom_op`` returned.

scaled_tanh_fct = onnx.helper.make_function(
    "mylib.onnx",
    "ScaledTanh",
    ["x"],
    ["y"],
    [
        onnx.helper.make_node("Tanh", ["x"], ["t"]),
        onnx.helper.make_node("Constant", [], ["s"], value_float=2.0),
        onnx.helper.make_node("Mul", ["t", "s"], ["y"]),
    ],
    [onnx.helper.make_opsetid("", 18)],
)


def convert_scaled_tanh_fct(g, x: str, scale: float) -> str:
    assert scale == 2.0, "the function is written for scale=2"
    g.add_function(scaled_tanh_fct)
    return g.make_node("ScaledTanh", [x], domain="mylib.onnx")


onx = to_onnx(
    model,
    (x,),
    dynamic_shapes=({0: "batch"},),
    dispatcher=Dispatcher({"mylib::numpy_scaled_tanh": convert_scaled_tanh_fct}),
)
print([(node.domain, node.op_type) for node in onx.graph.node])
sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
print("max absolute difference:", np.abs(got - expected).max())

# %%
# An onnxscript function
# ++++++++++++++++++++++
#
# :class:`OxsDispatcher
# <experimental_experiment.torch_interpreter.oxs_dispatcher.OxsDispatcher>` takes
# functions written with onnxscript; python scalars become their attributes.

import onnxscript  # noqa: E402
from onnxscript import opset18 as op  # noqa: E402

from experimental_experiment.torch_interpreter.oxs_dispatcher import OxsDispatcher  # noqa: E402


@onnxscript.script(onnxscript.values.Opset("mylib.oxs", 1), default_opset=op)
def oxs_scaled_tanh(x, scale: float):
    return op.Mul(op.Tanh(x), op.CastLike(op.Constant(value_float=scale), x))


onx = to_onnx(
    model,
    (x,),
    dynamic_shapes=({0: "batch"},),
    dispatcher=OxsDispatcher({numpy_scaled_tanh: oxs_scaled_tanh}),
)
print([(node.domain, node.op_type) for node in onx.graph.node])
sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
print("max absolute difference:", np.abs(got - expected).max())

# %%
# The three models
# ++++++++++++++++
#
# Drawn with :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the converter adds its nodes to the graph, the two functions are one node each.

import matplotlib.pyplot as plt  # noqa: E402

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

models = {
    "nodes": to_onnx(model, (x,), dispatcher=dispatcher),
    "ONNX function": to_onnx(
        model, (x,), dispatcher=Dispatcher({"mylib::numpy_scaled_tanh": convert_scaled_tanh_fct})
    ),
    "onnxscript function": onx,
}
fig, axes = plt.subplots(1, 3, figsize=(11, 4.5))
for ax, (name, m) in zip(axes, models.items()):
    plot_onnx_graph(m, ax, title=name)
fig.tight_layout()
