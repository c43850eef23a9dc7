"""Small queries on IR values used by the patterns: producer, single use, constants."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def producer(
    value: ir.Value | None, op_type: str | tuple[str, ...], domain: str = ""
) -> ir.Node | None:
    """The node producing ``value`` if its type is ``op_type`` (one of), else None."""
    node = None if value is None else value.producer()
    types = (op_type,) if isinstance(op_type, str) else op_type
    if node is None or node.op_type not in types or node.domain != domain:
        return None
    return node


def used_once_by(value: ir.Value, node: ir.Node) -> bool:
    """Tells if ``node`` is the only user of ``value`` (not a graph output)."""
    if value.is_graph_output():
        return False
    return all(u.node is node for u in value.uses())


def small_constant(value: ir.Value | None, max_size: int = 1024) -> np.ndarray | None:
    """The value of a constant (initializer or Constant node) with at most ``max_size``
    elements, None otherwise (large weights are never read)."""
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None or tensor.size > max_size:
        return None
    try:
        return tensor.numpy()
    except Exception:  # external data not loaded
        return None


def scalar(value: ir.Value | None) -> float | None:
    """The float value of a one-element constant."""
    v = small_constant(value, 1)
    return None if v is None or v.size != 1 else float(v.reshape(-1)[0])


def static_dims(value: ir.Value | None) -> list | None:
    """The dimensions of ``value`` (ints, or dim names), None when the rank is unknown."""
    if value is None or value.shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in value.shape]
