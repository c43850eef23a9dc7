"""
.. _l-plot-onnxrt-diff:

Find where onnxruntime and torch start to disagree
==================================================

An exported model gives results different from torch's. Where does the discrepancy
come from? Every intermediate result of the FX graph has a counterpart in the ONNX
graph: :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` names the
output of each converter after the FX node it converts. Running both graphs and
comparing the results node by node finds the first operator whose result differs.

To have a discrepancy to find, this example replaces the converter of ``gelu`` by a
wrong one (the tanh approximation where the model uses the exact function) through a
:class:`Dispatcher <experimental_experiment.torch_interpreter.Dispatcher>`.

The model and a faulty export
+++++++++++++++++++++++++++++
"""

import math
import os

import numpy as np
import onnx
import onnxruntime
import torch

from experimental_experiment.torch_interpreter import Dispatcher, to_onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.linear2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.linear1(x)))
        return torch.softmax(self.linear2(h), dim=-1)


def tanh_gelu(g, x, approximate="none"):
    "A converter ignoring ``approximate``: always the tanh approximation."
    inner = g.op.Mul(
        g.op.Add(x, g.op.Mul(g.op.Mul(g.op.Mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi)
    )
    return g.op.Mul(g.op.Mul(x, 0.5), g.op.Add(g.op.Tanh(inner), 1.0))


torch.manual_seed(0)
model = Model().eval()
x = torch.randn(5, 8) * 3
ep = torch.export.export(model, (x,))
onx = to_onnx(
    ep, (x,), optimize=False, dispatcher=Dispatcher({torch.ops.aten.gelu.default: tanh_gelu})
)

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
print("max absolute difference of the output:", np.abs(got - model(x).detach().numpy()).max())

# %%
# Every intermediate result of torch
# ++++++++++++++++++++++++++++++++++
#
# :class:`torch.fx.Interpreter` runs the graph of the exported program node by node;
# a subclass keeps every result. The graph takes the weights as inputs, in the order
# of the signature.


class Recorder(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.results = {}

    def run_node(self, node):
        result = super().run_node(node)
        if isinstance(result, torch.Tensor):
            self.results[node.name] = result.detach()
        return result


state = {**ep.state_dict, **ep.constants}
weights = [state[spec.target] for spec in ep.graph_signature.input_specs if spec.target]
recorder = Recorder(ep.graph_module)
recorder.run(*weights, x)
print(list(recorder.results)[:8], "...")

# %%
# Every intermediate result of onnxruntime
# ++++++++++++++++++++++++++++++++++++++++
#
# The results named after an FX node become outputs of the ONNX model.

names = [n for n in recorder.results if n not in {i.name for i in onx.graph.input}]
produced = {out for node in onx.graph.node for out in node.output}
debug = onnx.ModelProto()
debug.CopyFrom(onx)
for name in names:
    if name in produced:
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(recorder.results[name].numpy().dtype)
        debug.graph.output.append(onnx.helper.make_tensor_value_info(name, elem_type, None))

sess = onnxruntime.InferenceSession(debug.SerializeToString(), providers=["CPUExecutionProvider"])
outputs = [o.name for o in sess.get_outputs()]
ort_results = dict(zip(outputs, sess.run(None, {sess.get_inputs()[0].name: x.numpy()})))

# %%
# Compare in the order of the graph
# +++++++++++++++++++++++++++++++++

first = None
diffs = {}
for name in names:
    if name not in ort_results:
        continue
    diff = diffs[name] = float(np.abs(ort_results[name] - recorder.results[name].numpy()).max())
    print(f"{name:20s} max absolute difference {diff:.3g}")
    if first is None and diff > 1e-4:
        first = name

# %%
# The same differences drawn, the first one above the tolerance in red:

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4))
labels = list(diffs)[::-1]
ax.barh(
    labels,
    [max(diffs[n], 1e-9) for n in labels],
    color=["#d0584a" if n == first else "#4c72b0" for n in labels],
)
ax.axvline(1e-4, color="#777777", linestyle="--", label="tolerance 1e-4")
ax.set_xscale("log")
ax.set_xlabel("max absolute difference between onnxruntime and torch")
ax.set_title("intermediate results in the order of the graph")
ax.legend()
fig.tight_layout()

# %%
# The first node with a discrepancy and its operator:

node = next(n for n in ep.graph.nodes if n.name == first)
print(first, "->", node.target)
print(node.meta.get("stack_trace", "").strip().splitlines()[-1])

# %%
# The same in one call
# ++++++++++++++++++++
#
# :func:`compare_intermediates <experimental_experiment.investigate.compare_intermediates>`
# does all of the above: the exporter writes in each ONNX node's ``metadata_props``
# the FX node it comes from and the user's line, the function runs both graphs and
# returns every comparison and the first one out of tolerance, with the ONNX nodes
# computing it and the statistics of both values. ``runtime="reference"`` uses
# :class:`onnx.reference.ReferenceEvaluator` instead of onnxruntime.

from experimental_experiment.investigate import compare_intermediates  # noqa: E402

for runtime in ["onnxruntime", "reference"]:
    found = compare_intermediates(ep, onx, (x,), runtime=runtime)
    print(f"-- {runtime}")
    # paths relative to this folder
    print(str(found).replace(os.getcwd() + os.sep, ""))
