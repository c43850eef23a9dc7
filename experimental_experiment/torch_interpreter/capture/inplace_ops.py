"""In-place operators made functional in the FX graph, without retracing the program.

``ExportedProgram.run_decompositions({})`` functionalizes a graph with in-place
operators by retracing the whole program, which costs minutes on models such as Swin
(``img_mask[:, h, w, :] = cnt``) or every CNN using ``ReLU(inplace=True)``. Most
in-place operators change a tensor the program created itself, directly or through
``slice``/``select`` views. :func:`functionalize_in_place` rewrites those:

* ``relu_(x)`` becomes ``relu(x)`` and later readers of ``x`` read the new value;
* ``x[:, a:b] += y`` (``add_`` on ``slice(x)``) becomes ``add(slice(x), y)`` followed by
  ``slice_scatter(x, new, ...)``, which every later reader of ``x`` reads.

It refuses, and leaves the graph untouched, when the mutated tensor is an input, a
buffer or a parameter (the new value must become an output), when it is reached
through a view other than ``slice``/``select``, when another view of it created before
the change is read after it (its value would be stale), or when the functional operator
is missing or gives another dtype. The caller then runs the full functionalization.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, cast

import torch
import torch._guards
import torch.fx.node

aten = torch.ops.aten

#: views through which a change is written back: view op -> its scatter
_WRITE_BACK = {
    aten.slice.Tensor: aten.slice_scatter.default,
    aten.select.int: aten.select_scatter.default,
}


@dataclasses.dataclass
class InPlaceRewrite:
    """What :func:`functionalize_in_place` did: ``reason`` is None when the graph has no
    in-place operator left, else why it was left untouched."""

    rewritten: int = 0
    write_backs: int = 0
    reason: str | None = None


@dataclasses.dataclass
class _Change:
    node: torch.fx.Node  # the in-place node
    functional: torch._ops.OpOverload  # its functional operator
    chain: list  # [(alias node, its parent)] from the changed tensor up to the root
    root: torch.fx.Node


def functionalize_in_place(
    gm: torch.fx.GraphModule, can_convert: Callable[[Any], bool] | None = None
) -> InPlaceRewrite:
    """Makes the in-place operators of ``gm`` functional when it is safe (see the module
    docstring); ``can_convert(op)`` tells if a functional operator has a converter.

    .. code-block:: python

        ep = torch.export.export(model, args)
        result = functionalize_in_place(ep.graph_module)
        if result.reason is not None:
            ep = ep.run_decompositions({})
    """
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    changes, checked = [], {}
    for node in nodes:
        if not _is_mutation(node):
            continue
        change = _plan(node, can_convert, checked)
        if isinstance(change, str):
            return InPlaceRewrite(reason=f"{node.name} ({node.target}): {change}")
        changes.append(change)
    reason = _stale_view(changes, order)
    if reason is not None:
        return InPlaceRewrite(reason=reason)
    result, latest = InPlaceRewrite(), {}
    for change in changes:
        result.write_backs += _rewrite(gm.graph, change, order, latest)
        result.rewritten += 1
    gm.graph.lint()
    gm.recompile()
    return result


def _schema(node: torch.fx.Node):
    return getattr(node.target, "_schema", None) if node.op == "call_function" else None


def _is_mutation(node: torch.fx.Node) -> bool:
    schema = _schema(node)
    return schema is not None and schema.is_mutable and node.target is not aten.detach_.default


def _is_alias(node: torch.fx.Node) -> bool:
    """The node's value shares memory with its first argument (a view, an in-place op,
    an element of split/unbind)."""
    if node.op == "call_function" and node.target is operator.getitem:
        return _is_alias(_first(node))
    schema = _schema(node)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def _first(node: torch.fx.Node) -> torch.fx.Node:
    """The first argument of a view or an in-place node: the node it aliases."""
    return cast(torch.fx.Node, node.args[0])


def _functional(op):
    packet = op.overloadpacket.__name__
    if not packet.endswith("_"):
        return None
    base = getattr(aten, packet[:-1], None)
    overload = getattr(base, op._overloadname, None) if base is not None else None
    if overload is None or overload._schema.is_mutable:
        return None
    return overload


def _plan(node: torch.fx.Node, can_convert, checked: dict) -> _Change | str:
    schema = cast(torch._ops.OpOverload, node.target)._schema
    written = [
        a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write
    ]
    if written != [schema.arguments[0].name] or not isinstance(node.args[0], torch.fx.Node):
        return f"changes {written}, not only its first argument"
    functional = _functional(node.target)
    if functional is None:
        return "no functional form"
    if can_convert is not None and not can_convert(functional):
        return f"no converter for its functional form {functional}"
    key = _signature(node, functional)
    if key not in checked:
        checked[key] = _same_result(node, functional)
    reason = checked[key]
    if reason is not None:
        return reason
    chain, current = [], _first(node)
    while _is_alias(current):
        if not (_is_mutation(current) or (current.target in _WRITE_BACK and not current.kwargs)):
            return (
                f"it changes {current.name}, a view made by {current.target}, "
                "which is not written back here"
            )
        chain.append(current)
        current = _first(current)
    if current.op != "call_function":
        return f"it changes {current.name}, an input, a buffer or a parameter"
    return _Change(node, functional, chain, current)


def _signature(node: torch.fx.Node, functional) -> tuple:
    """What decides the dtype and rank of the functional result: the operator, the
    dtype and rank of every tensor argument, the type of every other argument."""

    def describe(v):
        if isinstance(v, (list, tuple)):
            return tuple(describe(x) for x in v)
        if isinstance(v, dict):
            return tuple((k, describe(x)) for k, x in sorted(v.items()))
        val = v.meta.get("val") if isinstance(v, torch.fx.Node) else v
        if isinstance(val, torch.Tensor):
            return (val.dtype, val.dim())
        return type(val).__name__

    return (functional, describe(node.args), describe(node.kwargs))


def _same_result(node: torch.fx.Node, functional) -> str | None:
    """The functional operator gives the dtype and shape of the in-place one."""
    expected = node.meta.get("val")
    values = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    mode = torch._guards.detect_fake_mode([expected])
    if not isinstance(expected, torch.Tensor) or mode is None:
        return "no fake value to check the functional form against"
    try:
        with mode:
            got = functional(*values[0], **values[1])
    except Exception as e:  # data-dependent or unsupported: the full functionalization
        return f"its functional form fails on fake tensors: {type(e).__name__}"
    if (
        not isinstance(got, torch.Tensor)
        or got.dtype != expected.dtype
        or (len(got.shape) != len(expected.shape))
    ):
        return "its functional form returns another dtype or rank"
    return None


def _aliases(root: torch.fx.Node) -> set:
    found, stack = set(), [root]
    while stack:
        for user in stack.pop().users:
            if user not in found and _is_alias(user) and user.args[0] in found | {root}:
                found.add(user)
                stack.append(user)
    return found


def _stale_view(changes: list[_Change], order: dict) -> str | None:
    """A view created before a change of its tensor and read after it (unless the
    change writes through that view, which then reads the new value)."""
    aliases = {}
    for change in changes:
        if change.root not in aliases:
            aliases[change.root] = _aliases(change.root)
        at = order[change.node]
        rebound = set(change.chain) | {change.node}
        for view in aliases[change.root]:
            if (
                order[view] < at
                and view not in rebound
                and any(order[user] > at for user in view.users)
            ):
                return (
                    f"{view.name}, a view of {change.root.name}, is read after "
                    f"{change.node.name} changes {change.root.name}"
                )
    return None


def _whole_slice(view: torch.fx.Node) -> bool:
    """``x[:]`` on one axis: the view is the tensor itself, nothing to scatter."""
    if view.target is not aten.slice.Tensor:
        return False
    defaults = (None, 0, None, None, 1)  # self, dim, start, end, step
    _, _, start, end, step = tuple(view.args) + defaults[len(view.args) :]
    return bool(
        start in (0, None)
        and step == 1
        and (end is None or (isinstance(end, int) and end >= 2**63 - 1))
    )


def _rewrite(graph: torch.fx.Graph, change: _Change, order: dict, latest: dict) -> int:
    """Makes one change functional, writes it back through its views, and points the
    later readers of every changed alias to the new values; returns the scatter count.
    ``latest`` maps a node of the original graph to the node holding its current value
    (the readers after an earlier change already read that one)."""
    node = change.node
    node.target = change.functional
    new_values, value, last, added = {}, node, node, 0
    for view in change.chain:
        new_values[view] = value
        if view.target in _WRITE_BACK and not _whole_slice(view):
            with graph.inserting_after(last):
                value = graph.call_function(
                    _WRITE_BACK[view.target], (view.args[0], value, *view.args[1:])
                )
            value.meta = {
                "val": view.args[0].meta.get("val"),
                "stack_trace": node.meta.get("stack_trace"),
            }
            last, added = value, added + 1
    new_values[change.root] = value
    at = order[node]
    for old, new in new_values.items():
        current = latest.get(old, old)
        for user in list(current.users):
            if order.get(user, -1) > at:
                user.replace_input_with(current, new)
        latest[old] = new
    return added
