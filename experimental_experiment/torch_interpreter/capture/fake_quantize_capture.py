"""Fake-quantize operators at capture time.

Shape functions: torch 2.13 gives no meta kernel to
``fake_quantize_per_tensor_affine_cachemask`` and its siblings: torch.export runs them
on real tensors, which fails as soon as a dimension is dynamic
(``UnsupportedOperatorException``). Each output has the shape of the input (a float
tensor, and a boolean mask for the ``cachemask`` variants).
:func:`register_fake_quantize_kernels` registers the missing ones once; an operator
torch already covers is left alone.

Disabled observers: ``fused_moving_avg_obs_fake_quant`` (torchao's QAT observer and fake
quantizer) declares that it updates four buffers, which neither the in-place rewrite of
the capture nor ``run_decompositions`` always handles. Once its observer is off (the
model is trained, the deployment case) it changes nothing:
:func:`freeze_disabled_observers` replaces it by the plain fake quantization it computes.

``FakeQuantize`` modules (torch.ao's and torchao's) test their switches
(``if self.observer_enabled[0] == 1``), a branch on a buffer torch.export cannot take:
:func:`fixed_fake_quantizers` gives each one a forward without the switches, read before
the capture, for the time of the capture.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import types
from typing import Iterator

import torch

from ..errors import UnsupportedOpError

logger = logging.getLogger(__name__)


def _with_mask(x, *args):
    return torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)


def _like(x, *args, **kwargs):
    return torch.empty_like(x)


#: operator name -> fake kernel
_KERNELS = {
    "fake_quantize_per_tensor_affine_cachemask": _with_mask,
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams": _with_mask,
    "fake_quantize_per_channel_affine_cachemask": _with_mask,
    "_fake_quantize_learnable_per_tensor_affine": _like,
    "_fake_quantize_learnable_per_channel_affine": _like,
}
_registered: list[str] = []


def register_fake_quantize_kernels() -> list[str]:
    """Registers the fake kernels torch is missing (once); returns the operators that got
    one from this module."""
    if _registered:
        return list(_registered)
    for name, kernel in _KERNELS.items():
        qualname = f"aten::{name}"
        if not hasattr(torch.ops.aten, name) or torch._C._dispatch_has_kernel_for_dispatch_key(
            qualname, "Meta"
        ):
            continue
        try:
            torch.library.register_fake(qualname, kernel)
        except RuntimeError as e:  # registered elsewhere already
            logger.debug("no fake kernel registered for %s: %s", qualname, e)
            continue
        _registered.append(name)
    return list(_registered)


def _buffer_value(ep: torch.export.ExportedProgram, node) -> torch.Tensor | None:
    """The value of the buffer or constant a placeholder of ``ep`` stands for."""
    if not isinstance(node, torch.fx.Node) or node.op != "placeholder":
        return None
    sig = ep.graph_signature
    name = sig.inputs_to_buffers.get(node.name) or sig.inputs_to_lifted_tensor_constants.get(
        node.name
    )
    if name is None:
        return None
    value = ep.state_dict.get(name, ep.constants.get(name))
    return value if isinstance(value, torch.Tensor) else None


def freeze_disabled_observers(ep: torch.export.ExportedProgram) -> int:
    """Replaces every ``fused_moving_avg_obs_fake_quant`` whose observer is off by
    ``fake_quantize_per_tensor_affine`` (per channel when it is), or by its input when
    the fake quantization is off too; returns the number of replaced nodes."""
    op = torch.ops.aten.fused_moving_avg_obs_fake_quant.default
    graph, replaced = ep.graph_module.graph, 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not op:
            continue
        args = list(node.args) + [False, False][len(node.args) - 11 :]
        (
            x,
            observer_on,
            fake_quant_on,
            _,
            _,
            scale,
            zero_point,
            _,
            quant_min,
            quant_max,
            ch_axis,
            per_row,
        ) = args[:12]
        observer, fake_quant = _buffer_value(ep, observer_on), _buffer_value(ep, fake_quant_on)
        if observer is None or fake_quant is None or bool(observer.reshape(-1)[0]):
            continue
        if not bool(fake_quant.reshape(-1)[0]):
            node.replace_all_uses_with(x)
        else:
            with graph.inserting_before(node):
                if per_row:
                    new = graph.call_function(
                        torch.ops.aten.fake_quantize_per_channel_affine.default,
                        (x, scale, zero_point, ch_axis, quant_min, quant_max),
                    )
                else:
                    new = graph.call_function(
                        torch.ops.aten.fake_quantize_per_tensor_affine.tensor_qparams,
                        (x, scale, zero_point, quant_min, quant_max),
                    )
            new.meta.update(node.meta)
            node.replace_all_uses_with(new)
        graph.erase_node(node)
        replaced += 1
    if replaced:
        graph.lint()
        ep.graph_module.recompile()
        logger.info(
            "fused_moving_avg_obs_fake_quant with the observer off replaced by a "
            "fake quantization: %d",
            replaced,
        )
    return replaced


def _fake_quantize_classes() -> tuple:
    """The ``FakeQuantize`` classes whose ``forward`` branches on its switches, among the
    modules already imported (a model holding one has imported its module)."""
    classes = []
    for name in ("torch.ao.quantization.fake_quantize", "torchao.quantization.pt2e.fake_quantize"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "FakeQuantize"):
            classes.append(module.FakeQuantize)
    return tuple(classes)


def _fake_quantize_only(self, x):
    """FakeQuantize.forward once its observer is off and its fake quantization on."""
    observer = self.activation_post_process
    if self.is_per_channel:
        return torch.fake_quantize_per_channel_affine(
            x, self.scale, self.zero_point, self.ch_axis, observer.quant_min, observer.quant_max
        )
    return torch.fake_quantize_per_tensor_affine(
        x, self.scale, self.zero_point, observer.quant_min, observer.quant_max
    )


def _unchanged(self, x):
    return x


def _switch(module: torch.nn.Module, name: str) -> bool:
    """The value of a FakeQuantize switch held in a one-element buffer."""
    buffer = getattr(module, name)
    assert isinstance(buffer, torch.Tensor), f"{name} of {type(module).__name__} is {buffer!r}"
    return bool(buffer.reshape(-1)[0])


@contextlib.contextmanager
def fixed_fake_quantizers(model: torch.nn.Module) -> Iterator[int]:
    """For the time of the capture, every ``FakeQuantize`` submodule of ``model`` (exactly
    that class, its ``forward`` not overridden) computes what its switches select; yields
    the number of modules changed. A module observing raises
    :class:`~experimental_experiment.torch_interpreter.errors.UnsupportedOpError`.

    .. code-block:: python

        with fixed_fake_quantizers(model):
            ep = torch.export.export(model, args)

    It also registers the fake kernels of the fake-quantize operators torch lacks
    (:func:`register_fake_quantize_kernels`), needed with dynamic shapes.
    """
    register_fake_quantize_kernels()
    changed = []
    if isinstance(model, torch.nn.Module) and not isinstance(model, torch.fx.GraphModule):
        classes = _fake_quantize_classes()
        for name, module in model.named_modules():
            if type(module) not in classes or "forward" in vars(module):
                continue
            if _switch(module, "observer_enabled"):
                raise UnsupportedOpError(
                    f"the FakeQuantize module {name!r} has its observer on: each call "
                    "would update its statistics, which an ONNX graph cannot do; call "
                    "model.apply(torch.ao.quantization.disable_observer) before exporting",
                    op=type(module).__name__,
                    argument="observer_enabled",
                )
            on = _switch(module, "fake_quant_enabled")
            module.forward = types.MethodType(_fake_quantize_only if on else _unchanged, module)
            changed.append(module)
    try:
        yield len(changed)
    finally:
        for module in changed:
            del module.forward
