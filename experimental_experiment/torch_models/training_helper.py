"""make_aot_ort and train_loop: training through onnxruntime with torch.compile."""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch


def make_aot_ort(dynamic: bool = False, rewrite: bool = True, verbose: int = 0,
                 exporter: str | None = None, target_opset: int | None = None,
                 providers: list[str] | None = None, session_options=None,
                 verify: bool = False) -> tuple[Callable, dict[str, Any]]:
    """A torch.compile backend converting forward and backward graphs to ONNX.

    :param dynamic: the graphs are expected to have dynamic shapes (give
        ``dynamic=True`` to :func:`torch.compile` as well)
    :param rewrite: runs the optimizer on each model
    :param verbose: verbosity
    :param exporter: ``"custom"`` (our exporter) or ``"dynamo"`` (torch.onnx.export);
        None follows ``ONNXRT_CHANGE_REWRITER`` (custom unless it is ``"0"``)
    :return: ``(backend, extra)``; ``extra`` holds the options used

    .. code-block:: python

        local_aot_ort, _ = make_aot_ort(dynamic=True)
        optimized_mod = torch.compile(model, backend=local_aot_ort, fullgraph=True)
        train_loop(optimized_mod, input_ids, input_mask)
    """
    from torch._dynamo.backends.common import aot_autograd

    from ..torch_dynamo import onnx_custom_backend
    from ..xbuilder import OptimizationOptions

    options = OptimizationOptions(patterns="default" if rewrite else None,
                                  constant_folding=rewrite, verbose=verbose)
    compiler = functools.partial(
        onnx_custom_backend, exporter=exporter, target_opset=target_opset, options=options,
        providers=providers, session_options=session_options, verify=verify,
        verbose=verbose,
    )
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    return backend, {"dynamic": dynamic, "options": options, "exporter": exporter}


def train_loop(model: torch.nn.Module, *args, loss_fn: Callable | None = None,
               optimizer: torch.optim.Optimizer | None = None, steps: int = 1):
    """Runs ``steps`` of forward, loss, backward and an SGD step; returns the losses.

    The default loss is the sum of the squares of the first output's tensor(s).
    """
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(*args)
        loss = loss_fn(out) if loss_fn else _default_loss(out)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def _default_loss(out) -> torch.Tensor:
    if hasattr(out, "last_hidden_state"):
        out = out.last_hidden_state
    elif hasattr(out, "logits"):
        out = out.logits
    leaves = [t for t in torch.utils._pytree.tree_flatten(out)[0]
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return sum((t ** 2).sum() for t in leaves[:1])
