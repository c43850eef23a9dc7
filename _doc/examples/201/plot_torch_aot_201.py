"""
.. _l-torch-aot-201:

aot_autograd: the forward and backward graphs
=============================================

:func:`torch.compile` gives a backend the graph of the forward pass only.
``aot_autograd`` (from ``torch._dynamo.backends.common``) traces the backward pass
ahead of time and calls two compilers, one for the forward graph and one for the
backward graph, both made of aten operators. The onnxruntime backends of this package
are such compilers (see :ref:`l-plot-torch-dort-201`). This example uses compilers
which only print the graphs they receive.

Two printing compilers
++++++++++++++++++++++
"""

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

graphs = {}


def make_compiler(name: str):
    def compiler(gm: torch.fx.GraphModule, example_inputs: list):
        print(f"--- {name} graph, {len(example_inputs)} inputs")
        print(gm.graph)
        graphs[name] = gm.graph
        # aot_autograd calls the result with a list of tensors it may free early
        return make_boxed_func(gm.forward)

    return compiler


backend = aot_autograd(fw_compiler=make_compiler("forward"), bw_compiler=make_compiler("backward"))

# %%
# A model and a training step
# +++++++++++++++++++++++++++


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).sum()


torch.manual_seed(0)
model = Model()
x = torch.randn(5, 4)
compiled = torch.compile(model, backend=backend, fullgraph=True)

# %%
# The forward graph is compiled at the first call. It returns the loss and the
# tensors the backward pass needs (here the input and the output of the sigmoid).

loss = compiled(x)

# %%
# The backward graph is compiled at the first call to ``backward``.
# Its inputs are the saved tensors and the gradient of the loss;
# its outputs are the gradients of the inputs of the forward graph.

loss.backward()

# %%
# The gradients are those of eager PyTorch.

expected = Model()
expected.load_state_dict(model.state_dict())
expected(x).backward()
for (name, p), q in zip(model.named_parameters(), expected.parameters()):
    print(name, (p.grad - q.grad).abs().max().item())

# %%
# Both graphs
# +++++++++++
#
# Drawn with :func:`plot_fx_graph <experimental_experiment.helpers.graph_plot.plot_fx_graph>`:

import matplotlib.pyplot as plt

from experimental_experiment.helpers.graph_plot import plot_fx_graph

fig, axes = plt.subplots(1, 2, figsize=(12, 6))
for ax, (name, graph) in zip(axes, graphs.items()):
    plot_fx_graph(graph, ax, title=f"{name} graph")
fig.tight_layout()
