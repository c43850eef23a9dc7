"""Every (model type, head) pair of the zoo (``--heads all``): the listing, the CSV keyed
by head, the skipped cases with their reason, and one tiny case per new kind of inputs
exported by to_onnx and checked with onnxruntime on a second size."""

import ast
import os

import pytest

from experimental_experiment.bench import zoo, zoo_heads
from experimental_experiment.bench.zoo import main, read_rows, run_case, run_case_inline
from experimental_experiment.bench.zoo_cases import (
    CHECK_SIZES,
    EXPORT_SIZES,
    build_case,
    list_cases,
)
from experimental_experiment.bench.zoo_diffusers import DIFFUSERS_TYPES
from experimental_experiment.bench.zoo_head_inputs import GROW
from experimental_experiment.bench.zoo_heads import (
    ALL_HEADS,
    HEADS,
    NEW_HEADS,
    ZooCase,
    head_pairs,
    heads_of,
)
from experimental_experiment.bench.zoo_report import render_heads


def test_first_heads_stay_the_default():
    first = list_cases()
    assert len({c.model_type for c in first}) == len(first)  # one head per type
    assert {c.head for c in first} <= set(HEADS) | set(DIFFUSERS_TYPES.values())
    assert list_cases(heads="first") == first


def test_all_heads_lists_every_pair():
    pairs = set(head_pairs("all"))
    assert {
        ("albert", "question-answering"),
        ("albert", "masked-lm"),
        ("clip", "zero-shot-image-classification"),
        ("detr", "object-detection"),
        ("patchtst", "time-series-regression"),
    } <= pairs
    cases = list_cases(heads="all")
    assert {(c.model_type, c.head) for c in cases} == pairs
    assert {c.head for c in cases} == set(ALL_HEADS)
    # a sample keeps every head, at most 2 types each
    sample = list_cases(heads="all", per_head=2)
    assert {c.head for c in sample} == set(ALL_HEADS)
    assert max(sum(c.head == h for c in sample) for h in ALL_HEADS) == 2
    # the heads in the order given
    assert list_cases(["albert"], heads="question-answering,masked-lm") == [
        ZooCase("albert", "question-answering"),
        ZooCase("albert", "masked-lm"),
    ]
    with pytest.raises(ValueError, match="unknown heads"):
        heads_of("no-such-head")


def test_inputs_do_not_import_the_cases():
    # the cases import the inputs: neither the inputs nor the heads import the cases,
    # not even lazily or for type checking
    folder = os.path.dirname(zoo_heads.__file__)
    for name in ("zoo_inputs.py", "zoo_head_inputs.py", "zoo_heads.py"):
        with open(os.path.join(folder, name)) as f:
            tree = ast.parse(f.read())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "zoo_cases" not in imported, name


def test_skipped_case_is_a_row_with_its_reason():
    row = run_case_inline(ZooCase("superglue", "keypoint-matching"), "to_onnx")
    assert row["status"] == "skip" and row["stage"] == "" and "keypoints" in row["cause"]


def _fake_case(case, exporter, *, atol=1e-3):
    return dict(model_type=case.model_type, head=case.head, exporter=exporter, status="pass")


def test_main_keys_rows_by_head(tmp_path, monkeypatch):
    monkeypatch.setattr(zoo, "run_case_inline", _fake_case)
    out = str(tmp_path / "heads.csv")
    argv = ["--output", out, "--types", "albert", "--exporters", "to_onnx", "--heads", "all"]
    assert main(argv) == 0
    assert main(argv) == 0  # resumed: nothing runs twice
    heads = [r["head"] for r in read_rows(out)]
    assert heads == sorted(h for t, h in head_pairs("all") if t == "albert")
    assert len(heads) > 1 and "question-answering" in heads


@pytest.mark.parametrize(
    "model_type,head",
    [
        ("albert", "multiple-choice"),  # tokens (batch, choices, seq)
        ("albert", "question-answering"),  # tokens, start and end logits
        ("clip", "zero-shot-image-classification"),  # tokens and pixels
        ("aria", "image-text-to-text"),  # pixels and a prompt, one prefill
        ("patchtst", "time-series-classification"),  # past values and their mask
        ("sam", "mask-generation"),  # pixels and a point prompt
        ("beit", "backbone"),  # pixels of a dynamic size
    ],
)
def test_new_head_exports(model_type, head):
    assert head in NEW_HEADS
    row = run_case(ZooCase(model_type, head), "to_onnx", timeout=120)
    assert row["status"] == "pass", row
    assert row["cache"] in (0, "0") and float(row["max_diff"]) <= 1e-3


def test_dense_head_checks_another_image_size():
    data = build_case(ZooCase("beit", "backbone"))
    export, check = data["inputs"]["pixel_values"], data["check_inputs"]["pixel_values"]
    assert check.shape[0] == CHECK_SIZES["batch"] != export.shape[0] == EXPORT_SIZES["batch"]
    assert check.shape[2:] == (export.shape[2] + GROW, export.shape[3] + GROW)
    assert data["dynamic_shapes"]["pixel_values"] == {0: "batch", 2: "height", 3: "width"}


def test_multiple_choice_and_prompt_layouts():
    data = build_case(ZooCase("albert", "multiple-choice"))
    ids = data["inputs"]["input_ids"]
    assert ids.shape == (EXPORT_SIZES["batch"], 2, EXPORT_SIZES["seq"])
    assert data["dynamic_shapes"]["input_ids"] == {0: "batch", 2: "seq"}
    data = build_case(ZooCase("llava", "image-text-to-text"))
    ids, config = data["inputs"]["input_ids"], data["model"].config
    n_image = int((ids[0] == config.image_token_id).sum())
    assert n_image > 0 and ids.shape[1] == n_image + EXPORT_SIZES["seq"]


def _row(model_type, head, status, cause="", exporter="to_onnx", stage="", **kw):
    return dict(
        model_type=model_type,
        head=head,
        status=status,
        cause=cause,
        exporter=exporter,
        stage=stage,
        **kw,
    )


def test_render_heads():
    rows = [
        _row("a", "qa", "pass"),
        _row("b", "qa", "fail", "numerical mismatch", stage="check"),
        _row("c", "km", "skip", "two images"),
    ]
    text = render_heads(rows)
    assert "* - km" in text and "two images" in text
    assert "numerical mismatch (1)" in text
    assert "On the" not in text  # one exporter: nothing to compare


def test_render_heads_compares_exporters_on_common_cases():
    rows = [
        _row("a", "qa", "pass", export_time="1.0", nodes="10"),
        _row("a", "qa", "pass", exporter="torch.onnx", export_time="3.0", nodes="30"),
        _row("b", "qa", "pass", export_time="2.0", nodes="20"),
        _row("b", "qa", "fail", "capture", exporter="torch.onnx", stage="export"),
        # the tiny model of c does not build: neither exporter ran it
        _row("c", "qa", "fail", "config", stage="config"),
        _row("c", "qa", "fail", "config", exporter="torch.onnx", stage="config"),
        # d only ran with to_onnx: not a common case
        _row("d", "qa", "pass", export_time="9.0", nodes="90"),
    ]
    text = render_heads(rows)
    # per head, passed out of the cases whose tiny model built
    assert "- 3 / 3" in text and "- 1 / 2" in text
    assert "On the 2 cases every exporter ran" in text
    assert "``to_onnx`` 2, ``torch.onnx`` 1" in text
    # medians over the one case both passed (a), not over b or d
    assert "``to_onnx`` 1.00 s and 10 nodes; ``torch.onnx`` 3.00 s and 30 nodes" in text
    assert "do not compare" not in text
    # exporters run at different times: the times do not compare
    meta = {"runs": {"to_onnx": {"date": "d1"}, "torch.onnx": {"date": "d2"}}}
    assert "their export times do not compare" in render_heads(rows, meta)
