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


def _xlstm_scan_sequence(
    query,
    key,
    value,
    igate,
    fgate,
    c_initial=None,
    n_initial=None,
    m_initial=None,
    return_last_states=False,
    eps=1e-6,
    dtype_state=torch.float32,
    step_kernel=None,
    **kwargs,
):
    """The loop of xLSTM's ``mlstm_recurrent_sequence_native`` as a ``scan``: every
    step calls the same step kernel (``mlstm_recurrent_step_native``) on the same
    slices, the states are the carries."""
    batch_size, nh, _, dhqk = query.shape
    dhv = value.shape[-1]
    device = query.device
    if c_initial is not None:
        if n_initial is None or m_initial is None:
            raise ValueError("Initial states must be provided together.")
        init = (
            c_initial.to(dtype=dtype_state),
            n_initial.to(dtype=dtype_state),
            m_initial.to(dtype=dtype_state),
        )
    else:
        init = (
            torch.zeros((batch_size, nh, dhqk, dhv), dtype=dtype_state, device=device),
            torch.zeros((batch_size, nh, dhqk), dtype=dtype_state, device=device),
            torch.zeros((batch_size, nh, 1), dtype=dtype_state, device=device),
        )

    def step(carry, xs):
        q, k, v, i, f = xs
        h, (c, n, m) = step_kernel(
            cstate=carry[0],
            nstate=carry[1],
            mstate=carry[2],
            query=q,
            key=k,
            value=v,
            igate=i[..., None],
            fgate=f[..., None],
            eps=eps,
            dtype_state=dtype_state,
            **kwargs,
        )
        # a scan output cannot alias a carry
        return (c, n, m), h.clone()

    # the states left by the chunkwise kernel are views: a carry must be contiguous
    init = tuple(t.contiguous() for t in init)
    last, matH = _scan()(step, init, (query, key, value, igate, fgate), dim=2)
    if return_last_states:
        return matH, tuple(last)
    return matH


#: chunk size of xLSTM's kernels during a capture: longer than any sequence, every
#: token goes through the scan (the wrapper's guard ``seq // chunk < 1`` then bounds
#: the sequence at this length only)
_UNCHUNKED = 2**31


def _xlstm_backend_forward(original):
    """Replaces ``xLSTMBackend.forward`` (xLSTM's native mLSTM kernels) in inference
    mode: ``wrap_chunkwise_arbitrary_sequence_length`` runs as before (the chunks of
    ``chunk_size`` tokens, then the remaining tokens one by one), with the sequence
    kernel ``mlstm_recurrent_sequence_native`` replaced by the same steps in a ``scan``.
    The training modes run the original.

    Fixes: ``Constraints violated (L['input_ids'].size()[1])``: ``for t in
    range(sequence_length)`` in ``mlstm_recurrent_sequence_native`` unrolls the sequence.

    During a capture the chunk size is :data:`_UNCHUNKED`: the scan runs over the whole
    sequence, which stays dynamic at any length. With the real chunk size (64 by
    default), the branch ``num_chunks > 0`` of the wrapper would bound the sequence below
    one chunk (an example shorter than a chunk), or the chunkwise kernel's loop would fix
    the number of chunks (a longer one). Below a chunk the exported model computes
    eager's numbers; beyond, the recurrent form of what eager computes by chunks (equal
    up to float rounding).
    """
    import functools

    def forward(
        self,
        query,
        key,
        value,
        igate,
        fgate,
        c_initial=None,
        n_initial=None,
        m_initial=None,
        return_last_states=None,
        mode=None,
    ):
        fn = self._inference_fn
        kernel = (
            fn.keywords.get("mlstm_sequence_kernel") if isinstance(fn, functools.partial) else None
        )
        if "inference" not in (mode or self.config.mode) or not isinstance(
            kernel, functools.partial
        ):
            return original(
                self,
                query,
                key,
                value,
                igate,
                fgate,
                c_initial=c_initial,
                n_initial=n_initial,
                m_initial=m_initial,
                return_last_states=return_last_states,
                mode=mode,
            )
        keywords = dict(fn.keywords)
        if torch.compiler.is_exporting():
            keywords["chunk_size"] = _UNCHUNKED
        keywords["mlstm_sequence_kernel"] = functools.partial(
            _xlstm_scan_sequence, step_kernel=self.step_kernel_fn, **kernel.keywords
        )
        return fn.func(
            *fn.args,
            query=query,
            key=key,
            value=value,
            igate=igate,
            fgate=fgate,
            c_initial=c_initial,
            n_initial=n_initial,
            m_initial=m_initial,
            **keywords,
        )

    return forward


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
    module = sys.modules.get("transformers.models.xlstm.modeling_xlstm")
    cls = getattr(module, "xLSTMBackend", None)
    if cls is not None and "forward" in vars(cls):
        patches.append(
            Patch(cls, "forward", _xlstm_backend_forward, _xlstm_backend_forward.__doc__)
        )
    return patches
