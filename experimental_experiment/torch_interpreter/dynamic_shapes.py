"""dynamic_shapes as the user writes them, as torch.export.export takes them."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch.export import Dim

from .errors import InvalidArgumentError

_DIM_TYPES = (type(Dim.DYNAMIC),)


def _is_dim(value) -> bool:
    return value is None or isinstance(value, (int, str)) or isinstance(
        value, _DIM_TYPES
    ) or type(value).__name__ in ("Dim", "_Dim", "_DerivedDim", "DerivedDim")


def _is_tensor_spec(spec) -> bool:
    if isinstance(spec, dict):
        return all(isinstance(k, int) for k in spec)
    if isinstance(spec, (list, tuple)):
        return len(spec) > 0 and all(_is_dim(d) for d in spec) and not all(
            d is None for d in spec
        )
    return False


def _dim_name(value) -> str | None:
    if isinstance(value, str):
        return value
    name = getattr(value, "__name__", None)
    if isinstance(name, str) and not isinstance(value, _DIM_TYPES):
        return name
    return None


def normalize_dynamic_shapes(dynamic_shapes, model, args: tuple, kwargs: dict):
    """Replaces strings by ``Dim.DYNAMIC`` and collects the user's dim names.

    Returns ``(dynamic_shapes for torch.export, {(flat input path, axis): name})``.
    The path is the tuple of keys torch's pytree gives for the leaf.
    """
    if dynamic_shapes is None:
        return None, {}
    if not isinstance(dynamic_shapes, (dict, tuple, list)):
        raise InvalidArgumentError(
            f"dynamic_shapes must be a dict, tuple or list, not {type(dynamic_shapes)}"
        )
    names: dict[tuple, str] = {}

    def convert(spec, path):
        if spec is None:
            return None
        if _is_tensor_spec(spec):
            items = spec.items() if isinstance(spec, dict) else enumerate(spec)
            out = {}
            for axis, d in items:
                name = _dim_name(d)
                if name is not None:
                    names[(path, axis)] = name
                out[axis] = Dim.DYNAMIC if isinstance(d, str) else d
            if isinstance(spec, dict):
                return out
            return type(spec)(out[i] for i in range(len(spec)))
        if isinstance(spec, dict):
            return {k: convert(v, path + (k,)) for k, v in spec.items()}
        if isinstance(spec, (list, tuple)):
            return type(spec)(convert(v, path + (i,)) for i, v in enumerate(spec))
        return spec

    arg_names = _argument_names(model, args, kwargs)
    if isinstance(dynamic_shapes, dict):
        unknown = set(dynamic_shapes) - set(arg_names)
        if unknown and arg_names:
            raise InvalidArgumentError(
                f"dynamic_shapes names {sorted(unknown)} are not arguments of the model "
                f"(arguments: {arg_names})"
            )
        converted = {k: convert(v, (k,)) for k, v in dynamic_shapes.items()}
    else:
        n = len(args) + len(kwargs)
        if len(dynamic_shapes) != n:
            raise InvalidArgumentError(
                f"dynamic_shapes has {len(dynamic_shapes)} elements but the model "
                f"receives {n} inputs (args and kwargs)"
            )
        keys = arg_names if len(arg_names) == n else [f"arg{i}" for i in range(n)]
        converted = [convert(v, (k,)) for k, v in zip(keys, dynamic_shapes)]
        n_pos = _n_named_positional(model)
        if n_pos is not None and len(args) > n_pos:
            # forward(self, *args): torch.export wants one entry for all of *args
            converted = converted[:n_pos] + [tuple(converted[n_pos:len(args)])] + converted[
                len(args):
            ]
        converted = type(dynamic_shapes)(converted)
    return converted, names


def _n_named_positional(model) -> int | None:
    """Number of named positional parameters when forward has ``*args``, else None."""
    forward = getattr(model, "forward", model)
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return None
    if not any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _argument_names(model, args: tuple, kwargs: dict) -> list[str]:
    """Names of the arguments given: positional names then keyword names."""
    forward = getattr(model, "forward", model)
    try:
        params = list(inspect.signature(forward).parameters.values())
    except (TypeError, ValueError):
        return []
    pos = [
        p.name for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    names = pos[: len(args)]
    var = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
    if len(names) < len(args):
        prefix = var[0] if var else "args"
        names += [f"{prefix}_{i}" for i in range(len(args) - len(names))]
    return names + list(kwargs)


class PathKey(tuple):
    """One step of a leaf path: ``(key, index)``, the pytree key (a dict key, an
    attribute, a flattened name like ``key_0``) and the position among the siblings.
    The user's dynamic_shapes may address the leaf either way: a dict by key, a
    registered class (a transformers cache) by a list of one entry per child."""

    def __new__(cls, key, index: int):
        return super().__new__(cls, (key, index))

    def matches(self, value, by_index: bool = True) -> bool:
        return value == self[0] or (
            by_index and isinstance(value, int) and not isinstance(value, bool)
            and value == self[1]
        )


def _index_paths(spec, prefix: tuple = ()) -> list[tuple]:
    """Position of every leaf among its siblings, level by level, from a TreeSpec."""
    if spec.is_leaf():
        return [prefix]
    out = []
    for i, child in enumerate(spec.children()):
        out.extend(_index_paths(child, prefix + (i,)))
    return out


def leaf_paths(model, args: tuple, kwargs: dict) -> list[tuple[tuple, Any]]:
    """``(path, leaf)`` for every leaf of (args, kwargs), paths starting by arg names,
    followed by one :class:`PathKey` per level."""
    arg_names = _argument_names(model, args, kwargs)
    flat = []
    values = list(args) + list(kwargs.values())
    keys = arg_names if len(arg_names) == len(values) else [f"arg{i}" for i in range(len(values))]
    for key, value in zip(keys, values):
        leaves, spec = torch.utils._pytree.tree_flatten_with_path(value)
        for (kp, leaf), ipath in zip(leaves, _index_paths(spec)):
            steps = tuple(PathKey(_key_value(k), i) for k, i in zip(kp, ipath))
            flat.append(((key,) + steps, leaf))
    return flat


def _key_value(k):
    for attr in ("idx", "key", "name"):
        if hasattr(k, attr):
            return getattr(k, attr)
    return str(k)


def _path_matches(user_path: tuple, path: tuple, by_index: bool) -> bool:
    if len(user_path) != len(path):
        return False
    return all(
        p.matches(u, by_index) if isinstance(p, PathKey) else p == u
        for u, p in zip(user_path, path)
    )


def _find_name(names: dict, path: tuple, axis: int) -> str | None:
    """The user's name for ``axis`` of the leaf at ``path``: keys are tried first, then
    positions (a list given for a registered class such as a cache)."""
    for by_index in (False, True):
        for (user_path, user_axis), value in names.items():
            if user_axis == axis and _path_matches(user_path, path, by_index):
                return value
    return None


def symbol_names(placeholders: list, paths: list[tuple], names: dict) -> dict[str, str]:
    """``{torch symbol: user name}`` from the placeholders' fake tensors."""
    out: dict[str, str] = {}
    for node, path in zip(placeholders, paths):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for axis, d in enumerate(val.shape):
            name = _find_name(names, path, axis)
            if name is None or not isinstance(d, torch.SymInt):
                continue
            expr = d.node.expr
            if expr.is_symbol:
                out.setdefault(str(expr), name)
    return out
