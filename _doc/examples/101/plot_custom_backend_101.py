"""
.. _l-plot-custom-backend:

A custom backend for torch.compile
==================================

:func:`torch.compile` captures the model into FX graphs with Dynamo and gives each
graph to a *backend*, a function returning a callable which replaces the graph.
A backend can do anything: print the graph, run it unchanged, or convert it to
ONNX and run it with :epkg:`onnxruntime`, which is what the backends of
:mod:`experimental_experiment.torch_dynamo` do.

The smallest backend
++++++++++++++++++++

It prints the graph it receives and runs it as it is.
"""

import numpy as np
import torch

from experimental_experiment.torch_models.dump_helper import dump_onnx
from experimental_experiment.torch_models.training_helper import make_aot_ort, train_loop


def printing_backend(gm: torch.fx.GraphModule, example_inputs: list):
    print("backend called with inputs of shapes", [tuple(t.shape) for t in example_inputs])
    print(gm.graph)
    return gm.forward


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(10, 32), torch.nn.Sigmoid(), torch.nn.Linear(32, 1)
        )

    def forward(self, x):
        return self.layers(x)


torch.manual_seed(0)
model = MLP()
x = torch.randn(4, 10)
compiled = torch.compile(model, backend=printing_backend, fullgraph=True)
print((compiled(x) - model(x)).abs().max().item())

# %%
# The backend is only called once: the second call reuses the compiled graph.

print((compiled(x) - model(x)).abs().max().item())

# %%
# The onnxruntime backend
# +++++++++++++++++++++++
#
# :func:`make_aot_ort <experimental_experiment.torch_models.training_helper.make_aot_ort>`
# returns a backend which converts the forward graph and the backward graph with
# :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` and runs them
# with onnxruntime. :func:`dump_onnx <experimental_experiment.torch_models.dump_helper.dump_onnx>`
# saves every model it builds.

torch._dynamo.reset()
local_aot_ort, _ = make_aot_ort(dynamic=False)
compiled = torch.compile(model, backend=local_aot_ort, fullgraph=True)

with dump_onnx("custom_backend", folder="dump_custom_backend", clean=True):
    got = compiled(x)
print("forward, max absolute difference:", (got - model(x)).abs().max().item())

# %%
# Training
# ++++++++
#
# :func:`train_loop <experimental_experiment.torch_models.training_helper.train_loop>`
# runs a few steps of forward, backward and SGD. The gradients come from the backward
# graph run by onnxruntime; they are compared with those of eager PyTorch.

model_eager = MLP()
model_eager.load_state_dict(model.state_dict())
with dump_onnx("custom_backend_train", folder="dump_custom_backend"):
    losses = train_loop(compiled, x, steps=3)
print("losses with onnxruntime:", losses)
print("losses in eager mode:   ", train_loop(model_eager, x, steps=3))

for (name, p), q in zip(model.named_parameters(), model_eager.parameters()):
    print(
        f"{name:20s} max difference of the weights after training: "
        f"{np.abs(p.detach().numpy() - q.detach().numpy()).max():.3g}"
    )

# %%
# The models the backend built:

import os

print(sorted(f for f in os.listdir("dump_custom_backend") if f.endswith(".onnx")))

# %%
# The forward graph onnxruntime runs, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the weights are inputs, torch.compile gives them to the backend with the input.

import onnx

from experimental_experiment.helpers.graph_plot import plot_onnx_graph

plot_onnx_graph(onnx.load("dump_custom_backend/custom_backend_0.onnx"), title="forward graph")
