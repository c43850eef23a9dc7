"""Decomposition fallback: an operator with no converter is decomposed by torch.

Only the operators with no converter are decomposed
(``ep.run_decompositions({op: table[op]})``), every other node is kept as captured, so
a graph the converters already cover is returned unchanged. Decompositions may
introduce other operators with no converter: the process repeats a few times. What
is left raises an :class:`UnsupportedOpError` naming each operator and why (no
converter and no decomposition, or a decomposition into operators still missing).
"""

from __future__ import annotations

import logging
import operator
from typing import Callable

import torch

from ..convert.registry import find_converter
from ..errors import UnsupportedOpError, user_source_line

logger = logging.getLogger(__name__)

MAX_ROUNDS = 4


def _tables() -> list:
    from torch._decomp import core_aten_decompositions, decomposition_table

    return [core_aten_decompositions(), decomposition_table]


def find_decomposition(op: object) -> Callable | None:
    """torch's decomposition of ``op`` (core ATen table first, then the full table),
    or its CompositeImplicitAutograd kernel, None if there is none."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    for table in _tables():
        if op in table:
            return table[op]
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    return None


def missing_ops(
    ep: torch.export.ExportedProgram,
    opset: int,
    can_convert: Callable[[object], bool] | None = None,
) -> list:
    """Operators called by the graph (and its subgraphs) with no converter."""
    return list(_missing_nodes(ep, opset, can_convert))


def _missing_nodes(
    ep: torch.export.ExportedProgram,
    opset: int,
    can_convert: Callable[[object], bool] | None = None,
) -> dict:
    """The first node calling each operator with no converter, by operator."""
    found = {}
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            op = node.target
            if node.op != "call_function" or op is operator.getitem:
                continue
            if not isinstance(op, torch._ops.OpOverload):
                continue  # higher order ops and python functions have their own path
            if can_convert is not None and can_convert(op):
                continue
            if find_converter(op, opset) is None:
                found.setdefault(op, node)
    return found


def decompose_unsupported(
    ep: torch.export.ExportedProgram,
    opset: int,
    can_convert: Callable[[object], bool] | None = None,
    record: list | None = None,
) -> torch.export.ExportedProgram:
    """Decomposes the operators with no converter, raises what cannot be.

    :param ep: the captured program
    :param opset: main opset (converters may depend on it)
    :param can_convert: tells if a user converter (dispatcher) handles an op
    :param record: receives ``(operator, reason)`` for every decomposed operator
    :return: the program, unchanged if every operator has a converter
    """
    done: set = set()  # decomposed operators
    origin: dict = {}  # operator -> the decomposed ones it may come from
    for _ in range(MAX_ROUNDS):
        missing = missing_ops(ep, opset, can_convert)
        table = {op: find_decomposition(op) for op in missing if op not in done}
        table = {op: fn for op, fn in table.items() if fn is not None}
        if not table:
            break
        logger.info(
            "decomposing operators with no converter: %s", ", ".join(str(op) for op in table)
        )
        ep = ep.run_decompositions(table)
        if record is not None:
            record.extend((str(op), _why(op, origin)) for op in table)
        done |= set(table)
        for op in missing_ops(ep, opset, can_convert):
            if op not in missing:
                origin.setdefault(op, ", ".join(str(o) for o in table))
    missing = _missing_nodes(ep, opset, can_convert)
    if missing:
        raise UnsupportedOpError(_message(missing, origin, done))
    return ep


def _why(op, origin: dict) -> str:
    if op in origin:
        return f"no converter; it comes from torch's decomposition of {origin[op]}"
    return "no converter"


def _message(missing: dict, origin: dict, done: set) -> str:
    """One paragraph per operator: why it is left, its first FX node, the user's line."""
    lines = []
    for op, node in missing.items():
        if op in origin:
            why = f"it comes from torch's decomposition of {origin[op]}"
        elif op not in done:
            why = "torch has no decomposition for it"
        else:
            why = "its decomposition still calls it"
        lines.append(
            f"{op} ({why}), first called by node {node.name!r} from the "
            f"user's code: {user_source_line(node)}"
        )
    return (
        "no converter, even after the decomposition fallback, for\n"
        + "\n".join(lines)
        + "\nWhat to try: register a converter with Dispatcher({op: fn}) passed as "
        "to_onnx(..., dispatcher=...)."
    )
