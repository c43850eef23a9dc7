"""Patches of Longformer's sliding-chunk self-attention (LED's encoder reuses it) and of
the padding of the sequence to a multiple of the attention window, so that both trace
with a dynamic batch and a dynamic sequence.

* The chunk counts are computed with ``torch.div(seq_len, w, rounding_mode="trunc")``:
  a 0-d tensor, which becomes a size through ``.item()`` (*"Could not guard on
  data-dependent expression Eq(u1, 1)"*). The patched methods divide the sizes with
  ``//`` (a symbolic size) and make the overlapping chunks by concatenating
  consecutive blocks instead of ``as_strided``: the same values, the same matrix
  products.
* The padding to a multiple of the window is applied only ``if padding_len > 0``, a
  guard on the sequence length; LED's encoder also removes it with
  ``hidden_states[:, :-padding_len]``, empty when nothing was padded. The patched
  code always pads (maybe by zero tokens) to ``ceil(seq / window) * window`` tokens.
* Whether any token has a global attention is read as a Python ``bool``
  (``is_index_global_attn.flatten().any().item()``) and every layer branches on it:
  see :func:`_local_attention_when_traced`.
"""

from __future__ import annotations

import inspect

import torch

from ..errors import InvalidArgumentError


def _window(config) -> int:
    """The largest attention window of the layers (what the model pads to)."""
    window = config.attention_window
    return window if isinstance(window, int) else max(window)


def _refuse_global_attention(model: str, global_attention_mask) -> None:
    """Raises before the capture goes on when a global attention mask is given: the
    exported layers compute the local attention only (:func:`_local_attention_when_traced`),
    an ONNX model taking the mask would silently ignore it."""
    if global_attention_mask is not None and torch.compiler.is_exporting():
        raise InvalidArgumentError(
            f"{model}: global attention (argument 'global_attention_mask') cannot be "
            "exported: the global tokens are gathered by a data-dependent count, and the "
            "exported model would attend locally only, ignoring the mask. Export without "
            "'global_attention_mask' (the sliding-window attention is exact); a "
            "question-answering head, which sets global attention on the question itself, "
            "cannot be exported."
        )


def _no_global_attention(original):
    """Replaces ``LongformerModel.forward``: unchanged, except that a capture given a
    global attention mask (by the user, or set by a question-answering head) stops with
    :class:`InvalidArgumentError` (:func:`_refuse_global_attention`).

    Fixes: an exported model silently ignoring ``global_attention_mask``: the exported
    layers attend locally only (:func:`_local_attention_when_traced`)."""
    signature = inspect.signature(original)

    def forward(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        _refuse_global_attention(type(self).__name__, bound.arguments.get("global_attention_mask"))
        return original(self, *args, **kwargs)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__signature__ = signature  # type: ignore[attr-defined]
    return forward


def _traced(is_global_attn) -> bool:
    """Whether ``is_global_attn`` was read from a tensor during a capture (a symbolic
    value instead of a ``bool``)."""
    return isinstance(is_global_attn, (torch.SymBool, torch.SymInt))


def _local_attention_when_traced(original):
    """Replaces ``LongformerSelfAttention.forward`` (and ``LEDEncoderSelfAttention``'s):
    unchanged in eager mode; during a capture, where ``is_global_attn`` is a symbolic
    value read from the mask, the layer runs its local (sliding-window) attention only.

    The exported model therefore computes the original model exactly when no token has
    a global attention, the only case a capture accepts: a global attention mask given
    to ``LongformerModel`` or ``LEDEncoder`` during a capture raises
    :class:`InvalidArgumentError` (:func:`_refuse_global_attention`), since the
    exported layers would ignore it.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    Eq(u0, 1)``: every layer branches on ``is_global_attn``, a boolean read from the
    attention mask with ``.item()``, and the global path gathers the global tokens with
    ``nonzero`` (a data-dependent number of them).
    """

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        is_index_masked=None,
        is_index_global_attn=None,
        is_global_attn=None,
        output_attentions=False,
    ):
        if _traced(is_global_attn):
            # global tokens (a positive mask) become local ones (a zero mask)
            attention_mask = attention_mask.clamp(max=0)
            is_index_global_attn = torch.zeros_like(is_index_global_attn)
            is_global_attn = False
        return original(
            self,
            hidden_states,
            attention_mask=attention_mask,
            is_index_masked=is_index_masked,
            is_index_global_attn=is_index_global_attn,
            is_global_attn=is_global_attn,
            output_attentions=output_attentions,
        )

    return forward


def _chunked_query_key(original):
    """Replaces ``LongformerSelfAttention._sliding_chunks_query_key_matmul`` (and
    LED's): the scores of every query against the ``2w + 1`` keys around it
    (``w = window_overlap``), computed on chunks of ``2w`` positions overlapping by
    ``w`` (two consecutive blocks of ``w`` positions), the number of chunks a symbolic
    size (``seq // w - 1``).

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression
    8*u1 < 16``: the number of chunks, ``torch.div(seq_len, w, rounding_mode="trunc")``,
    is a tensor turned into a size.
    """

    def matmul(self, query, key, window_overlap):
        w = window_overlap
        batch, seq, heads, dim = query.shape
        blocks = seq // w  # chunks of w positions (seq is a multiple of 2w)

        def chunks(x):
            # (batch * heads, blocks - 1, 2w, dim): chunk c holds the blocks c and c + 1
            x = x.transpose(1, 2).reshape(batch * heads, blocks, w, dim)
            return torch.cat([x[:, :-1], x[:, 1:]], dim=2)

        # (einsum would guard on the number of chunks being 1 or not)
        products = torch.matmul(chunks(query), chunks(key).transpose(-1, -2))
        # every diagonal of a chunk's products becomes a column
        diagonals = self._pad_and_transpose_last_two_dims(products, padding=(0, 0, 0, 1))
        scores = diagonals.new_zeros((batch * heads, blocks, w, 2 * w + 1))
        # the key itself and the w keys after it: chunk c's first half, the last
        # chunk's second half for the last block
        scores[:, :-1, :, w:] = diagonals[:, :, :w, : w + 1]
        scores[:, -1, :, w:] = diagonals[:, -1, w:, : w + 1]
        # the w keys before: from the chunk starting one block earlier
        scores[:, 1:, :, :w] = diagonals[:, :, -(w + 1) : -1, w + 1 :]
        scores[:, 0, 1:w, 1:w] = diagonals[:, 0, : w - 1, 1 - w :]
        scores = scores.view(batch, heads, seq, 2 * w + 1).transpose(2, 1)
        self._mask_invalid_locations(scores, w)
        return scores

    return matmul


def _chunked_probs_value(original):
    """Replaces ``LongformerSelfAttention._sliding_chunks_matmul_attn_probs_value`` (and
    LED's): the probabilities of every query over its ``2w + 1`` keys times the values,
    on blocks of ``w`` queries against ``3w`` values (the block, the one before and the
    one after, ``-1`` beyond the sequence), the number of blocks ``seq // w``.

    Fixes: ``GuardOnDataDependentSymNode: Could not guard on data-dependent expression``:
    the number of chunks, ``torch.div(seq_len, w, rounding_mode="trunc")``, is a tensor
    turned into a size; ``as_strided`` with symbolic strides.
    """

    def matmul(self, attn_probs, value, window_overlap):
        w = window_overlap
        batch, seq, heads, dim = value.shape
        blocks = seq // w
        probs = attn_probs.transpose(1, 2).reshape(batch * heads, blocks, w, 2 * w + 1)
        value = value.transpose(1, 2).reshape(batch * heads, blocks, w, dim)
        # block c sees the values of the blocks c - 1, c, c + 1 (-1 outside)
        padded = torch.nn.functional.pad(value, (0, 0, 0, 0, 1, 1), value=-1)
        windows = torch.cat([padded[:, :-2], padded[:, 1:-1], padded[:, 2:]], dim=2)
        context = torch.matmul(self._pad_and_diagonalize(probs), windows)
        return context.view(batch, heads, seq, dim).transpose(1, 2)

    return matmul


def _padded_length(seq, window: int):
    """``seq`` rounded up to a multiple of ``window`` (a symbolic size stays one)."""
    return (seq + window - 1) // window * window


def _longformer_padding(original):
    """Replaces ``LongformerModel._pad_to_window_size``: always pads the tokens (the
    ids, the positions, the embeddings, the masks) to ``ceil(seq / window) * window``,
    by zero tokens when the length is already a multiple, with the same values as the
    original.

    Fixes: a guard on ``padding_len > 0``, ``(window - seq % window) % window`` of the
    dynamic sequence length: the exported graph would only be valid for lengths on the
    same side of the guard as the example's.
    """

    def pad(
        self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, pad_token_id
    ):
        window = _window(self.config)
        tokens = input_ids if input_ids is not None else inputs_embeds
        batch, seq = tokens.shape[:2]
        padding = _padded_length(seq, window) - seq

        def right(x, value):
            # the masks have the tokens' length: one symbolic length in the graph
            torch._check(x.shape[1] == seq)
            return torch.nn.functional.pad(x, (0, padding), value=value)

        if input_ids is not None:
            input_ids = right(input_ids, pad_token_id)
        if position_ids is not None:
            position_ids = right(position_ids, pad_token_id)
        if inputs_embeds is not None:
            ids = inputs_embeds.new_full(
                (batch, padding), self.config.pad_token_id, dtype=torch.long
            )
            inputs_embeds = torch.cat([inputs_embeds, self.embeddings(ids)], dim=-2)
        attention_mask = right(attention_mask, 0)
        token_type_ids = right(token_type_ids, 0)
        return padding, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds

    return pad


def _led_padded_encoder(original):
    """Replaces ``LEDEncoder.forward``: pads the inputs to ``ceil(seq / window) *
    window`` tokens (the padding token, a zero mask, the padding token's embedding) as
    the original does, calls it on the padded inputs (it has nothing left to pad), then
    removes the padding from the hidden states and the local attentions as the
    original does.

    Fixes: a guard on ``padding_len > 0`` of the dynamic sequence length, and
    ``hidden_states[:, :-padding_len]`` (empty if nothing was padded): the exported
    graph would only be valid for lengths on the same side of the guard as the
    example's.
    """

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        global_attention_mask=None,
        inputs_embeds=None,
        output_attentions=None,
        output_hidden_states=None,
        return_dict=None,
        **kwargs,
    ):
        _refuse_global_attention(type(self).__name__, global_attention_mask)
        if (input_ids is None) == (inputs_embeds is None):
            # the original raises the error
            return original(
                self,
                input_ids=input_ids,
                attention_mask=attention_mask,
                global_attention_mask=global_attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=return_dict,
                **kwargs,
            )
        tokens = input_ids if input_ids is not None else inputs_embeds
        batch, seq = tokens.shape[:2]
        padding = _padded_length(seq, _window(self.config)) - seq

        def right(x, value):
            # the masks have the tokens' length: one symbolic length in the graph
            torch._check(x.shape[1] == seq)
            return torch.nn.functional.pad(x, (0, padding), value=value)

        if attention_mask is None:
            attention_mask = torch.ones((batch, seq), device=tokens.device, dtype=torch.long)
        attention_mask = right(attention_mask, 0)
        if global_attention_mask is not None:
            global_attention_mask = right(global_attention_mask, 0)
        if input_ids is not None:
            input_ids = right(input_ids, self.config.pad_token_id)
        else:
            ids = inputs_embeds.new_full(
                (batch, padding), self.config.pad_token_id, dtype=torch.long
            )
            inputs_embeds = torch.cat([inputs_embeds, self.embed_tokens(ids)], dim=-2)
        if return_dict is None:
            return_dict = self.config.return_dict
        out = original(
            self,
            input_ids=input_ids,
            attention_mask=attention_mask,
            global_attention_mask=global_attention_mask,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        out.last_hidden_state = out.last_hidden_state[:, :seq]
        if out.hidden_states is not None:
            out.hidden_states = tuple(state[:, :seq] for state in out.hidden_states)
        if out.attentions is not None:
            out.attentions = tuple(state[:, :, :seq] for state in out.attentions)
        return out if return_dict else out.to_tuple()

    return forward
