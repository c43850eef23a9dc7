"""
.. _l-plot-exporter-recipes-custom-custom-ops-inplace:

to_onnx and a custom operator modifying its input
=================================================

A custom operator declared with ``mutates_args`` updates a tensor in place.
ONNX has no in-place operation: the converter must compute the new value of
the mutated tensor, and every later use of that tensor must read the new value.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` makes a graph
with in-place operations functional before converting it, which wraps the call into
``torch.ops.higher_order.auto_functionalized_v2``.
The same models are exported with :func:`torch.onnx.export` in
:ref:`l-plot-exporter-recipes-onnx-exporter-custom-ops-inplace`.

An operator updating its first input
++++++++++++++++++++++++++++++++++++
"""

import numpy as np
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import Dispatcher, to_onnx


@torch.library.custom_op("mylib::add_scaled_", mutates_args=("x",))
def add_scaled_(x: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
    x.add_(y * alpha)


@add_scaled_.register_fake
def _(x, y, alpha):
    return None


class InplaceModel(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x, y, 0.5)
        return x + 1


x, y = torch.randn(3, 4), torch.randn(3, 4)
model = InplaceModel().eval()
ep = torch.export.export(model, (x, y))
print(ep.graph)


def run(onx, *tensors):
    "Runs a model with onnxruntime."
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, [t.numpy() for t in tensors])))[0]


# %%
# The converter returns the new value of the mutated input
# ++++++++++++++++++++++++++++++++++++++++++++++++++++++++
#
# The converter is written for the operator itself. ONNX has no in-place update:
# it returns the new value of the mutated input ``x`` (for an operator with outputs,
# the outputs followed by the new values of the mutated inputs). The exporter converts
# ``auto_functionalized_v2`` by calling it, then every later use of ``x`` reads the
# new value.


def convert_add_scaled_(g, x: str, y: str, alpha: float) -> str:
    return g.op.Add(x, g.op.Mul(y, alpha))


dispatcher = Dispatcher({torch.ops.mylib.add_scaled_.default: convert_add_scaled_})
onx = to_onnx(model, (x, y), dynamic_shapes=({0: "batch"}, {0: "batch"}), dispatcher=dispatcher)
print([node.op_type for node in onx.graph.node])

# %%
# Drawn with :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the converter's ``Mul`` and ``Add`` compute the new value of ``x``, which the last
# ``Add`` of the model reads.

from experimental_experiment.helpers.graph_plot import plot_onnx_graph

plot_onnx_graph(onx, title="InplaceModel exported with to_onnx")

# %%
# Check
# +++++
#
# The update must be visible in the output, on a batch size other than the one
# used for the export.

xb, yb = torch.randn(6, 4), torch.randn(6, 4)
diff = np.abs(run(onx, xb, yb) - model(xb, yb).numpy()).max()
print("max absolute difference:", diff)
assert diff < 1e-5, "discrepancy: the in-place update is lost"

# %%
# A mutated slice
# +++++++++++++++
#
# When the operator updates a view (here rows 1 and 2), the converter is the same:
# the exporter reads the slice, calls the converter, and writes the result back.


class SliceModel(torch.nn.Module):
    def forward(self, x, y):
        x = x.clone()
        add_scaled_(x[1:3], y, 0.5)
        return x * 2


onx = to_onnx(
    SliceModel(), (x, torch.randn(2, 4)), dynamic_shapes=({1: "n"}, {1: "n"}), dispatcher=dispatcher
)
xb, yb = torch.randn(3, 7), torch.randn(2, 7)
diff = np.abs(run(onx, xb, yb) - SliceModel()(xb, yb).numpy()).max()
print("max absolute difference:", diff)
assert diff < 1e-5

# %%
# A functional operator
# +++++++++++++++++++++
#
# An operator returning the new value converts the same way.


@torch.library.custom_op("mylib::add_scaled", mutates_args=())
def add_scaled(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + y * alpha


@add_scaled.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


class FunctionalModel(torch.nn.Module):
    def forward(self, x, y):
        x = add_scaled(x, y, 0.5)
        return x + 1


onx = to_onnx(
    FunctionalModel(),
    (x, y),
    dynamic_shapes=({0: "batch"}, {0: "batch"}),
    dispatcher=Dispatcher({torch.ops.mylib.add_scaled.default: convert_add_scaled_}),
)
print([node.op_type for node in onx.graph.node])
xb, yb = torch.randn(6, 4), torch.randn(6, 4)
print("max absolute difference:", np.abs(run(onx, xb, yb) - model(xb, yb).numpy()).max())
