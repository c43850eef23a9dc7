"""Converters composed of several ONNX ops (linalg, special functions, FFT, cumulative,
statistics, searching), exported with a dynamic dimension and run on two shapes.
The OpInfo tests cover them on torch's samples with static shapes."""

import pytest
import torch

from experimental_experiment.ext_test_case import OpModule, check_export


def _spd(b, n):
    a = torch.randn(b, n, n)
    return a @ a.transpose(-1, -2) + n * torch.eye(n)


CASES = {
    # name: (function, inputs of the first shape, inputs of the second, dynamic dims)
    "det": (torch.linalg.det, lambda b: (torch.randn(b, 4, 4),)),
    "inv": (torch.linalg.inv, lambda b: (torch.randn(b, 3, 3) + 3 * torch.eye(3),)),
    "solve": (
        torch.linalg.solve,
        lambda b: (torch.randn(b, 3, 3) + 3 * torch.eye(3), torch.randn(b, 3, 2)),
    ),
    "cholesky": (torch.linalg.cholesky, lambda b: (_spd(b, 4),)),
    "eigvalsh": (torch.linalg.eigvalsh, lambda b: (_spd(b, 4),)),
    "svdvals": (torch.linalg.svdvals, lambda b: (torch.randn(b, 4, 3),)),
    "pinv": (torch.linalg.pinv, lambda b: (torch.randn(b, 4, 3),)),
    "lu_factor": (lambda a: torch.linalg.lu_factor(a)[0], lambda b: (torch.randn(b, 4, 4),)),
    "cumprod": (lambda x: torch.cumprod(x, 0), lambda b: (torch.rand(b, 3) + 0.5,)),
    "cummax": (lambda x: torch.cummax(x, 0), lambda b: (torch.randn(b, 3),)),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, 0), lambda b: (torch.randn(b, 3),)),
    "median_dim": (lambda x: torch.median(x, 0), lambda b: (torch.randn(2 * b + 1, 3),)),
    "nanmedian": (torch.nanmedian, lambda b: (torch.randn(b, 3),)),
    "cdist": (torch.cdist, lambda b: (torch.randn(b, 3), torch.randn(4, 3))),
    "searchsorted": (
        lambda s, v: torch.searchsorted(s, v),
        lambda b: (torch.sort(torch.randn(7)).values, torch.randn(b, 2)),
    ),
    "lgamma": (torch.lgamma, lambda b: (torch.randn(b, 3) * 4,)),
    "digamma": (torch.digamma, lambda b: (torch.rand(b, 3) * 5 + 0.1,)),
    "erfinv": (torch.erfinv, lambda b: (torch.rand(b, 3) * 1.8 - 0.9,)),
    "i0e": (torch.special.i0e, lambda b: (torch.randn(b, 3) * 10,)),
    # both sides of the switch between the series and the asymptotic form (3 for J/Y,
    # 2 for K), zero and negative arguments (NaN for Y and K)
    "bessel_j0": (torch.special.bessel_j0, lambda b: (torch.randn(b, 3) * 8,)),
    "bessel_j1": (torch.special.bessel_j1, lambda b: (torch.randn(b, 3) * 8,)),
    "bessel_y0": (torch.special.bessel_y0, lambda b: (torch.rand(b, 3) * 12 - 1,)),
    "bessel_y1": (torch.special.bessel_y1, lambda b: (torch.rand(b, 3) * 12 + 0.05,)),
    "modified_bessel_k0": (torch.special.modified_bessel_k0, lambda b: (torch.rand(b, 3) * 8 - 1,)),
    "modified_bessel_k1": (
        torch.special.modified_bessel_k1,
        lambda b: (torch.rand(b, 3) * 8 + 0.05,),
    ),
    "scaled_modified_bessel_k0": (
        torch.special.scaled_modified_bessel_k0,
        lambda b: (torch.rand(b, 3) * 40,),
    ),
    "scaled_modified_bessel_k1": (
        torch.special.scaled_modified_bessel_k1,
        lambda b: (torch.rand(b, 3) * 40 + 0.05,),
    ),
    "ndtri": (torch.special.ndtri, lambda b: (torch.rand(b, 3) * 0.98 + 0.01,)),
    "log_ndtr": (torch.special.log_ndtr, lambda b: (torch.randn(b, 3) * 10,)),
    "hermite": (
        torch.special.hermite_polynomial_h,
        lambda b: (torch.randn(b, 3), torch.randint(0, 6, (b, 3)).float()),
    ),
    "atan2": (torch.atan2, lambda b: (torch.randn(b, 3), torch.randn(b, 3))),
    "rfft": (
        lambda x: torch.view_as_real(torch.fft.rfft(x, dim=0)),
        lambda b: (torch.randn(b, 3),),
    ),
    "fft_ortho": (
        lambda x: torch.view_as_real(torch.fft.fft(x, norm="ortho")),
        lambda b: (torch.randn(b, 8),),
    ),
    "irfft": (lambda x: torch.fft.irfft(torch.fft.rfft(x), n=8), lambda b: (torch.randn(b, 8),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_composition(name):
    fn, make = CASES[name]
    torch.manual_seed(0)
    first, second = make(2), make(3)
    ds = tuple({0: "batch"} for _ in first)
    if name == "searchsorted":
        ds = (None, {0: "batch"})
    if name == "cdist":
        ds = ({0: "batch"}, None)
    check_export(OpModule(fn), [first, second], dynamic_shapes=ds, atol=1e-3, rtol=1e-3)
