"""One transformers cache layer as tensors (leaves) and a hashable description (spec),
and back: the pytree registration of :mod:`.cache_registration` flattens every layer of a
cache with these functions.

A layer may hold, depending on its class:

* attention keys and values (``DynamicLayer``, ``StaticLayer``, their sliding-window
  variants), plus the length tensor of static layers;
* convolution and recurrent states, ``number_of_states`` of each
  (``LinearAttentionLayer``: Mamba, gated delta-net, short convolutions);
* both (``LinearAttentionAndFullAttentionLayer``... hybrid layers of Falcon-H1);
* keys and values plus the keys of a token indexer and optionally their positions
  (``DynamicIndexedLayer``: sparse attention of Qwen4-Exp, GLM-MoE-DSA...);
* keys and values of a sliding window plus the keys and values of the prompt kept
  apart, never evicted (``prefill_keys``, ``prefill_values``: the reference
  sliding-window attention of UnlimitedOCR); the lengths the layer keeps
  (``prefill_cumulative_length``, ``prefill_length`` once the prompt is complete) are
  read back from the prefill tensors;
* nothing (``DummyLayer``, a layer sharing another layer's cache, or a layer not
  filled yet): it is kept in the spec so that the rebuilt cache has every layer at its
  index.

Leaves are named after the layer's index in ``cache.layers``: ``key_<i>``,
``value_<i>``, ``cumulative_length_<i>``, ``conv_state_<i>``, ``recurrent_state_<i>``
(``conv_state_<i>_<j>`` when a layer holds several states), ``indexer_key_<i>``,
``indexer_position_ids_<i>``, ``linear_length_<i>`` (the number of tokens a
linear-attention layer has seen, a 0-d tensor since transformers 5.25),
``prefill_key_<i>``, ``prefill_value_<i>``.

A layer initialized but still empty holds 1-D empty tensors (``torch.tensor([])``):
they are leaves as they are (the sliding part of a reference layer right after the
prompt).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

#: attributes recomputed from the key tensor when an attention layer is rebuilt
KV_DERIVED = frozenset(
    {
        "keys",
        "values",
        "dtype",
        "device",
        "is_initialized",
        "cumulative_length",
        "_sliding_window_tensor",
        "batch_size",
        "num_heads",
        "k_head_dim",
        "v_head_dim",
    }
)

#: attributes of a linear-attention layer recomputed from its states
LINEAR_DERIVED = frozenset(
    {
        "conv_states",
        "recurrent_states",
        "is_conv_states_initialized",
        "is_recurrent_states_initialized",
        "dtype",
        "device",
    }
)

#: attributes of an indexed layer (sparse attention's token indexer) recomputed from
#: its indexer keys
INDEXER_DERIVED = frozenset(
    {
        "indexer_keys",
        "indexer_position_ids",
        "indexer_dtype",
        "indexer_device",
        "is_indexer_initialized",
    }
)

#: attributes of a layer keeping the prompt apart from its sliding window (reference
#: sliding-window attention) recomputed from its prefill keys; ``prefill_length`` too
#: when it equals their length (:attr:`LayerSpec.prefill_done`)
PREFILL_DERIVED = frozenset({"prefill_keys", "prefill_values", "prefill_cumulative_length"})

#: the kinds of leaves, in the order they appear in a flattened cache
LEAF_KINDS = (
    "key",
    "value",
    "cumulative_length",
    "conv_state",
    "recurrent_state",
    "indexer_key",
    "indexer_position_ids",
    "linear_length",
    "prefill_key",
    "prefill_value",
)

_SIMPLE = (int, float, bool, str, type(None), torch.dtype, torch.device)
#: the token count of a linear-attention layer (transformers 5.25), a 0-d tensor
_LINEAR_LENGTH = "cumulative_length_linear"


class UnknownCacheError(TypeError):
    """A cache class (or layer class) the registration does not know how to flatten.

    Cause: ``bypass_export_some_errors`` registers transformers' cache classes as
    pytree nodes; a cache layer holding an attribute it cannot rebuild (a tensor
    outside the keys, values, convolution and recurrent states, an object) cannot be
    flattened safely.

    Fix: use a cache class of transformers that the registration knows (DynamicCache,
    StaticCache, encoder-decoder caches, with attention, linear-attention or hybrid
    layers), or register your class yourself with
    ``torch.utils._pytree.register_pytree_node``
    (:ref:`l-plot-torch-export-with-dynamic-cache-201`)."""


@dataclasses.dataclass(frozen=True)
class _Frozen:
    """A dictionary attribute of a layer (``has_previous_state``...), hashable."""

    items: tuple


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """What is needed to rebuild a layer besides its tensors.

    :param cls: the layer class
    :param kv: the layer holds keys and values
    :param length: the layer holds a length tensor (static layers)
    :param conv: indices of the convolution states it holds
    :param recurrent: indices of the recurrent states it holds
    :param state: the other attributes, ``(name, value)`` sorted by name
    :param indexer: the layer holds indexer keys
    :param indexer_positions: the layer holds indexer position ids
    :param linear_length: the layer holds the number of tokens its linear attention has
        seen as a tensor (``cumulative_length_linear``, transformers 5.25)
    :param prefill: the layer holds the keys and values of the prompt apart from the
        ones of its sliding window (``prefill_keys``, ``prefill_values``)
    :param prefill_done: the prompt is complete: ``prefill_length`` is the length of
        the prefill keys (symbolic in an export); otherwise ``prefill_length`` is kept
        in ``state`` (None while the next call is the prompt, or the length a chunked
        prefill declared)
    """

    cls: type
    kv: bool
    length: bool
    conv: tuple[int, ...]
    recurrent: tuple[int, ...]
    state: tuple
    indexer: bool = False
    indexer_positions: bool = False
    linear_length: bool = False
    prefill: bool = False
    prefill_done: bool = False


def _linear_mixin():
    from transformers import cache_utils

    return getattr(cache_utils, "LinearAttentionCacheLayerMixin", None)


def is_linear_layer(layer_or_cls) -> bool:
    """True for a layer (or layer class) holding convolution / recurrent states."""
    mixin = _linear_mixin()
    cls = layer_or_cls if isinstance(layer_or_cls, type) else type(layer_or_cls)
    return mixin is not None and issubclass(cls, mixin)


def _freeze(layer, name: str, value):
    if isinstance(value, dict) and all(
        isinstance(k, _SIMPLE) and isinstance(v, _SIMPLE) for k, v in value.items()
    ):
        return _Frozen(tuple(value.items()))
    if isinstance(value, (torch.Tensor, torch.SymInt)) or not isinstance(value, _SIMPLE):
        raise UnknownCacheError(
            f"cache layer {type(layer).__name__} has attribute {name!r} of type "
            f"{type(value).__name__}: bypass_export_some_errors does not know how to "
            f"flatten it, the layer class is not supported yet"
        )
    return value


def _thaw(value):
    return dict(value.items) if isinstance(value, _Frozen) else value


def _present(states: dict | None) -> tuple[int, ...]:
    return tuple(j for j, t in (states or {}).items() if t is not None)


def _seq_length(t: torch.Tensor):
    """The number of positions of keys ``(batch, heads, seq, dim)``, 0 for the 1-D empty
    tensor of a layer initialized but empty."""
    return t.shape[-2] if t.dim() >= 2 else 0


def _prefill_done(layer) -> bool:
    """True when the prompt of a reference layer is complete: its ``prefill_length``
    equals the length of its prefill keys (both symbolic in an export)."""
    length = layer.prefill_length
    if length is None:
        return False
    return bool(length == _seq_length(layer.prefill_keys))


def layer_spec(layer) -> LayerSpec:
    """The :class:`LayerSpec` of ``layer``; raises :class:`UnknownCacheError` for an
    attribute it cannot keep (a tensor it does not know, an object)."""
    kv = getattr(layer, "keys", None) is not None
    length = kv and isinstance(getattr(layer, "cumulative_length", None), torch.Tensor)
    linear = is_linear_layer(layer)
    indexer = isinstance(getattr(layer, "indexer_keys", None), torch.Tensor)
    linear_length = linear and isinstance(getattr(layer, _LINEAR_LENGTH, None), torch.Tensor)
    prefill = kv and isinstance(getattr(layer, "prefill_keys", None), torch.Tensor)
    prefill_done = prefill and _prefill_done(layer)
    skip = (
        (KV_DERIVED if kv else {"_sliding_window_tensor"})
        | (LINEAR_DERIVED if linear else frozenset())
        | (INDEXER_DERIVED if indexer else set())
        | ({_LINEAR_LENGTH} if linear_length else set())
        | (PREFILL_DERIVED if prefill else set())
        | ({"prefill_length"} if prefill_done else set())
    )
    state = tuple(
        (name, _freeze(layer, name, value))
        for name, value in sorted(vars(layer).items())
        if name not in skip
    )
    conv = _present(layer.conv_states) if linear else ()
    recurrent = _present(layer.recurrent_states) if linear else ()
    positions = indexer and isinstance(layer.indexer_position_ids, torch.Tensor)
    return LayerSpec(
        type(layer),
        kv,
        length,
        conv,
        recurrent,
        state,
        indexer,
        positions,
        linear_length,
        prefill,
        prefill_done,
    )


def _suffix(i: int, j: int, spec: LayerSpec) -> str:
    n = dict(spec.state).get("number_of_states", 1)
    return f"{i}" if n == 1 else f"{i}_{j}"


def flatten_layers(layers) -> tuple[list[torch.Tensor], list[str], tuple[LayerSpec, ...]]:
    """Leaves of all ``layers`` grouped by kind (:data:`LEAF_KINDS`: keys of every layer,
    then values, lengths, convolution states, recurrent states), their names, the specs."""
    specs = tuple(layer_spec(layer) for layer in layers)
    groups: dict[str, list[tuple[str, torch.Tensor]]] = {k: [] for k in LEAF_KINDS}
    for i, (layer, spec) in enumerate(zip(layers, specs)):
        if spec.kv:
            groups["key"].append((f"key_{i}", layer.keys))
            groups["value"].append((f"value_{i}", layer.values))
        if spec.length:
            groups["cumulative_length"].append((f"cumulative_length_{i}", layer.cumulative_length))
        for j in spec.conv:
            groups["conv_state"].append((f"conv_state_{_suffix(i, j, spec)}", layer.conv_states[j]))
        for j in spec.recurrent:
            groups["recurrent_state"].append(
                (f"recurrent_state_{_suffix(i, j, spec)}", layer.recurrent_states[j])
            )
        if spec.indexer:
            groups["indexer_key"].append((f"indexer_key_{i}", layer.indexer_keys))
        if spec.indexer_positions:
            groups["indexer_position_ids"].append(
                (f"indexer_position_ids_{i}", layer.indexer_position_ids)
            )
        if spec.linear_length:
            groups["linear_length"].append((f"linear_length_{i}", getattr(layer, _LINEAR_LENGTH)))
        if spec.prefill:
            groups["prefill_key"].append((f"prefill_key_{i}", layer.prefill_keys))
            groups["prefill_value"].append((f"prefill_value_{i}", layer.prefill_values))
    pairs = [p for k in LEAF_KINDS for p in groups[k]]
    return [t for _, t in pairs], [n for n, _ in pairs], specs


def _new_layer(spec: LayerSpec):
    layer = spec.cls.__new__(spec.cls)
    layer.__dict__.update({name: _thaw(value) for name, value in spec.state})
    if hasattr(layer, "sliding_window") and not spec.kv:  # a sliding layer not filled yet
        layer._sliding_window_tensor = torch.tensor(layer.sliding_window, dtype=torch.long)
    return layer


def _set_kv(layer, keys, values, length=None) -> None:
    layer.keys, layer.values = keys, values
    layer.dtype, layer.device = keys.dtype, keys.device
    layer.is_initialized = True
    if length is not None:
        layer.cumulative_length = length
        layer.batch_size, layer.num_heads = keys.shape[:2]
        layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
    elif hasattr(layer, "sliding_window"):
        layer.cumulative_length = _seq_length(keys)
        layer._sliding_window_tensor = torch.tensor(layer.sliding_window, dtype=torch.long)


def _set_linear(layer, spec: LayerSpec, conv: dict, recurrent: dict) -> None:
    n = layer.number_of_states
    layer.conv_states = {j: conv.get(j) for j in range(n)}
    layer.recurrent_states = {j: recurrent.get(j) for j in range(n)}
    layer.is_conv_states_initialized = {j: j in conv for j in range(n)}
    layer.is_recurrent_states_initialized = {j: j in recurrent for j in range(n)}
    first = next(iter([*conv.values(), *recurrent.values()]), None)
    if not spec.kv:  # the attention part sets them otherwise
        layer.dtype = None if first is None else first.dtype
        layer.device = None if first is None else first.device


def _set_indexer(layer, keys, positions) -> None:
    layer.indexer_keys, layer.indexer_position_ids = keys, positions
    layer.indexer_dtype, layer.indexer_device = keys.dtype, keys.device
    layer.is_indexer_initialized = True


def _set_prefill(layer, spec: LayerSpec, keys, values) -> None:
    layer.prefill_keys, layer.prefill_values = keys, values
    layer.prefill_cumulative_length = _seq_length(keys)
    if spec.prefill_done:
        layer.prefill_length = layer.prefill_cumulative_length


def unflatten_layers(leaves: list, specs: tuple[LayerSpec, ...]) -> list:
    """The layers :func:`flatten_layers` flattened, rebuilt around ``leaves``."""
    it = iter(leaves)
    kv = [i for i, s in enumerate(specs) if s.kv]
    keys = {i: next(it) for i in kv}
    values = {i: next(it) for i in kv}
    lengths = {i: next(it) for i, s in enumerate(specs) if s.length}
    conv = {(i, j): next(it) for i, s in enumerate(specs) for j in s.conv}
    recurrent = {(i, j): next(it) for i, s in enumerate(specs) for j in s.recurrent}
    indexer = {i: next(it) for i, s in enumerate(specs) if s.indexer}
    positions = {i: next(it) for i, s in enumerate(specs) if s.indexer_positions}
    linear_lengths = {i: next(it) for i, s in enumerate(specs) if s.linear_length}
    prefill_keys = {i: next(it) for i, s in enumerate(specs) if s.prefill}
    prefill_values = {i: next(it) for i, s in enumerate(specs) if s.prefill}
    layers = []
    for i, spec in enumerate(specs):
        layer = _new_layer(spec)
        if spec.kv:
            _set_kv(layer, keys[i], values[i], lengths.get(i))
        if is_linear_layer(spec.cls):
            _set_linear(
                layer,
                spec,
                {j: conv[i, j] for j in spec.conv},
                {j: recurrent[i, j] for j in spec.recurrent},
            )
        if spec.indexer:
            _set_indexer(layer, indexer[i], positions.get(i))
        if spec.linear_length:
            setattr(layer, _LINEAR_LENGTH, linear_lengths[i])
        if spec.prefill:
            _set_prefill(layer, spec, prefill_keys[i], prefill_values[i])
        layers.append(layer)
    return layers


def leaf_kind(name: str) -> str:
    """The kind (:data:`LEAF_KINDS`) of a leaf from its name (``conv_state_3`` ->
    ``conv_state``)."""
    for kind in sorted(LEAF_KINDS, key=len, reverse=True):
        if name.startswith(kind + "_"):
            return kind
    raise ValueError(f"{name!r} is not the name of a cache leaf ({LEAF_KINDS})")


def describe(specs: tuple[LayerSpec, ...]) -> list[dict[str, Any]]:
    """One line per layer for messages: class and what it holds."""
    return [
        dict(layer=i, cls=s.cls.__name__, kv=s.kv, conv=s.conv, recurrent=s.recurrent)
        for i, s in enumerate(specs)
    ]


#: cache attributes besides ``layers`` holding one tensor per layer (``[]`` for a layer
#: without one), and the kind of leaf they give: MiniMax's lightning-attention states
STATE_LISTS = {"linear_cache": "recurrent_state"}


@dataclasses.dataclass(frozen=True)
class CacheSpec:
    """What is needed to rebuild a cache besides its tensors: the spec of every layer,
    and for every attribute of :data:`STATE_LISTS` the cache has, ``(name, length,
    indices of the layers holding a tensor)``."""

    layers: tuple[LayerSpec, ...]
    lists: tuple[tuple[str, int, tuple[int, ...]], ...] = ()


def before_prompt(spec: CacheSpec) -> CacheSpec:
    """The spec of a cache whose reference layers (:attr:`LayerSpec.prefill`) have not
    seen their prompt yet (``prefill_length`` None): rebuilt around empty tensors, the
    next call fills their prefill keys and values instead of the sliding window, as the
    first call of ``generate`` does."""

    def reopen(s: LayerSpec) -> LayerSpec:
        if not s.prefill:
            return s
        state = tuple(sorted({**dict(s.state), "prefill_length": None}.items()))
        return dataclasses.replace(s, state=state, prefill_done=False)

    return dataclasses.replace(spec, layers=tuple(reopen(s) for s in spec.layers))


def flatten_cache(cache) -> tuple[list[torch.Tensor], list[str], CacheSpec]:
    """:func:`flatten_layers` on ``cache.layers``, followed by the tensors of the
    attributes of :data:`STATE_LISTS` (named ``recurrent_state_<i>``)."""
    leaves, names, specs = flatten_layers(cache.layers)
    lists = []
    for attr, kind in STATE_LISTS.items():
        values = getattr(cache, attr, None)
        if values is None:
            continue
        present = tuple(i for i, v in enumerate(values) if isinstance(v, torch.Tensor))
        lists.append((attr, len(values), present))
        leaves.extend(values[i] for i in present)
        names.extend(f"{kind}_{i}" for i in present)
    return leaves, names, CacheSpec(specs, tuple(lists))


def unflatten_cache_parts(leaves: list, spec: CacheSpec) -> tuple[list, dict[str, list]]:
    """The layers and the attributes of :data:`STATE_LISTS` :func:`flatten_cache`
    flattened, rebuilt around ``leaves``."""
    n_extra = sum(len(present) for _, _, present in spec.lists)
    n_layers = len(leaves) - n_extra
    layers = unflatten_layers(leaves[:n_layers], spec.layers)
    it = iter(leaves[n_layers:])
    lists = {}
    for attr, length, present in spec.lists:
        values: list = [[] for _ in range(length)]
        for i in present:
            values[i] = next(it)
        lists[attr] = values
    return layers, lists
