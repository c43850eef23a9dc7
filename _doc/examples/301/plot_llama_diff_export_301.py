"""
.. _l-plot-llama-diff-export:

Compare two exports of a tiny Llama
===================================

The same model exported by :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`
and by :func:`torch.onnx.export`: how long each export takes, which operators each
model uses, and whether both agree with torch on inputs of another shape.
The model is a Llama from :epkg:`transformers` built from a configuration with random
weights (one layer, hidden size 64, nothing is downloaded).

The model
+++++++++
"""

import collections
import os
import time
import warnings

import numpy as np
import onnxruntime
import pandas
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from experimental_experiment.helpers.graph_plot import plot_op_types
from experimental_experiment.torch_interpreter import to_onnx

# torch.onnx.export warns that "seq" is used for two inputs; torch's pytree warns
# about one of its own deprecated classes: neither concerns this example
warnings.filterwarnings("ignore", message="# The axis name")
warnings.filterwarnings("ignore", message=".*LeafSpec.* is deprecated")

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
model = LlamaForCausalLM(config).eval()


def inputs(batch: int, seq: int):
    return dict(
        input_ids=torch.randint(0, config.vocab_size, (batch, seq)),
        attention_mask=torch.ones(batch, seq, dtype=torch.int64),
    )


dynamic_shapes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}

# %%
# Both exports
# ++++++++++++

models = {}
begin = time.perf_counter()
with torch.no_grad():
    models["to_onnx"] = to_onnx(model, (), inputs(2, 8), dynamic_shapes=dynamic_shapes)
print(f"to_onnx: {time.perf_counter() - begin:.1f} s")

begin = time.perf_counter()
with torch.no_grad():
    program = torch.onnx.export(
        model, (), kwargs=inputs(2, 8), dynamic_shapes=dynamic_shapes, dynamo=True, verbose=False
    )
models["torch.onnx.export"] = program.model_proto
print(f"torch.onnx.export: {time.perf_counter() - begin:.1f} s")

# %%
# The operators
# +++++++++++++

counts = (
    pandas.DataFrame(
        {
            name: collections.Counter(f"{n.domain}.{n.op_type}".lstrip(".") for n in onx.graph.node)
            for name, onx in models.items()
        }
    )
    .fillna(0)
    .astype(int)
)
counts.loc["total"] = counts.sum()
counts.sort_values(list(models)[0], ascending=False)

# %%
# The same counts drawn with
# :func:`plot_op_types <experimental_experiment.helpers.graph_plot.plot_op_types>`:

plot_op_types(models)

# %%
# The opsets and the size of the models:

for name, onx in models.items():
    print(
        f"{name:18s} opsets={[(o.domain or 'ai.onnx', o.version) for o in onx.opset_import]} "
        f"ir_version={onx.ir_version} size={len(onx.SerializeToString()):,} bytes"
    )

# %%
# Discrepancies with torch on another shape
# +++++++++++++++++++++++++++++++++++++++++

feeds = inputs(3, 17)
with torch.no_grad():
    expected = model(**feeds).logits.numpy()
for name, onx in models.items():
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, dict(zip(names, [feeds[k].numpy() for k in feeds])))[0]
    print(f"{name:18s} max absolute difference {np.abs(got - expected).max():.3g}")

# %%
# Which value differs first
# +++++++++++++++++++++++++
#
# When an export gives wrong numbers,
# :func:`find_discrepancies <experimental_experiment.investigate.find_discrepancies>`
# runs the captured graph and the ONNX model side by side (every ONNX node knows the
# FX node it comes from and the user's line, see its ``metadata_props``) and stops at
# the first intermediate value out of tolerance. Here a wrong converter for
# ``aten.rsqrt`` (the normalization layers) is injected through a
# :class:`Dispatcher <experimental_experiment.torch_interpreter.Dispatcher>`.

from experimental_experiment.investigate import find_discrepancies  # noqa: E402
from experimental_experiment.torch_interpreter import Dispatcher  # noqa: E402


def wrong_rsqrt(g, x):
    "sqrt instead of 1/sqrt: the bug to find"
    return g.op.Sqrt(x)


with torch.no_grad():
    found = find_discrepancies(
        model, (), inputs(2, 8), dispatcher=Dispatcher({torch.ops.aten.rsqrt.default: wrong_rsqrt})
    )
# the user's code is in transformers: its path is shown relative to the installed packages
site_packages = os.path.dirname(os.path.dirname(torch.__file__))
print(str(found).replace(site_packages + os.sep, ""))

# %%
# The same search on the right export finds nothing:

with torch.no_grad():
    print(find_discrepancies(model, (), inputs(2, 8)))

# %%
# The export report
# +++++++++++++++++
#
# ``to_onnx(..., report=...)`` records what the export did: capture attempts,
# converters, timings, rewrites, and the user's line for every dynamic dimension the
# model specialized or constrained. It is written as JSON, Markdown or SARIF.

from experimental_experiment.report import ExportReport  # noqa: E402

report = ExportReport()
with torch.no_grad():
    to_onnx(model, (), inputs(2, 8), dynamic_shapes=dynamic_shapes, report=report)
print(
    f"{report.status}: {report.nodes_before_optimization} nodes before optimization, "
    f"{report.nodes_after_optimization} after"
)
for attempt in report.capture_attempts:
    print(f"capture {attempt.description}: {'ok' if attempt.success else attempt.error}")

# %%
# The converters used most, from ``report.converters``:

pandas.DataFrame(
    [
        {"aten op": c.op, "converter": c.converter.split(".")[-1], "nodes": c.count}
        for c in report.converters
    ]
).sort_values("nodes", ascending=False).head(10).reset_index(drop=True)
