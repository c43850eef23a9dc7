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

import contextvars
import inspect
import sys

import torch


def _timesfm_rows(
    self, values: torch.Tensor, freq, window_size, fcontext_len: int, context_len=None
):
    """TimesFM's preprocessing of a 2-D batch of series ``(batch, length)``: the last
    ``fcontext_len`` values of every row, the smallest value, the trend and residual
    rows when ``window_size`` is given (interleaved: trend then residual of each row),
    then every row left-padded with zeros or cut to ``context_len`` (by default
    ``self.context_len``), its padding mask (1 on the padded values, 0 on the series
    and the horizon) and the frequencies as an ``int32`` column (zeros when ``freq`` is
    None)."""
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
    if context_len is None:
        context_len = self.context_len
    # left-padded with context_len zeros (a padding mask of ones), then cut to the last
    # context_len values (context_len + horizon for the mask): the values of the
    # original's padding or cut, without a test on the length (one exported length
    # stays valid for shorter and longer series)
    n, length = rows.shape[0], rows.shape[-1]
    rows = torch.cat([rows.new_zeros((n, context_len)), rows], dim=1)[:, -context_len:]
    padding = torch.cat(
        [rows.new_ones((n, context_len)), rows.new_zeros((n, length + self.horizon_len))],
        dim=1,
    )[:, -(context_len + self.horizon_len) :]
    if isinstance(freq, torch.Tensor):
        freq = freq[: rows.shape[0]].to(torch.int32)
    else:
        freq = torch.tensor(freq[: rows.shape[0]], dtype=torch.int32)
    return rows, padding, freq.reshape(-1, 1), smallest


def _batched_when_2d(original, batched):
    """A ``forward(self, past_values, ...)`` calling ``batched`` for a 2-D tensor
    ``past_values`` (a batch of series of one length), ``original`` otherwise."""

    def forward(self, past_values, *args, **kwargs):
        if isinstance(past_values, torch.Tensor) and past_values.dim() == 2:
            return batched(self, past_values, *args, **kwargs)
        return original(self, past_values, *args, **kwargs)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    forward.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    return forward


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

    return _batched_when_2d(original, can_return_tuple(batched))


def _timesfm2_5_batched_forward(original):
    """Replaces ``TimesFm2_5ModelForPrediction.forward`` for a 2-D tensor
    ``past_values`` ``(batch, length)``: the rows are cut to the forecast context,
    decomposed, left-padded and masked as one tensor (:func:`_timesfm_rows`, padded to
    the forecast context as the original pads them) instead of one series at a time,
    then normalized, decoded (twice with the flip invariance) and projected as the
    original does it, the whole batch at once. A list of series goes to the original.

    Fixes: ``Constraints violated (dimension 0 ('batch') of input 'past_values')``:
    ``inputs = [ts[-forecast_context_len:] for ts in past_values]`` iterates over the
    batch, and so does ``_preprocess``.
    """
    from transformers.models.timesfm2_5 import modeling_timesfm2_5 as mt
    from transformers.utils import can_return_tuple

    def flip_quantiles(x):
        # the mean stays, the quantiles are reversed (those of -x)
        return torch.cat([x[..., :1], torch.flip(x[..., 1:], dims=(-1,))], dim=-1)

    def batched(
        self,
        past_values,
        window_size=None,
        future_values=None,
        forecast_context_len=None,
        truncate_negative=None,
        force_flip_invariance=None,
        **kwargs,
    ):
        config, revin = self.config, self.model._revin
        fcontext_len = forecast_context_len or self.context_len
        if truncate_negative is None:
            truncate_negative = config.infer_is_positive
        if force_flip_invariance is None:
            force_flip_invariance = config.force_flip_invariance
        series, padding, _, smallest = _timesfm_rows(
            self, past_values, None, window_size, fcontext_len, context_len=fcontext_len
        )
        series, padding = series.to(past_values.device), padding.to(past_values.device)
        mu = series.mean(dim=1, keepdim=True)
        sigma = series.std(dim=1, keepdim=True)
        normalized = revin(series, mu, sigma, reverse=False)
        point, spreads, decoded = self._decode_and_project(normalized, padding, **kwargs)
        if force_flip_invariance:
            flipped_point, flipped_spreads, _ = self._decode_and_project(
                -normalized, padding, **kwargs
            )
            point = (point - flip_quantiles(flipped_point)) / 2
            spreads = (spreads - flip_quantiles(flipped_spreads)) / 2
        horizon = min(self.horizon_len, point.shape[1])
        forecast = point[:, :horizon, :].clone()
        median = min(config.decode_index, forecast.shape[-1] - 1)
        if config.use_continuous_quantile_head:
            h = min(horizon, spreads.shape[1])
            # every quantile but the median: its spread around the median forecast
            for q in range(1, min(len(config.quantiles) + 1, forecast.shape[-1])):
                if q != median:
                    forecast[:, :h, q] = (
                        spreads[:, :h, q] - spreads[:, :h, median] + forecast[:, :h, median]
                    )
        full = revin(forecast, mu, sigma, reverse=True)
        mean = full[:, :, min(config.decode_index, full.shape[-1] - 1)]
        if window_size is not None:
            mean = mean[0::2, ...] + mean[1::2, ...]
            full = full[0::2, ...] + full[1::2, ...]
        if truncate_negative:
            zero = torch.zeros(1, device=mean.device, dtype=mean.dtype)
            clamp = (smallest >= 0).to(mean.device)
            mean = torch.where(clamp, torch.maximum(mean, zero), mean)
            full = torch.where(clamp, torch.maximum(full, zero), full)
        loss = None
        if future_values is not None:
            predicted = forecast[:, : future_values.shape[1]]
            targets = revin(future_values, mu, sigma, reverse=False)
            index = min(config.decode_index, predicted.shape[-1] - 1)
            loss = torch.nn.functional.mse_loss(predicted[:, :, index], targets)
            others = [i for i in range(predicted.shape[-1]) if i != index]
            if others:
                others = torch.tensor(others, device=predicted.device, dtype=torch.long)
                loss = loss + self._quantile_loss(
                    torch.index_select(predicted, dim=-1, index=others), targets
                )
        return mt.TimesFm2_5OutputForPrediction(
            last_hidden_state=decoded.last_hidden_state,
            hidden_states=decoded.hidden_states,
            attentions=decoded.attentions,
            mean_predictions=mean,
            full_predictions=full,
            loss=loss,
        )

    return _batched_when_2d(original, can_return_tuple(batched))


def _float_row(*values) -> torch.Tensor:
    """A float32 row of sizes, some symbolic (``torch.tensor`` would make them
    constants): the same numbers as ``torch.tensor([values])``."""
    return torch.stack([torch.scalar_tensor(v, dtype=torch.float32) for v in values])[None]


def _superpoint_keypoints(decoder, encoded: torch.Tensor):
    """SuperPoint's keypoints of every image at once: the pixels whose score (after the
    non-maximum suppression) is above the threshold and which are not too close to the
    border, in raster order, or the ``max_keypoints`` best ones by decreasing score for
    an image that has more; padded with zeros up to the largest number of keypoints of
    the batch (data-dependent). Returns the ``(x, y)`` keypoints in pixels, their scores
    and the mask of the keypoints that are not padding."""
    scores = decoder._get_pixel_scores(encoded)
    batch, height, width = scores.shape
    flat = scores.reshape(batch, -1)
    position = torch.arange(flat.shape[1], device=flat.device)
    y, x = position // width, position % width
    border = decoder.border_removal_distance
    # the border is measured on 8 times the size of the score map, as the original does
    keep = (flat > decoder.keypoint_threshold) & (y >= border) & (x >= border)
    keep = keep & (y < height * 8 - border) & (x < width * 8 - border)
    count = keep.sum(dim=1)
    # positions of the kept pixels first, in raster order (a stable sort)
    order = torch.argsort((~keep).to(torch.int32), dim=1, stable=True)
    if decoder.max_keypoints >= 0:
        k = decoder.max_keypoints
        ranked = torch.argsort(
            torch.where(keep, flat, torch.full_like(flat, float("-inf"))),
            dim=1,
            descending=True,
            stable=True,
        )
        order = torch.where((count > k)[:, None], ranked, order)
        count = count.clamp(max=k)
    n = count.max().item()
    torch._check(n >= 0)
    torch._check(n <= flat.shape[1])
    order = order[:, :n]
    valid = torch.arange(n, device=flat.device)[None, :] < count[:, None]
    keypoints = torch.stack([order % width, order // width], dim=-1).to(scores.dtype)
    keypoints = torch.where(valid[..., None], keypoints, torch.zeros_like(keypoints))
    kept = torch.where(valid, flat.gather(1, order), torch.zeros_like(order, dtype=flat.dtype))
    return keypoints, kept, valid


def _superpoint_descriptors(decoder, encoded, keypoints, valid, scale: int = 8):
    """SuperPoint's descriptors of every keypoint of every image at once: the
    normalized descriptor map sampled (bilinear, corners aligned) at each keypoint and
    normalized again, zeros for the padding."""
    descriptors = decoder.conv_descriptor_b(decoder.relu(decoder.conv_descriptor_a(encoded)))
    descriptors = torch.nn.functional.normalize(descriptors, p=2, dim=1)
    batch, channels, height, width = descriptors.shape
    grid = keypoints - scale / 2 + 0.5
    half = scale / 2 + 0.5
    grid = grid / _float_row(width * scale - half, height * scale - half).to(grid)
    grid = (grid * 2 - 1).view(batch, 1, -1, 2)
    sampled = torch.nn.functional.grid_sample(
        descriptors, grid, mode="bilinear", align_corners=True
    )
    sampled = torch.nn.functional.normalize(sampled.reshape(batch, channels, -1), p=2, dim=1)
    sampled = sampled.transpose(1, 2)
    return torch.where(valid[..., None], sampled, torch.zeros_like(sampled))


def _superpoint_batched_forward(original):
    """Replaces ``SuperPointForKeypointDetection.forward``: the keypoints, scores and
    descriptors of every image are computed on the whole batch
    (:func:`_superpoint_keypoints`, :func:`_superpoint_descriptors`) instead of one
    image at a time; the number of keypoints (the largest of the batch) stays a
    data-dependent size, the image size stays symbolic.

    Fixes: ``Constraints violated (dimension 0 ('batch') of input 'pixel_values')``:
    ``[self.keypoint_decoder(h[None, ...]) for h in last_hidden_state]`` iterates over
    the batch (and ``torch.tensor([width, height])`` makes the image size a constant).
    """
    from transformers.models.superpoint import modeling_superpoint as ms

    def forward(
        self, pixel_values, labels=None, output_hidden_states=None, return_dict=None, **kwargs
    ):
        if labels is not None:  # the original refuses it
            return original(self, pixel_values, labels, output_hidden_states, return_dict, **kwargs)
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if return_dict is None:
            return_dict = self.config.return_dict
        pixel_values = self.extract_one_channel_pixel_values(pixel_values)
        _, _, height, width = pixel_values.shape
        encoder_outputs = self.encoder(
            pixel_values, output_hidden_states=output_hidden_states, return_dict=return_dict
        )
        encoded = encoder_outputs[0]
        keypoints, scores, valid = _superpoint_keypoints(self.keypoint_decoder, encoded)
        descriptors = _superpoint_descriptors(self.descriptor_decoder, encoded, keypoints, valid)
        keypoints = keypoints / _float_row(width, height).to(keypoints.device)
        mask = valid.to(torch.int32)
        hidden_states = encoder_outputs[1] if output_hidden_states else None
        if not return_dict:
            values = [keypoints, scores, descriptors, mask, hidden_states]
            return tuple(v for v in values if v is not None)
        return ms.SuperPointKeypointDescriptionOutput(
            loss=None,
            keypoints=keypoints,
            scores=scores,
            descriptors=descriptors,
            mask=mask,
            hidden_states=hidden_states,
        )

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    return forward


def _fastspeech2_length_regulator(original):
    """Replaces FastSpeech2Conformer's ``length_regulator``: every row repeats its
    token embeddings by their durations at once, frame ``t`` of a row taking the token
    whose cumulated duration first exceeds ``t`` (the ``repeat_interleave`` of the
    original), padded with zeros up to the longest row (a data-dependent size); rows
    all of zero duration get a duration of 1 in place, as in the original.

    Fixes: ``Could not guard on data-dependent expression Eq(u0, 1)``: ``for i, ... in
    enumerate(zip(encoded_embeddings, duration_labels))`` iterates over the batch and
    ``repeat_interleave`` gives each row a data-dependent length.
    """

    def length_regulator(encoded_embeddings, duration_labels, speaking_speed=1.0):
        if speaking_speed <= 0:
            raise ValueError("`speaking_speed` must be greater than 0.")
        if speaking_speed != 1.0:
            duration_labels = torch.round(duration_labels.float() * speaking_speed).long()
        rows = duration_labels.sum(dim=1)
        duration_labels.masked_fill_(((rows.sum() == 0) & rows.eq(0))[:, None], 1)
        total = duration_labels.sum(dim=1)
        frames = total.max().item()
        torch._check(frames >= 0)
        step = torch.arange(frames, device=duration_labels.device)
        ends = duration_labels.cumsum(dim=1)
        token = (ends[:, None, :] <= step[None, :, None]).sum(dim=-1)
        token = token.clamp(max=encoded_embeddings.shape[1] - 1)
        index = token[..., None].expand(-1, -1, encoded_embeddings.shape[2])
        hidden = encoded_embeddings.gather(1, index).to(torch.float)
        valid = (step[None, :] < total[:, None])[..., None]
        return torch.where(valid, hidden, torch.zeros_like(hidden))

    length_regulator.__wrapped__ = original  # type: ignore[attr-defined]
    return length_regulator


def _fastspeech2_positions_of_any_length(original):
    """Replaces ``FastSpeech2ConformerRelPositionalEncoding.forward`` for a symbolic
    length (during the capture): the relative positions ``-(length - 1)`` to
    ``length - 1`` are computed for that length by the model's own ``extend_pos_enc``
    (the rows the original slices from its table of 5000 positions, or computes when
    the sequence is longer), the table kept in the module is left as it is. A length
    known in eager mode goes to the original.

    Fixes: ``Could not guard on data-dependent expression 2*u0 - 1 <= 9999``: the
    decoder's length is the number of frames the durations give (data-dependent), and
    the original compares it with the length of its table.
    """

    def forward(self, feature_representation):
        if not isinstance(feature_representation.size(1), torch.SymInt):
            return original(self, feature_representation)
        positions = self.extend_pos_enc(feature_representation)
        hidden_states = feature_representation * self.input_scale
        return self.dropout(hidden_states), self.dropout(positions)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    return forward


def _slanext_all_steps(original):
    """Replaces ``SLANeXtSLAHead.forward`` and ``SLANetSLAHead.forward`` (the same
    greedy decoding of the table structure)
    when neither its attentions nor its hidden states are asked for: the
    ``max_text_length + 1`` steps run in a ``scan`` (the same step: attention GRU cell,
    generator, ``argmax`` fed back as a one-hot), then the predictions are cut after
    the first step at which every row has produced the end token, where the original
    loop stops (a data-dependent number of steps). The steps are sequential, so the
    kept ones are those of the original; the extra ones are computed and dropped.

    Fixes: ``Could not guard on data-dependent expression Eq(u0, 1)``: ``if
    torch.stack(structure_ids_list, dim=1).eq(end).any(-1).all(): break`` decides the
    number of steps from the predictions.
    """

    def forward(self, hidden_states, targets=None, **kwargs):
        config = self.config
        asked = [kwargs.get(k, getattr(config, k, False)) for k in _RECORDED_OUTPUTS]
        if any(asked):
            return original(self, hidden_states, targets, **kwargs)
        from transformers.modeling_outputs import BaseModelOutput

        from .patch_recurrences import _scan

        batch = hidden_states.shape[0]
        features = hidden_states.new_zeros((batch, config.hidden_size), dtype=torch.float32)
        predicted = torch.zeros((batch,), dtype=torch.long, device=hidden_states.device)
        memory = hidden_states.float()
        cell, generator = self.structure_attention_cell, self.structure_generator
        channels, end = config.out_channels, config.out_channels - 1
        ticks = torch.zeros((config.max_text_length + 1, 1), device=hidden_states.device)

        def step(carry, tick):
            features, predicted = carry
            embedding = torch.nn.functional.one_hot(predicted, channels).float()
            features, _ = cell(features, memory, embedding)
            logits = generator(features)
            predicted = logits.argmax(dim=1)
            return (features, predicted), (logits, predicted.clone())

        _, (logits, ids) = _scan()(step, (features, predicted), ticks)
        # logits (steps, batch, channels), ids (steps, batch)
        done = ids.eq(end).to(torch.int64).cumsum(dim=0).gt(0).all(dim=1)
        # steps kept: up to the first step where every row has ended, all otherwise
        kept = torch.where(done.any(), done.to(torch.int64).argmax() + 1, done.shape[0])
        n = kept.item()
        torch._check(n >= 1)
        torch._check(n <= done.shape[0])
        preds = logits[:n].transpose(0, 1)
        structure_preds = torch.nn.functional.softmax(preds, dim=-1, dtype=torch.float32)
        return BaseModelOutput(last_hidden_state=structure_preds.to(hidden_states.dtype))

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    return forward


#: outputs the original SLANeXt head records step by step (hooks on its cell)
_RECORDED_OUTPUTS = ("output_attentions", "output_hidden_states")


#: True while ``ViltModel.forward`` runs on a call given no ``pixel_mask``: the mask
#: it creates (``torch.ones``) covers every pixel of every image
_VILT_FULL_MASK = contextvars.ContextVar("vilt_full_mask", default=False)


def _vilt_model_marks_full_masks(original):
    """Replaces ``ViltModel.forward`` by the original run with :data:`_VILT_FULL_MASK`
    set when the call gives no ``pixel_mask`` (the model then makes one of ones): the
    patched ``visual_embed`` (:func:`_vilt_visual_embed_of_full_masks`) knows every
    patch of every image is valid. The computation is the original's.

    Fixes, with it: ``Could not guard on data-dependent expression u0 > 1`` (the size of
    every image read from the values of the mask made of ones).
    """
    signature = inspect.signature(original)

    def forward(self, *args, **kwargs):
        arguments = signature.bind_partial(self, *args, **kwargs).arguments
        token = _VILT_FULL_MASK.set(arguments.get("pixel_mask") is None)
        try:
            return original(self, *args, **kwargs)
        finally:
            _VILT_FULL_MASK.reset(token)

    forward.__wrapped__ = original  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    forward.__signature__ = signature  # type: ignore[attr-defined]
    return forward


def _vilt_visual_embed_of_full_masks(original):
    """Replaces ``ViltEmbeddings.visual_embed`` when the pixel mask is the full one
    ``ViltModel`` creates (:func:`_vilt_model_marks_full_masks`) and
    ``max_image_length`` is negative (every patch kept, the configuration's default):
    the position embeddings are interpolated once to the grid of patches, and the
    patches stay in their order. The original interpolates them image by image to the
    size the mask gives each image (the same grid for a full mask) and shuffles the
    patches with ``torch.multinomial`` (a random permutation, the same patches with
    their positions); keeping their order is one of its outcomes, and the encoder, which
    attends to every patch, gives the same output for any order (up to rounding). Any
    other mask or length goes to the original.

    Fixes: ``Could not guard on data-dependent expression u0 > 1``: ``for h, w in
    zip(x_h, x_w)`` reads each image's size from the mask's values, and the patches
    are selected image by image.
    """

    def visual_embed(self, pixel_values, pixel_mask, max_image_length=200):
        if not (
            _VILT_FULL_MASK.get() and isinstance(max_image_length, int) and max_image_length < 0
        ):
            return original(self, pixel_values, pixel_mask, max_image_length)
        x = self.patch_embeddings(pixel_values)
        batch_size, num_channels, height, width = x.shape
        patch_dim = self.config.image_size // self.config.patch_size
        spatial_pos = self.position_embeddings[:, 1:, :].transpose(1, 2)
        spatial_pos = spatial_pos.view(1, num_channels, patch_dim, patch_dim)
        pos_embed = torch.nn.functional.interpolate(
            spatial_pos, size=(height, width), mode="bilinear", align_corners=True
        )
        pos_embed = pos_embed.expand(batch_size, -1, -1, -1).flatten(2).transpose(1, 2)
        x = x.flatten(2).transpose(1, 2)
        rows = torch.arange(height, device=x.device)
        cols = torch.arange(width, device=x.device)
        patch_index = torch.stack(torch.meshgrid(rows, cols, indexing="ij"), dim=-1)
        patch_index = patch_index.reshape(1, -1, 2).expand(batch_size, -1, -1)
        cls_tokens = self.cls_token.expand(batch_size, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        first = self.position_embeddings[:, 0, :][:, None, :].expand(batch_size, -1, -1)
        x = self.dropout(x + torch.cat((first, pos_embed), dim=1))
        x_mask = torch.ones(x.shape[:2], dtype=torch.int64, device=x.device)
        return x, x_mask, (patch_index, (height, width))

    visual_embed.__wrapped__ = original  # type: ignore[attr-defined]
    return visual_embed


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
    module = sys.modules.get("transformers.models.timesfm2_5.modeling_timesfm2_5")
    cls = getattr(module, "TimesFm2_5ModelForPrediction", None)
    if cls is not None and "forward" in vars(cls) and "_decode_and_project" in vars(cls):
        patches.append(
            Patch(cls, "forward", _timesfm2_5_batched_forward, _timesfm2_5_batched_forward.__doc__)
        )
    module = sys.modules.get("transformers.models.superpoint.modeling_superpoint")
    cls = getattr(module, "SuperPointForKeypointDetection", None)
    if cls is not None and "forward" in vars(cls) and hasattr(module, "top_k_keypoints"):
        patches.append(
            Patch(cls, "forward", _superpoint_batched_forward, _superpoint_batched_forward.__doc__)
        )
    module = sys.modules.get(
        "transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer"
    )
    if module is not None and callable(getattr(module, "length_regulator", None)):
        patches.append(
            Patch(
                module,
                "length_regulator",
                _fastspeech2_length_regulator,
                _fastspeech2_length_regulator.__doc__,
            )
        )
    cls = getattr(module, "FastSpeech2ConformerRelPositionalEncoding", None)
    if cls is not None and "forward" in vars(cls) and "extend_pos_enc" in vars(cls):
        patches.append(
            Patch(
                cls,
                "forward",
                _fastspeech2_positions_of_any_length,
                _fastspeech2_positions_of_any_length.__doc__,
            )
        )
    # SLANet's head is SLANeXt's (the same decoding loop)
    for name, head in (("slanext", "SLANeXtSLAHead"), ("slanet", "SLANetSLAHead")):
        module = sys.modules.get(f"transformers.models.{name}.modeling_{name}")
        cls = getattr(module, head, None)
        if cls is not None and "forward" in vars(cls):
            patches.append(Patch(cls, "forward", _slanext_all_steps, _slanext_all_steps.__doc__))
    module = sys.modules.get("transformers.models.vilt.modeling_vilt")
    model = getattr(module, "ViltModel", None)
    embeddings = getattr(module, "ViltEmbeddings", None)
    if model is not None and embeddings is not None and "visual_embed" in vars(embeddings):
        patches.append(
            Patch(
                model,
                "forward",
                _vilt_model_marks_full_masks,
                _vilt_model_marks_full_masks.__doc__,
            )
        )
        patches.append(
            Patch(
                embeddings,
                "visual_embed",
                _vilt_visual_embed_of_full_masks,
                _vilt_visual_embed_of_full_masks.__doc__,
            )
        )
    return patches
