"""
.. _l-plot-exporter-exporter-infer-ds:

Infer dynamic shapes from several sets of inputs
================================================

Writing ``dynamic_shapes`` by hand is tedious for a model with many inputs
or nested inputs. When two or more sets of valid inputs are available,
the dynamic dimensions can be deduced: a dimension whose value changes from one
set to another is dynamic, the others stay static. This example writes that
deduction in a few lines with :mod:`torch.utils._pytree` and uses it to export.

The model and two sets of inputs
++++++++++++++++++++++++++++++++
"""

import torch
from torch.utils import _pytree as pytree

from experimental_experiment.helpers.graph_plot import plot_fx_graph


class Model(torch.nn.Module):
    def forward(self, x, extra):
        ids, mask = extra["ids"], extra["mask"]
        return (x.sum(dim=1, keepdim=True) + ids.float() * mask, x.shape[0])


inputs_1 = (torch.randn(2, 8), {"ids": torch.randint(0, 9, (2, 3)), "mask": torch.ones(2, 3)})
inputs_2 = (torch.randn(5, 8), {"ids": torch.randint(0, 9, (5, 7)), "mask": torch.ones(5, 7)})
model = Model()
print(model(*inputs_1)[0].shape, model(*inputs_2)[0].shape)

# %%
# The deduction
# +++++++++++++
#
# Both sets are flattened into lists of tensors; they must have the same structure.
# For every tensor, the axes where the sets disagree become ``Dim.DYNAMIC``.
# The result is unflattened back into the structure of the inputs, which is
# what ``dynamic_shapes`` expects.


def infer_dynamic_shapes(*input_sets):
    "Returns the dynamic shapes for positional inputs given several valid sets."
    flats = [pytree.tree_flatten(inputs) for inputs in input_sets]
    spec = flats[0][1]
    for _, other in flats[1:]:
        if other != spec:
            raise ValueError(f"inputs do not share the same structure:\n{spec}\n{other}")
    dims = []
    for tensors in zip(*[flat for flat, _ in flats]):
        ranks = {t.dim() for t in tensors}
        if len(ranks) != 1:
            raise ValueError(f"one input has different ranks {ranks}")
        dims.append(
            {
                axis: torch.export.Dim.DYNAMIC
                for axis in range(tensors[0].dim())
                if len({t.shape[axis] for t in tensors}) > 1
            }
        )
    return pytree.tree_unflatten(dims, spec)


dynamic_shapes = infer_dynamic_shapes(inputs_1, inputs_2)
print(dynamic_shapes)

# %%
# Export
# ++++++
#
# The exporter then finds the relations between the dimensions itself:
# the batch dimension of ``x``, ``ids`` and ``mask`` is one symbol,
# the sequence length of ``ids`` and ``mask`` another one.

ep = torch.export.export(model, inputs_1, dynamic_shapes=dynamic_shapes)
for node in ep.graph.nodes:
    if node.op == "placeholder":
        print(node.name, node.meta["val"].shape)

# %%
# The graph, drawn with
# :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`,
# and the symbolic shapes of its inputs:

plot_fx_graph(ep, shapes=True, title="dynamic shapes inferred from two sets of inputs")

# %%
# The exported program runs on both sets.

for inputs in [inputs_1, inputs_2]:
    got, expected = ep.module()(*inputs), model(*inputs)
    print((got[0] - expected[0]).abs().max().item(), got[1], expected[1])

# %%
# Limits
# ++++++
#
# Two sets cannot tell a dimension which only changes in a third set:
# choose input sets which differ on every dimension meant to be dynamic,
# and avoid dimensions equal to 1 (see :ref:`l-plot-exporter-lost_dynamic_dimension`).
