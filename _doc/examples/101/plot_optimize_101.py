"""
.. _l-plot-optimize-101:

Optimize an exported model
==========================

A graph converted operator by operator is rarely the best one: it keeps
identities, computes again and again values which only depend on the weights,
and chains operators which cancel each other. :func:`to_onnx
<experimental_experiment.torch_interpreter.to_onnx>` runs optimization passes
before returning the model, selected by
:class:`OptimizationOptions <experimental_experiment.xbuilder.OptimizationOptions>`.
This example compares the model before and after them.

A model with room for improvement
+++++++++++++++++++++++++++++++++
"""

import numpy as np
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import export_program, to_onnx
from experimental_experiment.xbuilder import OptimizationOptions


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.arange(8).float())

    def forward(self, x):
        # the transposed weight, the scale: computed from constants only
        w = self.linear.weight.T.T * 1.0
        y = x @ w.T + self.linear.bias
        y = y * (self.scale + 1) / 2
        # two transpositions cancelling each other
        return y.transpose(0, 1).transpose(0, 1).reshape(x.shape[0], -1)


model = Model().eval()
x = torch.randn(3, 8)
dynamic_shapes = ({0: "batch"},)


def show(onx):
    for node in onx.graph.node:
        print(f"  {node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}")


# %%
# Without optimization
# ++++++++++++++++++++

raw = to_onnx(model, (x,), dynamic_shapes=dynamic_shapes, optimize=False)
print(len(raw.graph.node), "nodes")
show(raw)

# %%
# With the default optimization
# +++++++++++++++++++++++++++++
#
# :func:`export_program <experimental_experiment.torch_interpreter.export_program>`
# also returns what each pass and each pattern did (``result.optimization``):
# one entry per pass or pattern with the number of matches, of rewrites applied,
# of refusals (and their reasons) and the time spent. Only what applied is shown here.

result = export_program(model, (x,), dynamic_shapes=dynamic_shapes)
opt, report = result.model, result.optimization
print(len(opt.graph.node), "nodes")
for entry in report:
    if entry.applied:
        print(f"  {entry.kind:8s} {entry.name:35s} applied={entry.applied}")
show(opt)

# %%
# The passes can be selected one by one.

for options in [
    OptimizationOptions(constant_folding=False),
    OptimizationOptions(remove_identity=False),
]:
    onx = to_onnx(model, (x,), dynamic_shapes=dynamic_shapes, options=options)
    print(options, "->", len(onx.graph.node), "nodes")

# %%
# The pattern rewriting (``patterns="default"``) is the next step of the optimizer:
# it would remove the two transpositions. It is tracked with the graph optimizer and
# does nothing yet.
#
# Another optimizer: onnxscript
# +++++++++++++++++++++++++++++
#
# :epkg:`onnxscript` has its own optimizer, the one :func:`torch.onnx.export` uses.
# It applies to any ONNX model.

import onnxscript.optimizer

opt2 = onnxscript.optimizer.optimize(raw)
print(len(opt2.graph.node), "nodes")
show(opt2)

# %%
# All models compute the same results
# +++++++++++++++++++++++++++++++++++

xb = torch.randn(5, 8)
with torch.no_grad():
    expected = model(xb).numpy()
for name, onx in [("raw", raw), ("to_onnx", opt), ("onnxscript", opt2)]:
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: xb.numpy()})[0]
    print(f"{name:12s} max absolute difference: {np.abs(got - expected).max():.3g}")

# %%
# Operators before and after
# ++++++++++++++++++++++++++
#
# :func:`plot_op_types <experimental_experiment.helpers.graph_plot.plot_op_types>`
# counts the nodes per operator type in each model.

from experimental_experiment.helpers.graph_plot import plot_op_types

plot_op_types({"no optimization": raw, "to_onnx": opt, "onnxscript": opt2})
