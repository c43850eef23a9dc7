"""Builds the case of one diffusers class
(:mod:`experimental_experiment.bench.diffusers_classes`): the tiny model
(:mod:`experimental_experiment.bench.diffusers_configs`) wrapped in a module whose
forward takes tensors and returns tensors, export and check inputs
(:mod:`experimental_experiment.bench.diffusers_inputs`), in the format of the zoo's
``build_case``. A class that cannot be built or run eagerly raises
``DiffusersCaseError`` (status ``skip``).

.. code-block:: python

    from experimental_experiment.bench.zoo_cases import ZooCase
    from experimental_experiment.bench.diffusers_cases import build_class_case

    data = build_class_case(ZooCase("SD3Transformer2DModel", "transformer-2d"))
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from .diffusers_classes import (
    MORE_FRAMES,
    SKIPPED,
    SQUARE,
    STATIC_BATCH,
    STATIC_FRAMES,
    STATIC_SIZE,
    UNINITIALIZED,
    DiffusersCaseError,
    diffusers_model_classes,
)
from .diffusers_configs import tiny_kwargs
from .diffusers_inputs import (
    CHECK_SIZES,
    EXPORT_SIZES,
    KIND_LAYOUTS,
    channel_candidates,
    make_inputs,
)


def flat_tensors(out) -> list[torch.Tensor]:
    """Tensors of a diffusers output (tuples, lists, output classes, a latent
    distribution gives its mode), in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flat_tensors(o)]
    if callable(getattr(out, "mode", None)):
        return [out.mode()]
    return []


class MethodModule(torch.nn.Module):
    """Calls ``model.<method>(**tensors, **fixed)`` and returns a tuple of tensors; the
    forward with the names of the tensors as arguments is made by ``wrap``."""

    def __init__(self, model, method: str, fixed: dict):
        super().__init__()
        self.model, self.method, self.fixed = model, method, fixed

    def call(self, **kwargs):
        out = getattr(self.model, self.method)(**kwargs, **self.fixed)
        return tuple(flat_tensors(out))


def wrap(model, method: str, names: list[str], fixed: dict) -> MethodModule:
    """A ``MethodModule`` whose forward has the arguments ``names`` (torch.export
    reads the signature to match the dynamic shapes)."""
    for name in names:
        if not name.isidentifier():
            raise DiffusersCaseError(f"input name {name!r} is not an identifier")
    args = ", ".join(names)
    call = ", ".join(f"{n}={n}" for n in names)
    src = f"def forward(self, {args}):\n    return self.call({call})\n"
    namespace: dict[str, Any] = {}
    exec(src, namespace)  # noqa: S102 (the names are checked identifiers)
    cls = type(
        f"{type(model).__name__}_{method}", (MethodModule,), {"forward": namespace["forward"]}
    )
    return cls(model, method, fixed)


def _eager(module, inputs: dict) -> list[torch.Tensor]:
    with torch.no_grad():
        return list(module(**copy.deepcopy(inputs)))


def _randomize_zero_weights(model, seed: int):
    """Zero-initialized weights (zero convolutions of ControlNets, adaLN-zero layers)
    get random values: a zero output would make every check pass."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2 and param.dtype.is_floating_point and not param.any():
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    return model


def tiny_model(name: str, seed: int = 0):
    """The tiny model of the diffusers class ``name`` in eval mode."""
    cls = diffusers_model_classes()[name]
    torch.manual_seed(seed)
    try:
        model = cls(**tiny_kwargs(cls))
    except Exception as e:
        raise DiffusersCaseError(f"tiny configuration of {name}: {type(e).__name__}: {e}") from e
    names = UNINITIALIZED.get(name, ())
    if names:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for pname, param in model.named_parameters():
                if pname.rsplit(".", 1)[-1] in names:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    return _randomize_zero_weights(model.eval(), seed)


def build_class_case(
    case, seed: int = 0, export_sizes: dict | None = None, check_sizes: dict | None = None
) -> dict[str, Any]:
    """The tiny model of ``case`` (``ZooCase(class name [.encode|.decode], kind)``)
    wrapped, with export and check inputs on which it ran eagerly (the first layout of
    the kind that runs, twice with the same result)."""
    name, _, method = case.model_type.partition(".")
    if name in SKIPPED or case.head == "container":
        raise DiffusersCaseError(SKIPPED.get(name, "container of other models"))
    model = tiny_model(name, seed)
    method = method or "forward"
    kind = case.head
    export_sizes = export_sizes or EXPORT_SIZES
    check_sizes = check_sizes or CHECK_SIZES
    if case.model_type in MORE_FRAMES:
        export_frames, check_frames = MORE_FRAMES[case.model_type]
        export_sizes = dict(export_sizes, frames=export_frames)
        check_sizes = dict(check_sizes, frames=check_frames)
    if name in SQUARE:  # height and width equal, both dynamic
        export_sizes = dict(export_sizes, width=export_sizes["height"])
        check_sizes = dict(check_sizes, width=check_sizes["height"])
    static = set()
    if case.model_type in STATIC_FRAMES:  # checked on the export's frame count
        check_sizes = dict(check_sizes, frames=export_sizes["frames"])
        static.add("frames")
    if case.model_type in STATIC_SIZE:  # checked on the export's height and width
        check_sizes = dict(check_sizes, height=export_sizes["height"], width=export_sizes["width"])
        static.update(("height", "width", "tokens"))
    if case.model_type in STATIC_BATCH:  # exported and checked with a batch of 1
        export_sizes = dict(export_sizes, batch=1)
        check_sizes = dict(check_sizes, batch=1)
        static.add("batch")
    first: Exception | None = None
    for layout in KIND_LAYOUTS.get(kind, ("3d", "4d", "packed", "5d")):
        for channels in channel_candidates(model.config, kind):
            try:
                inputs, ds, fixed = make_inputs(
                    model, method, layout, channels, export_sizes, kind, seed
                )
                check, _, _ = make_inputs(
                    model, method, layout, channels, check_sizes, kind, seed + 1
                )
                if static:
                    ds = {k: {a: d for a, d in v.items() if d not in static} for k, v in ds.items()}
                module = wrap(model, method, list(inputs), fixed).eval()
                outputs = _eager(module, inputs)
                if not outputs:
                    raise DiffusersCaseError(f"{name}.{method} returns no tensor")
                a, b = _eager(module, check), _eager(module, check)
                if any(not torch.equal(x, y) for x, y in zip(a, b)):
                    raise DiffusersCaseError(
                        f"{name}.{method} is random (two eager runs differ): nothing to compare"
                    )
            except DiffusersCaseError as e:
                first = first or e
                continue
            except Exception as e:  # the next layout may fit
                first = first or e
                continue
            return dict(
                model=module,
                inputs=inputs,
                check_inputs=check,
                dynamic_shapes=ds,
                cache=0,
                model_class=name,
                layout=layout,
            )
    assert first is not None
    if isinstance(first, DiffusersCaseError):
        raise first
    raise DiffusersCaseError(
        f"eager run of {name}.{method}: {type(first).__name__}: {str(first)[:300]}"
    ) from first
