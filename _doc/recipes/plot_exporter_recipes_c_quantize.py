"""
.. _l-plot-exporter-recipes-custom-quantize:

to_onnx, then int4 weights with onnxruntime
===========================================

A Llama-like decoder with random weights (2 layers, hidden size 64) is exported by
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>` with the
onnxruntime pattern set (fused attention and normalizations), then its weights are
quantized to 4 bits by :func:`quantize_model
<experimental_experiment.quantize.quantize_model>`, which calls onnxruntime's own
tools (``MatMulNBitsQuantizer``). The model :func:`torch.onnx.export` produces
quantizes the same way: the function takes any float ONNX model.

The same from the command line (:ref:`l-cli-quantize`):

.. code-block:: bash

    python -m experimental_experiment quantize llama.onnx llama.int4.onnx \\
        --precision int4 --block-size 32 --accuracy-level 4

Export
++++++
"""

import os
import tempfile

import numpy as np
import onnx
import onnxruntime

from experimental_experiment.bench.llm_exporters import (
    export_to_onnx,
    make_feeds,
    make_llama,
    session_feeds,
)
from experimental_experiment.quantize import find_lm_head, node_type_counts, quantize_model

folder = tempfile.mkdtemp()
config, model = make_llama("tiny")
path, seconds = export_to_onnx(
    model, config, "default+onnxruntime", os.path.join(folder, "llama.onnx")
)
onx = onnx.load(path)
print(f"exported in {seconds:.1f} s, {len(onx.graph.node)} nodes")

# %%
# Quantize
# ++++++++
#
# Every ``MatMul`` multiplying by a weight becomes a ``MatMulNBits`` (4-bit weights
# in blocks of 32 along the input dimension, one float scale per block), except the
# head computing the logits, the most sensitive one, kept in float
# (``quantize_lm_head=True`` quantizes it too). ``accuracy_level=4`` lets the CPU
# kernel quantize the activations to int8 on the fly. The fused operators are left
# as they are.

q4 = quantize_model(onx, "int4", block_size=32, accuracy_level=4)
print("head kept in float:", find_lm_head(onx))

before, after = node_type_counts(onx), node_type_counts(q4)
kinds = sorted(
    {k for k in before | after if before[k] != after[k] or "." in k or "Normalization" in k}
)
print(f"{'operator':<40} {'float':>6} {'int4':>6}")
for kind in kinds:
    print(f"{kind:<40} {before[kind]:>6} {after[kind]:>6}")

# %%
# Run with onnxruntime
# ++++++++++++++++++++
#
# One decoding step: one new token after 64 cached positions. The logits of the
# quantized model stay close to the float ones: the error of 4-bit weights, about 10%
# of each quantized layer's output, partly absorbed by the residual connections.

feeds = make_feeds(config, batch=1, seq=1, past=64)


def run(model_proto):
    sess = onnxruntime.InferenceSession(
        model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, session_feeds(names, feeds, config.num_hidden_layers))[0]


expected, got = run(onx), run(q4)
print("max absolute difference:", float(np.abs(got - expected).max()))
print("relative L2 error:", float(np.linalg.norm(got - expected) / np.linalg.norm(expected)))
print("same next token:", bool((got[:, -1].argmax(-1) == expected[:, -1].argmax(-1)).all()))

# %%
# Size
# ++++
#
# The tiny model is dominated by its embeddings and its head, left in float here;
# ``quantize_embeddings=True`` and ``quantize_lm_head=True`` quantize them as well.

q4_all = quantize_model(
    onx, "int4", block_size=32, accuracy_level=4, quantize_lm_head=True, quantize_embeddings=True
)
for name, proto in [("float", onx), ("int4", q4), ("int4 head+embeddings", q4_all)]:
    print(f"{name:<22} {proto.ByteSize() / 2**10:8.0f} KiB")

# %%
# Speed
# +++++
#
# This model is too small to time. ``python -m experimental_experiment.bench.quantize_latency
# --size small --past 512 --threads 1`` measures the size on disk and the latency of one
# decoding step with 512 cached tokens (float32, int4 with several block sizes and
# accuracy levels, int8) on a larger model of the same architecture.

# %%
# Operators before and after
# ++++++++++++++++++++++++++
#
# The matrix multiplications become ``MatMulNBits``; the fused attention and
# normalization operators are the same in the three models.

import matplotlib.pyplot as plt  # noqa: E402

from experimental_experiment.helpers.graph_plot import plot_op_types  # noqa: E402

ax = plot_op_types({"float": onx, "int4": q4, "int4 head+embeddings": q4_all}, top=12)
plt.tight_layout()
