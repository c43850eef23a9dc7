"""
.. _l-plot-exporter-decompositions:

Decompositions: run_decompositions
==================================

:func:`torch.export.export` keeps high-level operators such as
``aten.linear`` or ``aten.layer_norm``. The method
:meth:`torch.export.ExportedProgram.run_decompositions` rewrites the graph with
a smaller set of operators, the *core aten* operator set: the graph is longer
but a converter to ONNX has fewer operators to support.
:func:`torch.onnx.export` decomposes the graph before converting it;
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` does not by default,
and converts the high-level operators directly.

The model
+++++++++
"""

import collections

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.norm(self.linear(x)))


model = Model().eval()
x = torch.randn(3, 8)
ep = torch.export.export(model, (x,))
print(ep.graph)


def count_ops(ep: torch.export.ExportedProgram) -> dict:
    "Counts the operators called by a program."
    return dict(
        collections.Counter(str(n.target) for n in ep.graph.nodes if n.op == "call_function")
    )


print(count_ops(ep))

# %%
# The default decomposition table
# +++++++++++++++++++++++++++++++

decomposed = ep.run_decompositions()
print(decomposed.graph)
print(count_ops(decomposed))

# %%
# Both programs compute the same thing.

print((decomposed.module()(x) - ep.module()(x)).abs().max().item())

# %%
# Both graphs drawn with
# :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:

import matplotlib.pyplot as plt

from experimental_experiment.helpers.graph_plot import plot_fx_graph

fig, axes = plt.subplots(1, 2, figsize=(9, 7))
plot_fx_graph(ep, axes[0], title="torch.export.export")
plot_fx_graph(decomposed, axes[1], title="after run_decompositions()")
fig.tight_layout()

# %%
# Keeping some operators
# ++++++++++++++++++++++
#
# The table is a dictionary ``{operator: decomposition}``: removing an operator
# from it keeps that operator in the graph. Here ``layer_norm`` is kept
# (ONNX has ``LayerNormalization`` since opset 17) and the rest decomposed.

table = torch.export.default_decompositions()
for op in [torch.ops.aten.layer_norm.default, torch.ops.aten.native_layer_norm.default]:
    table.pop(op, None)
partial = ep.run_decompositions(table)
print(count_ops(partial))

# %%
# The same with to_onnx
# +++++++++++++++++++++
#
# :class:`ExportOptions <experimental_experiment.torch_interpreter.ExportOptions>`
# selects the decomposition: ``None`` (the default, no decomposition),
# ``"default"`` or a table. The converters of the high-level operators produce
# the same ONNX operators as those of the decomposed ones for this model.

from experimental_experiment.torch_interpreter import ExportOptions, to_onnx

for table in [None, "default"]:
    onx = to_onnx(model, (x,), export_options=ExportOptions(decomposition_table=table))
    print(f"decomposition_table={table!r}:", [n.op_type for n in onx.graph.node])
