"""
.. _l-plot-exporter-recipes-vlm:

A vision-language model exported part by part (Qwen2.5-VL-like)
===============================================================

A vision-language model is three models chained by a loop: a **vision encoder**
(the vision tower and its projector turn the pixels into one vector per image token),
an **embedding merge** (the token embeddings of the prompt, where every image
placeholder token receives the next image vector), and a **decoder** with a cache
(``inputs_embeds`` in, logits and the present keys and values out), called once on the
prompt (prefill) and once per generated token (decode). A runtime exports these parts
separately: the vision encoder runs once per image, the decoder many times.

This recipe does it for a tiny Qwen2.5-VL-like model built from a configuration with
random weights (nothing is downloaded), with
:func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`, then generates
8 tokens with the three ONNX models in onnxruntime and compares them with
``model.generate``. The wrappers used here are in
``experimental_experiment.torch_models.multimodal.parts``: to do the same with another
model, write the same three small modules around it.

The model, an image and a prompt
++++++++++++++++++++++++++++++++

Random weights give flat logits (the two best tokens differ by 1e-5 and float
rounding decides between them), so the normalization weights are perturbed and the
output projection scaled: greedy decoding is then decisive.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
import torch

from experimental_experiment.torch_models.multimodal.cases import (
    build_model,
    build_multimodal,
)
from experimental_experiment.torch_models.multimodal.export import decoder_example, export_part
from experimental_experiment.torch_models.multimodal.parts import (
    Decoder,
    EmbeddingMerge,
    VisionEncoder,
)
from experimental_experiment.torch_models.multimodal.run import eager_generate, mrope_positions

model = build_model("qwen2_5_vl")
case = build_multimodal("qwen2_5_vl", image_size=(32, 64), prompt=(3, 4), model=model)
print(type(model).__name__, f"{sum(p.numel() for p in model.parameters()):,} parameters")
print(
    "pixel_values",
    tuple(case.vision_inputs["pixel_values"].shape),
    "grid (t, h, w) in patches",
    case.constants["image_grid_thw"].tolist(),
)
print("prompt", case.input_ids.tolist())

# %%
# The image token (``model.config.image_token_id``) appears as many times as the
# vision encoder returns vectors (the processor of a real model expands it the same way).
#
# The vision encoder
# ++++++++++++++++++
#
# Qwen2.5-VL's vision tower reads the grid of patches as python integers (loops over
# ``grid.tolist()``, ``repeat_interleave``): position ids, attention boundaries and
# window indices are computed outside the graph with transformers' own functions
# (``transformers.vision_utils``) and given to the tower, so the exported encoder is
# valid for this image size; export it again for another one.

vision = VisionEncoder(model, **case.constants)
times = {}
begin = time.perf_counter()
vision_onx = export_part(vision, tuple(case.vision_inputs.values()))
times["vision"] = time.perf_counter() - begin

# %%
# The embedding merge
# +++++++++++++++++++
#
# Token embeddings, then the k-th image token receives the k-th image vector: a
# cumulative sum over the image-token mask gives the row to gather. The batch, the
# sequence and the number of image vectors are dynamic.

with torch.no_grad():
    features = vision(*case.vision_inputs.values())
begin = time.perf_counter()
merge_onx = export_part(
    EmbeddingMerge(model),
    (case.input_ids.expand(2, -1).contiguous(), features),
    dynamic_shapes=({0: "batch", 1: "seq"}, {0: "n_image_tokens"}),
)
times["merge"] = time.perf_counter() - begin

# %%
# The decoder with its cache
# ++++++++++++++++++++++++++
#
# The model's forward called with ``inputs_embeds`` and no pixels. It is exported on
# random inputs (batch 2, 3 new tokens, 5 cached positions) with dynamic batch,
# sequence and cache length; Qwen2.5-VL takes 3D position ids (temporal, height, width).

args, ds = decoder_example(model, mrope=True)
begin = time.perf_counter()
decoder_onx = export_part(Decoder(model), (), dynamic_shapes=ds, kwargs=dict(zip(ds, args)))
times["decoder"] = time.perf_counter() - begin
for name, value in times.items():
    print(f"export of {name}: {value:.1f} s")
for value in decoder_onx.graph.input:
    dims = value.type.tensor_type.shape.dim
    print("decoder input", value.name, [d.dim_param or d.dim_value for d in dims])

# %%
# Generation, step by step, in onnxruntime
# ++++++++++++++++++++++++++++++++++++++++
#
# 1. the vision encoder runs once, the merge builds the prompt's embeddings;
# 2. the position ids of the prompt: text tokens count up, image tokens take the
#    coordinates of their patch (``mrope_positions``, which
#    returns the shift to add to the positions of the generated tokens);
# 3. the decoder runs on the prompt with an empty cache (length 0), then on every
#    new token with the cache it returned.


def ort(onx):
    return onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])


vision_sess, merge_sess, decoder_sess = ort(vision_onx), ort(merge_onx), ort(decoder_onx)
image = vision_sess.run(
    None, {vision_sess.get_inputs()[0].name: case.vision_inputs["pixel_values"].numpy()}
)[0]
ids = case.input_ids.numpy()
embeds = merge_sess.run(None, {"input_ids": ids, "image_features": image})[0]
positions, delta = mrope_positions(
    ids,
    model.config.image_token_id,
    [tuple(g) for g in case.constants["image_grid_thw"].tolist()],
    model.config.vision_config.spatial_merge_size,
)
names = [i.name for i in decoder_sess.get_inputs()]
cache = {
    i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), dtype=np.float32)
    for i in decoder_sess.get_inputs()[3:]
}
past, onnx_tokens, onnx_logits = 0, [], []
for _ in range(8):
    seq = embeds.shape[1]
    feeds = {
        names[0]: embeds,
        names[1]: np.ones((1, past + seq), dtype=np.int64),
        names[2]: positions,
        **cache,
    }
    outputs = decoder_sess.run(None, feeds)
    logits = outputs[0][:, -1, :]
    token = int(logits.argmax())
    onnx_tokens.append(token)
    onnx_logits.append(logits[0])
    cache = dict(zip(names[3:], outputs[1:]))
    past += seq
    # the next token: its embedding (no image token, the features are not used)
    embeds = merge_sess.run(
        None, {"input_ids": np.array([[token]], dtype=np.int64), "image_features": image}
    )[0]
    positions = np.full((3, 1, 1), past + delta[0], dtype=np.int64)

eager_tokens, eager_logits = eager_generate(case, steps=8)
print("eager", eager_tokens[0].tolist())
print("onnx ", onnx_tokens)
print(
    "max absolute difference of the logits:",
    max(float(np.abs(e[0] - o).max()) for e, o in zip(eager_logits, onnx_logits)),
)

# %%
# The logits of eager and ONNX at every step
# ++++++++++++++++++++++++++++++++++++++++++
#
# Left: the logit of the chosen token and of the runner-up at every step (the gap is
# what keeps greedy decoding away from a tie), eager as lines, onnxruntime as dots.
# Right: the number of nodes of every exported part.

eager_sorted = np.sort(np.stack([e[0] for e in eager_logits]), axis=-1)
onnx_sorted = np.sort(np.stack(onnx_logits), axis=-1)
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
steps = np.arange(1, 9)
axes[0].plot(steps, eager_sorted[:, -1], "-", label="eager, best")
axes[0].plot(steps, eager_sorted[:, -2], "-", label="eager, second")
axes[0].plot(steps, onnx_sorted[:, -1], "o", label="onnxruntime, best")
axes[0].plot(steps, onnx_sorted[:, -2], "o", label="onnxruntime, second")
axes[0].set_xlabel("generated token")
axes[0].set_ylabel("logit")
axes[0].set_title("best two logits per step")
axes[0].legend(fontsize=8)
counts = {
    "vision": len(vision_onx.graph.node),
    "merge": len(merge_onx.graph.node),
    "decoder": len(decoder_onx.graph.node),
}
axes[1].bar(list(counts), list(counts.values()), color=["#4c72b0", "#55a868", "#c44e52"])
axes[1].set_ylabel("nodes")
axes[1].set_title("nodes per exported part")
fig.tight_layout()
