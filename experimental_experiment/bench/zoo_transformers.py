"""The third exporter of the model zoo: transformers' own ``OnnxExporter``
(``transformers.exporters``, built on ``torch.onnx.export`` with its own patches), called
the way its documentation says: ``OnnxExporter().export(model, inputs, OnnxConfig(...))``
with explicit ``dynamic_shapes`` marking the axes that vary (the ones the two other
exporters get), its ``onnx_ir`` model turned into a ``ModelProto``.

Its ONNX inputs and outputs are named after the path of each tensor in the inputs and
in what the model returns (``past_key_values.layers.0.keys``, an ``input.`` or
``output.`` prefix on a name both sides have), and it drops the inputs the graph does
not read: the zoo's check feeds and compares it by name (``named_feeds``,
``named_expected``), not by position.

.. code-block:: python

    from experimental_experiment.bench.zoo_cases import ZooCase, build_case
    from experimental_experiment.bench.zoo_transformers import export_transformers

    data = build_case(ZooCase("bert", "masked-lm"))
    onx = export_transformers(data["model"], data["inputs"], data["dynamic_shapes"])
"""

from __future__ import annotations

import copy
import os
import traceback
from typing import Any

import numpy as np
import torch

from ..errors import ExportError

#: folders of the frames that show the export reached tracing (a failure from there on
#: is the exporter's failure, not a refusal)
_TRACING = (
    os.path.join("torch", "export"),
    os.path.join("torch", "_export"),
    os.path.join("torch", "_dynamo"),
    os.path.join("torch", "onnx"),
    os.path.join("torch", "fx"),
)
_EXPORTERS_DIR = os.path.join("transformers", "exporters")


class TransformersExportRefusedError(ExportError):
    """transformers' ``OnnxExporter`` refused a case before tracing it: a check of its
    own (missing or outdated package, an input it does not take such as ``labels``, a
    configuration it rejects) raised. The zoo writes the case as ``skip`` with this
    reason, not as a failure.

    Cause: the innermost frame of the error is in ``transformers/exporters`` and no
    frame reached ``torch.export``, ``torch._dynamo``, ``torch.fx`` or ``torch.onnx``.

    Fix: nothing to fix in the exporter compared; follow the message of transformers
    (install the package it names, remove the input it refuses)."""


def refused_before_tracing(e: BaseException) -> bool:
    """True when ``e`` was raised by transformers' exporter itself before any tracing:
    the innermost frame is in ``transformers/exporters`` and no frame is in
    torch's export, dynamo, fx or onnx packages."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or _EXPORTERS_DIR not in frames[-1].filename:
        return False
    return not any(part in f.filename for f in frames for part in _TRACING)


def _dims(spec) -> Any:
    """``{axis: name}`` to ``{axis: Dim.DYNAMIC}``; None stays None (a static tensor)."""
    if isinstance(spec, dict):
        return {k: torch.export.Dim.DYNAMIC for k, v in spec.items() if isinstance(v, str)}
    return spec


def _our_leaves(value) -> list[torch.Tensor]:
    """The tensors of ``value`` in the order the zoo's dynamic shapes list them (this
    package's cache flattening, the one ``to_onnx`` uses)."""
    from ..torch_interpreter.patches.cache_registration import register_cache_classes

    with register_cache_classes():
        return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def transformers_dynamic_shapes(model, inputs: dict, dynamic_shapes: dict) -> dict:
    """The zoo's dynamic shapes (dimension names) written for transformers' exporter:
    ``Dim.DYNAMIC`` for the named axes; for a cache, one entry per tensor in the order
    transformers flattens it (its own pytree registration), matched with the zoo's
    order by tensor identity. A cache the zoo cannot flatten gets ``Dim.AUTO`` on every
    axis (what ``OnnxConfig(dynamic=True)`` gives every input)."""
    from transformers.exporters.exporter_dynamo import (
        get_auto_dynamic_shapes,
        register_cache_pytrees_for_model,
    )

    register_cache_pytrees_for_model(model)  # the exporter registers them the same way
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        spec = dynamic_shapes.get(name)
        if isinstance(value, torch.Tensor) or value is None or not isinstance(spec, (list, tuple)):
            out[name] = _dims(spec)
            continue
        theirs = [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
        try:
            ours = _our_leaves(value)
        except Exception:  # a cache this package does not flatten
            out[name] = get_auto_dynamic_shapes(value)
            continue
        by_id = {id(t): s for t, s in zip(ours, spec)}
        if len(ours) != len(spec) or any(id(t) not in by_id for t in theirs):
            out[name] = get_auto_dynamic_shapes(value)
            continue
        out[name] = [_dims(by_id[id(t)]) for t in theirs]
    return out


def export_transformers(model, inputs: dict, dynamic_shapes: dict):
    """Exports ``model`` with ``OnnxExporter().export(model, inputs, OnnxConfig(dynamic=True,
    dynamic_shapes=...))`` and returns the ``ModelProto``. Raises
    ``TransformersExportRefusedError`` when the exporter refuses the case before
    tracing it, and lets any other error through.

    :param model: the model (a ``PreTrainedModel`` or a module)
    :param inputs: the forward's keyword arguments (copied, the exporter mutates them)
    :param dynamic_shapes: the zoo's dynamic shapes, dimension names per axis
    :return: ``onnx.ModelProto``
    """
    import onnx_ir
    from transformers.exporters import OnnxConfig, OnnxExporter

    inputs = copy.deepcopy(inputs)
    try:
        exporter = OnnxExporter()
        config = OnnxConfig(
            dynamic=True, dynamic_shapes=transformers_dynamic_shapes(model, inputs, dynamic_shapes)
        )
        exported = exporter.export(model, inputs, config)
    except Exception as e:
        if refused_before_tracing(e):
            raise TransformersExportRefusedError(
                f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            ) from e
        raise
    return onnx_ir.to_proto(exported.program)


def named_feeds(sess, inputs: dict) -> dict[str, np.ndarray]:
    """Feeds by name for a model exported by transformers' exporter: each ONNX input
    is the tensor at its path in ``inputs`` (the exporter's own lookup); raises
    ``ValueError`` when an input has no tensor."""
    from transformers.exporters.utils import onnx_inputs

    names = [i.name for i in sess.get_inputs()]
    found = onnx_inputs(names, inputs)
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"ONNX inputs {missing} have no tensor in {list(inputs)}")
    return {n: found[n].detach().cpu().numpy() for n in names}


def named_expected(sess, model, inputs: dict) -> list[torch.Tensor]:
    """Eager outputs (a run on a copy of ``inputs``, no patch) in the order of the ONNX
    outputs, matched by path; raises ``AssertionError`` when the two sets of outputs
    differ (the zoo's *number of outputs differs*)."""
    from transformers.exporters.utils import get_leaf_tensors

    with torch.no_grad():
        leaves = get_leaf_tensors(model(**copy.deepcopy(inputs)))
    names = [o.name for o in sess.get_outputs()]
    paths = [n.removeprefix("output.") for n in names]
    unknown = [n for n, p in zip(names, paths) if p not in leaves]
    if unknown or len(paths) != len(leaves):
        missing = sorted(set(leaves) - set(paths))
        raise AssertionError(
            f"{len(names)} ONNX outputs, {len(leaves)} eager outputs "
            f"(ONNX only: {unknown[:3]}, eager only: {missing[:3]})"
        )
    return [leaves[p] for p in paths]


__all__ = [
    "TransformersExportRefusedError",
    "export_transformers",
    "named_expected",
    "named_feeds",
    "refused_before_tracing",
    "transformers_dynamic_shapes",
]
