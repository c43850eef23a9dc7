"""A corpus of size-dependent branches exported with dynamic dimensions: at ten sizes
each, inside and outside the range the export reports, the ONNX model either matches
eager PyTorch or the size is outside the reported range (never silently wrong)."""

import json
import warnings

import numpy as np
import onnxruntime
import pytest
import torch
import torch.nn.functional as F

from experimental_experiment.errors import ConstrainedDimensionWarning
from experimental_experiment.torch_interpreter import to_onnx
from experimental_experiment.torch_interpreter.capture.guard_ranges import METADATA_KEY


class ShiftedWindow(torch.nn.Module):
    """Swin's rule: pad to a multiple of the window, shift only when the padded size
    exceeds the window."""

    def forward(self, x):
        h = x.shape[1]
        y = F.pad(x, (0, 0, 0, (7 - h % 7) % 7))
        if y.shape[1] > 7:
            y = torch.roll(y, 3, dims=1)
        return y[:, :h] * 2


class SwinStage(torch.nn.Module):
    """Patch embedding (//4), merging (padded to even, //2), then the window branch of
    a later stage: the guard is on a chain of integer divisions of the input size."""

    def forward(self, x):
        y = F.avg_pool1d(x, 4)  # (B, C, L // 4)
        n = y.shape[2]
        y = F.avg_pool1d(F.pad(y, (0, n % 2)), 2)
        m = y.shape[2]
        y = F.pad(y, (0, (7 - m % 7) % 7))
        if 7 >= y.shape[2]:
            return y[..., :m] + 1
        return torch.roll(y, 3, dims=2)[..., :m] + 1


class AtLeast(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] >= 16:
            return x.mean(dim=1)
        return x.sum(dim=1)


class DivisionChain(torch.nn.Module):
    def forward(self, x):
        k = ((x.shape[1] // 4) + 1) // 2
        if k > 3:
            return x[:, :k] * 3
        return x[:, :k] - 1


class MultipleOfFour(torch.nn.Module):
    """A divisibility branch: the valid sizes are every fourth one, not an interval."""

    def forward(self, x):
        if x.shape[1] % 4 == 0:
            return x * 2
        return x * 3


class TallOrWide(torch.nn.Module):
    """A branch comparing two dynamic dimensions."""

    def forward(self, x):
        if x.shape[1] > x.shape[2]:
            return x.sum(dim=1)
        return x.sum(dim=2)


class ProductLoop(torch.nn.Module):
    """A mask written row by row over ``frames * positions`` rows (HunyuanVideo 1.5's
    causal mask): the capture unrolls ``range`` at the example's product and records
    the guard ``frames * positions == 6``, which no single dimension's range shows."""

    def forward(self, x):
        n_frame, n_hw = x.shape[1], x.shape[2]
        seq_len = n_frame * n_hw
        mask = torch.zeros((seq_len, seq_len), dtype=x.dtype)
        for i in range(seq_len):
            mask[i, : (i // n_hw + 1) * n_hw] = 1
        return mask * x.sum()


class PaddedMask(torch.nn.Module):
    """transformers' ``prepare_padding_mask``: the mask is padded when shorter than the
    cache and the new tokens, then read at their positions. The capture records
    ``seq + past - total <= 0`` (the branch not taken), met with equality by the
    example (a mask of ``past + seq`` positions, as every caller builds it)."""

    def forward(self, x, past, mask):
        kv = past.shape[1] + x.shape[1]
        if kv - mask.shape[1] > 0:
            mask = F.pad(mask, (0, kv - mask.shape[1]))
        m = mask[:, torch.arange(kv)]
        keys = torch.cat([past, x], dim=1)
        return (keys * m.unsqueeze(-1)).sum(dim=1)


class AtLeastEight(torch.nn.Module):
    """A lower bound exactly at the example size (8)."""

    def forward(self, x):
        if x.shape[1] >= 8:
            return x.mean(dim=1)
        return x.sum(dim=1)


def _export(model, x, ds):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, (x,), dynamic_shapes=ds)
    props = {p.key: p.value for p in onx.metadata_props}
    ranges = json.loads(props.get(METADATA_KEY, "{}"))
    warned = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    return onx, ranges, warned


def _inside(ranges: dict, shape: tuple) -> bool:
    for dim, r in ranges.items():
        axis = int(dim.split("[")[1].rstrip("]"))
        size = shape[axis]
        if (r["min"] is not None and size < r["min"]) or (r["max"] is not None and size > r["max"]):
            return False
        if r.get("step") and (size - r["min"]) % r["step"]:
            return False
    return True


def _check(model, example, ds, shapes):
    onx, ranges, warned = _export(model, example, ds)
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    wrong, outside = [], []
    for shape in shapes:
        x = torch.randn(*shape)
        expected = model(x).numpy()
        got = sess.run(None, {"x": x.numpy()})[0]
        ok = got.shape == expected.shape and np.allclose(got, expected, atol=1e-5)
        inside = _inside(ranges, shape)
        if not inside:
            outside.append(shape)
        if not ok:
            wrong.append(shape)
            assert not inside, (
                f"silently wrong at {shape}: reported ranges {ranges}, warnings {warned}"
            )
    return ranges, warned, wrong, outside


CASES = [
    (ShiftedWindow(), (2, 5, 3), {1: "h"}, [(2, n, 3) for n in (2, 3, 5, 6, 7, 8, 9, 13, 14, 30)]),
    (
        SwinStage(),
        (2, 3, 48),
        {2: "length"},
        [(2, 3, n) for n in (8, 16, 32, 48, 56, 60, 64, 72, 96, 128)],
    ),
    (AtLeast(), (2, 20, 3), {1: "n"}, [(2, n, 3) for n in (2, 5, 15, 16, 17, 20, 31, 32, 64, 100)]),
    (
        DivisionChain(),
        (2, 40, 3),
        {1: "n"},
        [(2, n, 3) for n in (4, 8, 24, 27, 28, 29, 40, 64, 100, 200)],
    ),
    (
        MultipleOfFour(),
        (2, 8, 3),
        {1: "n"},
        [(2, n, 3) for n in (4, 6, 8, 10, 12, 13, 16, 40, 41, 100)],
    ),
    (
        TallOrWide(),
        (2, 8, 6),
        {1: "h", 2: "w"},
        [
            (2, 8, 6),
            (2, 7, 7),
            (2, 9, 2),
            (2, 20, 5),
            (2, 6, 8),
            (2, 8, 8),
            (2, 12, 7),
            (2, 3, 2),
            (2, 100, 99),
            (2, 5, 9),
        ],
    ),
    (
        ProductLoop(),
        (2, 2, 3),
        {1: "frames", 2: "hw"},
        [(2, 2, 3), (2, 3, 2), (2, 2, 5), (2, 4, 3), (2, 3, 4), (2, 2, 4), (2, 5, 7)],
    ),
]


@pytest.mark.parametrize(
    "model,example,axes,shapes", CASES, ids=[type(c[0]).__name__ for c in CASES]
)
def test_size_dependent_branch_never_silently_wrong(model, example, axes, shapes):
    ranges, warned, wrong, outside = _check(model, torch.randn(*example), ({**axes},), shapes)
    # the corpus does exercise the branch: some sizes take the other one in eager
    assert wrong, f"no size took the other branch for {type(model).__name__}"
    assert ranges and warned, "the bound must be in the metadata and warned about"
    assert set(wrong) <= set(outside)


def test_swin_stage_names_the_branch_line():
    _, ranges, warned = _export(SwinStage(), torch.randn(2, 3, 48), ({2: "length"},))
    entry = ranges["x.shape[2]"]
    assert entry["max"] is not None and entry["max"] < 128
    assert entry["code"] == "if 7 >= y.shape[2]:"
    assert any("x.shape[2]" in w and "if 7 >= y.shape[2]:" in w for w in warned), warned


def test_no_branch_no_range():
    class Plain(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (0, (7 - x.shape[1] % 7) % 7)) * 2

    _, ranges, warned = _export(Plain(), torch.randn(2, 5), ({1: "n"},))
    assert ranges == {} and warned == []


def test_metadata_is_machine_independent():
    onx, _, _ = _export(ShiftedWindow(), torch.randn(2, 5, 3), ({1: "h"},))
    text = {p.key: p.value for p in onx.metadata_props}[METADATA_KEY]
    assert "/" not in text.split('"where": "')[1].split('"')[0]


def test_verify_dynamic_shapes_checks_the_reported_bounds():
    """One call: the bounds of the reported range pass, the sizes just outside are
    reported as outside (expected), nothing fails silently."""
    from experimental_experiment.torch_interpreter.result.verify import verify_dynamic_shapes

    model, x, ds = SwinStage(), torch.randn(2, 3, 48), ({2: "length"},)
    onx, ranges, _ = _export(model, x, ds)
    report = verify_dynamic_shapes(model, onx, (x,), dynamic_shapes=ds)
    names = {t.name: t for t in report.trials}
    high = ranges["x.shape[2]"]["max"]
    assert names["length=max"].passed and names["length=max"].dims["length"] == high
    assert names["length=max+1"].outside and not names["length=max+1"].passed
    assert report.ok, str(report)
    assert "outside the valid range" in str(report)


def test_divisibility_is_a_step_not_a_point():
    _, ranges, warned = _export(MultipleOfFour(), torch.randn(2, 8, 3), ({1: "n"},))
    entry = ranges["x.shape[1]"]
    assert entry["step"] == 4 and entry["min"] == 4 and entry["max"] is None, entry
    assert any("size % 4 == 0" in w for w in warned), warned


def test_loop_over_a_product_of_sizes_names_the_dimensions_and_the_loop():
    """``range(frames * hw)`` unrolled at the example: the equality of the product with
    the example's is reported on both dimensions, at the loop's line (it was left out as
    a relation between sizes, and another guard gave ``hw`` a wrong step of 2)."""
    _, ranges, warned = _export(ProductLoop(), torch.randn(2, 2, 3), ({1: "frames", 2: "hw"},))
    assert ranges["x.shape[1]"]["max"] == 2, ranges
    assert ranges["x.shape[2]"]["min"] == 3 and ranges["x.shape[2]"]["max"] == 3, ranges
    assert ranges["x.shape[2]"]["code"] == "for i in range(seq_len):", ranges
    for dim in ("x.shape[1]", "x.shape[2]"):
        assert any(dim in w and "for i in range(seq_len):" in w for w in warned), warned


def test_relation_between_sizes_is_still_not_a_range():
    """An equality larger sizes also satisfy (``width == 2 * height``) is a relation the
    inputs keep: no range, no warning."""

    class Twice(torch.nn.Module):
        def forward(self, x, y):
            return x.reshape(-1) + y.reshape(2, -1)[0]

    x, y = torch.randn(3, 4, 2, 3), torch.randn(2, 2, 36)
    ds = ({0: "a", 1: "b", 2: "e", 3: "f"}, {1: "c", 2: "d"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(Twice(), (x, y), dynamic_shapes=ds)
    props = {p.key: p.value for p in onx.metadata_props}
    warned = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    assert METADATA_KEY not in props and warned == [], (props, warned)


def test_pins_tells_a_constant_product_from_a_relation():
    """An equality with a constant product pins the sizes; a relation the inputs keep
    as they grow (a flattened size equal to another input's, a product of four) does
    not."""
    from experimental_experiment.torch_interpreter.capture.guard_ranges import _pins

    names = ["a", "b", "c", "d", "e"]
    values = [2, 3, 4, 5, 120]
    pinned = eval("lambda a, b, c, d, e: a * b * c == 24")  # noqa: S307
    flattened = eval("lambda a, b, c, d, e: a * b * c * d == e")  # noqa: S307
    floors = eval("lambda a, b, c, d, e: (1 + (c - 1) // 4) * (d // 2) == 2")  # noqa: S307
    assert _pins(pinned, frozenset("abc"), names, values)
    assert _pins(floors, frozenset("cd"), names, values)
    assert not _pins(flattened, frozenset("abcde"), names, values)


def _padded_mask_inputs(seq: int, past: int, total: int):
    return (
        torch.randn(2, seq, 4),
        torch.randn(2, past, 4),
        (torch.rand(2, total) > 0.3).to(torch.float32),
    )


def test_mask_covering_past_and_sequence_is_a_relation_not_a_range():
    """``seq + past <= total``, met with equality by the example, is how the inputs are
    built (Dots3-Note's and Mistral-Large-4's decoders): no range, no warning (scanned
    one size at a time it read as ``seq`` valid only up to 3, ``past`` up to 5 and
    ``total`` from 8 by steps of 7), and the model matches eager at sizes outside those."""
    model = PaddedMask()
    args = _padded_mask_inputs(3, 5, 8)
    ds = ({1: "seq"}, {1: "past"}, {1: "total"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, args, dynamic_shapes=ds)
    warned = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    props = {p.key: p.value for p in onx.metadata_props}
    assert warned == [] and METADATA_KEY not in props, (warned, props.get(METADATA_KEY))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for seq, past in [(6, 9), (10, 2)]:  # seq > 3 and past > 5 or total < 8
        x, p, m = _padded_mask_inputs(seq, past, seq + past)
        expected = model(x, p, m).numpy()
        got = np.asarray(sess.run(None, {"x": x.numpy(), "past": p.numpy(), "mask": m.numpy()})[0])
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_covers_needs_a_sum_met_exactly():
    """Two sizes equal at the example (a square image) stay a range; so do a bound by a
    constant, a strict inequality and a relation the example does not meet exactly."""
    import sympy

    from experimental_experiment.torch_interpreter.capture.guard_ranges import _covers

    s, p, t = sympy.symbols("s p t", positive=True, integer=True)
    hints = {"s": 3, "p": 5, "t": 8}
    assert _covers(sympy.Le(s + p - t, 0), hints)
    assert _covers(sympy.Ge(t, s + p), hints)
    assert not _covers(sympy.Le(p, t - 3), hints)  # two sizes
    assert not _covers(sympy.Le(s + p, 8), hints)  # a constant
    assert not _covers(sympy.Lt(s + p, t + 1), hints)  # strict
    assert not _covers(sympy.Le(s + p, t + 1), hints)  # not a homogeneous form
    assert not _covers(sympy.Le(s + p, 2 * t), hints)  # not met exactly
    assert not _covers(sympy.Le(s * p, 2 * t - 1), hints)  # a product


def test_bound_at_the_example_is_not_a_step():
    """``size >= 8`` exported at 8 is ``[8, inf]``: the sizes 9 to 14 were reported
    invalid (a step of 7, the period search seeing no size below 2 to refute it)."""
    ranges, warned, wrong, outside = _check(
        AtLeastEight(),
        torch.randn(2, 8, 3),
        ({1: "n"},),
        [(2, n, 3) for n in (3, 7, 8, 9, 10, 11, 14, 20)],
    )
    entry = ranges["x.shape[1]"]
    assert entry["min"] == 8 and entry["max"] is None and "step" not in entry, entry
    assert entry["code"] == "if x.shape[1] >= 8:", entry
    assert set(wrong) == set(outside) == {(2, 3, 3), (2, 7, 3)}
    assert any("x.shape[1] >= 8" in w for w in warned), warned


def test_square_example_keeps_the_branch_between_two_sizes():
    """``if h > w`` exported with a square example: ``h <= w`` holds with equality at
    the example but two equal sizes are no relation the inputs keep: both dimensions
    are bounded (``w`` from 8 on, not by steps of 7), never silently wrong."""
    ranges, warned, wrong, outside = _check(
        TallOrWide(),
        torch.randn(2, 8, 8),
        ({1: "h", 2: "w"},),
        [(2, 8, 8), (2, 9, 8), (2, 12, 5), (2, 5, 9), (2, 8, 9), (2, 8, 10), (2, 3, 3)],
    )
    assert wrong and set(wrong) <= set(outside)
    assert ranges["x.shape[1]"]["max"] == 8 and ranges["x.shape[1]"]["min"] is None, ranges
    assert ranges["x.shape[2]"]["min"] == 8 and "step" not in ranges["x.shape[2]"], ranges
    assert (2, 8, 9) not in outside and (2, 8, 10) not in outside
    assert len(warned) == 2, warned


class PositionSlice(torch.nn.Module):
    """Absolute position embeddings read after a cache (BERT's embeddings in a
    vision-encoder-decoder's text decoder): the rows ``past`` to ``past + seq`` of a
    table of 16, expanded to the batch. The capture records ``seq == len or len == 1``
    with ``len = max(0, min(16, past + seq) - min(16, past))``: true while
    ``past + seq <= 16``, a relation between the two inputs."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(16, 4))

    def forward(self, x, past):
        p, s = past.shape[1], x.shape[1]
        rows = self.pos[p : p + s].expand(x.shape[0], s, x.shape[2])
        return x + rows + past.mean(dim=1, keepdim=True)


def test_position_slice_after_a_cache_is_a_relation_not_a_range():
    """The broadcast guard of ``pos[past:past + seq].expand(batch, seq)`` is a relation
    between ``seq`` and ``past``: no range on either (it read as ``past`` valid only up to
    its example 5 for BERT's table of 512 rows, ``seq`` up to 3 here: each scanned alone,
    then narrowed together on a grid where both grew), and the model matches eager with
    a longer cache."""
    model = PositionSlice()
    args = (torch.randn(2, 3, 4), torch.randn(2, 5, 4))
    ds = ({1: "seq"}, {1: "past"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, args, dynamic_shapes=ds)
    warned = [str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)]
    props = {p.key: p.value for p in onx.metadata_props}
    assert warned == [] and METADATA_KEY not in props, (warned, props.get(METADATA_KEY))
    sess = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    for seq, past in [(3, 9), (1, 13), (5, 11)]:  # past > 5, past + seq <= 16
        x, p = torch.randn(2, seq, 4), torch.randn(2, past, 4)
        expected = model(x, p).detach().numpy()
        got = np.asarray(sess.run(None, {"x": x.numpy(), "past": p.numpy()})[0])
        np.testing.assert_allclose(got, expected, atol=1e-5)
