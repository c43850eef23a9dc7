"""The model zoo harness: a few tiny transformers models (causal LM with a cache, masked
LM, image classification) exported by to_onnx in a forked process and checked with
onnxruntime against eager on other sizes; broken cases (unknown type, timeout) become
failed rows with their stage; the CSV run resumes."""

import csv
import time

import pytest

from experimental_experiment.bench import zoo
from experimental_experiment.bench.zoo import (
    cause_bucket,
    first_line,
    main,
    read_rows,
    root_cause,
    run_case,
    run_cases,
    write_rows,
)
from experimental_experiment.bench.zoo_cases import (
    EXPORT_SIZES,
    ZooCase,
    build_case,
    input_kind,
    list_cases,
    shrink_config_dict,
)
from experimental_experiment.bench.zoo_diffusers import DIFFUSERS_TYPES, diffusers_available


@pytest.mark.parametrize(
    "model_type,head,cache",
    [
        ("llama", "causal-lm", "1"),
        ("bert", "masked-lm", "0"),
        ("vit", "image-classification", "0"),
    ],
)
def test_zoo_case_passes(model_type, head, cache):
    cases = {c.model_type: c for c in list_cases()}
    assert cases[model_type].head == head
    row = run_case(cases[model_type], "to_onnx", timeout=120)
    assert row["status"] == "pass", row
    assert str(row["cache"]) == cache
    assert row["nodes"] > 0 and float(row["max_diff"]) <= 1e-3
    assert row["export_time"] > 0 and row["wall_time"] >= row["export_time"]


def test_unknown_type_is_a_config_failure():
    row = run_case(ZooCase("no_such_model_type", "unknown"), "to_onnx", timeout=60)
    assert (row["status"], row["stage"], row["cause"]) == ("fail", "config", "unknown model type")
    assert row["error"].startswith("ValueError")


def test_timeout_is_recorded():
    # one second of CPU time is not enough to build and export a model
    row = run_case(ZooCase("llama", "causal-lm"), "to_onnx", timeout=1)
    assert (row["status"], row["stage"], row["cause"]) == ("fail", "timeout", "timeout")
    assert row["wall_time"] <= 5 + 1


def test_memory_limit_is_recorded():
    # the forked child starts with the parent's memory (torch imported): above 0.05 GB
    row = run_case(ZooCase("llama", "causal-lm"), "to_onnx", timeout=60, max_memory=0.05)
    assert (row["status"], row["stage"], row["cause"]) == ("fail", "memory", "memory")


def test_check_inputs_have_other_sizes():
    data = build_case(ZooCase("llama", "causal-lm"))
    assert data["inputs"]["input_ids"].shape == (EXPORT_SIZES["batch"], EXPORT_SIZES["seq"])
    assert data["check_inputs"]["input_ids"].shape[0] != EXPORT_SIZES["batch"]
    assert list(data["inputs"]) == list(data["dynamic_shapes"])


def test_shrink_config_dict():
    d = shrink_config_dict(
        dict(
            model_type="x",
            num_hidden_layers=12,
            num_attention_heads=12,
            hidden_size=768,
            intermediate_size=3072,
            vocab_size=50000,
            pad_token_id=49999,
            eos_token_id=49999,
            bos_token_id=2,
            layer_types=["a", "a", "b"] * 4,
            text_config=dict(model_type="y", num_layers=24, d_model=512),
        )
    )
    assert (d["num_hidden_layers"], d["num_attention_heads"], d["hidden_size"]) == (2, 4, 64)
    # one layer of each kind is kept
    assert (d["intermediate_size"], d["vocab_size"], d["layer_types"]) == (128, 1024, ["a", "b"])
    assert d["pad_token_id"] == d["eos_token_id"] == 1023 and d["bos_token_id"] == 2
    assert (d["text_config"]["num_layers"], d["text_config"]["d_model"]) == (2, 64)


def test_cause_bucket():
    assert cause_bucket("conversion", "UnsupportedOpError: aten.foo.default (node 'x')") == (
        "conversion of aten.foo.default"
    )
    assert cause_bucket(
        "runtime", "Fail: [ONNXRuntimeError] : 1 : FAIL : Node (n) Op (Add)"
    ).startswith("onnxruntime FAIL")
    assert cause_bucket("capture", "KeyError: 'layer_12'") == "capture: KeyError: 'layer_12'"
    assert (
        cause_bucket("capture", "CaptureError: could not capture M: <- KeyError: 'l_1'")
        == "capture: KeyError: 'l_1'"
    )
    # digits and names stay as written: the page shows the real message
    assert cause_bucket(
        "config", "ImportError: LayoutLMv2Model requires the detectron2 library"
    ) == ("config: ImportError: LayoutLMv2Model requires the detectron2 library")
    assert (
        cause_bucket(
            "conversion",
            "DispatchError: No ONNX function found for <OpOverload("
            "op='prims.signbit', overload='default')>. Failure message: x",
        )
        == "conversion of prims.signbit.default"
    )
    assert (
        cause_bucket("capture", "TorchExportError: failed", "\nConstraints violated (s0)")
        == "dynamic dimension specialized"
    )
    # the detail may also mention a specialization: the output type comes first
    assert (
        cause_bucket(
            "capture",
            "RuntimeError: Found <class 'PadCache'> in output, which is not a known type",
            "Constraints violated (s0)",
        )
        == "unsupported output type"
    )


def test_root_cause_and_colors():
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise ValueError("\x1b[96mouter\x1b[0m\nsecond line") from inner
    except ValueError as e:
        assert first_line(e) == "ValueError: outer"
        assert first_line(root_cause(e)) == "KeyError: 'inner'"


def test_input_kind():
    assert input_kind("seq2seq-lm", {"input_ids", "decoder_input_ids"}) == "seq2seq"
    # an audio language model listed as seq2seq takes no decoder tokens: a decoder
    assert input_kind("seq2seq-lm", {"input_ids", "input_features"}) == "decoder"
    assert input_kind("image-classification", {"input_ids"}) == "text"  # ImageGPT
    assert input_kind("ctc", {"input_features"}) == "audio"


@pytest.mark.parametrize("model_type,cache", [("falcon_h1", "1"), ("mamba", "0")])
def test_hybrid_without_cache_passes(model_type, cache):
    # falcon_h1 takes its hybrid cache (conv, recurrent states, keys and values); mamba
    # falls back to no cache (its attention mask covers the new tokens only): without
    # a cache input the model must not return the cache it would create
    row = run_case(ZooCase(model_type, "causal-lm"), "to_onnx", timeout=120)
    assert row["status"] == "pass", row
    assert str(row["cache"]) == cache and float(row["max_diff"]) <= 1e-3


@pytest.mark.skipif(not diffusers_available(), reason="diffusers is not installed")
@pytest.mark.parametrize("model_type", sorted(DIFFUSERS_TYPES))
def test_diffusers_cases(model_type):
    assert model_type in {c.model_type for c in list_cases()}
    row = run_case(ZooCase(model_type, DIFFUSERS_TYPES[model_type]), "to_onnx", timeout=120)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3


def test_main_rerun_failed_strict(tmp_path):
    out = tmp_path / "zoo.csv"
    write_rows(
        str(out),
        [
            dict(
                model_type="no_such_model_type",
                head="unknown",
                exporter="to_onnx",
                status="fail",
                stage="config",
                error="old",
            ),
            dict(model_type="other", head="unknown", exporter="to_onnx", status="pass"),
        ],
    )
    argv = [
        "--output",
        str(out),
        "--exporters",
        "to_onnx",
        "--timeout",
        "60",
        "--failed",
        "--rerun",
        "--types",
        "no_such_model_type,other",
    ]
    assert main(argv) == 0
    rows = {r["model_type"]: r for r in read_rows(str(out))}
    assert rows["no_such_model_type"]["error"].startswith("ValueError")  # replaced
    assert rows["other"]["status"] == "pass"  # not failed: not rerun
    assert main([*argv, "--strict"]) == 1


def test_main_resumes(tmp_path):
    out = tmp_path / "zoo.csv"
    argv = [
        "--output",
        str(out),
        "--types",
        "no_such_model_type",
        "--exporters",
        "to_onnx,torch.onnx",
        "--timeout",
        "60",
    ]
    assert main(argv) == 0
    assert main(argv) == 0  # nothing left to run: no duplicated rows
    rows = read_rows(str(out))
    assert [(r["exporter"], r["stage"]) for r in rows] == [
        ("to_onnx", "config"),
        ("torch.onnx", "config"),
    ]
    with open(out, newline="") as f:
        assert next(csv.reader(f))[0] == "model_type"
    assert (tmp_path / "zoo.json").exists()


def _fake_case(case, exporter, *, atol=1e-3, build=None):
    """A case ending fast, except ``zz_slow``: with 2 jobs it ends after the next ones."""
    time.sleep(1.0 if case.model_type == "zz_slow" else 0.05)
    return dict(
        model_type=case.model_type,
        head=case.head,
        exporter=exporter,
        status="pass",
        nodes=len(case.model_type),
    )


def test_jobs_write_the_same_rows(tmp_path, monkeypatch):
    # the forked children inherit the patched function
    monkeypatch.setattr(zoo, "run_case_inline", _fake_case)
    todo = [(ZooCase(t, "unknown"), "to_onnx") for t in ("zz_slow", "aa_fast", "mm_fast")]
    ended = [r["model_type"] for r in run_cases(todo, jobs=2, timeout=30)]
    assert ended[0] != "zz_slow" and sorted(ended) == ["aa_fast", "mm_fast", "zz_slow"]
    assert [r["model_type"] for r in run_cases(todo, jobs=1, timeout=30)] == [
        "zz_slow",
        "aa_fast",
        "mm_fast",
    ]
    written = {}
    for jobs in (1, 2):
        out = tmp_path / f"zoo{jobs}.csv"
        assert (
            main(
                [
                    "--output",
                    str(out),
                    "--types",
                    "zz_slow,aa_fast,mm_fast",
                    "--timeout",
                    "30",
                    "--jobs",
                    str(jobs),
                ]
            )
            == 0
        )
        written[jobs] = [
            {k: v for k, v in r.items() if k != "wall_time"} for r in read_rows(str(out))
        ]
    assert written[1] == written[2] and len(written[2]) == 6
    keys = [(r["model_type"], r["exporter"]) for r in written[2]]
    assert keys == sorted(keys)


def test_eager_fallback_failure_is_the_cause(monkeypatch):
    # a model refusing sdpa is built again with eager attention; when that fails too,
    # the row names that failure, not the sdpa refusal it followed
    from experimental_experiment.bench import zoo_cases

    class Refusing:
        forward = object()

        @classmethod
        def _from_config(cls, config, attn_implementation=None):
            if attn_implementation == "eager":
                raise IndexError("list index out of range (the real cause)")
            raise ValueError("X does not support torch.nn.functional.scaled_dot_product_attention")

    Refusing._supports_sdpa = True
    monkeypatch.setattr(zoo_cases, "skip_reason", lambda case: None)
    monkeypatch.setattr(zoo_cases, "tiny_config", lambda model_type: object())
    monkeypatch.setattr(zoo_cases, "_model_class", lambda case: Refusing)
    monkeypatch.setattr(zoo_cases, "_config_for_class", lambda cls, config: config)
    row = zoo.run_case_inline(ZooCase("refusing", "object-detection"), "to_onnx")
    assert (row["status"], row["stage"]) == ("fail", "config")
    assert row["error"] == "IndexError: list index out of range (the real cause)", row["error"]


def test_strip_paths_keeps_no_machine_path():
    from experimental_experiment.bench.zoo import _ROOT, strip_paths

    venv = f"{_ROOT}/.venv/lib/python3.11/site-packages/transformers/models/dpt/m.py:538"
    text = f"at {venv} ('size = x'), at /usr/lib/python3/dist-packages/x.py and {_ROOT}/a/b.py"
    assert strip_paths(text) == (
        "at site-packages/transformers/models/dpt/m.py:538 ('size = x'), "
        "at /usr/lib/python3/dist-packages/x.py and a/b.py"
    )
    assert strip_paths("(/opt/py/lib/site-packages/torch/x.py)") == "(site-packages/torch/x.py)"


def test_outside_valid_ranges():
    """A warning of the capture bounding a dimension is added to a failure only when a
    check size lies outside the valid sizes written in the model's metadata."""
    import json

    import onnx
    import torch

    from experimental_experiment.bench.zoo import outside_valid_ranges

    def model(ranges):
        onx = onnx.ModelProto()
        if ranges is not None:
            entry = onx.metadata_props.add()
            entry.key, entry.value = "dynamic_dimension_ranges", json.dumps(ranges)
        return onx

    x = {"pixel_values": torch.zeros(3, 3, 160, 160)}
    assert outside_valid_ranges(model(None), x)
    assert not outside_valid_ranges(model({"pixel_values.shape[2]": {"min": 8, "max": None}}), x)
    assert outside_valid_ranges(model({"pixel_values.shape[2]": {"min": 121, "max": 128}}), x)
    assert outside_valid_ranges(model({"pixel_values.shape[3]": {"min": 128, "step": 64}}), x)
    assert not outside_valid_ranges(model({"pixel_values.shape[3]": {"min": 32, "step": 64}}), x)
    assert outside_valid_ranges(model({"input_ids.shape[1]": {"min": 2, "max": 9}}), x)
