"""
.. _l-plot-convolution-matmul-102:

Convolution and matrix multiplication
=====================================

A convolution is a sum of matrix multiplications: for a kernel of size
``k x k``, each of the ``k * k`` positions of the kernel multiplies
the input shifted by that position by a matrix of weights. This example writes
a convolution both ways, checks they agree, exports both to ONNX and compares
the time :epkg:`onnxruntime` needs for each: a runtime has dedicated kernels for
``Conv`` which a chain of ``MatMul`` cannot match.

Two implementations
+++++++++++++++++++
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
import pandas
import torch

from experimental_experiment.torch_interpreter import to_onnx


class ConvModel(torch.nn.Module):
    def __init__(self, channels: int, kernel: int = 3):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, kernel, bias=False)

    def forward(self, x):
        return self.conv(x)


class MatMulModel(torch.nn.Module):
    "The same convolution (no padding, stride 1) as a sum of matrix multiplications."

    def __init__(self, conv: torch.nn.Conv2d):
        super().__init__()
        self.weight = torch.nn.Parameter(conv.weight.detach().clone())

    def forward(self, x):
        k = self.weight.shape[-1]
        h, w = x.shape[2] - k + 1, x.shape[3] - k + 1
        out = None
        for i in range(k):
            for j in range(k):
                # (N, C, h, w) -> (N, h, w, C) @ (C, Cout) -> (N, Cout, h, w)
                shifted = x[:, :, i : i + h, j : j + w].permute(0, 2, 3, 1)
                term = (shifted @ self.weight[:, :, i, j].T).permute(0, 3, 1, 2)
                out = term if out is None else out + term
        return out


conv = ConvModel(8).eval()
mm = MatMulModel(conv.conv).eval()
x = torch.randn(2, 8, 20, 20)
with torch.no_grad():
    print("max difference:", (conv(x) - mm(x)).abs().max().item())

# %%
# The ONNX graphs
# +++++++++++++++

onx_conv = to_onnx(conv, (x,))
onx_mm = to_onnx(mm, (x,))
print("conv:  ", [node.op_type for node in onx_conv.graph.node])
print("matmul:", len(onx_mm.graph.node), "nodes,", sorted({n.op_type for n in onx_mm.graph.node}))

# %%
# Speed
# +++++
#
# The median time of a few runs, for several numbers of channels.


def measure(onx, feeds, repeat: int = 15) -> float:
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    sess.run(None, {name: feeds})
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        sess.run(None, {name: feeds})
        times.append(time.perf_counter() - begin)
    return float(np.median(times))


rows = []
for channels in [4, 16, 64]:
    conv = ConvModel(channels).eval()
    mm = MatMulModel(conv.conv).eval()
    x = torch.randn(1, channels, 32, 32)
    feeds = x.numpy()
    rows.append(
        {
            "channels": channels,
            "Conv (ms)": measure(to_onnx(conv, (x,)), feeds) * 1000,
            "MatMul (ms)": measure(to_onnx(mm, (x,)), feeds) * 1000,
        }
    )
# 3 significant digits
df = pandas.DataFrame(rows).set_index("channels").map(lambda v: float(f"{v:.3g}"))
df

# %%
# Plot
# ++++

ax = df.plot.bar(title="onnxruntime, 3x3 convolution on 32x32 images")
ax.set_ylabel("ms")
plt.tight_layout()
