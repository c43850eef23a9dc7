"""Error texts on the benchmark pages keep what the reader needs: digits, the operator
named on the line after '... for', the command after a colon."""

from experimental_experiment.bench import op_coverage, zoo
from experimental_experiment.bench.report_format import head_line

FALLBACK = (
    "no converter, even after the decomposition fallback, for\n"
    "aten.special_bessel_j0.default (torch has no decomposition for it), first "
    "called by node 'special_bessel_j0'\nWhat to try: register a converter"
)


def test_head_line_follows_an_announcing_line():
    assert head_line(FALLBACK).endswith(
        "for aten.special_bessel_j0.default (torch has no "
        "decomposition for it), first called by node "
        "'special_bessel_j0'"
    )
    assert head_line("\n  one line  \nsecond") == "one line"
    assert head_line("install it:\npip install detectron2") == (
        "install it: pip install detectron2"
    )
    assert head_line("") == ""


def test_op_coverage_detail_names_the_operator():
    try:
        try:
            raise NotImplementedError(FALLBACK)
        except NotImplementedError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        text = op_coverage.first_line(e)
    assert text.startswith("RuntimeError <- NotImplementedError: no converter")
    assert "aten.special_bessel_j0.default" in text


def test_zoo_error_keeps_digits():
    e = ImportError(
        "LayoutLMv2Model requires the detectron2 library but it was not found "
        "in your environment. Check out the instructions:\nhttps://x/2"
    )
    text = zoo.first_line(e)
    assert text.startswith("ImportError: LayoutLMv2Model requires the detectron2 library")
    assert text.endswith("instructions: https://x/2")
    assert zoo.cause_bucket("config", text).startswith("config: ImportError: LayoutLMv2Model")


def test_constructs_detail_is_not_cut_at_120_characters():
    from experimental_experiment.bench.constructs import _first_line

    outer = "ConversionError: Failed to convert the exported program to an ONNX model. " * 2
    try:
        try:
            raise KeyError("op='h16bench.add_scaled_'")
        except KeyError as e:
            raise RuntimeError(outer) from e
    except RuntimeError as e:
        text = _first_line(e)
    assert text.startswith(f"RuntimeError: {outer.strip()} <- KeyError:")
    assert "h16bench.add_scaled_" in text
