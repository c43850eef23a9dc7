"""Random converters (rand, randn, randint, bernoulli) against onnxruntime and eager.

The draws differ between torch and onnxruntime: the models compared with eager only
depend on what is certain about a draw (its shape, dtype, range, the size of a random
mask); the distribution itself is checked on onnxruntime's outputs.
"""

import numpy as np
import onnxruntime
import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export
from experimental_experiment.torch_interpreter import to_onnx

DS = ({0: "batch", 1: "n"},)
SHAPES = [(2, 3), (5, 4)]


def _inputs(dtype=torch.float32):
    return [(torch.randn(s).to(dtype),) for s in SHAPES]


def _random_masking(x, keep=2):
    """ViTMAE's random_masking: a random permutation keeps part of the rows."""
    b, n = x.shape
    noise = torch.rand(b, n, device=x.device)
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    mask = torch.ones(b, n)
    mask[:, :keep] = 0
    mask = torch.gather(mask, dim=1, index=ids_restore)
    shuffled = torch.gather(x, 1, ids_shuffle)
    # the mask and the permutation are random, the number of masked rows and the
    # restored order are not
    return mask.sum(dim=1), torch.gather(shuffled, 1, ids_restore)


CASES = {
    "rand_range": lambda x: (
        ((torch.rand(x.shape[0], x.shape[1]) < 1) & (torch.rand(x.shape[0], x.shape[1]) >= 0)).to(
            x.dtype
        )
        + x
    ),
    "rand_floor": lambda x: torch.rand(x.shape[0], 3).floor() + x[:, :1],
    "rand_like": lambda x: torch.rand_like(x).floor() + x,
    "rand_like_dtype": lambda x: torch.rand_like(x, dtype=torch.float64).floor(),
    "randn_like_zero": lambda x: torch.randn_like(x) * 0 + x,
    "randn_shape": lambda x: torch.randn(x.shape[1], x.shape[0]).isfinite(),
    "randint_one": lambda x: torch.randint(3, 4, (x.shape[0], x.shape[1])),
    "randint_range": lambda x: (
        (torch.randint(5, (x.shape[0], 2)) >= 0) & (torch.randint(5, (x.shape[0], 2)) < 5)
    ),
    "randint_symint": lambda x: torch.randint(x.shape[0], x.shape[0] + 1, (x.shape[1],)),
    "randint_like": lambda x: torch.randint_like(x, 1) + x,
    "randint_like_low": lambda x: torch.randint_like(x, -2, -1) + x,
    "bernoulli_certain": lambda x: torch.bernoulli((x > 0).to(x.dtype)),
    "bernoulli_p": lambda x: torch.bernoulli(x, 1.0) + torch.bernoulli(x, 0.0),
    "random_masking": _random_masking,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_random(name):
    check_export(OpModule(CASES[name]), _inputs(), dynamic_shapes=DS)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_random_dtypes(dtype):
    """onnxruntime has no bfloat16 comparison: the reference evaluator runs that one."""

    def fn(x):
        r = torch.rand(x.shape[0], x.shape[1], dtype=dtype)
        n = torch.randn_like(x, dtype=dtype)
        inside = (r >= 0) & (r < 1)
        return inside.to(dtype), (n * 0).to(dtype), torch.bernoulli(x * 0 + 1)

    check_export(
        OpModule(fn), _inputs(dtype), dynamic_shapes=DS, use_reference=dtype == torch.bfloat16
    )


def _draws(fn, shape, dtype=torch.float32):
    """The model and two runs of the same session."""
    onx = to_onnx(OpModule(fn), (torch.zeros((2, 3), dtype=dtype),), dynamic_shapes=DS)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {sess.get_inputs()[0].name: torch.zeros(shape, dtype=dtype).numpy()}
    return onx, sess.run(None, feeds)[0], sess.run(None, feeds)[0]


def test_distributions():
    shape = (200, 300)
    _, u, u2 = _draws(lambda x: torch.rand(x.shape[0], x.shape[1]), shape)
    assert u.shape == shape and u.dtype == np.float32
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert not np.array_equal(u, u2)  # a new draw at every run: nothing was folded
    _, n, _ = _draws(lambda x: torch.randn_like(x), shape)
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    _, r, _ = _draws(lambda x: torch.randint(-3, 4, (x.shape[0], x.shape[1])), shape)
    assert r.dtype == np.int64 and set(np.unique(r)) == set(range(-3, 4))
    _, b, _ = _draws(lambda x: torch.bernoulli(x + 0.25), shape)
    assert set(np.unique(b)) == {0, 1} and abs(b.mean() - 0.25) < 0.01
    _, h, _ = _draws(lambda x: torch.rand_like(x), shape, torch.float16)
    assert h.dtype == np.float16 and h.min() >= 0 and h.max() < 1


def test_random_not_merged():
    """Two draws of the same shape stay two draws (no common subexpression)."""
    onx, out, _ = _draws(lambda x: torch.rand_like(x) - torch.rand_like(x), (50, 40))
    assert sum(n.op_type == "RandomUniformLike" for n in onx.graph.node) == 2
    assert np.abs(out).max() > 0
