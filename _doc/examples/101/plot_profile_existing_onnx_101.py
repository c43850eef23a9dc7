"""
.. _l-plot-profile-existing-onnx-101:

Profile an existing ONNX model with onnxruntime
===============================================

:epkg:`onnxruntime` has a profiler: enabled in the session options, it records
the time spent in every node at every run and writes it to a JSON file
(Chrome's trace format). This example profiles a model stored on disk, then
aggregates the time per operator type.

An ONNX model on disk
+++++++++++++++++++++

Any ONNX file works; this one is a small convolutional network exported here.
"""

import json
import os

import matplotlib.pyplot as plt
import numpy as np
import onnx
import onnxruntime
import pandas
import torch

from experimental_experiment.torch_interpreter import to_onnx


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.head(x.flatten(1))


torch.manual_seed(0)
x = torch.randn(8, 3, 16, 16)
to_onnx(ConvNet().eval(), (x,), dynamic_shapes=({0: "batch"},), filename="plot_profile.onnx")
print(os.path.getsize("plot_profile.onnx"), "bytes")

# %%
# Run with the profiler
# +++++++++++++++++++++

model = onnx.load("plot_profile.onnx")
print([node.op_type for node in model.graph.node])

options = onnxruntime.SessionOptions()
options.enable_profiling = True
options.profile_file_prefix = "plot_profile"
sess = onnxruntime.InferenceSession(
    "plot_profile.onnx", options, providers=["CPUExecutionProvider"]
)
feeds = {sess.get_inputs()[0].name: np.random.randn(32, 3, 16, 16).astype(np.float32)}
for _ in range(20):
    sess.run(None, feeds)
profile_file = sess.end_profiling()
print(profile_file)

# %%
# Read the profile
# ++++++++++++++++
#
# Every event has a category (``Session`` or ``Node``), a name, a duration in
# microseconds and arguments such as the operator type.

with open(profile_file) as f:
    events = json.load(f)
print(len(events), "events, the first one:", events[0])

# %%
# The kernel times of the nodes:

df = pandas.DataFrame(
    [
        {"name": e["name"], "op_type": e["args"].get("op_name"), "dur": e["dur"]}
        for e in events
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
    ]
)
df.head()

# %%
# Time per operator type
# ++++++++++++++++++++++

per_op = df.groupby("op_type")["dur"].sum().sort_values()
per_op.to_frame("total duration (µs)")

# %%
# The ``Relu`` nodes do not appear: onnxruntime fused them into the convolutions
# when it optimized the graph, and changed the layout of the convolutions
# (``nchwc``, hence the ``ReorderOutput`` node).

ax = (per_op / per_op.sum() * 100).plot.barh(title="share of the kernel time (%)")
ax.set_xlabel("%")
plt.tight_layout()

# %%
# Clean up.

os.remove(profile_file)
os.remove("plot_profile.onnx")
