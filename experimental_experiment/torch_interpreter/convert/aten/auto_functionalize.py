"""Custom operators mutating their inputs, as functionalization wraps them.

``torch.export`` functionalizes a call to an operator declared with ``mutates_args``
into ``auto_functionalized(op, **kwargs)`` (v1) or
``auto_functionalized_v2(op, **kwargs, _all_bases=[...])`` (v2). Both return the
operator's outputs (one ``None`` slot when it returns nothing) followed by the new
values of the mutated tensors (v1) or of their bases (v2).

The converter of the wrapped operator (from the user's Dispatcher or the registry)
returns the operator's outputs followed by the new values of its mutated arguments,
in the schema's order.
"""

from __future__ import annotations

import torch

from ....xbuilder import GraphBuilder
from ...errors import UnsupportedOpError
from ..node_context import NodeContext
from ..registry import call_converter, converter
from .shape import I64_MAX, as_1d, ints

_HOP = torch.ops.higher_order


def _mutable_names(schema) -> list[str]:
    return [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]


def _inner_converter(g: GraphBuilder, op, *, ctx: NodeContext):
    interp = getattr(ctx, "interpreter", None)
    fn = interp.registry.find(op, g.main_opset) if interp is not None else None
    if fn is None:
        raise UnsupportedOpError(
            f"no converter for the custom operator {op} (it mutates "
            f"{_mutable_names(op._schema)}, torch wraps it into auto_functionalized)\n"
            "What to try: Dispatcher({op: fn}) where fn(g, *args) returns the op's "
            "outputs followed by the new values of the mutated arguments."
        )
    return fn


def _call(g: GraphBuilder, op, values: dict, *, ctx: NodeContext) -> tuple[list, list]:
    """Calls the converter of ``op``; returns (its outputs, new mutated values)."""
    schema = op._schema
    args = [
        values.get(a.name, a.default_value if a.has_default_value() else None)
        for a in schema.arguments
        if not a.kwarg_only
    ]
    kwargs = {a.name: values[a.name] for a in schema.arguments if a.kwarg_only and a.name in values}
    result = call_converter(_inner_converter(g, op, ctx=ctx), g, args, kwargs, ctx)
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    n_out, n_mut = len(schema.returns), len(_mutable_names(schema))
    if len(result) != n_out + n_mut:
        raise UnsupportedOpError(
            f"the converter of {op} returned {len(result)} names, expected {n_out} "
            f"output(s) followed by the new values of {_mutable_names(schema)}"
        )
    return result[:n_out], result[n_out:]


def _pack(outs: list, mutated: list) -> tuple:
    return tuple(outs or [None]) + tuple(mutated)


@converter(_HOP.auto_functionalized)
def auto_functionalized(
    g: GraphBuilder, op, _only_clone_these_tensors=None, *, ctx: NodeContext, **kwargs
):
    """auto_functionalized(op, **kwargs) -> (*outputs, *new values of mutated args)"""
    outs, mutated = _call(g, op, kwargs, ctx=ctx)
    return _pack(outs, mutated)


@converter(_HOP.auto_functionalized_v2)
def auto_functionalized_v2(
    g: GraphBuilder, op, _only_clone_these_bases=None, _all_bases=(), *, ctx: NodeContext, **kwargs
):
    """auto_functionalized_v2(op, **kwargs, _all_bases) -> (*outputs, *new bases)"""
    if not isinstance(op, torch._ops.OpOverload):
        raise UnsupportedOpError(f"auto_functionalized_v2 of {op} (a higher-order op)")
    names = _mutable_names(op._schema)
    bases = list(_all_bases)
    views = {}
    for name in names:
        if f"_{name}_length" in kwargs:
            raise UnsupportedOpError(f"{op}: mutated tensor lists ({name!r}) are not supported")
        views[name] = _read_view(g, op, name, kwargs, bases)
        kwargs[name] = views[name][1]
    outs, mutated = _call(g, op, kwargs, ctx=ctx)
    new_bases = list(bases)
    for name, value in zip(names, mutated):
        info, _ = views[name]
        if info is not None:
            new_bases[info[0]] = _write_view(g, new_bases[info[0]], value, info)
    return _pack(outs, new_bases)


def _read_view(g, op, name, kwargs, bases):
    """Pops the view information of ``name``: ((base index, slice or None), value)."""
    index = kwargs.pop(f"_{name}_base_index")
    if index is None:
        return None, None
    kwargs.pop(f"_{name}_alias", None)
    if f"_{name}_storage_offset" in kwargs:
        raise UnsupportedOpError(
            f"{op}: argument {name!r} is a strided view of another tensor "
            "(as_strided); make it contiguous (clone) before calling the operator"
        )
    if f"_{name}_slice_dim" in kwargs:
        sl = tuple(kwargs.pop(f"_{name}_slice_{k}") for k in ("dim", "start", "end"))
        dim, start, end = sl
        value = g.op.Slice(
            bases[index], as_1d(g, start), as_1d(g, I64_MAX if end is None else end), ints([dim])
        )
        return (index, sl), value
    return (index, None), bases[index]


def _write_view(g, base, value, info):
    """The base with ``value`` written where the view reads."""
    _, sl = info
    if sl is None:
        return value
    dim, start, end = sl
    head = g.op.Slice(base, ints([0]), as_1d(g, start), ints([dim]))
    if end is None:
        return g.op.Concat(head, value, axis=dim)
    tail = g.op.Slice(base, as_1d(g, end), ints([I64_MAX]), ints([dim]))
    return g.op.Concat(head, value, tail, axis=dim)
