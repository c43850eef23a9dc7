"""
.. _l-plot-exporter-lost_dynamic_dimension:

A dynamic dimension lost by torch.export.export
===============================================

A dimension declared dynamic may come out static. :func:`torch.export.export`
raises an error when the dimension is declared with ``Dim.DYNAMIC`` or a named
:class:`torch.export.Dim`, but ``Dim.AUTO`` silently falls back to a static
dimension: the exported model then fails on other shapes, or worse, an ONNX
model built from it has a fixed dimension where the user expected a dynamic one.
This example goes through the usual causes and how to detect them.
"""

import torch
from torch.fx.experimental.symbolic_shapes import is_concrete_int

DYN, AUTO = torch.export.Dim.DYNAMIC, torch.export.Dim.AUTO


def input_shapes(ep: torch.export.ExportedProgram) -> dict:
    "Shapes of the user inputs of an exported program, symbolic dimensions as symbols."
    names = set(ep.graph_signature.user_inputs)
    return {
        n.name: tuple(n.meta["val"].shape)
        for n in ep.graph.nodes
        if n.op == "placeholder" and n.name in names
    }


# %%
# Cause 1: an example input with a dimension equal to 1
# +++++++++++++++++++++++++++++++++++++++++++++++++++++
#
# The exporter specializes dimensions of size 0 and 1 (the *0/1 specialization*):
# broadcasting rules depend on it. An example batch of size 1 makes the batch static.


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


x1, y1 = torch.randn(1, 4), torch.randn(1, 4)

ep = torch.export.export(Add(), (x1, y1), dynamic_shapes=({0: AUTO}, {0: AUTO}))
print("Dim.AUTO:   ", input_shapes(ep))

try:
    torch.export.export(Add(), (x1, y1), dynamic_shapes=({0: DYN}, {0: DYN}))
except Exception as e:
    print("Dim.DYNAMIC:", type(e).__name__)
    print(str(e))

# %%
# The fix is to export with example inputs whose dynamic dimensions are
# greater than 1.

x3, y3 = torch.randn(3, 4), torch.randn(3, 4)
ep = torch.export.export(Add(), (x3, y3), dynamic_shapes=({0: DYN}, {0: DYN}))
print(input_shapes(ep))

# %%
# Cause 2: broadcasting with a dimension of size 1
# ++++++++++++++++++++++++++++++++++++++++++++++++
#
# ``bias`` has a first dimension of 1 and is broadcast against ``x``: the exporter
# assumes it stays 1. Declaring it dynamic makes no sense for this model.


class AddBias(torch.nn.Module):
    def forward(self, x, bias):
        return x + bias


ep = torch.export.export(
    AddBias(), (torch.randn(3, 4), torch.randn(1, 4)), dynamic_shapes=({0: AUTO}, {0: AUTO})
)
print(input_shapes(ep))

# %%
# Cause 3: the code depends on the value of the dimension
# +++++++++++++++++++++++++++++++++++++++++++++++++++++++
#
# A python test on a shape is evaluated once, at export time. If the test
# ``x.shape[0] == 3`` is true for the example, the exporter must assume it
# always is: the dimension becomes static.


class Branch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            return x * 2
        return x / 2


ep = torch.export.export(Branch(), (x3,), dynamic_shapes=({0: AUTO},))
print(input_shapes(ep))

# %%
# A test on an inequality only adds a constraint on the range of the dimension:
# it stays dynamic, and the branch not taken disappears from the graph.


class Inequality(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x * 2
        return x / 2


ep = torch.export.export(Inequality(), (x3,), dynamic_shapes=({0: DYN},))
print(input_shapes(ep), ep.range_constraints)

# %%
# Detect a lost dimension
# +++++++++++++++++++++++
#
# A simple check after every export: compare the requested dynamic dimensions
# with the ones the program kept. A dimension is static when its shape entry is an
# integer or a :class:`torch.SymInt` equal to a constant (``is_concrete_int``).


def lost_dimensions(ep, dynamic_shapes: dict) -> list:
    "Returns the (input, axis) declared dynamic that became static."
    shapes = input_shapes(ep)
    return [
        (name, axis)
        for name, axes in dynamic_shapes.items()
        for axis in axes
        if is_concrete_int(shapes[name][axis])
    ]


ds = {"x": {0: AUTO}, "y": {0: AUTO}}
print(
    "example of size 1:",
    lost_dimensions(torch.export.export(Add(), (x1, y1), dynamic_shapes=ds), ds),
)
print(
    "example of size 3:",
    lost_dimensions(torch.export.export(Add(), (x3, y3), dynamic_shapes=ds), ds),
)

# %%
# Summary
# +++++++
#
# The inputs whose first dimension, declared with ``Dim.AUTO``, became static,
# for each case above.

import matplotlib.pyplot as plt

cases = {
    "Add, example of size 1": (Add(), (x1, y1)),
    "Add, example of size 3": (Add(), (x3, y3)),
    "AddBias, bias of size 1": (AddBias(), (x3, torch.randn(1, 4))),
    "Branch, x.shape[0] == 3": (Branch(), (x3,)),
    "Inequality, x.shape[0] > 2": (Inequality(), (x3,)),
}
static = {}
for name, (module, args) in cases.items():
    program = torch.export.export(module, args, dynamic_shapes=[{0: AUTO} for _ in args])
    shapes = input_shapes(program)
    static[name] = [i for i, shape in shapes.items() if is_concrete_int(shape[0])]
    print(f"{name:28s} static: {static[name]}")

fig, ax = plt.subplots(figsize=(7, 3))
names = list(static)[::-1]
ax.barh(names, [1] * len(names), color=["#d0584a" if static[n] else "#4c9f50" for n in names])
for i, n in enumerate(names):
    text = f"static: {', '.join(static[n])}" if static[n] else "dynamic"
    ax.text(0.5, i, text, ha="center", va="center", color="white")
ax.set_xticks([])
ax.set_title("first dimension declared Dim.AUTO: what the exporter kept")
fig.tight_layout()
