"""
.. _l-plot-exporter-recipes-custom-phi2:

to_onnx and a Phi-2-like model
==============================

A language model of the Phi-2 architecture, built by :epkg:`transformers` from a
configuration with random weights: nothing is downloaded, the model is tiny
(2 layers, hidden size 64). :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`
converts the graph captured by :func:`torch.export.export` without decomposing it.
The same model is exported with :func:`torch.onnx.export` in
:ref:`l-plot-exporter-recipes-onnx_exporter-phi2`.

The model
+++++++++
"""

import time

import numpy as np
import onnxruntime
import torch
from transformers import PhiConfig, PhiForCausalLM

from experimental_experiment.helpers.graph_plot import plot_op_types
from experimental_experiment.torch_interpreter import to_onnx

torch.manual_seed(0)
config = PhiConfig(
    vocab_size=1024,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=256,
    use_cache=False,
)
model = PhiForCausalLM(config).eval()
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")

input_ids = torch.randint(0, config.vocab_size, (2, 8))
attention_mask = torch.ones(2, 8, dtype=torch.int64)
inputs = dict(input_ids=input_ids, attention_mask=attention_mask)

# %%
# Export
# ++++++
#
# The batch size and the sequence length are dynamic. If an operator of the
# model had no converter, the exporter would stop and name it.

dynamic_shapes = {
    "input_ids": {0: "batch", 1: "seq_length"},
    "attention_mask": {0: "batch", 1: "seq_length"},
}
begin = time.perf_counter()
with torch.no_grad():
    onx = to_onnx(model, (), inputs, dynamic_shapes=dynamic_shapes)
print(f"export in {time.perf_counter() - begin:.1f} s")

# %%
# The model
# +++++++++

for value in [*onx.graph.input, *onx.graph.output]:
    dims = value.type.tensor_type.shape.dim
    print(value.name, [d.dim_param or d.dim_value for d in dims])

# %%
# The most frequent operators, counted with
# :func:`plot_op_types <experimental_experiment.helpers.graph_plot.plot_op_types>`:

plot_op_types({"to_onnx": onx}, top=15)

# %%
# Check with onnxruntime on another shape
# +++++++++++++++++++++++++++++++++++++++

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
ids = torch.randint(0, config.vocab_size, (3, 11))
mask = torch.ones(3, 11, dtype=torch.int64)
feeds = dict(zip([i.name for i in sess.get_inputs()], [ids.numpy(), mask.numpy()]))
got = sess.run(None, feeds)[0]
with torch.no_grad():
    expected = model(input_ids=ids, attention_mask=mask).logits.numpy()
print("logits:", got.shape, "max absolute difference:", np.abs(got - expected).max())
