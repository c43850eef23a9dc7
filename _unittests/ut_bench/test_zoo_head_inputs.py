"""A transducer's forward is one decoding step: one token per utterance, the audio
length and the batch dynamic; the ONNX model matches eager on a second size."""

import warnings

from experimental_experiment.bench.zoo import run_case_inline
from experimental_experiment.bench.zoo_cases import CHECK_SIZES, EXPORT_SIZES, build_case
from experimental_experiment.bench.zoo_heads import ZooCase


def test_transducer_step_matches_eager_on_another_size():
    # with decoder_input_ids of 3 tokens, the capture specialized their count (failure)
    case = ZooCase("nemotron3_5_asr", "rnnt")
    data = build_case(case)
    ids, check = data["inputs"]["decoder_input_ids"], data["check_inputs"]["decoder_input_ids"]
    assert ids.shape == (EXPORT_SIZES["batch"], 1) and check.shape == (CHECK_SIZES["batch"], 1)
    assert data["dynamic_shapes"]["decoder_input_ids"] == {0: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = run_case_inline(case, "to_onnx", build=lambda _case: data)
    assert row["status"] == "pass", row
    assert float(row["max_diff"]) <= 1e-3
