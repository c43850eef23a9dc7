"""
.. _l-plot-executorch-102:

From torch.export to ExecuTorch
===============================

:epkg:`ExecuTorch` runs PyTorch models on phones and embedded devices. Like the
exporters to ONNX, it starts from :func:`torch.export.export`, then lowers the program
to the *Edge dialect*, the core aten operator set with stricter typing, and finally
to a ``.pte`` file the ExecuTorch runtime loads. The first two steps only need torch
and show what any backend receives; the last one needs the ``executorch`` package,
which is not a dependency of this project: the example uses it only when installed.

The model and its capture
+++++++++++++++++++++++++
"""

import collections

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.norm = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        x = torch.nn.functional.silu(self.norm(self.conv(x)))
        return self.head(x.mean(dim=(2, 3)))


model = Model().eval()
x = torch.randn(2, 3, 16, 16)
ep = torch.export.export(model, (x,))


def count_ops(program):
    return dict(
        collections.Counter(
            str(n.target).replace("aten.", "")
            for n in program.graph.nodes
            if n.op == "call_function"
        )
    )


print(count_ops(ep))

# %%
# The core aten operator set
# ++++++++++++++++++++++++++
#
# The decompositions replace ``conv2d``, ``batch_norm``, ``silu``, ``linear``... by the
# operators of the core aten set (about 180 operators): what ExecuTorch's backends
# implement, and what :func:`torch.onnx.export` converts.

core = ep.run_decompositions()
print(count_ops(core))
print("same results:", torch.allclose(core.module()(x), model(x), atol=1e-5))

# %%
# Both graphs drawn with
# :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`
# (parameters and buffers are inputs):

import matplotlib.pyplot as plt

from experimental_experiment.helpers.graph_plot import plot_fx_graph

fig, axes = plt.subplots(1, 2, figsize=(9, 6))
plot_fx_graph(ep, axes[0], title="torch.export.export")
plot_fx_graph(core, axes[1], title="after run_decompositions()")
fig.tight_layout()

# %%
# Lowering with ExecuTorch
# ++++++++++++++++++++++++

try:
    from executorch.exir import to_edge
except ImportError:
    to_edge = None
    print(
        "executorch is not installed: the lowering to the Edge dialect and the .pte file "
        "are skipped (pip install executorch)"
    )

if to_edge is not None:
    edge = to_edge(ep)
    print(count_ops(edge.exported_program()))
    program = edge.to_executorch()
    print(len(program.buffer), "bytes in the .pte file")
