"""
.. _l-plot-exporter-nn_modules_inputs:

torch.export.export and a module given as an input
==================================================

A ``forward`` method may receive another module as an argument, a design met
in some models where a layer is shared or selected at run time.
:func:`torch.export.export` accepts tensors, numbers, strings, ``None`` and
containers of them (lists, tuples, dictionaries, and classes registered with
:mod:`torch.utils._pytree`) as inputs. What happens with a module depends on
``strict``: the non-strict mode (the default) flattens the module into its
parameters, which become *user inputs* of the graph, the strict mode refuses it.
Either way, the weights of that module are not part of the exported model.
The usual way around it is a wrapper holding both modules, so that the
weights of the second one become parameters of the exported model.

The model
+++++++++
"""

import warnings

import torch

# torch.export calls one of its own deprecated functions when a module is an input
warnings.filterwarnings("ignore", message=".*_register_pytree_node. is deprecated")


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x)


class Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, head: torch.nn.Module):
        return head(torch.relu(self.linear(x)))


body, head = Body().eval(), Head().eval()
x = torch.randn(3, 4)
expected = body(x, head)
print(expected.shape)

# %%
# strict=False: the module is flattened into tensors
# ++++++++++++++++++++++++++++++++++++++++++++++++++
#
# The weights of ``head`` are inputs of the graph, the caller must give them at
# every call: not what a deployed model should expect.

ep = torch.export.export(body, (x, head), strict=False)
print(ep.graph_signature)

# %%
# strict=True: the export fails
# +++++++++++++++++++++++++++++

try:
    torch.export.export(body, (x, head), strict=True)
except Exception as e:
    print(type(e).__name__)
    print(str(e).split("Exported graphs inputs")[0].strip())

# %%
# A wrapper holding both modules
# ++++++++++++++++++++++++++++++
#
# The wrapper owns ``head``: its parameters are found by the exporter like any other.


class Wrapper(torch.nn.Module):
    def __init__(self, body, head):
        super().__init__()
        self.body = body
        self.head = head

    def forward(self, x):
        return self.body(x, self.head)


wrapped = Wrapper(body, head)
ep = torch.export.export(wrapped, (x,), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
print(ep.graph)

# %%
# The weights of ``head`` became parameters of the exported program.

print([spec.target for spec in ep.graph_signature.input_specs if spec.target])

# %%
# Check:

print((ep.module()(x) - expected).abs().max().item())

# %%
# The same applies to the conversion to ONNX, which starts with :func:`torch.export.export`.

from experimental_experiment.torch_interpreter import to_onnx

onx = to_onnx(wrapped, (x,), dynamic_shapes=({0: "batch"},))
print([init.name for init in onx.graph.initializer])

# %%
# The ONNX graph, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the weights of both modules are initializers, ``x`` the only input.

from experimental_experiment.helpers.graph_plot import plot_onnx_graph

plot_onnx_graph(onx, title="Wrapper(Body, Head) exported with to_onnx")
