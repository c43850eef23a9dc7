"""torch.compile backends on onnxruntime: training matches eager, dynamic shapes,
SymInt and None outputs, session cache, verification, dumps, debug backend."""

import copy
import os

import onnx
import pytest
import torch

from experimental_experiment.torch_dynamo import (
    BackendOptions,
    BackendStats,
    OnnxBackend,
    default_backend,
    onnx_backend,
    onnx_custom_backend,
)
from experimental_experiment.torch_dynamo._export import default_exporter, graph_layout
from experimental_experiment.torch_dynamo._runner import compare_with_eager
from experimental_experiment.torch_models.dump_helper import dump_onnx
from experimental_experiment.torch_models.training_helper import make_aot_ort, train_loop


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(10, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.Sigmoid(),
        torch.nn.Linear(32, 16),
        torch.nn.Tanh(),
        torch.nn.Linear(16, 1),
    )


def cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 4, 3, stride=2, padding=1),
        torch.nn.GELU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 2 * 2, 10),
    )


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    onnx_backend.clear_cache()
    yield
    torch._dynamo.reset()


def assert_same_training(model, inputs, steps=3, compile_dynamic=None, atol=1e-5, **kwargs):
    """Trains a copy eagerly and the model through the backend; compares losses,
    gradients, weights and buffers after every step; returns the backend's compiler."""
    ref = copy.deepcopy(model)
    backend, extra = make_aot_ort(**kwargs)
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=compile_dynamic)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    for args in inputs:
        for _ in range(steps):
            got = train_loop(compiled, *args, optimizer=opt)
            expected = train_loop(ref, *args, optimizer=opt_ref)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                torch.testing.assert_close(
                    p.grad,
                    q.grad,
                    atol=atol,
                    rtol=atol * 10,
                    msg=lambda m, n=name: f"grad {n}: {m}",
                )
                torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)
            for b, rb in zip(model.buffers(), ref.buffers()):  # running statistics
                torch.testing.assert_close(b, rb, atol=1e-5, rtol=1e-4)
    return extra["compiler"]


def test_mlp_trains_like_eager():
    compiler = assert_same_training(mlp(), [(torch.randn(8, 10),)])
    assert compiler.stats.exported == 2  # forward and backward


def test_cnn_trains_like_eager():
    compiler = assert_same_training(cnn(), [(torch.randn(2, 3, 8, 8),)])
    assert compiler.stats.exported == 2


def test_cnn_batch_norm_layer_norm_avg_pool():
    # running statistics are mutated buffers: aot_autograd returns them as outputs
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1, groups=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.SiLU(),
        torch.nn.AvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.LayerNorm(64),
        torch.nn.Linear(64, 10),
        torch.nn.LogSoftmax(-1),
    )
    # batch norm divides by the batch's deviation: float32 rounding grows (5e-5 seen)
    assert_same_training(model, [(torch.randn(4, 3, 8, 8),)], steps=2, atol=1e-4)
    assert model[1].num_batches_tracked.item() == 2


class ActivationsAndLosses(torch.nn.Module):
    """Many activations, the losses computed inside the compiled graph."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.seq = torch.nn.Sequential(
            torch.nn.Linear(8, 16),
            torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(16, 16),
            torch.nn.LeakyReLU(),
            torch.nn.ELU(),
            torch.nn.Softplus(),
            torch.nn.Hardswish(),
            torch.nn.Hardsigmoid(),
            torch.nn.ReLU6(),
            torch.nn.Mish(),
            torch.nn.Linear(16, 5),
        )

    def forward(self, x, y):
        out = self.seq(x)
        loss = torch.nn.functional.cross_entropy(out, y, label_smoothing=0.1)
        target = out[:, 1::2].detach().repeat(1, 2)[:, :3]
        return loss + torch.nn.functional.mse_loss(out[:, ::2], target)


def test_losses_inside_the_graph():
    y = torch.tensor([0, 3, -100, 4])
    assert_same_training(ActivationsAndLosses(), [(torch.randn(4, 8), y)], steps=2)


def test_dynamic_one_model_for_every_shape():
    inputs = [(torch.randn(8, 10),), (torch.randn(5, 10),), (torch.randn(11, 10),)]
    compiler = assert_same_training(mlp(), inputs, steps=2, compile_dynamic=True, dynamic=True)
    assert compiler.stats.exported == 2


def test_dynamic_cnn():
    inputs = [(torch.randn(2, 3, 8, 8),), (torch.randn(3, 3, 8, 8),)]
    compiler = assert_same_training(cnn(), inputs, steps=1, compile_dynamic=True, dynamic=True)
    assert compiler.stats.exported == 2


def test_static_specialization_per_signature():
    # symbolic graphs, make_aot_ort(dynamic=False): one static model per shape
    inputs = [(torch.randn(8, 10),), (torch.randn(5, 10),)]
    ref = copy.deepcopy(mlp())
    backend, extra = make_aot_ort(dynamic=False)
    compiled = torch.compile(mlp(), backend=backend, fullgraph=True, dynamic=True)
    for args in inputs + inputs:
        torch.testing.assert_close(train_loop(compiled, *args, lr=0), train_loop(ref, *args, lr=0))
    assert extra["compiler"].stats == BackendStats(exported=4, cache_hits=0)


def _capture(model, args, dynamic):
    """Forward and backward graphs aot_autograd gives to a backend."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs = []

    def record(gm, example):
        graphs.append((gm, example))
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=record, bw_compiler=record)
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
    compiled(*args).sum().backward()
    return graphs


def _realize(value, n):
    """A real input for a placeholder: every symbolic dim (or SymInt) becomes n."""
    if isinstance(value, torch.SymInt):
        return n
    return torch.randn([d if isinstance(d, int) else n for d in value.shape])


def test_symint_inputs_and_outputs():
    x = torch.randn(6, 10)
    (fw, fw_args), (bw, _) = _capture(mlp(), (x,), dynamic=True)
    layout = graph_layout(fw)
    assert "int" in layout.outputs  # the batch size saved for the backward graph
    assert any(isinstance(a, torch.SymInt) for a in fw_args)
    run = onnx_custom_backend(fw, fw_args)
    real = [_realize(a, 7) for a in fw_args]
    outputs = run(list(real))
    expected = fw(*real)
    assert len(outputs) == len(expected)
    for o, e in zip(outputs, expected):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(o, e)
        else:
            assert type(o) is int and o == e == 7
    assert graph_layout(bw).outputs.count("none") >= 1  # x does not require a gradient


def test_session_cache_between_compilations():
    x = torch.randn(4, 10)
    backend, extra = make_aot_ort()
    for _ in range(2):
        torch._dynamo.reset()
        train_loop(torch.compile(mlp(), backend=backend, fullgraph=True), x)
    assert extra["compiler"].stats == BackendStats(exported=2, cache_hits=2)


def _train_with(compiler, model, x):
    from torch._dynamo.backends.common import aot_autograd

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=compiler, bw_compiler=compiler)
    return train_loop(torch.compile(model, backend=backend, fullgraph=True), x, lr=0)


def test_backend_instances_do_not_share_their_cache():
    x = torch.randn(4, 10)
    expected = train_loop(mlp(), x, lr=0)
    first, second = OnnxBackend(), OnnxBackend(BackendOptions(dynamic=False))
    assert _train_with(first, mlp(), x) == pytest.approx(expected, rel=1e-5)
    assert _train_with(first, mlp(), x) == pytest.approx(expected, rel=1e-5)
    assert first.stats == BackendStats(exported=2, cache_hits=2)
    assert len(first.cache) == 2
    # the same graphs: a second instance exports them again, the first one is untouched
    assert _train_with(second, mlp(), x) == pytest.approx(expected, rel=1e-5)
    assert second.stats == BackendStats(exported=2, cache_hits=0)
    assert first.stats == BackendStats(exported=2, cache_hits=2)
    assert default_backend().stats == BackendStats()  # the function's instance
    first.clear()
    assert first.stats == BackendStats() and not first.cache
    assert len(second.cache) == 2


def test_backend_cache_size_and_use_cache():
    x = torch.randn(4, 10)
    small = OnnxBackend(cache_size=1)
    _train_with(small, mlp(), x)
    assert len(small.cache) == 1 and small.stats.exported == 2
    _train_with(small, mlp(), x)  # forward evicted by backward, and so on
    assert small.stats == BackendStats(exported=4, cache_hits=0)
    uncached = OnnxBackend(BackendOptions(use_cache=False))
    _train_with(uncached, mlp(), x)
    _train_with(uncached, mlp(), x)
    assert uncached.stats == BackendStats(exported=4, cache_hits=0)
    assert not uncached.cache


def test_function_backend_uses_the_default_instance():
    import functools

    x = torch.randn(4, 10)
    compiler = functools.partial(onnx_custom_backend, dynamic=False)
    _train_with(compiler, mlp(), x)
    _train_with(compiler, mlp(), x)
    assert default_backend().stats == BackendStats(exported=2, cache_hits=2)
    onnx_backend.clear_cache()
    assert default_backend().stats == BackendStats() and not default_backend().cache


def test_bool_and_int_inputs():
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 6)
            self.lin = torch.nn.Linear(6, 3)

        def forward(self, ids, mask):
            return self.lin(self.emb(ids)).masked_fill(mask.unsqueeze(-1), 0)

    torch.manual_seed(1)
    ids = torch.randint(0, 20, (2, 5))
    ids[0, :2] = 4  # repeated rows of the embedding
    mask = torch.rand(2, 5) > 0.5
    assert_same_training(Masked(), [(ids, mask)], steps=2)


def test_verify_and_compare():
    assert_same_training(mlp(), [(torch.randn(8, 10),)], steps=1, verify=True)
    (fw, _), _ = _capture(mlp(), (torch.randn(3, 10),), dynamic=False)
    real = [_realize(n.meta["val"], 3) for n in fw.graph.nodes if n.op == "placeholder"]
    good = fw(*real)
    compare_with_eager(fw, real, good)
    bad = [o + 1 if isinstance(o, torch.Tensor) else o for o in good]
    with pytest.raises(AssertionError, match="differs from eager"):
        compare_with_eager(fw, real, bad)


def test_dlpack_path():
    import functools

    from torch._dynamo.backends.common import aot_autograd

    ref, model = mlp(), mlp()
    c = functools.partial(onnx_custom_backend, use_dlpack=True)
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=c, bw_compiler=c))
    x = torch.randn(8, 10)
    assert train_loop(compiled, x) == pytest.approx(train_loop(ref, x), rel=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)


def test_dump_onnx_context_and_env(tmp_path, monkeypatch):
    x = torch.randn(4, 10)
    backend, extra = make_aot_ort()
    with dump_onnx("mlp", folder=str(tmp_path / "dump"), clean=True):
        train_loop(torch.compile(mlp(), backend=backend), x)
    names = sorted(os.listdir(tmp_path / "dump"))
    assert names == ["mlp_0.onnx", "mlp_0.txt", "mlp_1.onnx", "mlp_1.txt"]
    onnx.checker.check_model(onnx.load(str(tmp_path / "dump" / "mlp_1.onnx")))
    assert "threshold_backward" in (tmp_path / "dump" / "mlp_1.txt").read_text()
    # a cached session is dumped again, the environment variable works the same way
    torch._dynamo.reset()
    monkeypatch.setenv("ONNXRT_DUMP_PATH", str(tmp_path / "env" / "model_"))
    train_loop(torch.compile(mlp(), backend=backend), x)
    assert sorted(os.listdir(tmp_path / "env")) == [
        "model_0.onnx",
        "model_0.txt",
        "model_1.onnx",
        "model_1.txt",
    ]
    assert extra["compiler"].stats.cache_hits == 2


def test_debug_backend(tmp_path):
    inputs = [(torch.randn(2, 3, 8, 8),)]
    assert_same_training(cnn(), inputs, steps=1, debug=True, dump_intermediate=str(tmp_path))
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 2 and all(f.endswith("_call0.npz") for f in files)
    import numpy as np

    data = np.load(tmp_path / files[0])
    assert len(data.files) > 10  # inputs and every intermediate result


def test_default_exporter(monkeypatch):
    monkeypatch.delenv("ONNXRT_CHANGE_REWRITER", raising=False)
    assert default_exporter() == "custom"
    monkeypatch.setenv("ONNXRT_CHANGE_REWRITER", "1")
    assert default_exporter() == "custom"
    monkeypatch.setenv("ONNXRT_CHANGE_REWRITER", "0")
    assert default_exporter() == "dynamo"


def test_dynamo_exporter_static_mlp():
    # torch.onnx.export works on a static MLP, forward and backward
    assert_same_training(mlp(), [(torch.randn(8, 10),)], steps=1, exporter="dynamo")


def test_dynamo_exporter_refuses_symint_inputs():
    backend, _ = make_aot_ort(exporter="dynamo", dynamic=True)
    compiled = torch.compile(mlp(), backend=backend, fullgraph=True, dynamic=True)
    with pytest.raises(Exception, match="SymInt inputs"):
        train_loop(compiled, torch.randn(8, 10))


def test_backend_speed_benchmark_runs(capsys):
    # a smoke test of the benchmark script (its numbers are not checked)
    from experimental_experiment.bench.backend_speed import main

    threads = torch.get_num_threads()
    try:
        rows = main(
            [
                "--models",
                "mlp",
                "--backends",
                "eager,ort",
                "--warmup",
                "1",
                "--repeat",
                "2",
                "--threads",
                "1",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert [r["backend"] for r in rows] == ["eager", "ort"]
    assert all(r["median"] > 0 for r in rows) and rows[0]["/eager"] == 1.0
    assert "median step" in capsys.readouterr().out
