"""
.. _l-plot-torch-export-with-dynamic-cache-201:

torch.export.export with a DynamicCache as input
================================================

Large language models from :epkg:`transformers` keep the keys and values of the
attention layers computed at the previous steps in a cache,
``transformers.cache_utils.DynamicCache``, given to the model as an input
(``past_key_values``, renamed ``cache`` in transformers 5.24).
:func:`torch.export.export` only accepts inputs it can flatten into tensors:
the class must be registered with :mod:`torch.utils._pytree`.
:func:`bypass_export_some_errors
<experimental_experiment.torch_interpreter.onnx_export_errors.bypass_export_some_errors>`
registers it while the export runs and removes the registration on exit.

A model taking a cache
++++++++++++++++++++++

A tiny attention step: the new key and value are appended to the cache,
the query attends to every position.
"""

import torch
from transformers.cache_utils import DynamicCache

from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.onnx_export_errors import (
    bypass_export_some_errors,
)


class AttentionStep(torch.nn.Module):
    def forward(self, query, key, value, cache):
        keys = torch.cat([cache.layers[0].keys, key], dim=2)
        values = torch.cat([cache.layers[0].values, value], dim=2)
        scores = query @ keys.transpose(2, 3) / keys.shape[-1] ** 0.5
        return torch.softmax(scores, dim=-1) @ values


def make_inputs(batch: int, past: int, heads: int = 2, dim: int = 8):
    "Returns (query, key, value, cache) with a cache of length past."
    cache = DynamicCache()
    cache.update(torch.randn(batch, heads, past, dim), torch.randn(batch, heads, past, dim), 0)
    step = [torch.randn(batch, heads, 1, dim) for _ in range(3)]
    return (*step, cache)


model = AttentionStep()
inputs = make_inputs(batch=2, past=5)
expected = model(*inputs)
print(expected.shape)

# %%
# Without the patch
# +++++++++++++++++

try:
    torch.export.export(model, inputs)
except Exception as e:
    print(type(e).__name__)
    print(str(e).split(". ")[0])

# %%
# With bypass_export_some_errors
# ++++++++++++++++++++++++++++++
#
# Once registered, the cache is flattened into a list of tensors, the keys of every
# layer then the values of every layer. The dynamic shapes follow that structure:
# a list of one entry per tensor. The batch size and the cache length are dynamic.

DYN = torch.export.Dim.DYNAMIC
cache_shapes = [{0: DYN, 2: DYN}, {0: DYN, 2: DYN}]
step_shape = {0: DYN}
dynamic_shapes = (step_shape, step_shape, step_shape, cache_shapes)

with bypass_export_some_errors(patch_transformers=True) as modificator:
    ep = torch.export.export(model, modificator(inputs), dynamic_shapes=dynamic_shapes)
print(ep.graph)

# %%
# The exported program runs with another batch size and another cache length.

with bypass_export_some_errors(patch_transformers=True):
    other = make_inputs(batch=3, past=9)
    got = ep.module()(*other)
print((got - model(*other)).abs().max().item())

# %%
# The registration is removed when the context manager exits:

print(DynamicCache in torch.utils._pytree.SUPPORTED_NODES)

# %%
# And to ONNX
# +++++++++++
#
# :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` needs the same
# patch. The cache becomes two ONNX inputs, the dimensions are named. The inputs of a
# transformers cache are always named ``past_key_values_key_<i>`` and
# ``past_key_values_value_<i>``, whether the argument is called ``past_key_values``
# (transformers < 5.24) or ``cache`` (transformers >= 5.24): the code feeding
# onnxruntime does not depend on the transformers release.

import numpy as np
import onnxruntime

cache_names = [{0: "batch", 2: "past"}, {0: "batch", 2: "past"}]
with bypass_export_some_errors(patch_transformers=True) as modificator:
    onx = to_onnx(
        model,
        modificator(inputs),
        dynamic_shapes=({0: "batch"}, {0: "batch"}, {0: "batch"}, cache_names),
    )

# %%
# The inputs of the ONNX model and a run with onnxruntime on other sizes:

for value in onx.graph.input:
    print(value.name, [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim])

sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
query, key, value, cache = make_inputs(batch=3, past=9)
tensors = [query, key, value, cache.layers[0].keys, cache.layers[0].values]
feeds = dict(zip([i.name for i in sess.get_inputs()], [t.numpy() for t in tensors]))
got = sess.run(None, feeds)[0]
expected = model(query, key, value, cache).numpy()
print("max absolute difference with onnxruntime:", np.abs(got - expected).max())

# %%
# The graph, drawn with
# :func:`plot_onnx_graph <experimental_experiment.helpers.graph_plot.plot_onnx_graph>`:
# the two tensors of the cache are inputs like the others.

from experimental_experiment.helpers.graph_plot import plot_onnx_graph

plot_onnx_graph(onx, title="AttentionStep with a DynamicCache")

# %%
# A transformers model
# ++++++++++++++++++++
#
# :func:`get_tiny_llm <experimental_experiment.torch_models.llm_helper.get_tiny_llm>`
# builds a tiny model from its configuration (random weights), its inputs with a
# DynamicCache and the matching dynamic shapes.

from experimental_experiment.torch_models.llm_helper import get_tiny_llm

data = get_tiny_llm("llama", batch=2, seq=3, past=5)
print(list(data["inputs"]))
print(data["dynamic_shapes"])

with torch.no_grad(), bypass_export_some_errors(patch_transformers=True) as modificator:
    onx = to_onnx(
        data["model"], (), modificator(data["inputs"]), dynamic_shapes=data["dynamic_shapes"]
    )
print([i.name for i in onx.graph.input])
print([o.name for o in onx.graph.output])

# %%
# The exported model feeds its own cache back for a few greedy steps, the tokens
# and the logits are compared with ``model.generate``:

from experimental_experiment.torch_models.decoding_check import check_greedy_decoding

report = check_greedy_decoding(data["model"], onx, torch.randint(0, 1000, (2, 5)), steps=4)
print(report["ok"], report["max_abs_diff"], report["onnx_tokens"])
