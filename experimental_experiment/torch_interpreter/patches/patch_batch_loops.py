"""Python loops over the batch written as operations on the whole batch.

Some models of transformers take a batch as a list of rows: ``for ts in past_values``
iterates over the first dimension of a tensor. torch.export unrolls the loop and
specializes the batch to the example's (*"Constraints violated (dimension 0 ('batch')
of input 'past_values')"*). The replacements below compute every row with the same
operations in one call: in eager mode they give the same numbers as the loop, and the
batch stays dynamic. Each patch is applied only when the model's module is already
imported, and only takes another path for the inputs the loop specializes (a tensor);
any other input (a list of series of different lengths) goes to the original.
"""

from __future__ import annotations

import sys

import torch


def _timesfm_rows(self, values: torch.Tensor, freq, window_size, fcontext_len: int):
    """TimesFM's preprocessing of a 2-D batch of series ``(batch, length)``: the last
    ``fcontext_len`` values of every row, the smallest value, the trend and residual
    rows when ``window_size`` is given (interleaved: trend then residual of each row),
    then every row left-padded with zeros or cut to ``self.context_len``, its padding
    mask (1 on the padded values, 0 on the series and the horizon) and the frequencies
    as an ``int32`` column."""
    rows = values[:, -fcontext_len:]
    smallest = torch.min(rows)
    if window_size is not None:
        padded = torch.nn.functional.pad(rows, (window_size - 1, 0), "constant", 0)
        trend = padded.unfold(-1, window_size, 1).mean(dim=-1)
        rows = torch.stack([trend, rows - trend], dim=1).reshape(-1, rows.shape[-1])
        if freq is not None:
            freq = (
                freq.repeat_interleave(2, dim=0)
                if isinstance(freq, torch.Tensor)
                else [f for f in freq for _ in range(2)]
            )
    if freq is None:
        freq = torch.zeros((rows.shape[0],), dtype=torch.int32)
    context_len, length = self.context_len, rows.shape[-1]
    padding = torch.zeros(
        (rows.shape[0], length + self.horizon_len), dtype=rows.dtype, device=rows.device
    )
    if length < context_len:
        front = context_len - length
        rows = torch.cat([rows.new_zeros((rows.shape[0], front)), rows], dim=1)
        padding = torch.cat([padding.new_ones((rows.shape[0], front)), padding], dim=1)
    elif length > context_len:
        rows = rows[:, -context_len:]
        padding = padding[:, -(context_len + self.horizon_len) :]
    if isinstance(freq, torch.Tensor):
        freq = freq[: rows.shape[0]].to(torch.int32)
    else:
        freq = torch.tensor(freq[: rows.shape[0]], dtype=torch.int32)
    return rows, padding, freq.reshape(-1, 1), smallest


def _timesfm_batched_forward(original):
    """Replaces ``TimesFmModelForPrediction.forward`` for a 2-D tensor ``past_values``
    ``(batch, length)``: the rows are cut, decomposed, padded and masked as one tensor
    (:func:`_timesfm_rows`) instead of one series at a time, then decoded as the
    original decodes them (patch after patch, the whole batch at once). A list of
    series goes to the original.

    Fixes: ``Constraints violated (dimension 0 ('batch') of input 'past_values')``:
    ``inputs = [ts[-fcontext_len:] for ts in past_values]`` iterates over the batch.
    """
    from transformers.models.timesfm import modeling_timesfm as mt
    from transformers.utils import can_return_tuple

    def batched(
        self,
        past_values,
        freq=None,
        window_size=None,
        future_values=None,
        forecast_context_len=None,
        return_forecast_on_context=False,
        truncate_negative=False,
        **kwargs,
    ):
        fcontext_len = self.context_len if forecast_context_len is None else forecast_context_len
        series, padding, inp_freq, smallest = _timesfm_rows(
            self, past_values, freq, window_size, fcontext_len
        )
        device = past_values.device
        series, padding, inp_freq = series.to(device), padding.to(device), inp_freq.to(device)
        context_len = series.shape[1]
        patch_len, horizon = self.config.horizon_length, self.horizon_len
        forecasts = []
        decoded = None
        for step in range((horizon + patch_len - 1) // patch_len):
            padding = padding[:, : series.shape[1]][:, -fcontext_len:]
            decoded = self.decoder(
                past_values=series[:, -fcontext_len:],
                past_values_padding=padding,
                freq=inp_freq,
                **kwargs,
            )
            out = self._postprocess_output(decoded.last_hidden_state, (decoded.loc, decoded.scale))
            if return_forecast_on_context and step == 0:
                on_context = out[:, :-1, : self.config.patch_length, :]
                forecasts.append(on_context.reshape(on_context.size(0), -1, on_context.size(3)))
            forecasts.append(out[:, -1, :patch_len, :])
            series = torch.concatenate([series, out[:, -1, :patch_len, 0]], axis=-1)
        end = (
            context_len - self.config.patch_length + horizon
            if return_forecast_on_context
            else horizon
        )
        full = torch.concatenate(forecasts, axis=1)[:, :end, :]
        mean = full[:, :, 0]
        if window_size is not None:
            mean = mean[0::2, ...] + mean[1::2, ...]
            full = full[0::2, ...] + full[1::2, ...]
        if truncate_negative:
            clamp = smallest >= 0
            mean = torch.where(clamp, mean.clamp_min(0.0), mean)
            full = torch.where(clamp, full.clamp_min(0.0), full)
        loss = None
        if future_values is not None:
            loss = torch.nn.functional.mse_loss(mean, future_values) + self._quantile_loss(
                full[:, :, 1:], future_values
            )
        return mt.TimesFmOutputForPrediction(
            last_hidden_state=decoded.last_hidden_state,
            attentions=decoded.attentions,
            hidden_states=decoded.hidden_states,
            mean_predictions=mean,
            full_predictions=full,
            loss=loss,
        )

    batched = can_return_tuple(batched)

    def forward(self, past_values, *args, **kwargs):
        if isinstance(past_values, torch.Tensor) and past_values.dim() == 2:
            return batched(self, past_values, *args, **kwargs)
        return original(self, past_values, *args, **kwargs)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    return forward


def get_batch_loop_patches() -> list:
    """Patches of the loops over the batch of the modules already imported."""
    from . import Patch

    patches = []
    module = sys.modules.get("transformers.models.timesfm.modeling_timesfm")
    cls = getattr(module, "TimesFmModelForPrediction", None)
    if cls is not None and "forward" in vars(cls) and "_preprocess" in vars(cls):
        patches.append(
            Patch(cls, "forward", _timesfm_batched_forward, _timesfm_batched_forward.__doc__)
        )
    return patches
