"""
.. _l-plot-torch-export-201:

torch.export.export in depth: buffers, mutations, constants, modules
====================================================================

:ref:`l-plot-torch-export-101` shows the captured graph of a simple model.
This example looks at what :func:`torch.export.export` does with the parts of a
model that are not plain computations: buffers updated during the forward pass,
constant tensors, python values given as inputs, and the module hierarchy.

Buffers updated in forward
++++++++++++++++++++++++++

A module may update one of its buffers in place, here a counter of calls and a
running sum. The graph :func:`torch.export.export` returns keeps the in-place
operators (``add_``); :meth:`run_decompositions
<torch.export.ExportedProgram.run_decompositions>` makes it functional: the
new values of the buffers become extra outputs (``BUFFER_MUTATION``) which the
runtime must copy back.
"""

import torch


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.calls.add_(1)
        self.total.add_(x.sum(dim=0))
        return x - self.total / self.calls


x = torch.randn(8, 4)
ep = torch.export.export(Accumulate(), (x,))
print(ep.graph)

# %%
# After the decompositions:

functional = ep.run_decompositions()
print(functional.graph)
for spec in functional.graph_signature.output_specs:
    print(f"{spec.kind.name:16s} {spec.arg.name:20s} {spec.target}")

# %%
# Drawn with :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:
# the buffers are inputs, their new values the first two outputs.

from experimental_experiment.helpers.graph_plot import plot_fx_graph

plot_fx_graph(functional, title="Accumulate, functional")

# %%
# An ONNX model has no state: :func:`to_onnx
# <experimental_experiment.torch_interpreter.to_onnx>` makes the graph functional
# before converting it when it finds in-place operators, keeps the user outputs only,
# and logs a warning for each dropped mutation.

from experimental_experiment.torch_interpreter import ExportOptions, to_onnx

for table in [None, "default"]:
    onx = to_onnx(Accumulate(), (x,), export_options=ExportOptions(decomposition_table=table))
    print(f"decomposition_table={table!r}: outputs", [o.name for o in onx.graph.output])

# %%
# Constant tensors and python values
# ++++++++++++++++++++++++++++++++++
#
# A tensor created inside ``forward`` from a python list becomes a constant of the
# program. A python integer given as an input is not a graph input: its value is
# baked into the graph.


class WithConstant(torch.nn.Module):
    def forward(self, x, power: int):
        scale = torch.tensor([1.0, 2.0, 3.0, 4.0])
        return (x * scale) ** power


ep = torch.export.export(WithConstant(), (x, 2))
print(ep.graph)
print({spec.arg.name: spec.kind.name for spec in ep.graph_signature.input_specs})

# %%
# The program only accepts the value it was exported with.

try:
    ep.module()(x, 3)
except Exception as e:
    print(type(e).__name__, ":", str(e).splitlines()[0])

# %%
# The module hierarchy
# ++++++++++++++++++++
#
# The graph is flat, but every node remembers the module it comes from in
# ``node.meta["nn_module_stack"]``.


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.second = Block()

    def forward(self, x):
        return self.second(self.first(x))


ep = torch.export.export(Net(), (x,))
for node in ep.graph.nodes:
    if node.op == "call_function":
        stack = node.meta.get("nn_module_stack", {})
        print(f"{node.name:12s} {' / '.join(path for path, _ in stack.values())}")

# %%
# :func:`torch.export.unflatten` rebuilds the hierarchy from that information.

unflat = torch.export.unflatten(ep)
print(type(unflat.first).__name__, [name for name, _ in unflat.named_children()])

# %%
# Save and load
# +++++++++++++
#
# An exported program can be saved with :func:`torch.export.save`, weights included,
# and loaded in another process without the model's code.

import io

buffer = io.BytesIO()
torch.export.save(ep, buffer)
print("size:", len(buffer.getvalue()), "bytes")
buffer.seek(0)
loaded = torch.export.load(buffer)
print((loaded.module()(x) - ep.module()(x)).abs().max().item())
