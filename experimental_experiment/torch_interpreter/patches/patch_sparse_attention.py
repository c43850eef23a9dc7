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
