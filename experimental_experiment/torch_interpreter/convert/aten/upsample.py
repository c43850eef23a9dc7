"""Upsampling (F.interpolate): nearest, nearest-exact, (bi/tri)linear, bicubic via Resize."""

from __future__ import annotations

import numpy as np

from ....xbuilder import GraphBuilder
from ..registry import converter
from ._helpers import aten, rank_of, shape_tensor
from ._nn_helpers import expand_param

# mode -> Resize attributes (torch's coordinate mappings)
_NEAREST = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
_NEAREST_EXACT = dict(
    mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"
)


def _interp(mode: str, align_corners: bool) -> dict:
    ctm = "align_corners" if align_corners else "half_pixel"
    if mode == "cubic":
        # torch's bicubic: a=-0.75, no clamping of the source coordinate
        return dict(mode="cubic", coordinate_transformation_mode=ctm, cubic_coeff_a=-0.75)
    return dict(mode="linear", coordinate_transformation_mode=ctm)


def _resize(g: GraphBuilder, x, output_size, scales, spatial: int, attrs: dict):
    """Resizes the last ``spatial`` axes to ``output_size`` or by ``scales``. Scales and
    sizes cover every axis (no ``axes`` attribute): onnxruntime 1.32's layout optimizer
    empties the ``sizes`` of a Resize with ``axes`` and refuses the model."""
    rank = rank_of(g, x)
    lead = rank - spatial
    if scales is not None and all(s is not None for s in scales):
        values = [1.0] * lead + list(expand_param(list(scales), spatial, "scale_factors"))
        return g.op.Resize(x, None, np.array(values, dtype=np.float32), **attrs)
    if output_size is None:
        raise ValueError("upsample: neither output_size nor scale_factors is given")
    shape = g.get_shape(x) if g.has_shape(x) else None
    known = shape is not None and all(isinstance(d, int) for d in shape[:lead])
    leading = list(shape[:lead]) if known else []
    sizes = shape_tensor(g, leading + list(expand_param(list(output_size), spatial, "output_size")))
    if not known:
        sizes = g.op.Concat(g.op.Shape(x, start=0, end=lead), sizes, axis=0)
    return g.op.Resize(x, None, None, sizes, **attrs)


def _register(name: str, spatial: int, attrs_of):
    """Registers the .vec overload and the .default one (separate scales) of ``name``."""
    packet = getattr(aten, name)

    def _split(args, kwargs):
        # align_corners (bool, linear modes only) then scales, positional or by name
        align = kwargs.pop("align_corners", None)
        bools = [a for a in args if isinstance(a, bool)]
        rest = [a for a in args if not isinstance(a, bool)] + list(kwargs.values())
        return bool(align if align is not None else (bools[0] if bools else False)), rest

    def vec(g: GraphBuilder, x, output_size=None, *args, **kwargs):
        align, rest = _split(args, kwargs)
        scale_factors = rest[0] if rest else None
        return _resize(g, x, output_size, scale_factors, spatial, attrs_of(align))

    def default(g: GraphBuilder, x, output_size, *args, **kwargs):
        align, scales = _split(args, kwargs)
        scales = scales if len(scales) == spatial else None
        return _resize(g, x, output_size, scales, spatial, attrs_of(align))

    for fn, overload in ((vec, "vec"), (default, "default")):
        op = getattr(packet, overload, None)
        if op is None:
            continue
        fn.__name__ = f"aten_{name}_{overload}"
        fn.__doc__ = str(op._schema)
        converter(op)(fn)


for _n, _d in ((1, "1d"), (2, "2d"), (3, "3d")):
    _register(f"upsample_nearest{_d}", _n, lambda align: _NEAREST)
    _register(f"_upsample_nearest_exact{_d}", _n, lambda align: _NEAREST_EXACT)
_register("upsample_linear1d", 1, lambda align: _interp("linear", align))
_register("upsample_bilinear2d", 2, lambda align: _interp("linear", align))
_register("upsample_trilinear3d", 3, lambda align: _interp("linear", align))
_register("upsample_bicubic2d", 2, lambda align: _interp("cubic", align))
