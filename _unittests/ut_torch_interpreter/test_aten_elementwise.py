"""Elementwise converters against onnxruntime and eager torch, on two shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export

DS = ({0: "batch", 1: "n"},)
SHAPES = [(2, 3), (5, 4)]


def _inputs(*dtypes, positive=False):
    sets = []
    for shape in SHAPES:
        args = []
        for dtype in dtypes:
            if dtype.is_floating_point:
                t = torch.rand(shape) + 0.5 if positive else torch.randn(shape)
                args.append(t.to(dtype))
            elif dtype == torch.bool:
                args.append(torch.rand(shape) > 0.5)
            else:
                args.append(torch.randint(1 if positive else -5, 6, shape, dtype=dtype))
        sets.append(tuple(args))
    return sets


BINARY = {
    "add": lambda x, y: x + y,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=2),
    "sub": lambda x, y: x - y,
    "rsub": lambda x, y: 1 - x + y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y.abs() + 1),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "ge": lambda x, y: x >= y,
    "where": lambda x, y: torch.where(x > y, x, y),
    "scalar_mix": lambda x, y: x * 2 + 1.5 - y / 3,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_binary(name, dtype):
    fn = BINARY[name]
    check_export(
        OpModule(fn),
        _inputs(dtype, dtype),
        dynamic_shapes=DS * 2,
        atol=1e-2 if dtype == torch.float16 else 1e-4,
    )


UNARY = {
    "abs": torch.abs,
    "neg": torch.neg,
    "exp": torch.exp,
    "sin": torch.sin,
    "cos": torch.cos,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "sign": torch.sign,
    "trunc": torch.trunc,
    "square": torch.square,
    "clamp": lambda x: torch.clamp(x, -0.5, 0.5),
    "clamp_min": lambda x: torch.clamp_min(x, 0.1),
}
POSITIVE = {
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "log2": torch.log2,
    "log1p": torch.log1p,
    "reciprocal": torch.reciprocal,
    "pow": lambda x: x**2.5,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    check_export(OpModule(UNARY[name]), _inputs(torch.float32), dynamic_shapes=DS)


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_unary_positive(name):
    check_export(OpModule(POSITIVE[name]), _inputs(torch.float32, positive=True), dynamic_shapes=DS)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_div_rounding(mode, dtype):
    fn = OpModule(lambda x, y: torch.div(x, y, rounding_mode=mode))
    check_export(fn, _inputs(dtype, dtype, positive=True), dynamic_shapes=DS * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_remainder(dtype):
    fn = OpModule(lambda x, y: torch.remainder(x, y) + torch.fmod(x, y))
    sets = _inputs(dtype, dtype, positive=True)
    sets = [(x - 3, y) for x, y in sets]
    check_export(fn, sets, dynamic_shapes=DS * 2)


def test_logical():
    fn = OpModule(lambda x, y: (x & y) | ~x ^ torch.logical_and(x, y))
    check_export(fn, _inputs(torch.bool, torch.bool), dynamic_shapes=DS * 2)


def test_bool_with_int_and_float_tensor():
    fn = OpModule(lambda x, y: (x > 0).to(torch.int64) + y)
    check_export(fn, _inputs(torch.float32, torch.int64), dynamic_shapes=DS * 2)


def test_bfloat16_with_reference():
    fn = OpModule(lambda x, y: x * y + 1)
    check_export(
        fn,
        _inputs(torch.bfloat16, torch.bfloat16),
        dynamic_shapes=DS * 2,
        atol=5e-2,
        rtol=5e-2,
        use_reference=True,
    )


ROUNDING = {
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "round_decimals": lambda x: torch.round(x, decimals=1),
    "round_decimals_neg": lambda x: torch.round(x, decimals=-1),
}
# onnxruntime's CPU has no bfloat16 kernel for these: computed in float32
BF16_UNARY = {
    "abs": torch.abs,
    "neg": torch.neg,
    "exp": torch.exp,
    "sin": torch.sin,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "sign": torch.sign,
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_onnxruntime(name, dtype):
    """Runs in onnxruntime (not the reference evaluator), bfloat16 included."""
    sets = [(torch.randn(s).mul(20).to(dtype),) for s in SHAPES]
    check_export(OpModule(ROUNDING[name]), sets, dynamic_shapes=DS, atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_bfloat16_onnxruntime(mode):
    # torch divides with fmod (exact quotient), ONNX with Div: off by one at boundaries
    fn = OpModule(lambda x: torch.div(x, 0.3, rounding_mode=mode))
    sets = [(torch.randn(s).mul(20).to(torch.bfloat16),) for s in SHAPES]
    check_export(fn, sets, dynamic_shapes=DS, atol=1, rtol=0)


@pytest.mark.parametrize("name", sorted(BF16_UNARY))
def test_unary_bfloat16_onnxruntime(name):
    check_export(
        OpModule(BF16_UNARY[name]), _inputs(torch.bfloat16), dynamic_shapes=DS, atol=1e-2, rtol=1e-2
    )


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
def test_rounding_integers(name):
    check_export(OpModule(ROUNDING[name]), _inputs(torch.int64), dynamic_shapes=DS)
