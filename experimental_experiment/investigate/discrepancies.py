"""Finds the first intermediate value where an ONNX export and the torch model differ.

The exporter writes, in every ONNX node's ``metadata_props``, the FX node it comes
from and the user's line (:mod:`experimental_experiment.torch_interpreter.convert.node_metadata`).
:func:`find_discrepancies` runs the captured FX graph (every intermediate value kept)
and the ONNX model (every tagged value made an output, or the reference evaluator's
intermediate results), then walks the FX nodes in order and stops at the first value
whose difference exceeds the tolerance.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch

from ..torch_interpreter.convert.node_metadata import FX_NODE, node_origin

logger = logging.getLogger(__name__)


@dataclass
class ValueStats:
    """Shape, dtype and statistics of one value."""

    shape: tuple
    dtype: str
    min: float = float("nan")
    max: float = float("nan")
    mean: float = float("nan")
    std: float = float("nan")

    @classmethod
    def of(cls, value: np.ndarray) -> ValueStats:
        v = np.asarray(value)
        if v.size == 0 or v.dtype.kind not in "biuf":
            return cls(tuple(v.shape), str(v.dtype))
        f = v.astype(np.float64)
        return cls(
            tuple(v.shape),
            str(v.dtype),
            float(f.min()),
            float(f.max()),
            float(f.mean()),
            float(f.std()),
        )


@dataclass
class Comparison:
    """One FX node compared with the ONNX value computing it.

    :param fx_node: name of the FX node
    :param aten_op: its target (the aten operator)
    :param onnx_value: name of the ONNX value computing it
    :param onnx_nodes: the ONNX nodes tagged with that FX node
    :param source: the user's line the FX node comes from
    :param max_abs_diff: largest absolute difference between both values
    :param ok: within the tolerance
    :param torch_stats: statistics of the torch value
    :param onnx_stats: statistics of the ONNX value

    .. code-block:: python

        report = find_discrepancies(model, (x,))
        for c in report.comparisons:
            print(c.fx_node, c.aten_op, c.onnx_value, c.max_abs_diff, c.ok)
    """

    fx_node: str
    aten_op: str
    onnx_value: str
    onnx_nodes: list[str]
    source: str
    max_abs_diff: float
    ok: bool
    torch_stats: ValueStats | None = None
    onnx_stats: ValueStats | None = None


@dataclass
class DiscrepancyReport:
    """Every comparison in FX order; ``first`` is the first one out of tolerance.

    :param comparisons: one :class:`Comparison` per FX node compared, in FX order
    :param first: the first comparison out of tolerance, None if there is none

    .. code-block:: python

        import torch
        from experimental_experiment.investigate import find_discrepancies

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        report = find_discrepancies(model, (torch.randn(2, 4),))
        if report.first is not None:
            print(report.first.source, report.first.max_abs_diff)
    """

    comparisons: list[Comparison] = field(default_factory=list)
    first: Comparison | None = None

    def __str__(self) -> str:
        if self.first is None:
            return f"no discrepancy in {len(self.comparisons)} compared values"
        c = self.first
        return (
            f"first discrepancy at FX node {c.fx_node!r} ({c.aten_op}), ONNX value "
            f"{c.onnx_value!r} computed by {', '.join(c.onnx_nodes)}: max abs diff "
            f"{c.max_abs_diff:.4g}\n  user's code: {c.source}\n"
            f"  torch: {c.torch_stats}\n  onnx:  {c.onnx_stats}"
        )


def torch_intermediates(
    ep: torch.export.ExportedProgram, args: tuple, kwargs: dict | None = None
) -> dict[str, Any]:
    """Runs the FX graph of ``ep`` on (args, kwargs), returns every node's value."""
    from torch.export.graph_signature import InputKind

    user = iter(_flat_user_inputs(ep, args, kwargs))
    flat = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            flat.append(next(user))
        elif spec.target in ep.state_dict:
            flat.append(ep.state_dict[spec.target])
        else:
            flat.append(ep.constants[spec.target])
    interp = torch.fx.Interpreter(ep.graph_module, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*flat)
    return {node.name: value for node, value in interp.env.items()}


def _flat_user_inputs(ep: torch.export.ExportedProgram, args: tuple, kwargs: dict | None) -> list:
    """The leaves of (args, kwargs), keywords in the order the program expects."""
    from torch.export._tree_utils import reorder_kwargs

    kwargs = kwargs or {}
    if kwargs and ep.call_spec.in_spec is not None:
        kwargs = reorder_kwargs(kwargs, ep.call_spec.in_spec)
    return torch.utils._pytree.tree_flatten((args, kwargs))[0]


def _tagged_values(model: onnx.ModelProto) -> dict[str, tuple[str, list[str], dict]]:
    """FX node name -> (ONNX value holding it, ONNX nodes computing it, origin)."""
    found: dict[str, tuple[str, list[str], dict]] = {}
    for node in model.graph.node:
        origin = node_origin(node)
        name = origin.get(FX_NODE)
        if not name or not node.output:
            continue
        value, nodes, _ = found.get(name, (None, [], origin))
        nodes.append(f"{node.op_type}({node.name or node.output[0]})")
        # the value named after the FX node if it exists, else the last output
        value = name if name in node.output else (value if value == name else node.output[0])
        found[name] = (value, nodes, origin)
    return found


def onnx_intermediates(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    names: list[str],
    runtime: str = "onnxruntime",
) -> dict[str, Any]:
    """Values of ``names`` in ``model``: onnxruntime (the names added as outputs) or
    ``"reference"`` (onnx's evaluator, every intermediate result)."""
    if runtime == "reference":
        from onnx.reference import ReferenceEvaluator

        results = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
        return {n: results[n] for n in names if n in results}
    if runtime != "onnxruntime":
        raise ValueError(f"runtime must be 'onnxruntime' or 'reference', not {runtime!r}")
    import onnxruntime

    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    present = {o.name for o in extended.graph.output}
    infos = {v.name: v for v in extended.graph.value_info}
    for n in names:
        if n not in present:
            extended.graph.output.append(infos.get(n) or onnx.ValueInfoProto(name=n))
    sess = onnxruntime.InferenceSession(
        extended.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    outs = [o.name for o in sess.get_outputs()]
    return dict(zip(outs, sess.run(None, feeds)))


def _to_numpy(value) -> np.ndarray | None:
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            value = torch.view_as_real(value)
        return (
            value.detach().cpu().numpy()
            if value.dtype != torch.bfloat16
            else (value.detach().float().cpu().numpy())
        )
    if isinstance(value, (int, float, bool)):
        return np.asarray(value)
    return None


def _compare(expected: np.ndarray, got: np.ndarray, atol: float, rtol: float) -> tuple:
    if expected.shape != got.shape:
        if expected.size == got.size:
            got = got.reshape(expected.shape)
        else:
            return float("inf"), False
    if expected.size == 0:
        return 0.0, True
    e, g = expected.astype(np.float64), np.asarray(got).astype(np.float64)
    diff = np.abs(e - g)
    diff = np.where(np.isnan(e) & np.isnan(g), 0.0, np.nan_to_num(diff, nan=np.inf))
    ok = bool((diff <= atol + rtol * np.abs(np.nan_to_num(e))).all())
    return float(diff.max()), ok


def _feeds(model: onnx.ModelProto, leaves: list) -> dict[str, np.ndarray]:
    tensors = [_to_numpy(t) for t in leaves if isinstance(t, torch.Tensor)]
    inputs = [i.name for i in model.graph.input]
    if len(inputs) != len(tensors):
        raise ValueError(
            f"the ONNX model has {len(inputs)} inputs, the example inputs "
            f"hold {len(tensors)} tensors"
        )
    return dict(zip(inputs, tensors))


def compare_intermediates(
    ep: torch.export.ExportedProgram,
    model: onnx.ModelProto,
    args: tuple,
    kwargs: dict | None = None,
    *,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    runtime: str = "onnxruntime",
) -> DiscrepancyReport:
    """Compares every FX node of ``ep`` with the ONNX value tagged with its name.

    :param ep: the exported program ``model`` was converted from
    :param model: the ONNX model (exported without optimization keeps every value)
    :param args: positional inputs
    :param kwargs: keyword inputs
    :param atol: absolute tolerance
    :param rtol: relative tolerance
    :param runtime: ``"onnxruntime"`` or ``"reference"`` (onnx's evaluator)
    :return: a :class:`DiscrepancyReport`

    .. code-block:: python

        import torch
        from experimental_experiment.investigate import compare_intermediates
        from experimental_experiment.torch_interpreter import to_onnx

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        args = (torch.randn(2, 4),)
        ep = torch.export.export(model, args)
        report = compare_intermediates(ep, to_onnx(ep, optimize=False), args)
        print(report)
    """
    expected = torch_intermediates(ep, args, kwargs)
    tagged = _tagged_values(model)
    got = onnx_intermediates(
        model,
        _feeds(model, _flat_user_inputs(ep, args, kwargs)),
        sorted({v for v, _, _ in tagged.values()}),
        runtime,
    )
    report = DiscrepancyReport()
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.name not in tagged:
            continue
        value, onnx_nodes, origin = tagged[node.name]
        e, g = _to_numpy(expected.get(node.name)), got.get(value)
        if e is None or g is None:
            continue
        diff, ok = _compare(e, np.asarray(g), atol, rtol)
        comp = Comparison(
            node.name,
            str(node.target),
            value,
            onnx_nodes,
            origin.get("source", ""),
            diff,
            ok,
            ValueStats.of(e),
            ValueStats.of(np.asarray(g)),
        )
        report.comparisons.append(comp)
        if not ok and report.first is None:
            report.first = comp
            logger.info("%s", report)
    return report


def find_discrepancies(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict | None = None,
    *,
    dynamic_shapes=None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    runtime: str = "onnxruntime",
    strict: bool = False,
    **export_kwargs,
) -> DiscrepancyReport:
    """Exports ``model`` (not optimized, so that every FX node keeps its ONNX value),
    runs torch and ONNX on (args, kwargs), returns the comparisons and the first
    value out of tolerance: its aten op, the ONNX nodes computing it, the user's line
    and both values' statistics.

    :param model: the torch model
    :param args: positional inputs
    :param kwargs: keyword inputs
    :param dynamic_shapes: as :func:`to_onnx` takes them
    :param atol: absolute tolerance
    :param rtol: relative tolerance
    :param runtime: ``"onnxruntime"`` or ``"reference"`` (onnx's evaluator)
    :param strict: the capture mode
    :param export_kwargs: other arguments of :func:`to_onnx` (``dispatcher=``...)
    :return: a :class:`DiscrepancyReport`

    .. code-block:: python

        import torch
        from experimental_experiment.investigate import find_discrepancies

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        report = find_discrepancies(model, (torch.randn(2, 4),))
        print(report)  # no discrepancy in 2 compared values
    """
    from ..torch_interpreter import to_onnx

    ep = torch.export.export(
        model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict
    )
    onx = to_onnx(ep, optimize=export_kwargs.pop("optimize", False), **export_kwargs)
    return compare_intermediates(ep, onx, args, kwargs, atol=atol, rtol=rtol, runtime=runtime)


def find_bad_rewrite(
    onx: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    *,
    patterns: str = "default",
    atol: float = 1e-4,
) -> dict | None:
    """When the unoptimized model is right and the optimized one is not: the first
    rewrite of ``patterns`` changing the results (:func:`bisect_patterns
    <experimental_experiment.xoptim.bisect_patterns>`), None if none does.

    :param onx: the unoptimized model
    :param feeds: its inputs, ``{name: array}``
    :param patterns: pattern sets, see :func:`get_pattern_list
        <experimental_experiment.xoptim.get_pattern_list>`, or a list of patterns
    :param atol: absolute tolerance
    :return: None or a dict with ``index``, ``pattern``, ``nodes``, ``max_diff`` and
        ``model`` (see :func:`bisect_patterns
        <experimental_experiment.xoptim.bisect_patterns>`)

    .. code-block:: python

        import numpy as np
        import onnx
        from experimental_experiment.investigate import find_bad_rewrite

        onx = onnx.load("model_unoptimized.onnx")
        culprit = find_bad_rewrite(onx, {"x": np.random.rand(2, 4).astype(np.float32)})
        if culprit:
            print(culprit["pattern"], culprit["nodes"], culprit["max_diff"])
    """
    from ..xoptim.bisect import bisect_patterns

    return bisect_patterns(onx, feeds, patterns=patterns, atol=atol)
