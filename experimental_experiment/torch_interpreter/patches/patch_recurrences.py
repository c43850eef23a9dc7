"""Recurrences over the sequence written with ``scan`` instead of a Python loop.

transformers runs some recurrent layers on CPU as ``for t in range(seq_len)``:
torch.export unrolls the loop and specializes the sequence length (*"You marked
dimension 1 ('seq') of input 'input_ids' as dynamic but your code specialized it to be
a constant"*). The replacements below compute the same steps, in the same order and
dtypes, inside ``torch._higher_order_ops.scan.scan``, which torch.export keeps as one
higher-order node (converted into an ONNX Scan): the results match the loop exactly.
Each patch is applied only when the model's module is already imported.
"""

from __future__ import annotations

import sys

import torch


def _scan():
    from torch._higher_order_ops.scan import scan

    return scan


def _recurrent_gemma_rnn_scan(original):
    """Replaces ``RecurrentGemmaRglru._rnn_scan`` (RecurrentGemma's RG-LRU): the linear
    recurrence ``h[t] = a[t] h[t-1] + x[t]`` runs in a ``scan`` along the sequence, the
    one-token case (decoding) included.

    Fixes: ``Constraints violated ... ('seq') of input 'input_ids' ... specialized it to
    be a constant``: ``for t in range(hidden_states.shape[1])`` unrolls the sequence.
    """

    def _rnn_scan(
        self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype=torch.float32
    ):
        recurrent_gate = recurrent_gate * ~reset
        if recurrent_states is None:
            recurrent_states = torch.zeros(
                hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device
            )
        out_dtype = hidden_states.dtype

        def step(state, xs):
            gate, x = xs
            state = gate.type(acc_dtype) * state + x.type(acc_dtype)
            return state, state.to(out_dtype, copy=True)  # a scan output cannot alias

        init = recurrent_states.to(recurrent_gate.device).type(acc_dtype)
        last, states = _scan()(step, init, (recurrent_gate, hidden_states), dim=1)
        return states, last

    return _rnn_scan


def _rwkv_linear_attention_cpu(original):
    """Replaces transformers' ``rwkv_linear_attention_cpu`` (RWKV's WKV on CPU): the
    numerator, denominator and running maximum are the carries of a ``scan`` along the
    sequence.

    Fixes: ``Constraints violated ... ('seq') of input 'input_ids' ... specialized it to
    be a constant``: ``for current_index in range(seq_length)`` unrolls the sequence.
    """

    def rwkv_linear_attention_cpu(
        time_decay, time_first, key, value, state=None, return_state=False
    ):
        if state is None:
            num_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
            den_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
            max_state = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38
        else:
            num_state, den_state, max_state = state
        time_decay = -torch.exp(time_decay)
        out_dtype = key.dtype

        def step(carry, xs):
            num_state, den_state, max_state = carry
            current_key, current_value = xs
            current_key = current_key.float()
            max_for_output = torch.maximum(max_state, current_key + time_first)
            e1 = torch.exp(max_state - max_for_output)
            e2 = torch.exp(current_key + time_first - max_for_output)
            numerator = e1 * num_state + e2 * current_value
            denominator = e1 * den_state + e2
            output = (numerator / denominator).to(out_dtype)
            max_for_state = torch.maximum(max_state + time_decay, current_key)
            e1 = torch.exp(max_state + time_decay - max_for_state)
            e2 = torch.exp(current_key - max_for_state)
            num_state = e1 * num_state + e2 * current_value
            den_state = e1 * den_state + e2
            return (num_state, den_state, max_for_state), output

        carry, output = _scan()(step, (num_state, den_state, max_state), (key, value), dim=1)
        if return_state or state is not None:
            return output, list(carry)
        return output, None

    return rwkv_linear_attention_cpu


def get_recurrence_patches() -> list:
    """Patches of the recurrences of the modules already imported."""
    from . import Patch

    patches = []
    module = sys.modules.get("transformers.models.recurrent_gemma.modeling_recurrent_gemma")
    cls = getattr(module, "RecurrentGemmaRglru", None)
    if cls is not None and "_rnn_scan" in vars(cls):
        patches.append(
            Patch(cls, "_rnn_scan", _recurrent_gemma_rnn_scan, _recurrent_gemma_rnn_scan.__doc__)
        )
    module = sys.modules.get("transformers.models.rwkv.modeling_rwkv")
    if module is not None and callable(getattr(module, "rwkv_linear_attention_cpu", None)):
        patches.append(
            Patch(
                module,
                "rwkv_linear_attention_cpu",
                _rwkv_linear_attention_cpu,
                _rwkv_linear_attention_cpu.__doc__,
            )
        )
    return patches
