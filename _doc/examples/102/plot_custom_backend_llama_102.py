"""
.. _l-plot-custom-backend-llama-102:

torch.compile with onnxruntime on a tiny Llama
==============================================

The backend of :ref:`l-plot-custom-backend` applied to a language model:
a Llama model from :epkg:`transformers`, built from a configuration with random
weights (one layer, hidden size 64, nothing is downloaded). :func:`torch.compile`
captures the forward pass, the backend converts it to ONNX and runs it with
:epkg:`onnxruntime`. With ``dynamic=True``, the graph is captured with symbolic
dimensions and one ONNX model serves every sequence length.

The model
+++++++++
"""

import os

import onnx
import torch
from transformers import LlamaConfig, LlamaModel

from experimental_experiment.torch_models.dump_helper import dump_onnx
from experimental_experiment.torch_models.training_helper import make_aot_ort

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
model = LlamaModel(config).eval()


def inputs(batch: int, seq: int):
    return (
        torch.randint(0, config.vocab_size, (batch, seq)),
        torch.ones(batch, seq, dtype=torch.int64),
    )


# %%
# Compile
# +++++++

local_aot_ort, _ = make_aot_ort(dynamic=True)
compiled = torch.compile(model, backend=local_aot_ort, fullgraph=True, dynamic=True)

# %%
# Run on several shapes
# +++++++++++++++++++++
#
# Every ONNX model the backend builds is saved in ``dump_llama``. If an operator
# has no converter, the backend raises an error naming it.

with torch.no_grad(), dump_onnx("llama", folder="dump_llama", clean=True):
    for batch, seq in [(2, 8), (3, 13), (1, 30)]:
        ids, mask = inputs(batch, seq)
        got = compiled(ids, mask).last_hidden_state
        expected = model(ids, mask).last_hidden_state
        print(
            f"batch={batch} seq={seq}: max absolute difference "
            f"{(got - expected).abs().max().item():.3g}"
        )

# %%
# The ONNX models
# +++++++++++++++
#
# One model per graph torch.compile built. The weights are inputs of the graphs
# torch.compile gives to a backend; the dynamic dimensions are named dimensions of
# the inputs, and their values are also given as scalar inputs. A batch of size 1
# is specialized by torch.compile (as by torch.export): it triggers a second
# compilation, hence a second model.

models = {}
for name in sorted(os.listdir("dump_llama")):
    if name.endswith(".onnx"):
        onx = models[name] = onnx.load(os.path.join("dump_llama", name))
        shapes = [
            [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
            for value in onx.graph.input
        ]
        symbolic = [s for s in shapes if any(isinstance(d, str) for d in s)]
        print(
            f"{name}: {len(onx.graph.node)} nodes, {len(shapes)} inputs, "
            f"{sum(1 for s in shapes if not s)} scalars, symbolic shapes {symbolic}"
        )

# %%
# The operators of both models, counted with
# :func:`plot_op_types <experimental_experiment.helpers.graph_plot.plot_op_types>`:

from experimental_experiment.helpers.graph_plot import plot_op_types

plot_op_types(models, top=15)
