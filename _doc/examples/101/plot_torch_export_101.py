"""
.. _l-plot-torch-export-101:

torch.export.export: a first look at the captured graph
=======================================================

Every exporter in this documentation starts with :func:`torch.export.export`.
It runs the model once on example inputs with fake tensors and records every
aten operator it calls into an :class:`torch.export.ExportedProgram`.
This example captures a small model and goes through what the result holds.

The model
+++++++++
"""

import torch

from experimental_experiment.helpers.graph_plot import plot_fx_graph


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("offset", torch.tensor([0.5, -0.5, 1.0]))

    def forward(self, x, y):
        z = self.linear(x) + self.offset
        return torch.relu(z) * y


model = Small().eval()
x, y = torch.randn(2, 4), torch.randn(2, 3)
expected = model(x, y)

# %%
# Capture
# +++++++

ep = torch.export.export(model, (x, y))
print(type(ep).__name__)

# %%
# The program holds a :class:`torch.fx.GraphModule`, the python code of which
# calls one ATen operator per line:

print(ep.graph_module.code)

# %%
# The graph is a :class:`torch.fx.Graph`: one node per operator. The parameters
# and buffers became inputs of the graph (``p_linear_weight``, ``b_offset``),
# which makes the graph a pure function.

print(ep.graph)

# %%
# Drawn with :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:

plot_fx_graph(ep, title="Small captured by torch.export.export")

# %%
# The signature tells which graph input is a parameter, a buffer or a user input,
# and which output is returned to the user.

for spec in ep.graph_signature.input_specs:
    print(f"input  {spec.arg.name:20s} {spec.kind.name:12s} {spec.target}")
for spec in ep.graph_signature.output_specs:
    print(f"output {spec.arg.name:20s} {spec.kind.name:12s}")

# %%
# Every node knows the shape and dtype of its result: ``node.meta["val"]`` is a
# fake tensor. The converters to ONNX rely on it.

for node in ep.graph.nodes:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        print(f"{node.name:15s} {str(val.dtype):15s} {tuple(val.shape)}")

# %%
# Run the captured program
# ++++++++++++++++++++++++
#
# :meth:`torch.export.ExportedProgram.module` turns the program back into a module.

got = ep.module()(x, y)
print("max difference with eager:", (got - expected).abs().max().item())

# %%
# Static shapes by default
# ++++++++++++++++++++++++
#
# Without ``dynamic_shapes``, every dimension is fixed to the example's value:
# the captured program refuses another batch size.

try:
    ep.module()(torch.randn(5, 4), torch.randn(5, 3))
except Exception as e:
    print(type(e).__name__, ":", str(e).splitlines()[0])

# %%
# With a dynamic first dimension, it accepts any batch size.

batch = torch.export.Dim("batch")
ep_dyn = torch.export.export(model, (x, y), dynamic_shapes=({0: batch}, {0: batch}))
print(ep_dyn.graph_signature.user_inputs, ep_dyn.range_constraints)
print(ep_dyn.module()(torch.randn(5, 4), torch.randn(5, 3)).shape)
