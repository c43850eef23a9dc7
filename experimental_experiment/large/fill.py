"""Fills the external data of an ONNX model from checkpoints, tensor by tensor."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass, field

import onnx
from onnx import TensorProto

from ..progress import progress_bar, progress_enabled
from ..torch_interpreter.errors import ExportError, InvalidArgumentError, UnfilledWeightsWarning
from ..torch_interpreter.result.large_model import onnx_dtype_to_torch, write_tensor
from ..xbuilder.model_container import (
    ExternalDataError,
    check_external_data,
    get_weights_metadata,
    set_weights_metadata,
)
from ..xbuilder.paired_save import PairedSave
from ..xbuilder.safe_paths import check_output_path, external_entries
from .checkpoints import CheckpointTensor, read_checkpoints
from .matching import match_names

logger = logging.getLogger(__name__)
_CHUNK = 1 << 26


@dataclass
class FillReport:
    """What :func:`fill_weights` did.

    :param matched: initializer -> (checkpoint tensor, rule): ``source`` (the weight the
        exporter recorded), ``exact``, ``underscore`` (dots to underscores), ``suffix``
    :param unfilled: initializers without data after filling
    :param unused: checkpoint tensors no initializer took
    :param ambiguous: initializer -> the checkpoint tensors it could take (none taken)
    :param mismatches: shape or dtype disagreements (an error, nothing written)
    :param written_bytes: bytes written from the checkpoints

    .. code-block:: python

        from experimental_experiment.large import fill_weights

        report = fill_weights("model.onnx", "model.safetensors")
        print(report.rules())  # number of initializers matched by each rule
        assert not report.unfilled, report.unfilled
    """

    matched: dict[str, tuple[str, str]] = field(default_factory=dict)
    unfilled: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    ambiguous: dict[str, list[str]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    written_bytes: int = 0

    def rules(self) -> dict[str, int]:
        """Number of initializers matched by each rule."""
        counts: dict[str, int] = {}
        for _, rule in self.matched.values():
            counts[rule] = counts.get(rule, 0) + 1
        return dict(sorted(counts.items()))

    def __str__(self) -> str:
        lines = [
            f"matched {len(self.matched)} initializers {self.rules()}, "
            f"{self.written_bytes} bytes written",
            f"unfilled {len(self.unfilled)}: {self.unfilled[:10]}",
            f"unused checkpoint tensors {len(self.unused)}: {self.unused[:10]}",
        ]
        lines += [f"ambiguous {k}: {v[:5]}" for k, v in list(self.ambiguous.items())[:10]]
        lines += [f"mismatch: {m}" for m in self.mismatches]
        return "\n".join(lines)


class WeightsMismatchError(ExportError, ValueError):
    """Checkpoint tensors disagree with the initializers they match (shape or dtype).

    Cause: the checkpoint given to ``fill_weights`` does not belong to the exported
    model (another configuration or dtype); nothing is written.

    Fix: export with the configuration and dtype of the checkpoint; the message lists
    the first disagreeing names with both shapes (:ref:`l-large-models`)."""

    def __init__(self, report: FillReport):
        super().__init__(
            f"{len(report.mismatches)} checkpoint tensors disagree with the model, nothing "
            "was written:\n"
            + "\n".join(report.mismatches[:20])
            + "\nCheck the checkpoint belongs to this model (same configuration and dtype)."
        )
        self.report = report


def _external(model: onnx.ModelProto) -> dict[str, tuple[TensorProto, dict]]:
    rows = {}
    for init in model.graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            rows[init.name] = (init, {e.key: e.value for e in init.external_data})
    return rows


def _mismatch(init: TensorProto, tensor: CheckpointTensor) -> str | None:
    dtype = onnx_dtype_to_torch(init.data_type)
    if tuple(init.dims) != tensor.shape or dtype != tensor.dtype:
        return (
            f"{init.name!r} is {dtype} {tuple(init.dims)} but {tensor.name!r} in "
            f"{tensor.file!r} is {tensor.dtype} {tensor.shape}"
        )
    return None


def match_checkpoints(
    model: onnx.ModelProto, checkpoints: list[str]
) -> tuple[FillReport, dict[str, CheckpointTensor]]:
    """The report of what ``checkpoints`` would fill in ``model`` (nothing written)."""
    external = _external(model)
    info = get_weights_metadata(model)
    tensors = read_checkpoints(checkpoints)
    sources = info.get("sources", {})
    matched, ambiguous = match_names({n: sources.get(n) for n in external}, list(tensors))
    report = FillReport(matched=matched, ambiguous=ambiguous)
    report.mismatches = [
        m for n, (c, _) in matched.items() if (m := _mismatch(external[n][0], tensors[c]))
    ]
    used = {c for c, _ in matched.values()}
    report.unused = sorted(set(tensors) - used)
    before = set(info.get("unfilled", []))
    report.unfilled = sorted(n for n in external if n in before and n not in matched)
    return report, tensors


def fill_weights(
    model_path: str,
    checkpoints: list[str] | str,
    *,
    output: str | None = None,
    progress: bool = True,
) -> FillReport:
    """Writes the checkpoint tensors into the external data of the model.

    Names are matched exactly first (the weight each initializer was exported from,
    then its name), then with dots as underscores, then by suffix. Disagreeing shapes or
    dtypes raise :class:`WeightsMismatchError` before anything is written. The data file
    is rewritten next to the model (``output`` or in place) through a temporary file,
    one tensor in memory at a time; initializers not matched keep their data. Model and
    data are replaced as one (the data file gets a new name, the model is renamed last).
    A data location leaving the model's folder, a checkpoint shard leaving its folder
    or an unusable ``output`` raise before any byte is read or written
    (:mod:`experimental_experiment.xbuilder.safe_paths`).

    :param model_path: the ONNX model whose weights are stored as external data
    :param checkpoints: one or several checkpoint files (``.safetensors``, a
        ``.safetensors.index.json`` index or a file saved by ``torch.save``) or
        folders holding them
    :param output: where to write the filled model, the model is replaced if None
    :param progress: shows a progress bar (bytes written) when stderr is a terminal
    :return: a :class:`FillReport` (matched, ambiguous, unused, unfilled names)

    .. code-block:: python

        from experimental_experiment.large import fill_weights

        report = fill_weights("model.onnx", ["model.safetensors"])
        print(report)
    """
    checkpoints = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    if not os.path.isfile(model_path):
        raise InvalidArgumentError(f"no model {model_path!r}")
    output = output or model_path
    check_output_path(output)
    model = onnx.load(model_path, load_external_data=False)
    src_folder = os.path.dirname(os.path.abspath(model_path))
    external_entries(model, src_folder)  # every location stays in the model's folder
    report, tensors = match_checkpoints(model, checkpoints)
    if report.mismatches:
        raise WeightsMismatchError(report)
    _check_data_files(model, src_folder)
    total = sum(
        int(meta.get("length", 0))
        for name, (_, meta) in _external(model).items()
        if name in report.matched
    )
    with progress_bar(total, "fill_weights", unit="B", enabled=progress_enabled(progress)) as bar:
        _rewrite(
            model,
            src_folder,
            output,
            os.path.abspath(output) == os.path.abspath(model_path),
            report,
            tensors,
            bar,
        )
    logger.info("fill_weights: %s", report)
    _warn_unfilled(report, model)
    return report


def _warn_unfilled(report: FillReport, model: onnx.ModelProto) -> None:
    """Warns (:class:`UnfilledWeightsWarning`) naming the initializers still without
    data (and the weights they were exported from): the model cannot run yet."""
    if not report.unfilled:
        return
    sources = get_weights_metadata(model).get("sources", {})
    names = [
        f"{n!r}" + (f" ({sources[n]})" if sources.get(n) not in (None, n) else "")
        for n in report.unfilled[:10]
    ]
    more = f" and {len(report.unfilled) - 10} more" if len(report.unfilled) > 10 else ""
    warnings.warn(
        f"fill_weights left {len(report.unfilled)} initializer(s) without data: "
        f"{', '.join(names)}{more}. No checkpoint holds them (non-persistent buffers such "
        "as rotary 'inv_freq' are in no state dict): the model gives wrong results until "
        "they are filled. Export the model with these buffers built (not on the meta "
        "device), or pass a checkpoint holding them.",
        UnfilledWeightsWarning,
        stacklevel=2,
    )


def _check_data_files(model, folder) -> None:
    """A missing data file is fine when no tensor in it has data yet; an existing one
    must hold every tensor (a truncated file is an error)."""
    unfilled = set(get_weights_metadata(model).get("unfilled", []))
    entries = external_entries(model, folder)
    missing = {e.location for e in entries if not os.path.isfile(e.path) and e.name not in unfilled}
    if missing:
        raise ExternalDataError(
            f"data files {sorted(missing)} of the model are missing from {folder!r}"
        )
    if all(os.path.isfile(e.path) for e in entries):
        check_external_data(model, folder)


def _rewrite(model, src_folder, output, in_place, report: FillReport, tensors, bar) -> None:
    """Writes the data files and the model as one (see
    :class:`PairedSave <experimental_experiment.xbuilder.paired_save.PairedSave>`)."""
    external = _external(model)
    entries = {e.name: e for e in external_entries(model, src_folder)}
    locations = sorted({info["location"] for _, info in external.values()})
    if not in_place and len(locations) > 1:
        raise InvalidArgumentError(
            "a model with several data files is filled in place (output=None)"
        )
    index = {loc: i for i, loc in enumerate(locations)}
    info = get_weights_metadata(model)
    unfilled = set(info.get("unfilled", []))
    with PairedSave(output) as save:
        for loc in locations:
            f = save.data_file(index[loc])
            old = next(e.path for e in entries.values() if e.location == loc)
            src = open(old, "rb") if os.path.isfile(old) else None
            try:
                end = _write_location(f, src, loc, external, report, tensors, unfilled, bar)
            finally:
                if src is not None:
                    src.close()
            f.truncate(end)
        info["unfilled"] = sorted(unfilled)
        sources = dict(info.get("sources", {}))
        sources.update({n: c for n, (c, _) in report.matched.items()})
        info["sources"] = dict(sorted(sources.items()))
        set_weights_metadata(model, info)
        rows = [
            (init, index[meta["location"]], entries[name].offset, entries[name].length)
            for name, (init, meta) in external.items()
        ]
        save.commit(model, rows, unfilled)
    report.unfilled = sorted(unfilled)


def _write_location(f, src, loc, external, report, tensors, unfilled, bar) -> int:
    """Writes every tensor stored in ``loc``: from the checkpoint when matched, copied
    from the old data file when it had data, a hole otherwise. Returns the file size."""
    end = 0
    rows = sorted(
        ((int(m.get("offset", 0)), n, m) for n, (_, m) in external.items() if m["location"] == loc)
    )
    for offset, name, meta in rows:
        if "length" not in meta:
            raise ExternalDataError(f"initializer {name!r} has no external data length")
        length = int(meta["length"])
        end = max(end, offset + length)
        f.seek(offset)
        if name in report.matched:
            bar.set_description(f"fill_weights: {name}")
            write_tensor(tensors[report.matched[name][0]].load(), f)
            report.written_bytes += length
            bar.update(length)
            unfilled.discard(name)
        elif name not in unfilled and src is not None:
            src.seek(offset)
            for start in range(0, length, _CHUNK):
                f.write(src.read(min(_CHUNK, length - start)))
        if name not in unfilled and f.tell() != offset + length:
            raise InvalidArgumentError(
                f"{name!r}: {f.tell() - offset} bytes written, "
                f"{length} expected (truncated data file {loc!r}?)"
            )
    return end
