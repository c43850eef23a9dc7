"""The optimized-models benchmark: the interleaved timer, one small model through every
variant (checked against eager), the real-size models resolved from export_time."""

import torch

from experimental_experiment.bench import optim_speed
from experimental_experiment.bench._timing import interleaved_medians


def test_interleaved_medians_rotates_and_counts():
    calls = []
    runners = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    times = interleaved_medians(runners, warmup=2, repeat=4)
    assert calls[:6] == list("aabbcc")  # warm-up, one function after the other
    # then one run of each per repetition, starting one further each time
    assert calls[6:] == list("abcbcacababc")
    for median, fastest in times.values():
        assert 0 <= fastest <= median


def test_small_cnn_every_variant():
    rows = optim_speed.bench_model("cnn", warmup=1, repeat=3)
    by = {r["variant"]: r for r in rows}
    assert list(by) == list(optim_speed.VARIANTS)
    ref = by["torch.onnx"]
    for name, r in by.items():
        assert r["error"] == "", r
        assert r["latency_ms"] > 0
        assert abs(r["speed_vs_torch_onnx"] - r["latency_ms"] / ref["latency_ms"]) < 1e-12
        if name != "eager":
            assert r["max_abs_diff"] < 1e-4, r
            assert r["nodes"] > 3
    # batch normalization folded into the convolutions by the default patterns
    assert by["to_onnx default"]["nodes"] < by["to_onnx no-opt"]["nodes"]


def test_real_models_come_from_export_time():
    from experimental_experiment.bench.export_time import MODELS

    assert set(optim_speed.REAL_MODELS) == set(MODELS)
    model, args, kwargs, dims = optim_speed.make_model("resnet")
    assert type(model).__name__ == "ResNetModel" and not model.training
    assert args[0].shape == (2, 3, 224, 224) and kwargs == {}
    assert dims == {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
    assert isinstance(args[0], torch.Tensor)
