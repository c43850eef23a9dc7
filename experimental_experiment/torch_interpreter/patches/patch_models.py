"""Patches of single transformers architectures whose code cannot be traced with
dynamic shapes. Each patch is applied only when the model's module is already imported
(the model was built), never imports it.
"""

from __future__ import annotations

import sys
import types

import torch

from .patch_longformer import (
    _chunked_probs_value,
    _chunked_query_key,
    _led_padded_encoder,
    _local_attention_when_traced,
    _longformer_padding,
    _no_global_attention,
)
from .patch_sparse_attention import (
    _deepseek_v4_attention,
    _deepseek_v4_csa_compressor,
    _deepseek_v4_hca_compressor,
    _deepseek_v4_indexer,
    _qwen4_exp_indexer,
)


def _cpmant_attention_mask(original):
    """Replaces ``CpmAntModel._prepare_attention_mask``: the left padding mask is built
    with ``torch.arange`` instead of ``torch.tensor(list(range(seqlen - prompt)))``.

    Fixes: ``Constraints violated ... ('seq') of input 'input_ids' ... specialized it to
    be a constant``: a Python list of the sequence length makes it a constant.
    """

    def prepare(self, input_ids, span, context, length):
        batch, seqlen = input_ids.shape
        device = input_ids.device
        positions = torch.arange(seqlen, device=device)
        causal = positions[None, :] <= positions[:, None]
        mask = context[:, None, :] | (context[:, :, None].logical_not() & causal[None])
        mask = mask & (span[:, None, :] == span[:, :, None])
        # tokens after the prompt, counted from the end, beyond ``length`` are padding
        from_end = torch.arange(seqlen - self.prompt_length - 1, -1, -1, device=device)
        kept = torch.cat(
            [
                torch.ones(batch, self.prompt_length, dtype=torch.bool, device=device),
                from_end[None, :] < length[:, None],
            ],
            dim=1,
        )
        return kept[:, :, None] & kept[:, None, :] & mask

    return prepare


def _dbrx_dense_experts(original):
    """Replaces ``DbrxExperts.forward``: every expert runs on every token, weighted by
    its routing weight (zero when the router did not select it), a loop over the
    number of experts instead of the experts hit.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 0)``: the loop over ``expert_mask.sum(...).nonzero()`` depends on the data.
    """

    def forward(self, hidden_states, top_k_index, top_k_weights):
        batch = hidden_states.shape[0]
        x = hidden_states.reshape(-1, self.hidden_size)
        weights = torch.zeros(
            x.shape[0], self.num_experts, dtype=top_k_weights.dtype, device=x.device
        )
        weights = weights.scatter_add(1, top_k_index, top_k_weights)
        split = (-1, self.ffn_hidden_size, self.hidden_size)
        out = torch.zeros_like(x)
        for e in range(self.num_experts):
            w1, v1, w2 = (getattr(self.mlp, n).view(split)[e] for n in ("w1", "v1", "w2"))
            states = self.mlp(x, w1, v1, w2).view(-1, self.hidden_size)
            out = out + states * weights[:, e, None].to(states.dtype)
        return out.view(batch, -1, self.hidden_size)

    return forward


def _switch_dense_experts(original):
    """Replaces ``SwitchTransformersExperts.forward``: every expert runs on every token,
    multiplied by its routing weight where the router mask selects it, zero elsewhere.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 0)``: the loop over the experts hit (``nonzero``) depends on the data.
    """

    def forward(self, hidden_states, selected_experts, routing_weights):
        out = torch.zeros_like(hidden_states)
        for e in range(self.num_experts):
            weight = (selected_experts[:, :, e].to(routing_weights.dtype) * routing_weights).sum(
                dim=1, keepdim=True
            )
            states = self[f"expert_{e}"](hidden_states) * weight
            out = out + states.to(hidden_states.dtype)
        return out

    return forward


def _reformer_axial_positions(original):
    """Replaces ``AxialPositionEmbeddings.forward`` in eval mode: the whole table of
    axial encodings is built once and indexed by ``position_ids`` instead of cut to
    ``position_ids.max().item()`` columns and read batch row by batch row.

    Fixes: ``Constraints violated ... ('batch') of input 'input_ids' ... specialized it
    to be a constant``: ``for i in range(batch_size)`` unrolls the batch.
    """

    def forward(self, position_ids):
        if self.training:
            return original(self, position_ids)
        shape = tuple(self.axial_pos_shape)
        table = torch.cat([w.expand(shape + w.shape[-1:]) for w in self.weights], dim=-1)
        return table.reshape(-1, table.shape[-1])[position_ids]

    return forward


def _longcat_dense_experts(original):
    """Replaces ``LongcatFlashExperts.forward``: every routed expert runs on every token,
    weighted by its routing weight (zero when the router did not select it); the
    zero-compute (identity) experts add the input times the sum of their weights.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 0)``: the loop over the experts hit depends on the data.
    """

    def forward(self, hidden_states, top_k_index, top_k_weights):
        weights = torch.zeros(
            hidden_states.shape[0],
            self.total_experts,
            dtype=top_k_weights.dtype,
            device=hidden_states.device,
        )
        weights = weights.scatter_add(1, top_k_index, top_k_weights)
        routed = self.num_routed_experts if self.gate_up_proj is not None else 0
        identity = weights[:, routed:].sum(dim=-1, keepdim=True)
        out = (self.identity_expert(hidden_states) * identity).to(hidden_states.dtype)
        for e in range(routed):
            gate, up = torch.nn.functional.linear(hidden_states, self.gate_up_proj[e]).chunk(2, -1)
            states = torch.nn.functional.linear(self.act_fn(gate) * up, self.down_proj[e])
            out = out + (states * weights[:, e, None]).to(hidden_states.dtype)
        return out

    return forward


def _tensor_len(value):
    """``len`` keeping a tensor's first dimension symbolic (``len()`` must return an int)."""
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.shape[0]
    return len(value)


def _depth_pro_patch_counts(original):
    """Replaces ``DepthProPatchEncoder.forward`` by the same code where ``len`` of a
    tensor is its symbolic first dimension: ``[len(i) for i in scaled_images]`` (the
    number of patches of every scaled image, a multiple of the batch) stays symbolic.
    The code is rebound at every call, to the module's globals of that moment: the
    image-size patches of ``modeling_depth_pro`` (``math``, ``torch_int``,
    ``split_to_patches``) apply to it whatever the order the patches were applied in.

    Fixes: ``Constraints violated (L['pixel_values'].size()[0])``: ``len(tensor)``
    makes the batch dimension a constant.
    """

    def forward(*args, **kwargs):
        fn = types.FunctionType(
            original.__code__,
            {**original.__globals__, "len": _tensor_len},
            original.__name__,
            original.__defaults__,
            original.__closure__,
        )
        fn.__kwdefaults__ = original.__kwdefaults__
        return fn(*args, **kwargs)

    forward.__doc__ = original.__doc__
    forward.__wrapped__ = original  # type: ignore[attr-defined]
    return forward


def _antialias_bilinear_weights(out_size, in_size: int, index):
    """Weights ``(batch, k, in_size)`` of ``F.interpolate(mode="bilinear",
    antialias=True, align_corners=False)`` along one axis resized from ``in_size`` to
    ``out_size[b]`` (a tensor): row ``[b, k]`` gives output position ``index[b, k]``.
    The triangle filter is widened by the scale when downsampling, then normalized."""
    scale = in_size / out_size.to(torch.float32)
    support = scale.clamp(min=1.0)
    center = scale[:, None] * (index.to(torch.float32) + 0.5)
    source = torch.arange(in_size, dtype=torch.float32, device=index.device) + 0.5
    w = (1 - ((source - center[..., None]) / support[:, None, None]).abs()).clamp(min=0)
    return w / w.sum(dim=-1, keepdim=True)


def _siglip2_resize_positions(original):
    """Replaces ``Siglip2VisionEmbeddings.resize_positional_embeddings``: the antialiased
    bilinear resize of the position grid to every image's ``(height, width)`` is two
    weight matrices built from ``spatial_shapes`` with tensor ops, for the whole batch;
    the positions beyond ``height * width`` take the first one, as in the original.

    Fixes: ``Constraints violated (L['pixel_values'].size()[0], ...)``: ``for i in
    range(batch_size)`` with ``spatial_shapes[i].tolist()`` unrolls the batch.
    """

    def resize(positional_embeddings, spatial_shapes, max_length):
        grid_h, grid_w, _ = positional_embeddings.shape
        height, width = spatial_shapes[:, 0:1], spatial_shapes[:, 1:2].clamp(min=1)
        k = torch.arange(max_length, device=spatial_shapes.device)[None, :]
        k = torch.where(k < height * width, k, 0)  # padding repeats position 0
        rows = _antialias_bilinear_weights(height[:, 0], grid_h, k // width)
        cols = _antialias_bilinear_weights(width[:, 0], grid_w, k % width)
        grid = positional_embeddings.to(torch.float32)
        resized = torch.einsum("bki,bkj,ijd->bkd", rows, cols, grid)
        return resized.to(positional_embeddings.dtype)

    return staticmethod(resize)


def _canine_pooled_mask(original):
    """Replaces ``CanineModel._downsample_attention_mask``: the maximum over windows of
    ``downsampling_rate`` characters is a reshape and ``amax`` of the first
    ``length // rate * rate`` characters (``MaxPool1d`` drops the remainder too).

    Fixes: ``Constraints violated (L['attention_mask'].size()[1], ...)``: the C++
    ``max_pool1d`` makes the sequence length a constant.
    """

    def downsample(self, char_attention_mask, downsampling_rate):
        batch, length = char_attention_mask.shape
        molecules = length // downsampling_rate
        kept = char_attention_mask[:, : molecules * downsampling_rate].float()
        return kept.reshape(batch, molecules, downsampling_rate).amax(dim=-1)

    return downsample


def _canine_local_attention(original):
    """Replaces ``CanineAttention.forward`` for local attention over consecutive chunks
    (chunk width equal to the strides, no position attending to the first one): one
    attention over the sequence where a position sees only the keys of its own chunk
    (``-inf`` elsewhere, so a chunk of padding still averages its own keys). Any
    other setting or ``output_attentions`` runs the original.

    Fixes: ``Constraints violated (L['input_ids'].size()[1], ...)``: ``for chunk_start
    in range(0, seq_length, stride)`` unrolls the chunks of the sequence.
    """

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        widths = {
            self.attend_from_chunk_width,
            self.attend_from_chunk_stride,
            self.attend_to_chunk_width,
            self.attend_to_chunk_stride,
        }
        if (
            not self.local
            or output_attentions
            or attention_mask is None
            or len(widths) > 1
            or self.always_attend_to_first_position
            or self.first_position_attends_to_all
        ):
            return original(self, hidden_states, attention_mask, output_attentions)
        chunk = torch.arange(hidden_states.shape[1], device=hidden_states.device) // widths.pop()
        outside = torch.where(chunk[:, None] == chunk[None, :], 0.0, float("-inf"))
        padding = (1.0 - attention_mask.float()) * torch.finfo(hidden_states.dtype).min
        mask = (padding + outside)[:, None]  # (batch, 1, from, to), added to the scores
        context = self.self(hidden_states, hidden_states, mask, False)[0]
        return (self.output(context, hidden_states),)

    return forward


def _qkv_norm_vision_attention(original):
    """Replaces the forward of the vision attention of Dots3-Note and GLM-OCR (one
    fused ``qkv`` projection, then an RMS norm of the query and key heads, then the
    rotary embedding): the segments of ``cu_seqlens`` (one per image, all of one size)
    become a batch of one ``scaled_dot_product_attention``, the norms are applied.

    Fixes: image features 2% off eager (the tokens then drift): transformers' own
    export patch of these classes (``_reshaped_vision_attention_forward`` of
    ``transformers.exporters.exporter_dynamo``) applies ``q_norm`` and ``k_norm`` only
    to the attentions with separate ``q_proj``, ``k_proj``, ``v_proj``, it skips them
    after a fused ``qkv``. Without any patch, ``lengths.tolist()`` splits the sequence
    with data-dependent sizes.
    """

    def forward(self, hidden_states, cu_seqlens, position_embeddings=None, **kwargs):
        rotary = sys.modules[type(self).__module__].apply_rotary_pos_emb_vision
        seq = hidden_states.shape[0]
        q, k, v = (
            self.qkv(hidden_states)
            .reshape(seq, 3, self.num_heads, -1)
            .permute(1, 0, 2, 3)
            .unbind(0)
        )
        q, k = self.q_norm(q), self.k_norm(k)
        if position_embeddings is not None:
            cos, sin = position_embeddings
            q, k = rotary(q, k, cos, sin)
        segments = cu_seqlens.shape[0] - 1

        def batched(t):  # (seq, heads, dim) -> (segments, heads, seq // segments, dim)
            return t.unflatten(0, (segments, seq // segments)).transpose(1, 2)

        out = torch.nn.functional.scaled_dot_product_attention(
            batched(q), batched(k), batched(v), is_causal=False, scale=self.scaling
        )
        return self.proj(out.transpose(1, 2).reshape(seq, -1))

    return forward


def _glm5_next_all_pools(original):
    """Replaces ``Glm5NextTextIndexer.get_pooled_states``: the keys of the indexer are
    grouped in pools of ``index_kpool`` from the first valid key of every row, each pool
    is averaged with the softmax of its gate scores; every pool is returned, the
    ones no row of the batch can use included (their ``pool_valid`` is False, the
    indexer gives them the lowest score and masks them out of its selection, as it
    does for the pools invalid in some rows only): the tokens selected are the same.

    Fixes: ``AssertionError: tgt_bound=VR[0, 2] not a subset of src_bound=VR[0, 1]``
    (one new token): ``pool_keys[:, pool_valid.any(0)]`` drops the pools invalid in
    every row, a boolean index whose size depends on the data.
    """

    def get_pooled_states(self, packed_states):
        keys, gates, valid = torch.split(packed_states, [self.head_dim, self.head_dim, 1], dim=-1)
        valid = valid.bool().squeeze(-1)
        batch, length = keys.shape[:2]
        size = self.index_kpool
        n_pools = (length + size - 1) // size
        first = torch.where(
            valid.any(-1),
            valid.long().argmax(-1),
            torch.full((batch,), length, dtype=torch.long, device=keys.device),
        )
        offsets = torch.arange(n_pools * size, device=keys.device).view(1, n_pools, size)
        indices = first[:, None, None] + offsets
        rows = torch.arange(batch, device=keys.device)[:, None, None]
        safe = indices.clamp(0, length - 1)
        inside = valid[rows, safe] & (indices < length)
        logits = gates[rows, safe].float() + self.index_kpool_compress_ape.float()[None, None]
        logits = logits.masked_fill(~inside[..., None], float("-inf"))
        weights = torch.nan_to_num(logits.softmax(dim=2)).to(keys.dtype)
        pooled = (weights * keys[rows, safe]).sum(dim=2)
        return pooled, indices.masked_fill(~inside, -1), inside.all(-1)

    return get_pooled_states


#: (module of transformers, class, method, replacement) of every patch of this file
def _deepstack_by_gather(original):
    """Replaces ``_deepstack_process`` of the models adding vision features to the
    hidden states of their first decoder layers (Qwen3-VL, Qwen3-VL-MoE, Qwen3-Omni,
    Granite-Docling): the k-th position the mask marks (row-major) receives the k-th
    feature row through a gather, as in eager mode, where a boolean index selects them.

    Fixes: ``GuardOnDataDependentSymNode`` (or a size specialized to the example): the
    boolean index ``hidden_states[visual_pos_masks, :]`` has as many rows as the mask
    has true values, a size only the data knows.
    """

    def deepstack_process(self, hidden_states, visual_pos_masks, visual_embeds):
        mask = visual_pos_masks.to(hidden_states.device)
        embeds = visual_embeds.to(hidden_states.device, hidden_states.dtype)
        index = torch.cumsum(mask.reshape(-1).to(torch.int64), 0) - 1
        index = index.clamp(min=0, max=embeds.shape[0] - 1)
        placed = embeds[index].reshape(hidden_states.shape)
        return torch.where(mask.unsqueeze(-1), hidden_states + placed, hidden_states)

    return deepstack_process


def _real_images_first(real: torch.Tensor) -> torch.Tensor:
    """The indices ordering the images ``real`` marks (a boolean vector) first, in
    their order, then the others in theirs: a stable partition computed with cumulative
    sums and a scatter (``arange`` when every image is real)."""
    flags = real.to(torch.int64)
    place = torch.where(
        real, flags.cumsum(0) - 1, flags.sum() + (1 - flags).cumsum(0) - 1
    )  # where every image goes
    index = torch.arange(real.shape[0], dtype=torch.int64, device=real.device)
    return torch.zeros_like(index).scatter(0, place, index)


def _modernvbert_every_image(original):
    """Replaces ``ModernVBertModel.get_image_features``: the vision tower encodes every
    image of ``pixel_values`` ``(batch, images, channels, height, width)``, the real
    ones first (a gather, :func:`_real_images_first`), instead of only the real ones
    (a boolean index) split per row (``split(counts.tolist())``). During the export
    the image features come back as one tensor, ``pooler_output = [features]``:
    ``ModernVBertModel.forward`` concatenates the rows' features anyway, and
    ``masked_scatter`` places the first ones (the real images', in the original's order)
    on the image tokens.

    Eager mode computes exactly what the original computes: when every image is real
    (the export inputs of the zoo: one image per row, or a fixed number) the gather is
    the identity, the tower runs on the same batch, ``pooler_output`` is split per row
    as the original splits it; with a padding image (all zeros) the original runs.
    During the export the path without the boolean index is the only one: the exported
    model gives the same embeddings with padding images (their features come last and
    are left over by ``masked_scatter``), but its ``image_hidden_states`` then also
    holds the padding images' features, after the real ones' (onnxruntime runs it: the
    check of the number of image tokens against the number of features,
    ``get_placeholder_mask``, does not stop it).

    Fixes: ``Constraints violated (dimension 0 ('batch') of input 'pixel_values')``:
    ``image_features.split(num_real_images_per_batch.tolist())`` makes the batch
    (the number of rows split) a constant.
    """
    from transformers.utils import can_return_tuple

    @can_return_tuple
    def get_image_features(self, pixel_values, pixel_attention_mask=None, **kwargs):
        num_images = pixel_values.shape[1]
        pixels = pixel_values.to(dtype=self.dtype).flatten(0, 1)
        # padding images are full 0; with no real image, the first one counts as one
        real = (pixels == 0.0).sum(dim=(-1, -2, -3)) != pixels.shape[1:].numel()
        first = torch.arange(real.shape[0], device=real.device) == 0
        real = real | (first & ~real.any())
        exporting = torch.compiler.is_exporting()
        if not exporting and not bool(real.all()):
            return original(self, pixel_values, pixel_attention_mask, return_dict=True, **kwargs)
        order = _real_images_first(real)
        pixels = pixels[order].contiguous()
        if pixel_attention_mask is None:
            mask = torch.ones(
                size=[pixels.shape[i] for i in (0, 2, 3)], dtype=torch.bool, device=pixels.device
            )
        else:
            mask = pixel_attention_mask.flatten(0, 1)[order].contiguous()
        patch_size = self.config.vision_config.patch_size
        grid = mask.unfold(dimension=1, size=patch_size, step=patch_size)
        grid = grid.unfold(dimension=2, size=patch_size, step=patch_size)
        patch_attention_mask = (grid.sum(dim=(-1, -2)) > 0).bool()
        outputs = self.vision_model(
            pixel_values=pixels,
            patch_attention_mask=patch_attention_mask,
            return_dict=True,
            **kwargs,
        )
        features = self.connector(outputs.last_hidden_state)
        if exporting:  # one tensor: a list per row would make the batch a constant
            outputs.pooler_output = [features.reshape(-1, features.shape[-1])]
        else:  # every image is real: num_images per row
            outputs.pooler_output = [f.reshape(-1, f.shape[-1]) for f in features.split(num_images)]
        return outputs

    get_image_features.__wrapped__ = original  # type: ignore[attr-defined]
    return get_image_features


def _reference_window_mask_sizes(original):
    """Replaces ``get_mask_sizes`` of UnlimitedOCR's reference sliding-window cache
    layer once the prompt is complete: the prompt, the window and the new tokens, offset
    0 (the window is never cut in the export, the mask applies it).

    Fixes: ``The size of tensor a (s45 + s69 + 1) must match the size of tensor b
    (s45 + 2*s69 + 1)`` for a decode step: the export traces the sliding-window layers
    as ``DynamicLayer`` (transformers' own export patch, or
    ``_sliding_layer_as_full_layer``), whose ``get_mask_sizes`` counts the tokens with
    ``get_seq_length``, which this layer overrides to include the prompt; the original
    then adds the prompt a second time.
    """
    from transformers.cache_utils import DynamicLayer

    def get_mask_sizes(self, query_length):
        if self.prefill_length is None or self.prefill_cumulative_length < self.prefill_length:
            return original(self, query_length)
        return self.prefill_length + DynamicLayer.get_seq_length(self) + query_length, 0

    return get_mask_sizes


def _kept_first(keep: torch.Tensor) -> torch.Tensor:
    """The indices ``(batch, n)`` ordering, in every row, the positions ``keep`` marks
    first, in their order, then the others in theirs: a stable partition computed with
    cumulative sums and a scatter."""
    flags = keep.to(torch.int64)
    kept = flags.cumsum(1) - 1
    dropped = flags.sum(1, keepdim=True) + (1 - flags).cumsum(1) - 1
    place = torch.where(keep, kept, dropped)  # where every position goes
    index = torch.arange(keep.shape[1], dtype=torch.int64, device=keep.device)
    index = index.unsqueeze(0).expand(keep.shape[0], -1)
    return torch.zeros_like(index).scatter(1, place, index)


def _udop_patches_by_gather(original):
    """Replaces ``combine_image_text_embeddings`` of UDOP: the image patches the word
    boxes do not cover come first, in their order, through a gather (:func:`_kept_first`),
    the covered ones after them are replaced by zeros, their boxes by zeros and their
    attention mask by 0, as in eager mode, where a boolean index selects the kept patches
    of every row and ``pad_sequence`` pads them with zeros to the number of patches. The
    sequence keeps its length (the words, then as many positions as patches) and the
    kept patches their positions: the encoder's relative position bias, computed from the
    positions in the sequence, is the original's. The covered patches are marked with a
    scatter instead of ``patch_inds[rows, cols] = False`` and the boxes of no word
    (``target_seg``) with a ``masked_fill``.

    Fixes: ``GuardOnDataDependentSymNode`` (or a number of kept patches specialized to
    the example): ``image_embeddings[i][patch_inds[i]]`` has as many rows as patches
    left uncovered, a number only the values of ``bbox`` know, and ``zip(*ind)`` iterates
    over a tensor as long as the words.
    """

    def combine_image_text_embeddings(
        image_embeddings,
        inputs_embeds,
        bbox,
        visual_bbox,
        attention_mask=None,
        num_patches=14,
        max_len=0,
        image_size=224,
        patch_size=16,
    ):
        if max_len != 0:  # never called so by UdopStack
            return original(
                image_embeddings,
                inputs_embeds,
                bbox,
                visual_bbox,
                attention_mask,
                num_patches,
                max_len,
                image_size,
                patch_size,
            )
        n = num_patches
        xs = torch.floor((bbox[:, :, 0] + bbox[:, :, 2]) / 2.0 * n).long()
        ys = torch.floor((bbox[:, :, 1] + bbox[:, :, 3]) / 2.0 * n).long()
        points = torch.clip(xs, 0, n - 1) + torch.clip(ys, 0, n - 1) * n
        bbox = bbox.to(torch.float32 if bbox.device.type == "mps" else torch.float64)
        means = bbox.mean(-1)
        no_word = (means == 0.0) | (means == 1.0)
        hidden = image_embeddings.shape[-1]
        under = torch.gather(image_embeddings, 1, points.unsqueeze(-1).expand(-1, -1, hidden))
        inputs_embeds = inputs_embeds + under.masked_fill(no_word.unsqueeze(-1), 0.0)

        covered = torch.zeros(
            image_embeddings.shape[:2], dtype=torch.bool, device=image_embeddings.device
        ).scatter(1, points, True)
        order = _kept_first(~covered)
        # the first count positions of every row hold the kept patches, zeros after them
        kept = (~covered).gather(1, order).unsqueeze(-1)
        patches = image_embeddings.gather(1, order.unsqueeze(-1).expand(-1, -1, hidden))
        patches = torch.where(kept, patches, torch.zeros_like(patches))
        if visual_bbox is None:
            from transformers.models.udop.modeling_udop import get_visual_bbox

            visual_bbox = get_visual_bbox(image_size=image_size, patch_size=patch_size)
            visual_bbox = visual_bbox.unsqueeze(0).expand(image_embeddings.shape[0], -1, -1)
            visual_bbox = visual_bbox.to(image_embeddings.device)
        boxes = visual_bbox.gather(1, order.unsqueeze(-1).expand(-1, -1, visual_bbox.shape[-1]))
        boxes = torch.where(kept, boxes, torch.zeros_like(boxes))
        inputs_embeds = torch.cat([inputs_embeds, patches], 1)
        bbox = torch.cat([bbox, boxes], 1)
        if attention_mask is not None:
            attention_mask = torch.cat([attention_mask, kept[..., 0].to(attention_mask.dtype)], 1)
        return inputs_embeds, bbox, attention_mask

    combine_image_text_embeddings.__wrapped__ = original  # type: ignore[attr-defined]
    return combine_image_text_embeddings


def _blt_every_patch_start(original):
    """Replaces ``BltPatcher.patch_lengths_from_entropies`` (a static method): the patch
    starts (tokens whose entropy exceeds the threshold, in order, then the sentinel
    ``seq - 1``) are ordered by a sort of fixed size instead of a boolean selection,
    and all ``seq + 1`` patches are kept, not only as many as the row with most starts
    needs. The extra patches are the sentinel patches eager already gives the other
    rows of the batch: they start after the last token, so no token belongs to them
    (the patch ids, from the cumulated lengths, are the same), the local encoder leaves
    them at zero, the global transformer is causal and the cross-attention masks keep
    the tokens off them: the logits are eager's.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 1)``: ``padded_indices[padded_mask]`` and ``[:, :max_valid_patches]`` give
    the number of patches from the entropies' values.
    """

    def patch_lengths_from_entropies(entropies, sequence_length, patch_size=None, threshold=None):
        batch = entropies.shape[0]
        device = entropies.device
        starts_mask = entropies[:, 1:] > threshold  # the first token (BOS) is ignored
        seq = starts_mask.shape[1]
        index = torch.arange(seq, device=device).unsqueeze(0).expand(batch, -1)
        # the starts first in their order, then the others (sentinel seq)
        order = torch.where(starts_mask, index, index + seq).sort(dim=1).values
        starts = torch.where(order < seq, order, torch.full_like(order, seq))
        first = torch.arange(2, device=device).unsqueeze(0).expand(batch, -1)
        starts = torch.cat([first, starts + 2], dim=1)  # tokens 0 and 1 always start
        last = torch.full_like(starts[:, :1], sequence_length - 1)
        ends = torch.cat([starts[:, 1:] - 1, last], dim=1)
        return ends - starts + 1

    return staticmethod(patch_lengths_from_entropies)


def _blt_unvalidated_entropy(original):
    """Replaces ``BltPatcher.forward``: the original runs with the argument validation of
    ``torch.distributions`` off (restored after), so ``Categorical(logits=logits)`` does
    not check its logits are finite. The validation only raises on invalid values, it
    changes no result.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 1)``: ``Distribution.__init__`` branches on ``constraint.check(logits).all()``.
    """

    def forward(self, *args, **kwargs):
        validate = torch.distributions.Distribution._validate_args
        torch.distributions.Distribution.set_default_validate_args(False)
        try:
            return original(self, *args, **kwargs)
        finally:
            torch.distributions.Distribution.set_default_validate_args(validate)

    return forward


def _blt_hash_windows(original):
    """Replaces ``byte_group_hash_function`` of BLT's module: the windows of ``group_size``
    tokens (the sequence left-padded with zeros) are gathered by index instead of
    ``unfold``, and the polynomial hash ``sum(token_j * prime ** j)`` (int64, wrapping
    like eager) is a chain of additions over the ``group_size`` columns, the powers
    computed in Python, instead of ``prime_tensor ** powers`` and ``torch.sum``.

    Fixes: ``You marked seq as dynamic but your code specialized it to be a constant``:
    ``unfold`` of a symbolic length bounds it between the group sizes; and wrong hashes
    in onnxruntime, whose int64 ``ReduceSum`` and ``Pow`` lose the low bits of values
    beyond 2**53 (every hash embedding differs).
    """

    def wrap(value: int) -> int:
        value %= 1 << 64
        return value - (1 << 64) if value >= 1 << 63 else value

    def byte_group_hash_function(token_ids, group_size=2, prime=1000000007, max_hash=30000):
        with torch.no_grad():
            batch, seq = token_ids.shape
            padding = torch.zeros(batch, group_size - 1, dtype=torch.int64, device=token_ids.device)
            padded = torch.cat([padding, token_ids], dim=1)
            index = torch.arange(seq, device=token_ids.device)[:, None] + torch.arange(
                group_size, device=token_ids.device
            )
            windows = padded[:, index]  # (batch, seq, group_size)
            hashes = windows[..., 0]
            for j in range(1, group_size):
                hashes = hashes + windows[..., j] * wrap(prime**j)
            return hashes % max_hash

    byte_group_hash_function.__wrapped__ = original  # type: ignore[attr-defined]
    return byte_group_hash_function


def _funnel_position_embeds(original):
    """Replaces ``FunnelAttentionStructure.get_position_embeds`` for the relative shift
    attention: the positions of every block are an arithmetic progression (first
    position, step, count) instead of a Python list of ``seq_len`` ints, the count
    stays symbolic. The factorized attention runs the original.

    The original pools the list of positions: the ``<cls>`` position
    ``1 - 2 ** block_index`` then one position out of two of the others (with
    ``separate_cls``), or one out of two (without); both keep a progression whose step
    doubles, and the relative positions read only the first and last positions and the
    count: the same ``arange`` bounds, the same tensors.

    Fixes: ``Constraints violated (L['attention_mask'].size()[1],
    L['input_ids'].size()[1])``: ``pos = list(range(seq_len))`` makes the sequence
    length a constant.

    Any length stays possible (odd ones too, no multiple of the pooling is needed):
    the model's own ``pooling_flag = hidden.size(1) > 2`` only bounds it from below
    (``seq >= 5`` with three blocks).
    """

    def relative_pos(pos, stride, pooled_pos, shift, device):
        # (first, step, count) of ``pos`` and ``pooled_pos``; ``relative_pos`` of the
        # original: arange(max_dist, min_dist - 1, -stride)
        max_dist = pooled_pos[0] - pos[0] + shift * pooled_pos[2] * stride
        min_dist = pooled_pos[0] - (pos[0] + (pos[2] - 1) * pos[1])
        count = (max_dist - min_dist + stride) // stride
        steps = torch.arange(count, dtype=torch.long, device=device)
        return max_dist - steps * stride

    def pool(pos, block_index, config):
        first, step, count = pos
        if not config.separate_cls:
            return first, 2 * step, (count + 1) // 2
        # pos[1:-1] (or pos[1:]) then one out of two, after the <cls> position
        if config.truncate_seq:  # a guard count >= 2, true for any length pooled
            rest = count - 2 if count >= 2 else 0
        else:
            rest = count - 1
        cls_pos = -(2**block_index) + 1
        # the progression goes on: the <cls> position is one step before the others
        assert cls_pos == first + step - 2 * step, f"unexpected positions {pos}"
        return cls_pos, 2 * step, 1 + (rest + 1) // 2

    def get_position_embeds(self, seq_len, dtype, device):
        if self.config.attention_type == "factorized":
            return original(self, seq_len, dtype, device)
        d_model = self.config.d_model
        freq_seq = torch.arange(0, d_model // 2, 1.0, dtype=torch.int64, device=device).to(dtype)
        inv_freq = 1 / (10000 ** (freq_seq / (d_model // 2)))
        rel_pos_id = torch.arange(
            -seq_len * 2, seq_len * 2, 1.0, dtype=torch.int64, device=device
        ).to(dtype)
        zero_offset = seq_len * 2
        sinusoid = rel_pos_id[:, None] * inv_freq[None]
        sin_embed = self.sin_dropout(torch.sin(sinusoid))
        cos_embed = self.cos_dropout(torch.cos(sinusoid))
        pos_embed = torch.cat([sin_embed, cos_embed], dim=-1)

        pos = (0, 1, seq_len)
        pooled_pos = pos
        position_embeds_list = []
        for block_index in range(self.config.num_blocks):
            if block_index == 0:
                position_embeds_pooling = None
            else:
                pooled_pos = pool(pos, block_index, self.config)
                stride = 2 ** (block_index - 1)
                rel_pos = relative_pos(pos, stride, pooled_pos, 2, device)
                rel_pos = rel_pos[:, None] + zero_offset
                rel_pos = rel_pos.expand(rel_pos.size(0), d_model)
                position_embeds_pooling = torch.gather(pos_embed, 0, rel_pos)
            pos = pooled_pos
            stride = 2**block_index
            rel_pos = relative_pos(pos, stride, pos, 1, device)
            rel_pos = rel_pos[:, None] + zero_offset
            rel_pos = rel_pos.expand(rel_pos.size(0), d_model)
            position_embeds_no_pooling = torch.gather(pos_embed, 0, rel_pos)
            position_embeds_list.append([position_embeds_no_pooling, position_embeds_pooling])
        return position_embeds_list

    return get_position_embeds


def imported_model_classes(keep) -> list[type]:
    """The classes defined by the imported transformers model modules for which
    ``keep(cls)`` is true (never imports a module)."""
    out = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or module is None:
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__module__ == name and keep(cls):
                out.append(cls)
    return out


_PATCHES = (
    ("cpmant.modeling_cpmant", "CpmAntModel", "_prepare_attention_mask", _cpmant_attention_mask),
    ("dbrx.modeling_dbrx", "DbrxExperts", "forward", _dbrx_dense_experts),
    (
        "switch_transformers.modeling_switch_transformers",
        "SwitchTransformersExperts",
        "forward",
        _switch_dense_experts,
    ),
    (
        "longcat_flash.modeling_longcat_flash",
        "LongcatFlashExperts",
        "forward",
        _longcat_dense_experts,
    ),
    ("reformer.modeling_reformer", "AxialPositionEmbeddings", "forward", _reformer_axial_positions),
    ("depth_pro.modeling_depth_pro", "DepthProPatchEncoder", "forward", _depth_pro_patch_counts),
    (
        "siglip2.modeling_siglip2",
        "Siglip2VisionEmbeddings",
        "resize_positional_embeddings",
        _siglip2_resize_positions,
    ),
    ("canine.modeling_canine", "CanineModel", "_downsample_attention_mask", _canine_pooled_mask),
    (
        "funnel.modeling_funnel",
        "FunnelAttentionStructure",
        "get_position_embeds",
        _funnel_position_embeds,
    ),
    ("canine.modeling_canine", "CanineAttention", "forward", _canine_local_attention),
    ("qwen4_exp.modeling_qwen4_exp", "Qwen4ExpTextQSAIndexer", "forward", _qwen4_exp_indexer),
    *(
        (module, cls, method, replacement)
        for module, cls in (
            ("longformer.modeling_longformer", "LongformerSelfAttention"),
            ("led.modeling_led", "LEDEncoderSelfAttention"),
        )
        for method, replacement in (
            ("forward", _local_attention_when_traced),
            ("_sliding_chunks_query_key_matmul", _chunked_query_key),
            ("_sliding_chunks_matmul_attn_probs_value", _chunked_probs_value),
        )
    ),
    (
        "longformer.modeling_longformer",
        "LongformerModel",
        "_pad_to_window_size",
        _longformer_padding,
    ),
    (
        "longformer.modeling_longformer",
        "LongformerModel",
        "forward",
        _no_global_attention,
    ),
    ("led.modeling_led", "LEDEncoder", "forward", _led_padded_encoder),
    (
        "deepseek_v4.modeling_deepseek_v4",
        "DeepseekV4HCACompressor",
        "forward",
        _deepseek_v4_hca_compressor,
    ),
    (
        "deepseek_v4.modeling_deepseek_v4",
        "DeepseekV4CSACompressor",
        "forward",
        _deepseek_v4_csa_compressor,
    ),
    ("deepseek_v4.modeling_deepseek_v4", "DeepseekV4Indexer", "forward", _deepseek_v4_indexer),
    ("deepseek_v4.modeling_deepseek_v4", "DeepseekV4Attention", "forward", _deepseek_v4_attention),
    ("blt.modeling_blt", "BltPatcher", "patch_lengths_from_entropies", _blt_every_patch_start),
    ("blt.modeling_blt", "BltPatcher", "forward", _blt_unvalidated_entropy),
    (
        "dots3_note.modeling_dots3_note",
        "Dots3NoteVisionAttention",
        "forward",
        _qkv_norm_vision_attention,
    ),
    ("glm_ocr.modeling_glm_ocr", "GlmOcrVisionAttention", "forward", _qkv_norm_vision_attention),
    (
        "glm5_next.modeling_glm5_next",
        "Glm5NextTextIndexer",
        "get_pooled_states",
        _glm5_next_all_pools,
    ),
    (
        "modernvbert.modeling_modernvbert",
        "ModernVBertModel",
        "get_image_features",
        _modernvbert_every_image,
    ),
    (
        "unlimited_ocr.modeling_unlimited_ocr",
        "UnlimitedOcrDynamicReferenceSlidingWindowLayer",
        "get_mask_sizes",
        _reference_window_mask_sizes,
    ),
)


def get_model_patches() -> list:
    """Patches of the architectures whose modules are imported."""
    from . import Patch

    patches = []
    for module, cls_name, method, replacement in _PATCHES:
        cls = getattr(sys.modules.get(f"transformers.models.{module}"), cls_name, None)
        if cls is not None and method in vars(cls):
            patches.append(Patch(cls, method, replacement, replacement.__doc__))
    for cls in imported_model_classes(lambda c: "_deepstack_process" in vars(c)):
        patches.append(
            Patch(cls, "_deepstack_process", _deepstack_by_gather, _deepstack_by_gather.__doc__)
        )
    udop = sys.modules.get("transformers.models.udop.modeling_udop")
    if udop is not None and hasattr(udop, "combine_image_text_embeddings"):
        patches.append(
            Patch(
                udop,
                "combine_image_text_embeddings",
                _udop_patches_by_gather,
                _udop_patches_by_gather.__doc__,
            )
        )
    blt = sys.modules.get("transformers.models.blt.modeling_blt")
    if blt is not None and hasattr(blt, "byte_group_hash_function"):
        patches.append(
            Patch(blt, "byte_group_hash_function", _blt_hash_windows, _blt_hash_windows.__doc__)
        )
    return patches
