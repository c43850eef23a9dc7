"""
.. _l-plot-exporter-recipes-onnx-exporter-custom-ops-inplace:

torch.onnx.export and a custom operator modifying its input
===========================================================

Some kernels update a tensor in place instead of returning a new one:
a cache update, an accumulation. Declared with :func:`torch.library.custom_op`
and ``mutates_args``, such an operator is captured by :func:`torch.export.export`.
The decompositions which :func:`torch.onnx.export` runs make the graph functional:
the call is wrapped in ``torch.ops.higher_order.auto_functionalized_v2``, which
:func:`torch.onnx.export` does not translate (torch 2.13). The recipe shows the
error, then the way around it: a functional operator returning the new value.
The same models are exported with this package's exporter in
:ref:`l-plot-exporter-recipes-custom-custom-ops-inplace`.

An operator updating its first input
++++++++++++++++++++++++++++++++++++
"""

import numpy as np
import onnxruntime
import torch
from onnxscript import opset18 as op


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
print(model(x, y) - (x + 0.5 * y + 1))

# %%
# The captured graph, then the functional graph the decompositions produce.

ep = torch.export.export(model, (x, y))
print(ep.graph)
print(ep.run_decompositions().graph)

# %%
# The export fails on ``auto_functionalized_v2``
# ++++++++++++++++++++++++++++++++++++++++++++++


def add_scaled_onnx(x, y, alpha: float):
    return op.Add(x, op.Mul(y, op.CastLike(alpha, y)))


try:
    torch.onnx.export(
        model,
        (x, y),
        dynamo=True,
        custom_translation_table={torch.ops.mylib.add_scaled_.default: add_scaled_onnx},
        verbose=False,
    )
except Exception as e:
    lines = [line for line in str(e).splitlines() if "auto_functionalized" in line]
    print(type(e).__name__, ":", lines[0] if lines else str(e).splitlines()[0])

# %%
# A functional operator
# +++++++++++++++++++++
#
# The same computation as an operator returning the new value: the model assigns the
# result instead of relying on the side effect, and the export succeeds.


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


functional = FunctionalModel().eval()
program = torch.onnx.export(
    functional,
    (x, y),
    dynamo=True,
    dynamic_shapes=({0: "batch"}, {0: "batch"}),
    custom_translation_table={torch.ops.mylib.add_scaled.default: add_scaled_onnx},
    verbose=False,
)
onx = program.model_proto
print([node.op_type for node in onx.graph.node])

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
xb, yb = torch.randn(6, 4), torch.randn(6, 4)
got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [xb.numpy(), yb.numpy()])))
print("max absolute difference:", np.abs(got[0] - model(xb, yb).numpy()).max())

# %%
# The ONNX graph, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:

from experimental_experiment.helpers.graph_plot import plot_onnx_graph  # noqa: E402

plot_onnx_graph(onx, title="FunctionalModel exported with torch.onnx.export")
