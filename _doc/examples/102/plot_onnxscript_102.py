"""
.. _l-plot-onnxscript-102:

Write ONNX with onnxscript
==========================

:epkg:`onnxscript` writes ONNX functions and models with python syntax:
a function decorated with ``@script()`` is parsed and translated into ONNX nodes,
it never runs as python. This example writes a model with it, runs it, then uses
an onnxscript function as the converter of a custom operator in :func:`to_onnx
<experimental_experiment.torch_interpreter.to_onnx>`, through an
:class:`OxsDispatcher <experimental_experiment.torch_interpreter.oxs_dispatcher.OxsDispatcher>`.

A model written with onnxscript
+++++++++++++++++++++++++++++++

A layer normalization without learned parameters, written with basic operators.
"""

import numpy as np
import onnx
import onnxruntime
import onnxscript
import torch
from onnxscript import FLOAT
from onnxscript import opset18 as op

from experimental_experiment.helpers.graph_plot import plot_onnx_graph


@onnxscript.script()
def normalize(x: FLOAT["N", 8]) -> FLOAT["N", 8]:  # noqa: F821
    axes = op.Constant(value_ints=[-1])
    mean = op.ReduceMean(x, axes)
    centered = op.Sub(x, mean)
    var = op.ReduceMean(op.Mul(centered, centered), axes)
    return op.Div(centered, op.Sqrt(op.Add(var, op.CastLike(1e-5, var))))


model = normalize.to_model_proto()
print(onnx.printer.to_text(model))

# %%
# The same graph drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:

plot_onnx_graph(model, title="normalize, written with onnxscript")

# %%
# Run it
# ++++++
#
# With onnxruntime, and eagerly: calling the function with numpy arrays evaluates
# each operator one by one, handy to debug.

x = np.random.randn(3, 8).astype(np.float32)
sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {"x": x})[0]
expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (8,)).numpy()
print("onnxruntime:", np.abs(got - expected).max())
print("eager mode: ", np.abs(normalize(x) - expected).max())

# %%
# An onnxscript function as a converter
# +++++++++++++++++++++++++++++++++++++
#
# A custom operator needs a converter. With an :class:`OxsDispatcher
# <experimental_experiment.torch_interpreter.oxs_dispatcher.OxsDispatcher>`,
# the converter can be an onnxscript function: it becomes a local function of the
# exported model, called where the operator was.

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.oxs_dispatcher import OxsDispatcher


@torch.library.custom_op("mylib::normalize", mutates_args=())
def normalize_op(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, x.shape[-1:])


@normalize_op.register_fake
def _(x):
    return torch.empty_like(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return normalize_op(self.linear(x))


@onnxscript.script(onnxscript.values.Opset("custom", 1))
def normalize_function(x):
    axes = op.Constant(value_ints=[-1])
    mean = op.ReduceMean(x, axes)
    centered = op.Sub(x, mean)
    var = op.ReduceMean(op.Mul(centered, centered), axes)
    return op.Div(centered, op.Sqrt(op.Add(var, op.CastLike(1e-5, var))))


torch_model = Model().eval()
dispatcher = OxsDispatcher({torch.ops.mylib.normalize.default: normalize_function})
onx = to_onnx(
    torch_model, (torch.randn(3, 8),), dynamic_shapes=({0: "batch"},), dispatcher=dispatcher
)
print([(node.domain or "ai.onnx", node.op_type) for node in onx.graph.node])
print([f.name for f in onx.functions])

xb = torch.randn(5, 8)
sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
with torch.no_grad():
    print("max absolute difference:", np.abs(got - torch_model(xb).numpy()).max())
