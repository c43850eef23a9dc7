"""A loop-free selective scan for Mamba-like state space models.

transformers' reference ``mamba_selective_scan`` (used without the ``mamba_ssm``
kernels, always on CPU) loops over the sequence in Python: torch.export unrolls the
loop and specializes the sequence length (*"You marked dimension 1 ('seq') of input
'input_ids' as dynamic but your code specialized it to be a constant"*).

The recurrence ``h[t] = exp(dt[t] A) h[t-1] + dt[t] B[t] x[t]``, ``y[t] = C[t] h[t]``
starting from ``h = 0`` has the closed form
``h[t] = sum_{s <= t} exp(L[t] - L[s]) dt[s] B[s] x[s]`` with ``L = cumsum(dt A)``
along the sequence. The exponent is masked to ``-inf`` for ``s > t`` before ``exp``,
every kept exponent is ``<= 0`` (``A < 0``, ``dt > 0``): no overflow. It costs
``O(seq^2)`` memory instead of a loop, with plain aten operators only.
"""

from __future__ import annotations

import sys

import torch

#: modules of transformers holding a ``mamba_selective_scan`` function to replace
SCAN_MODULES = (
    "transformers.models.mamba.modeling_mamba",
    "transformers.models.falcon_mamba.modeling_falcon_mamba",
    "transformers.models.jamba.modeling_jamba",
    "transformers.models.zamba.modeling_zamba",
)


def selective_scan_closed_form(
    hidden_states,
    dt,
    A,
    B,
    C,
    D=None,
    z=None,
    delta_bias=None,
    delta_softplus=False,
    return_last_state=False,
    **kwargs,
):
    """Same inputs and outputs as transformers' ``mamba_selective_scan`` (the reference
    path): ``hidden_states`` and ``dt`` ``(batch, d, seq)``, ``A`` ``(d, n)``, ``B`` and
    ``C`` ``(batch, n, seq)``; returns ``(batch, d, seq)`` and the last state
    ``(batch, d, n)`` when ``return_last_state``."""
    dtype = hidden_states.dtype
    dt = dt.float()
    if delta_bias is not None:
        dt = dt + delta_bias.float()[..., None]
    if delta_softplus:
        dt = torch.nn.functional.softplus(dt)
    x = hidden_states.float()
    # log of the cumulated decay: (batch, d, seq, n)
    log_a = torch.cumsum(dt[..., None] * A.float()[None, :, None, :], dim=2)
    seq = torch.arange(x.shape[-1], device=x.device)
    causal = seq[:, None] >= seq[None, :]  # (t, s)
    diff = log_a[:, :, :, None, :] - log_a[:, :, None, :, :]  # (batch, d, t, s, n)
    decay = torch.exp(torch.where(causal[None, None, :, :, None], diff, -torch.inf))
    b_x = (dt * x)[..., None] * B.float().transpose(1, 2)[:, None, :, :]  # (batch, d, s, n)
    states = (decay * b_x[:, :, None, :, :]).sum(dim=3)  # (batch, d, t, n)
    out = (states * C.float().transpose(1, 2)[:, None, :, :]).sum(dim=-1)
    if D is not None:
        out = out + x * D.float()[None, :, None]
    if z is not None:
        out = out * torch.nn.functional.silu(z.float())
    out = out.to(dtype)
    if return_last_state:
        return out, states[:, :, -1].to(dtype)
    return out


def _closed_form_scan(original):
    """Replaces transformers' ``mamba_selective_scan`` (Mamba, FalconMamba, Jamba, Zamba) by
    :func:`selective_scan_closed_form`.

    Fixes: ``Constraints violated ... ('seq') of input 'input_ids' ... specialized it to
    be a constant``: the reference scan loops over the sequence length in Python.
    """
    return selective_scan_closed_form


def get_ssm_patches() -> list:
    """Patches of the selective scan for the modules already imported."""
    from . import Patch

    patches = []
    for name in SCAN_MODULES:
        module = sys.modules.get(name)
        if module is not None and callable(getattr(module, "mamba_selective_scan", None)):
            patches.append(
                Patch(module, "mamba_selective_scan", _closed_form_scan, _closed_form_scan.__doc__)
            )
    return patches
