"""
.. _l-plot-exporter-dynamic_shapes:

torch.export.export and dynamic shapes
======================================

An exported model has static shapes unless ``dynamic_shapes`` says otherwise.
This argument follows the structure of the inputs: one entry per input,
each a dictionary ``{axis: dimension}``. This example goes through the ways
to declare a dynamic dimension and what :func:`torch.export.export` does with them.

The model
+++++++++
"""

import torch

from experimental_experiment.helpers.graph_plot import plot_fx_graph


class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], dim=1).sum(dim=1, keepdim=True) * x[:, :1]


model = Model()
x, y = torch.randn(3, 4), torch.randn(3, 2)
print(model(x, y).shape)

# %%
# Named dimensions: torch.export.Dim
# ++++++++++++++++++++++++++++++++++
#
# A :class:`torch.export.Dim` is a symbol with an optional range. Giving the same
# object to two inputs tells the exporter the two dimensions are equal.

batch = torch.export.Dim("batch", min=1, max=1024)
ep = torch.export.export(model, (x, y), dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
print(ep.graph)

# %%
# The same graph drawn with
# :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:

plot_fx_graph(ep, title="x: (batch, 4), y: (batch, 2)")

# %%
# The constraints the exporter kept on each symbol:

print(ep.range_constraints)

# %%
# Dim.DYNAMIC and Dim.AUTO
# ++++++++++++++++++++++++
#
# ``Dim.DYNAMIC`` asks for a dynamic dimension without naming it; the exporter
# finds itself that both batch dimensions are the same symbol.
# ``Dim.AUTO`` lets the exporter decide: dynamic if the code allows it,
# static otherwise, without raising.

DYN, AUTO = torch.export.Dim.DYNAMIC, torch.export.Dim.AUTO
ep = torch.export.export(model, (x, y), dynamic_shapes=({0: DYN, 1: DYN}, {0: DYN, 1: AUTO}))
for node in ep.graph.nodes:
    if node.op == "placeholder":
        print(node.name, node.meta["val"].shape)

# %%
# A dimension declared dynamic but specialized by the code
# ++++++++++++++++++++++++++++++++++++++++++++++++++++++++
#
# ``torch.export.export`` raises an error when the code forces a dimension declared
# dynamic to take a single value. Here the model reshapes into a fixed number of rows.


class Fixed(torch.nn.Module):
    def forward(self, x):
        return x.reshape((3, -1)) + 1


try:
    torch.export.export(Fixed(), (x,), dynamic_shapes=({0: batch},))
except Exception as e:
    print(type(e).__name__)
    print("\n".join(str(e).splitlines()[:8]))

# %%
# ``Dim.AUTO`` silently keeps it static instead:

ep = torch.export.export(Fixed(), (x,), dynamic_shapes=({0: AUTO},))
print(ep.graph.find_nodes(op="placeholder")[0].meta["val"].shape)

# %%
# Derived dimensions
# ++++++++++++++++++
#
# A dimension may be an expression of another one, such as ``2 * n``.


class Halves(torch.nn.Module):
    def forward(self, x, y):
        return x[: y.shape[0]] + x[y.shape[0] :] + y


n = torch.export.Dim("n")
ep = torch.export.export(
    Halves(), (torch.randn(6, 2), torch.randn(3, 2)), dynamic_shapes=({0: 2 * n}, {0: n})
)
print(ep.graph)
print(ep.module()(torch.randn(10, 2), torch.randn(5, 2)).shape)
