"""
.. _l-plot-llama-bench-102:

Benchmark a tiny Llama: eager PyTorch and onnxruntime
=====================================================

The inference time of a Llama model from :epkg:`transformers` (random weights,
two layers, hidden size 128) in eager PyTorch and with :epkg:`onnxruntime` after an
export with :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`, for
several sequence lengths. The model is tiny: the numbers show the overhead of each
runtime more than the speed of the kernels, which a larger model would reveal.
The complete benchmark suite is described in :ref:`l-bench`.

The model and its export
++++++++++++++++++++++++
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
import pandas
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from experimental_experiment.torch_interpreter import to_onnx

config = LlamaConfig(
    vocab_size=1024,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    use_cache=False,
)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval()


def inputs(batch: int, seq: int):
    return dict(
        input_ids=torch.randint(0, config.vocab_size, (batch, seq)),
        attention_mask=torch.ones(batch, seq, dtype=torch.int64),
    )


ds = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
with torch.no_grad():
    onx = to_onnx(model, (), inputs(2, 8), dynamic_shapes=ds)
options = onnxruntime.SessionOptions()
# idle onnxruntime threads keep spinning for a while and slow torch down
options.add_session_config_entry("session.intra_op.allow_spinning", "0")
sess = onnxruntime.InferenceSession(
    onx.SerializeToString(), options, providers=["CPUExecutionProvider"]
)

# %%
# Measure
# +++++++
#
# The median of a few runs after a warm-up, and the discrepancy between both runtimes.


def median_time(fn, repeat: int = 10) -> float:
    fn()
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
    return float(np.median(times))


rows = []
for seq in [8, 32, 128]:
    feeds = inputs(2, seq)
    with torch.no_grad():
        expected = model(**feeds).logits.numpy()
        row = {"seq": seq, "eager (ms)": median_time(lambda feeds=feeds: model(**feeds)) * 1000}
    np_feeds = {k: v.numpy() for k, v in feeds.items()}
    row["onnxruntime (ms)"] = median_time(lambda np_feeds=np_feeds: sess.run(None, np_feeds)) * 1000
    row["discrepancy"] = float(np.abs(sess.run(None, np_feeds)[0] - expected).max())
    rows.append(row)
df = pandas.DataFrame(rows).set_index("seq")
# shown with 3 significant digits (lower is better for every column)
df.style.format("{:.3g}")

# %%
# Plot
# ++++

ax = df[["eager (ms)", "onnxruntime (ms)"]].plot.bar(title="tiny Llama, batch 2, median time")
ax.set_ylabel("ms")
ax.set_xlabel("sequence length")
plt.tight_layout()
