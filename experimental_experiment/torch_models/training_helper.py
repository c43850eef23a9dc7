"""make_aot_ort and train_loop: training through onnxruntime with torch.compile."""

from __future__ import annotations

from typing import Any, Callable

import torch


def make_aot_ort(
    dynamic: bool = False,
    rewrite: bool = True,
    verbose: int = 0,
    exporter: str | None = None,
    target_opset: int | None = None,
    providers: list | None = None,
    session_options=None,
    verify: bool = False,
    debug: bool = False,
    dump_intermediate: str | None = None,
) -> tuple[Callable, dict[str, Any]]:
    """A torch.compile backend converting forward and backward graphs to ONNX.

    :param dynamic: graphs with symbolic dims (``torch.compile(..., dynamic=True)`` or
        a recompilation after a shape change) become one ONNX model with dynamic dims;
        with False, every new input signature gets its own model with static shapes
    :param rewrite: runs the optimizer (patterns, constant folding) on each model
    :param verbose: verbosity
    :param exporter: ``"custom"`` (our
        :func:`to_onnx <experimental_experiment.torch_interpreter.to_onnx>`) or
        ``"dynamo"`` (:func:`torch.onnx.export`); None
        follows the environment variable ``ONNXRT_CHANGE_REWRITER``: ``"custom"``
        unless it is ``"0"`` (torch.onnx.export captures every graph again and fails on
        most backward graphs, see :mod:`experimental_experiment.torch_dynamo`)
    :param target_opset: opset of the models
    :param providers: onnxruntime providers (default: from the inputs' device)
    :param session_options: :class:`onnxruntime.SessionOptions`
    :param verify: compares every call with eager execution of the graph
    :param debug: runs the models with onnx's reference evaluator instead of
        onnxruntime (:func:`onnx_debug_backend
        <experimental_experiment.torch_dynamo.onnx_debug_backend>`)
    :param dump_intermediate: with ``debug=True``, a folder where every intermediate
        result is saved
    :return: ``(backend, extra)``; ``extra`` holds the options and, as ``"compiler"``,
        the :class:`OnnxBackend <experimental_experiment.torch_dynamo.OnnxBackend>`
        given to ``aot_autograd`` (its session cache and ``stats``)

    .. code-block:: python

        local_aot_ort, _ = make_aot_ort(dynamic=True)
        optimized_mod = torch.compile(model, backend=local_aot_ort, fullgraph=True)
        train_loop(optimized_mod, input_ids, input_mask)
    """
    from torch._dynamo.backends.common import aot_autograd

    from ..xbuilder import OptimizationOptions

    options = OptimizationOptions(
        patterns="default" if rewrite else None, constant_folding=rewrite, verbose=verbose
    )
    compiler = _compiler(
        options,
        debug,
        exporter=exporter,
        target_opset=target_opset,
        providers=tuple(providers) if providers else None,
        session_options=session_options,
        dynamic=dynamic,
        verify=verify,
        verbose=verbose,
        dump_intermediate=dump_intermediate,
    )
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    extra = {"dynamic": dynamic, "options": options, "exporter": exporter, "compiler": compiler}
    return backend, extra


def _compiler(options, debug: bool, *, dump_intermediate, **kwargs):
    """The OnnxBackend (or OnnxDebugBackend) given to aot_autograd."""
    from ..torch_dynamo import BackendOptions, DebugOptions, OnnxBackend, OnnxDebugBackend

    if debug:
        return OnnxDebugBackend(
            DebugOptions(
                target_opset=kwargs["target_opset"],
                options=options,
                dump_intermediate=dump_intermediate,
                verify=kwargs["verify"],
                verbose=kwargs["verbose"],
            )
        )
    return OnnxBackend(BackendOptions(options=options, **kwargs))


def train_loop(
    model: torch.nn.Module,
    *args,
    loss_fn: Callable | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    steps: int = 1,
    lr: float = 1e-3,
) -> list[float]:
    """Runs ``steps`` of forward, loss, backward and an optimizer step.

    :param model: the model (compiled or not)
    :param args: its inputs
    :param loss_fn: computes the loss from the model's output; the default is the sum
        of the squares of the first floating tensor of the output
        (``last_hidden_state`` or ``logits`` for transformers' outputs)
    :param optimizer: default: SGD with learning rate ``lr``
    :param steps: number of steps
    :param lr: learning rate of the default optimizer
    :return: the losses

    .. code-block:: python

        import torch
        from experimental_experiment.torch_models.training_helper import train_loop

        model = torch.nn.Linear(4, 2)
        losses = train_loop(model, torch.randn(8, 4), steps=3, lr=0.01)
        assert len(losses) == 3
    """
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(*args)
        loss = loss_fn(out) if loss_fn else default_loss(out)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def default_loss(out) -> torch.Tensor:
    """Sum of the squares of the first floating tensor of ``out``."""
    if hasattr(out, "last_hidden_state"):
        out = out.last_hidden_state
    elif hasattr(out, "logits"):
        out = out.logits
    leaves = [
        t
        for t in torch.utils._pytree.tree_flatten(out)[0]
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    if not leaves:
        raise ValueError(f"no floating tensor in the model's output {type(out)}")
    return (leaves[0] ** 2).sum()
