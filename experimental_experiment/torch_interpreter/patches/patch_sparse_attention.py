"""Patches of the token selection of sparse-attention models (an indexer scoring blocks
of keys and keeping the best ones), written with tensor operations over every query at
once instead of Python loops over the batch and the queries."""

from __future__ import annotations

import math
import sys

import torch


def _qwen4_exp_indexer(original):
    """Replaces ``Qwen4ExpTextQSAIndexer.forward``: for every query, the visible keys are
    grouped in blocks of ``compress_ratio`` in their order, each complete block is pooled
    (mean of its keys, normalized, rotated at its first position) and scored against the
    query; the ``token_budget // compress_ratio`` best blocks and the incomplete last
    block are kept. Blocks are ranked by counting the better ones (pairwise comparison)
    instead of ``topk`` with a number of blocks depending on the query.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    ((u0//2)) > 0``: the loops over the batch and the queries call ``torch.nonzero``
    per query and branch on the number of blocks it finds.
    """

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values):
        rotary = sys.modules[type(self).__module__].apply_rotary_pos_emb
        batch, seq, _ = hidden_states.shape
        full_cos, full_sin = position_embeddings
        cos_q, sin_q = full_cos[:, -seq:, :], full_sin[:, -seq:, :]
        q, keys = torch.split(
            self.index_qk_proj(hidden_states),
            [self.index_n_heads * self.index_head_dim, self.index_kv_heads * self.index_head_dim],
            dim=-1,
        )
        q = q.reshape(batch, seq, -1, self.index_head_dim)
        keys = keys.reshape(batch, seq, -1, self.index_head_dim).squeeze(2)
        q = rotary(self.q_layernorm(q), cos=cos_q, sin=sin_q, unsqueeze_dim=2)
        if past_key_values is not None:
            keys = past_key_values.update_indexer(keys, self.layer_idx)
        visible = (attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0)[
            :, 0
        ]  # (batch, seq, kv)
        ratio, kv = self.compress_ratio, visible.shape[-1]
        rank = visible.to(torch.int64).cumsum(-1) - 1  # rank among the visible keys
        complete = torch.div(visible.sum(-1, keepdim=True), ratio, rounding_mode="floor") * ratio
        in_block = visible & (rank < complete)
        block_of = torch.div(rank, ratio, rounding_mode="floor")
        blocks = torch.arange((kv + ratio - 1) // ratio, device=visible.device)
        member = in_block[..., None, :] & (block_of[..., None, :] == blocks[:, None])
        pooled = torch.matmul(member.to(torch.float32) / ratio, keys.float()[:, None])
        pooled = self.k_layernorm(pooled.to(keys.dtype))  # (batch, seq, blocks, dim)
        positions = torch.arange(kv, device=visible.device)
        start = torch.where(member, positions, kv).amin(-1)  # first key of each block
        valid = start < kv
        start = torch.where(valid, start, 0)
        ncos = full_cos.shape[-1]

        def at_start(table):
            table = table[:, None].expand(batch, seq, table.shape[1], ncos)
            return torch.gather(table, 2, start[..., None].expand(*start.shape, ncos))

        rotated = rotary(
            pooled.unsqueeze(3), cos=at_start(full_cos), sin=at_start(full_sin), unsqueeze_dim=3
        ).squeeze(3)
        scores = torch.matmul(rotated.float(), q.float().transpose(-1, -2))
        scores = torch.relu(scores).sum(-1) / math.sqrt(self.index_head_dim)
        scores = torch.where(valid, scores, -math.inf)
        # a block is kept when fewer than block_topk blocks score better (ties: lower index)
        better = (scores[..., None, :] > scores[..., :, None]) | (
            (scores[..., None, :] == scores[..., :, None]) & (blocks[None, :] < blocks[:, None])
        )
        kept = valid & (better.sum(-1) < self.block_topk)
        selected = (member & kept[..., None]).any(-2) | (visible & (rank >= complete))
        return selected.unsqueeze(1)

    return forward


def _windows(module, states, rate):
    """The ``seq // rate`` complete windows of ``states`` (batch, seq, dim) as (batch,
    windows, rate, dim), gathered by index: the number of windows stays symbolic, zero
    included, where a slice and a ``view`` would make the capture check it."""
    windows = states.shape[1] // rate
    index = torch.arange(windows, device=states.device)[:, None] * rate
    return states[:, index + torch.arange(rate, device=states.device)]


def _deepseek_v4_compress(module, hidden_states, head_dim, overlap):
    """Pools every complete window of ``module.compress_rate`` tokens into one entry
    rotated at the window's first position (``DeepseekV4HCACompressor``, CSA compressor
    and indexer without a cache). ``overlap``: each entry also pools the first half of
    the previous window (``-inf`` gates for the first window)."""
    rotary = sys.modules[type(module).__module__].apply_rotary_pos_emb
    batch, rate = hidden_states.shape[0], module.compress_rate
    kv = _windows(module, module.kv_proj(hidden_states), rate)
    gate = _windows(module, module.gate_proj(hidden_states), rate) + module.position_bias
    windows = kv.shape[1]
    if overlap:
        # window w pools the first half of window w - 1 and the second half of window w
        first = kv.new_zeros((batch, 1, rate, head_dim))
        prev_kv = torch.cat([first, kv[..., :head_dim]], dim=1)[:, :windows]
        prev_gate = torch.cat([first - math.inf, gate[..., :head_dim]], dim=1)[:, :windows]
        kv = torch.cat([prev_kv, kv[..., head_dim:]], dim=2)
        gate = torch.cat([prev_gate, gate[..., head_dim:]], dim=2)
    compressed = module.kv_norm(
        (kv * gate.softmax(dim=2, dtype=torch.float32).to(kv.dtype)).sum(dim=2)
    )
    positions = torch.arange(windows, device=compressed.device) * rate
    positions = positions.unsqueeze(0).expand(batch, -1)
    cos, sin = module.rotary_emb(compressed, position_ids=positions, layer_type="compress")
    return rotary(compressed.unsqueeze(1), cos, sin).squeeze(1)


def _deepseek_v4_hca_compressor(original):
    """Replaces ``DeepseekV4HCACompressor.forward`` without a cache: the complete windows
    are pooled whatever their number (none included) and the causal bias over the
    compressed entries is always returned (no columns when there is no entry).

    Fixes: ``dynamic dimension attention_mask.shape[1] is valid only for sizes in [0, 3]``
    (a mismatch beyond): ``if chunk_kv.shape[1] > 0`` and ``compressed_len == 0`` branch
    on the number of complete windows. With a cache, the original runs.
    """

    def forward(self, hidden_states, q_residual, position_ids, past_key_values, layer_idx):
        if past_key_values is not None:
            return original(
                self, hidden_states, q_residual, position_ids, past_key_values, layer_idx
            )
        batch = hidden_states.shape[0]
        compressed_kv = _deepseek_v4_compress(self, hidden_states, self.head_dim, False)
        compressed_kv = compressed_kv.unsqueeze(1)
        entries = torch.arange(compressed_kv.shape[2], device=compressed_kv.device)
        threshold = (position_ids + 1) // self.compress_rate  # (batch, seq)
        hidden = entries.view(1, 1, 1, -1) >= threshold[:, None, :, None]
        bias = compressed_kv.new_zeros((batch, 1, position_ids.shape[1], entries.shape[0]))
        return compressed_kv, bias.masked_fill(hidden, -math.inf)

    return forward


def _deepseek_v4_indexer(original):
    """Replaces ``DeepseekV4Indexer.forward`` without a cache: compressed keys of every
    complete window (none included), scores masked beyond each query's complete windows,
    ``min(index_topk, windows)`` best kept as a symbolic size, the masked picks set to
    ``-1``.

    Fixes: ``dynamic dimension attention_mask.shape[1] is valid only for sizes in [0, 3]``:
    branches on the number of windows and ``min(self.index_topk, compressed_len)``. With
    a cache, the original runs.
    """

    def forward(self, hidden_states, q_residual, position_ids, past_key_values, layer_idx):
        if past_key_values is not None:
            return original(
                self, hidden_states, q_residual, position_ids, past_key_values, layer_idx
            )
        rotary = sys.modules[type(self).__module__].apply_rotary_pos_emb
        batch, seq, _ = hidden_states.shape
        compressed = _deepseek_v4_compress(self, hidden_states, self.head_dim, True)
        cos, sin = self.rotary_emb(hidden_states, position_ids=position_ids, layer_type="compress")
        q = self.q_b_proj(q_residual).view(batch, seq, -1, self.head_dim).transpose(1, 2)
        q = rotary(q, cos, sin).transpose(1, 2)
        scores = self.scorer(q, compressed, hidden_states)  # (batch, seq, entries)
        entries = compressed.shape[1]
        threshold = ((position_ids + 1) // self.compress_rate).unsqueeze(-1)
        index = torch.arange(entries, device=scores.device).view(1, 1, -1)
        scores = scores.masked_fill(index >= threshold, -math.inf)
        picked = scores.topk(torch.sym_min(self.index_topk, entries), dim=-1).indices
        return torch.where(picked >= threshold, torch.full_like(picked, -1), picked)

    return forward


def _deepseek_v4_csa_compressor(original):
    """Replaces ``DeepseekV4CSACompressor.forward`` without a cache: overlapping windows
    pooled whatever their number (none included), then the indexer's picks become the
    bias over the compressed entries.

    Fixes: ``dynamic dimension attention_mask.shape[1] is valid only for sizes in [0, 3]``:
    ``if chunk_kv.shape[1] > 0`` and ``if n_windows > 1`` branch on the number of
    complete windows. With a cache, the original runs.
    """

    def forward(self, hidden_states, q_residual, position_ids, past_key_values, layer_idx):
        if past_key_values is not None:
            return original(
                self, hidden_states, q_residual, position_ids, past_key_values, layer_idx
            )
        batch, seq, _ = hidden_states.shape
        compressed_kv = _deepseek_v4_compress(self, hidden_states, self.head_dim, True)
        compressed_kv = compressed_kv.unsqueeze(1)
        picked = self.indexer(hidden_states, q_residual, position_ids, None, layer_idx)
        entries = compressed_kv.shape[2]
        picked = torch.where(picked >= 0, picked, torch.full_like(picked, entries))
        bias = compressed_kv.new_full((batch, 1, seq, entries + 1), -math.inf)
        bias = bias.scatter(-1, picked.unsqueeze(1), 0.0)
        return compressed_kv, bias[..., :entries]

    return forward


def _deepseek_v4_attention(original):
    """Replaces ``DeepseekV4Attention.forward`` without a cache: the compressor's bias is
    always appended to the mask (no columns when there is no compressed entry) instead of
    only when the keys outnumber the mask's columns.

    Fixes: ``dynamic dimension attention_mask.shape[1] is valid only for sizes in [0, 3]``:
    ``kv.shape[2] > attention_mask.shape[-1]`` branches on the number of compressed
    entries. With a cache, the original runs.
    """

    def forward(
        self,
        hidden_states,
        position_embeddings,
        position_ids,
        attention_mask,
        past_key_values=None,
        **kwargs,
    ):
        if past_key_values is not None or self.compressor is None:
            return original(
                self,
                hidden_states,
                position_embeddings,
                position_ids,
                attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
        mod = sys.modules[type(self).__module__]
        shape = hidden_states.shape[:-1]
        cos, sin = position_embeddings[self.rope_layer_type]
        q_residual = self.q_a_norm(self.q_a_proj(hidden_states))
        q = self.q_b_proj(q_residual).view(*shape, -1, self.head_dim).transpose(1, 2)
        q = mod.apply_rotary_pos_emb(self.q_b_norm(q), cos, sin)
        kv = self.kv_norm(self.kv_proj(hidden_states)).view(*shape, -1, self.head_dim)
        kv = mod.apply_rotary_pos_emb(kv.transpose(1, 2), cos, sin)
        compressed_kv, bias = self.compressor(
            hidden_states, q_residual, position_ids, None, self.layer_idx
        )
        kv = torch.cat([kv, compressed_kv], dim=2)
        if isinstance(attention_mask, torch.Tensor):
            attention_mask = torch.cat([attention_mask, bias.to(attention_mask.dtype)], dim=-1)
        attention = mod.ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, mod.eager_attention_forward
        )
        out, weights = attention(
            self,
            q,
            kv,
            kv,
            attention_mask,
            dropout=0.0 if not self.training else self.attention_dropout,
            scaling=self.scaling,
            sliding_window=self.sliding_window,
            s_aux=self.sinks,
            **kwargs,
        )
        # undoes the rotation the values (the keys) carried, at the query's position
        out = mod.apply_rotary_pos_emb(out.transpose(1, 2), cos, -sin).transpose(1, 2)
        out = self.o_a_proj(out.reshape(*shape, self.config.o_groups, -1)).flatten(2)
        return self.o_b_proj(out), weights

    return forward
