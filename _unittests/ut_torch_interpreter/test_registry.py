"""The converter registry passes a converter its node context only when it declares
the keyword-only parameter ``ctx``, read from the signature once."""

import functools

import torch

from experimental_experiment.torch_interpreter.convert.registry import (
    call_converter,
    find_converter,
    takes_context,
)

aten = torch.ops.aten


def _plain(g, x, y=1):
    return ("plain", x, y)


def _with_ctx(g, x, y=1, *, ctx):
    return ("ctx", x, y, ctx)


def _kwargs_only(g, x, **kwargs):
    return ("kwargs", x, kwargs)


def _positional_ctx(g, ctx):  # a schema argument called ctx, not the context
    return ("positional", ctx)


def test_takes_context():
    assert takes_context(_with_ctx)
    assert takes_context(functools.partial(_with_ctx, y=2))
    assert not takes_context(_plain)
    assert not takes_context(_kwargs_only)  # **kwargs does not ask for the context
    assert not takes_context(_positional_ctx)
    assert not takes_context(len)  # a builtin without a signature


def test_call_converter():
    ctx = object()
    assert call_converter(_with_ctx, "g", ("x",), {"y": 3}, ctx) == ("ctx", "x", 3, ctx)
    assert call_converter(_plain, "g", ("x",), {"y": 3}, ctx) == ("plain", "x", 3)
    assert call_converter(_kwargs_only, "g", ("x",), {"a": 1}, ctx) == (
        "kwargs", "x", {"a": 1})
    assert call_converter(_positional_ctx, "g", ("v",), {}, ctx) == ("positional", "v")


def test_builtin_converters_declare_ctx_when_they_need_it():
    # relu needs nothing, zeros_like needs the output dtype
    assert not takes_context(find_converter(aten.relu.default, 18))
    assert takes_context(find_converter(aten.zeros_like.default, 18))
