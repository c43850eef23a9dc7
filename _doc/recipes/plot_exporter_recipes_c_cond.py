"""
.. _l-plot-exporter-recipes-custom-cond:

to_onnx and a test: torch.cond
==============================

:func:`torch.cond` keeps both branches of a test on a value computed by the model.
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` has to turn it into
an ONNX ``If`` operator whose branches are subgraphs. The same model is exported with
:func:`torch.onnx.export` in :ref:`l-plot-exporter-recipes-onnx-exporter-cond`.

The model
+++++++++
"""

import numpy as np
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import ExportError, to_onnx


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

# %%
# The captured graph
# ++++++++++++++++++
#
# :func:`torch.export.export` keeps the two branches as two subgraphs called by
# ``torch.ops.higher_order.cond``.

ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
print(ep.graph)

# %%
# Export
# ++++++
#
# The converter of ``torch.ops.higher_order.cond`` is not written yet: the
# exporter stops with an error naming the operator and the line of the model
# that calls it. Its support is tracked with the other control flow operators
# (*dynamic shapes, control flow, custom ops*). When it lands, this example checks
# the model on both branches.

try:
    onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},))
except ExportError as e:
    print(f"{type(e).__name__}: {e}")
    onx = None

# %%
# Both branches run
# +++++++++++++++++
#
# The test is on the sum of the hidden layer, an affine function of ``x``:
# multiplying the input by 100 or -100 makes the bias negligible and takes both branches.

if onx is not None:
    print([node.op_type for node in onx.graph.node])
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
else:
    print("not converted: torch.cond is not supported by to_onnx yet")
