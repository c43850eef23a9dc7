"""
.. _l-plot-rewrite-101:

Rewrite an ONNX graph with a pattern
====================================

A converter writes each operator with the operators ONNX has: ``gelu`` becomes
five nodes (``Mul``, ``Erf``, ``Add``...) before opset 20, which added ``Gelu``.
This example exports with opset 18 to have such an expression. A runtime may have a faster,
fused kernel for the whole expression: :epkg:`onnxruntime` has ``Gelu`` in its
``com.microsoft`` domain. Pattern rewriting finds the expression in the graph and
replaces it. This example uses the pattern API of :epkg:`onnxscript`
(:epkg:`Pattern-based Rewrite Using Rules With onnxscript`); the optimizer of this
package gets its own pattern engine with the graph optimizer work.

A model using gelu
++++++++++++++++++
"""

import math

import numpy as np
import onnxruntime
import torch
from onnxscript.rewriter import pattern, rewrite

from experimental_experiment.torch_interpreter import to_onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(16, 32)
        self.linear2 = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.linear2(torch.nn.functional.gelu(self.linear1(x)))


model = Model().eval()
x = torch.randn(4, 16)
onx = to_onnx(model, (x,), dynamic_shapes=({0: "batch"},), target_opset=18)
print([node.op_type for node in onx.graph.node])

# %%
# The pattern and its replacement
# +++++++++++++++++++++++++++++++
#
# Both are functions written with the ``op`` object: the pattern describes the
# nodes the converter produces, the replacement the node to insert instead.
# Python floats match constants of the same value.


def erf_gelu_pattern(op, x):
    half = op.Mul(x, 0.5)
    return op.Mul(half, op.Add(op.Erf(op.Mul(x, math.sqrt(0.5))), 1.0))


def fused_gelu(op, x):
    return op.Gelu(x, _domain="com.microsoft")


rule = pattern.RewriteRule(erf_gelu_pattern, fused_gelu)

# %%
# Rewrite
# +++++++

rewritten = rewrite(onx, pattern_rewrite_rules=[rule])
print([(node.domain or "ai.onnx", node.op_type) for node in rewritten.graph.node])
print([(o.domain or "ai.onnx", o.version) for o in rewritten.opset_import])

# %%
# Check
# +++++
#
# Both models give the same results with onnxruntime.

xb = torch.randn(7, 16)
with torch.no_grad():
    expected = model(xb).numpy()
for name, m in [("original", onx), ("rewritten", rewritten)]:
    sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
    print(f"{name:10s} max absolute difference: {np.abs(got - expected).max():.3g}")

# %%
# Before and after
# ++++++++++++++++
#
# Both graphs drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the five nodes computing gelu became one.

import matplotlib.pyplot as plt

from experimental_experiment.helpers.graph_plot import plot_onnx_graph

fig, axes = plt.subplots(1, 2, figsize=(8, 6))
plot_onnx_graph(onx, axes[0], title=f"converted: {len(onx.graph.node)} nodes")
plot_onnx_graph(rewritten, axes[1], title=f"rewritten: {len(rewritten.graph.node)} nodes")
fig.tight_layout()
