"""
.. _l-plot-torch-dort-201:

Train a tiny Llama with the onnxruntime backend
===============================================

:func:`make_aot_ort <experimental_experiment.torch_models.training_helper.make_aot_ort>`
builds a backend for :func:`torch.compile` from two compilers given to ``aot_autograd``
(see :ref:`l-torch-aot-201`): the forward graph and the backward graph are converted
to ONNX with :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` and run
with :epkg:`onnxruntime`. This example trains a tiny Llama model from :epkg:`transformers`
(random weights, one layer) for a few steps and compares with eager PyTorch.

The model
+++++++++
"""

import os

import torch
from transformers import LlamaConfig, LlamaModel

from experimental_experiment.torch_models.dump_helper import dump_onnx
from experimental_experiment.torch_models.training_helper import make_aot_ort, train_loop

config = LlamaConfig(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    use_cache=False,
)
torch.manual_seed(0)
model = LlamaModel(config)
eager = LlamaModel(config)
eager.load_state_dict(model.state_dict())
input_ids = torch.randint(0, config.vocab_size, (2, 16))
input_mask = torch.ones(2, 16, dtype=torch.int64)

# %%
# Compile and train
# +++++++++++++++++
#
# Every model the backend builds is saved in folder ``dump_dort``. If an operator of
# the model has no converter yet, torch.compile raises an error naming it.
# :epkg:`transformers` computes the attention with
# :func:`torch.nn.functional.scaled_dot_product_attention` (``sdpa``): the forward graph
# calls ``_scaled_dot_product_flash_attention_for_cpu``, the backward graph
# ``_scaled_dot_product_flash_attention_for_cpu_backward``, both converted.

local_aot_ort, _ = make_aot_ort(dynamic=False)
optimized = torch.compile(model, backend=local_aot_ort, fullgraph=True)

with dump_onnx("dort-llama-ort", folder="dump_dort", clean=True):
    losses = train_loop(optimized, input_ids, input_mask, steps=3)
eager_losses = train_loop(eager, input_ids, input_mask, steps=3)
print("losses with onnxruntime:", losses)
print("losses in eager mode:   ", eager_losses)

# %%
# Both runs follow the same curve:

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(range(1, len(losses) + 1), losses, "o-", label="torch.compile + onnxruntime")
ax.plot(range(1, len(eager_losses) + 1), eager_losses, "x--", label="eager")
ax.set_xlabel("training step")
ax.set_ylabel("loss")
ax.set_xticks(range(1, len(losses) + 1))
ax.set_title("tiny Llama, 3 steps of SGD")
ax.legend()
fig.tight_layout()

# %%
# The weights after training
# ++++++++++++++++++++++++++

diffs = [
    (p.detach() - q.detach()).abs().max().item()
    for p, q in zip(model.parameters(), eager.parameters())
]
print("largest difference between the weights:", max(diffs))

# %%
# The models built by the backend
# +++++++++++++++++++++++++++++++
#
# One for the forward pass, one for the backward pass.

import onnx

for name in sorted(os.listdir("dump_dort")):
    if name.endswith(".onnx"):
        onx = onnx.load(os.path.join("dump_dort", name))
        print(
            f"{name}: {len(onx.graph.input)} inputs, {len(onx.graph.output)} outputs, "
            f"{len(onx.graph.node)} nodes"
        )
