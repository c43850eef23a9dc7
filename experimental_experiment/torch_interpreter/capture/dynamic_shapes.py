"""dynamic_shapes as the user writes them, as torch.export.export takes them."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.export import Dim

from ..errors import InvalidArgumentError
from .signature import ArgumentLayout, PathKey

_DIM_TYPES = (type(Dim.DYNAMIC),)


def _is_dim(value) -> bool:
    return (
        value is None
        or isinstance(value, (int, str))
        or isinstance(value, _DIM_TYPES)
        or type(value).__name__ in ("Dim", "_Dim", "_DerivedDim", "DerivedDim")
    )


def _is_tensor_spec(spec) -> bool:
    if isinstance(spec, dict):
        return all(isinstance(k, int) for k in spec)
    if isinstance(spec, (list, tuple)):
        return len(spec) > 0 and all(_is_dim(d) for d in spec) and not all(d is None for d in spec)
    return False


def _dim_name(value) -> str | None:
    if isinstance(value, str):
        return value
    name = getattr(value, "__name__", None)
    if isinstance(name, str) and not isinstance(value, _DIM_TYPES):
        return name
    return None


def torch_dynamic_shapes(grouped: dict, kind: type) -> tuple[Any, dict[tuple, str]]:
    """The grouped spec (:func:`grouped_dynamic_shapes`) with strings replaced by
    ``Dim.DYNAMIC``, in the container type of the user's spec (``kind``: a dict or a
    sequence), and the user's dimension names ``{(flat input path, axis): name}``;
    the path is the tuple of keys torch's pytree gives for the leaf."""
    names: dict[tuple, str] = {}
    converted = {k: _convert_spec(v, (k,), names) for k, v in grouped.items()}
    if issubclass(kind, dict):
        return converted, names
    return kind(converted.values()), names


def check_spec_type(dynamic_shapes: object) -> None:
    """Raises :class:`InvalidArgumentError` unless ``dynamic_shapes`` is a dict, a tuple
    or a list (None is checked by the caller)."""
    if not isinstance(dynamic_shapes, (dict, tuple, list)):
        raise InvalidArgumentError(
            f"dynamic_shapes must be a dict, tuple or list, not {type(dynamic_shapes)}"
        )


def _convert_spec(spec, path: tuple, names: dict):
    """``spec`` with strings replaced by ``Dim.DYNAMIC``; ``names`` receives
    ``{(path, axis): name}``."""
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
        return {k: _convert_spec(v, path + (k,), names) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_convert_spec(v, path + (i,), names) for i, v in enumerate(spec))
    return spec


def _flat_key(prefix: tuple) -> str:
    """The name of one flattened value: ``x``, ``xs_0`` (the first value of ``*xs``)."""
    return prefix[0] if len(prefix) == 1 else f"{prefix[0]}_{prefix[1][0]}"


def _group(pairs: list[tuple[tuple, Any]], layout: ArgumentLayout) -> dict:
    """``{top-level name: spec}`` (every name of ``layout.bound``, None if not given)
    from ``[(prefix, spec)]``: the values of ``*xs`` become one tuple."""
    out: dict = {name: None for name in layout.bound}
    parts: dict = {}
    for prefix, spec in pairs:
        if len(prefix) == 1:
            out[prefix[0]] = spec
        else:
            parts[prefix[1][0]] = spec
    if parts:
        n = sum(1 for p in layout.prefixes if len(p) > 1)
        out[layout.var_pos] = tuple(parts.get(j) for j in range(n))
    return out


def _expand_keywords(name, spec, layout: ArgumentLayout) -> list[tuple[tuple, Any]]:
    """The spec of ``**kw`` (a dict keyed by keyword, or None) as one pair per keyword."""
    if spec is None:
        return []
    if not isinstance(spec, dict) or set(spec) - set(layout.extra_kw):
        raise InvalidArgumentError(
            f"dynamic_shapes[{name!r}] must be a dict keyed by the keywords **{name} "
            f"receives ({layout.extra_kw}), not {spec!r}"
        )
    return [((k,), v) for k, v in spec.items()]


def grouped_dynamic_shapes(
    dynamic_shapes: dict[str, Any] | tuple[Any, ...] | list[Any],
    model: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    *,
    layout: ArgumentLayout | None = None,
) -> dict:
    """The user's dynamic_shapes as ``{top-level argument name: spec}`` for the capture:
    the values of ``*xs`` grouped in one tuple, the keywords of ``**kw`` top-level (see
    :func:`explicit_keywords
    <experimental_experiment.torch_interpreter.capture.signature.explicit_keywords>`).
    Accepted: torch.export's forms (``{"xs": (s0, s1), "kw": {"a": sa}}`` or a tuple
    with one entry per argument) and the flattened ones (``{"xs_0": s0, "a": sa}`` or
    one entry per value of ``args + kwargs``). Raises :class:`InvalidArgumentError`
    for a spec which is not a dict, a tuple or a list, or when the names or the
    length do not match (``layout``: the arguments' layout when
    already known)."""
    check_spec_type(dynamic_shapes)
    layout = layout or ArgumentLayout(model, args, kwargs)
    if isinstance(dynamic_shapes, dict):
        return _group(_dict_pairs(dynamic_shapes, layout), layout)
    values, torch_names = list(dynamic_shapes), layout.torch_names()
    n_flat = len(layout.prefixes)
    if len(values) == len(torch_names) and (
        len(values) != n_flat or _looks_grouped(values, layout)
    ):
        return _group(_dict_pairs(dict(zip(torch_names, values)), layout), layout)
    if len(values) == n_flat:
        return _group(list(zip(layout.prefixes, values)), layout)
    raise InvalidArgumentError(
        f"dynamic_shapes has {len(values)} elements but the model receives "
        f"{len(torch_names)} arguments {torch_names}"
        + (
            f" ({n_flat} values once *args/**kwargs are flattened)"
            if n_flat != len(torch_names)
            else ""
        )
    )


def _dict_pairs(dynamic_shapes: dict, layout: ArgumentLayout) -> list[tuple[tuple, Any]]:
    flat = {_flat_key(p): p for p in layout.prefixes}
    pairs, unknown = [], []
    for k, v in dynamic_shapes.items():
        if k in layout.bound:
            # torch.export wants a tuple for *xs, a list is accepted here
            pairs.append(
                (
                    (k,),
                    tuple(v)
                    if k == layout.var_pos and isinstance(v, list) and not _is_tensor_spec(v)
                    else v,
                )
            )
        elif k == layout.var_kw:
            pairs += _expand_keywords(k, v, layout)
        elif k in flat:
            pairs.append((flat[k], v))
        else:
            unknown.append(k)
    if unknown:
        names = layout.torch_names()
        raise InvalidArgumentError(
            f"dynamic_shapes names {sorted(map(str, unknown))} are not arguments of "
            f"the model (arguments: {names}"
            + (f", or flattened: {sorted(flat)})" if sorted(flat) != sorted(names) else ")")
        )
    if layout.var_pos in dynamic_shapes and any(len(p) > 1 for p, _ in pairs):
        raise InvalidArgumentError(
            f"dynamic_shapes gives *{layout.var_pos} both grouped (key "
            f"{layout.var_pos!r}) and flattened (keys {layout.var_pos}_<i>); use one form"
        )
    return pairs


def _looks_grouped(values: list, layout: ArgumentLayout) -> bool:
    """When as many specs as arguments and as values are given (one value in ``*xs``
    or ``**kw``): grouped if the spec of ``*xs`` is a tuple of specs and the spec of
    ``**kw`` a dict keyed by its keyword."""
    for name, spec in zip(layout.torch_names(), values):
        if spec is None:
            continue
        if name == layout.var_pos and any(len(p) > 1 for p in layout.prefixes):
            if _is_tensor_spec(spec) or not isinstance(spec, (list, tuple)):
                return False
        elif name == layout.var_kw and layout.extra_kw:
            if not (isinstance(spec, dict) and set(spec) == set(layout.extra_kw)):
                return False
    return True


def _index_paths(spec, prefix: tuple = ()) -> list[tuple]:
    """Position of every leaf among its siblings, level by level, from a TreeSpec."""
    if spec.is_leaf():
        return [prefix]
    out = []
    for i, child in enumerate(spec.children()):
        out.extend(_index_paths(child, prefix + (i,)))
    return out


def leaf_paths(
    model: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    *,
    layout: ArgumentLayout | None = None,
) -> list[tuple[tuple, Any]]:
    """``(path, leaf)`` for every leaf of (args, kwargs), paths starting by arg names
    (the name of ``*xs`` then the position; the keywords of ``**kw`` are top-level),
    followed by one :class:`PathKey` per level."""
    flat = []
    values = list(args) + list(kwargs.values())
    layout = layout or ArgumentLayout(model, args, kwargs)
    for prefix, value in zip(layout.prefixes, values):
        leaves, spec = torch.utils._pytree.tree_flatten_with_path(value)
        for (kp, leaf), ipath in zip(leaves, _index_paths(spec)):
            steps = tuple(PathKey(_key_value(k), i) for k, i in zip(kp, ipath))
            flat.append((prefix + steps, leaf))
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


def argument_names(layout: ArgumentLayout) -> list[str]:
    """One name per value of ``args + kwargs``: the parameter's name, ``xs_<i>`` for
    the values of ``*xs``, the keyword for the values of ``**kw``."""
    return [_flat_key(p) for p in layout.prefixes]
