"""``flex_attention`` (``torch.nn.attention.flex_attention``) as a dense attention.

torch.export keeps ``flex_attention(query, key, value, score_mod, block_mask, scale,
kernel_options, score_mod_other_buffers, mask_mod_other_buffers)`` as one higher-order
node; ``score_mod`` and ``mask_mod`` (the last element of ``block_mask``) are
GraphModules written for scalars: ``score_mod(score, b, h, q_idx, kv_idx, *buffers)``
and ``mask_mod(b, h, q_idx, kv_idx, *buffers)``. Torch's eager implementation
vectorizes them with ``vmap``; here they are converted once, inline, on broadcast
tensors: ``b`` ``[B, 1, 1, 1]``, ``h`` ``[1, H, 1, 1]``, ``q_idx`` ``[1, 1, L, 1]``,
``kv_idx`` ``[1, 1, 1, S]`` (the index dtype of the captured mods, int32) and the scores
``[B, H, L, S]``. Before conversion, a copy of each body gets the fake values (shapes) of
those broadcast inputs, so the interpreter stamps the right shapes on its results.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ....xbuilder import GraphBuilder
from ....xbuilder.dtypes import i64
from ..._torch_helper import torch_dtype_to_onnx
from ...errors import ConversionError
from ..node_context import NodeContext
from ..registry import converter
from ._helpers import BOOL, aten, cast_to, rank_of
from .attention import _repeat_kv
from .control_flow import _as_name, _Call

_LAST = i64([-1])
#: ops a mask_mod made of ``noop_mask`` (no block_mask given) ends with
_ALWAYS_TRUE = (aten.new_ones.default, aten.ones.default)


@converter(torch.ops.higher_order.flex_attention)
def higher_order_flex_attention(
    g: GraphBuilder,
    query: str,
    key: str,
    value: str,
    score_mod: torch.fx.GraphModule,
    block_mask: tuple,
    scale: float,
    kernel_options: dict | None = None,
    score_mod_other_buffers: tuple = (),
    mask_mod_other_buffers: tuple = (),
    *,
    ctx: NodeContext,
):
    """flex_attention(Tensor query, Tensor key, Tensor value, GraphModule score_mod,
    tuple block_mask, float scale, dict kernel_options, Tensor[] score_mod_other_buffers,
    Tensor[] mask_mod_other_buffers) -> (Tensor output, Tensor logsumexp, Tensor max)

    A dense attention, as torch's eager (math) implementation: scores
    ``Q K^T * scale`` in float32 (float64 for float64 inputs), ``score_mod`` applied,
    ``-inf`` where ``mask_mod`` is False, softmax, times ``V``. Key and value heads are
    repeated for grouped queries (``enable_gqa``). A row where every score is ``-inf``
    gives 0 (not NaN), its logsumexp and max are ``-inf``; logsumexp and max are in
    base 2 (divided by ``ln 2``) as the higher-order op returns them.

    The block tensors of ``block_mask`` (``kv_num_blocks``, ``kv_indices``, ...) are
    ignored: the mask is ``mask_mod`` evaluated on every (query, key) pair. This equals
    the block-sparse kernel when the BlockMask was built by ``create_block_mask`` from
    the same ``mask_mod`` (what torch's eager implementation assumes too); a BlockMask
    whose blocks were edited by hand, or built from another mask, is not reproduced.
    """
    node = ctx.node
    fx_mask = node.args[4][-1]  # type: ignore[index]
    q_val, k_val = node.args[0].meta["val"], node.args[1].meta["val"]  # type: ignore[union-attr]
    wp = torch.float64 if q_val.dtype == torch.float64 else torch.float32
    ct = torch_dtype_to_onnx(wp)
    q, k, v = (cast_to(g, x, ct) for x in (query, key, value))
    hq, hk = q_val.shape[1], k_val.shape[1]
    if hq != hk:
        k, v = _repeat_kv(g, k, hq, hk), _repeat_kv(g, v, hq, hk)
    scores = g.op.Mul(g.op.MatMul(q, _transpose_last(g, k)), cast_to(g, float(scale), ct))

    dims = (q_val.shape[0], hq, q_val.shape[2], k_val.shape[2])
    bodies = _Bodies(q_val, dims, wp)
    call = _Call(ctx, "flex_attention")
    post = scores
    if not _is_identity(score_mod):
        gm = bodies.with_shapes(score_mod, _fx_arg(node, 7), scores=True)
        bound = [scores, *bodies.indices(g, query, key, gm, 1), *score_mod_other_buffers]
        post = _as_name(g, call.run(g, gm, bound, call.label(3))[0])
    minus_inf = cast_to(g, -np.inf, ct)
    mask_gm = block_mask[-1]
    if not _is_noop(mask_gm):
        gm = bodies.with_shapes(mask_gm, _fx_arg(node, 8), scores=False)
        bound = [*bodies.indices(g, query, key, gm, 0), *mask_mod_other_buffers]
        label = fx_mask.target if isinstance(fx_mask, torch.fx.Node) else "mask_mod"
        keep = _as_name(g, call.run(g, gm, bound, str(label))[0])
        if g.get_type(keep) != BOOL:
            keep = g.op.Cast(keep, to=BOOL)
        post = g.op.Where(keep, post, minus_inf)
    return _softmax_outputs(g, post, v, minus_inf, guard=post is not scores, ctx=ctx)


def _fx_arg(node: torch.fx.Node, i: int) -> tuple:
    """The FX nodes of the i-th argument (a tuple of buffers)."""
    names = ["score_mod_other_buffers", "mask_mod_other_buffers"]
    value = node.args[i] if len(node.args) > i else node.kwargs.get(names[i - 7], ())
    return tuple(value) if isinstance(value, (list, tuple)) else ()


def _transpose_last(g: GraphBuilder, x: str) -> str:
    rank = rank_of(g, x)
    return g.op.Transpose(x, perm=[*range(rank - 2), rank - 1, rank - 2])


def _softmax_outputs(g: GraphBuilder, post, v, minus_inf, *, guard: bool, ctx: NodeContext):
    """(output, logsumexp / ln 2, max / ln 2), as many as the node returns; ``guard``:
    some rows may be all ``-inf`` (masked), they give 0 and a logsumexp of ``-inf``."""
    ct = g.get_type(post)
    n = len(ctx.val) if isinstance(ctx.val, (list, tuple)) else 1
    probs = g.op.Softmax(post, axis=-1)
    top = g.op.ReduceMax(post, _LAST, keepdims=0) if guard or n > 2 else None
    lse = g.op.ReduceLogSumExp(post, _LAST, keepdims=0) if n > 1 else None
    if guard:
        masked = g.op.Equal(top, minus_inf)
        probs = g.op.Where(g.op.Unsqueeze(masked, _LAST), cast_to(g, 0.0, ct), probs)
        if lse is not None:
            lse = g.op.Where(masked, minus_inf, lse)
    inv_ln2 = cast_to(g, 1.0 / math.log(2.0), ct)
    results = [g.op.MatMul(probs, v)]
    results += [g.op.Mul(x, inv_ln2) for x in (lse, top)[: n - 1] if x is not None]
    return tuple(cast_to(g, r, ctx.dtype(i)) for i, r in enumerate(results))


def _is_identity(gm: Any) -> bool:
    """score_mod=None: the body returns its first input (the score) unchanged."""
    if gm is None:
        return True
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
    first = next(n for n in gm.graph.nodes if n.op == "placeholder")
    return out is first


def _is_noop(gm: Any) -> bool:
    """No mask: the body returns ones (``noop_mask``, what block_mask=None gives)."""
    if gm is None:
        return True
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
    if not isinstance(out, torch.fx.Node):
        return out is True
    if out.target in _ALWAYS_TRUE:
        return True
    return out.target == aten.full.default and out.args[1] is True


class _Bodies:
    """Broadcast index tensors and copies of the mods with their shapes."""

    def __init__(self, query_val: torch.Tensor, dims: tuple, working: torch.dtype):
        self.dims = dims
        self.working = working
        self.mode = torch._guards.detect_fake_mode([query_val])
        if self.mode is None:
            raise ConversionError("flex_attention: the query has no fake value to trace with")

    def with_shapes(self, gm: torch.fx.GraphModule, fx_buffers: tuple, *, scores: bool):
        """A copy of ``gm`` whose nodes hold the fake values of broadcast inputs."""
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        n_fixed = 5 if scores else 4
        idx_dtype = phs[n_fixed - 4].meta["val"].dtype
        mode = self.mode
        assert mode is not None
        with mode:
            fakes: list[Any] = []
            if scores:
                fakes.append(torch.empty(self.dims, dtype=self.working))
            for axis, size in enumerate(self.dims):
                shape = [1, 1, 1, 1]
                shape[axis] = size
                fakes.append(torch.empty(shape, dtype=idx_dtype))
        for b in fx_buffers:
            fakes.append(b.meta["val"] if isinstance(b, torch.fx.Node) else b)
        graph = torch.fx.Graph()
        graph.output(graph.graph_copy(gm.graph, {}))  # nodes and (copied) meta
        copied = torch.fx.GraphModule(gm, graph)
        _FakeProp(copied, mode).run(*fakes)
        return copied

    def indices(self, g: GraphBuilder, query: str, key: str, gm, first: int) -> list:
        """Names of b, h, q_idx, kv_idx, typed as the placeholders ``first`` to
        ``first + 3`` of ``gm``."""
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        names = []
        sources = [(query, 0), (query, 1), (query, 2), (key, 2)]
        for axis, (ph, (src, src_axis)) in enumerate(zip(phs[first : first + 4], sources)):
            to = torch_dtype_to_onnx(ph.meta["val"].dtype)
            names.append(cast_to(g, _arange(g, src, src_axis, axis, self.dims[axis]), to))
        return names


def _arange(g: GraphBuilder, x: str, src_axis: int, axis: int, size) -> str:
    """0, 1, ..., size - 1 on dimension ``axis`` of a 4-D tensor (1 elsewhere);
    ``size`` is dimension ``src_axis`` of ``x`` when it is not static."""
    shape = [1, 1, 1, 1]
    if isinstance(size, int):
        shape[axis] = size
        return g.make_constant(np.arange(size, dtype=np.int64).reshape(shape))
    n = g.op.Squeeze(g.op.Shape(x, start=src_axis, end=src_axis + 1), i64([0]))
    shape[axis] = -1
    return g.op.Reshape(g.op.Range(i64(0), n, i64(1)), i64(shape))


class _FakeProp(torch.fx.Interpreter):
    """Runs a body on fake tensors and keeps every result in ``node.meta["val"]``."""

    def __init__(self, gm: torch.fx.GraphModule, mode):
        super().__init__(gm)
        self.mode = mode

    def run_node(self, n: torch.fx.Node) -> Any:
        with self.mode:
            result = super().run_node(n)
        if n.op not in ("output",):
            n.meta["val"] = result
        return result

    def get_attr(self, target, args, kwargs) -> Any:
        value = super().get_attr(target, args, kwargs)
        if isinstance(value, torch.Tensor):
            return self.mode.from_tensor(value)
        return value
