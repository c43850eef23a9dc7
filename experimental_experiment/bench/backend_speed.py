"""Training step speed: forward + backward with the onnxruntime backend
(:func:`make_aot_ort <experimental_experiment.torch_models.training_helper.make_aot_ort>`)
against eager PyTorch and ``torch.compile``'s default backend (inductor), on CPU.

.. code-block:: bash

    python -m experimental_experiment.bench.backend_speed
    python -m experimental_experiment.bench.backend_speed --models mlp --repeat 50
    python -m experimental_experiment.bench.backend_speed --backends eager,ort --seq 256
    python -m experimental_experiment.bench.backend_speed --threads 1

Models: ``llama`` is the tiny LlamaModel of seed 000_935d5d4648d66da2 (eager attention,
batch 2, sequence ``--seq``), ``mlp`` a 4-layer perceptron (batch 256, width 512).
A step is ``zero_grad``, forward, loss (sum of squares), backward; the first
``--warmup`` steps (compilation included) are not timed, then the backends run
``--repeat`` steps in turn (interleaved, so that the load of the machine weighs on
all of them alike); the median step is reported with its ratio to eager and to
inductor. One run, one process: the numbers move from one run to the next.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import warnings
from typing import Callable

import torch

BACKENDS = ("eager", "ort", "inductor")
THREADS = [0]  # --threads: torch and onnxruntime use the same number of threads


def make_llama(seq: int = 1024, batch: int = 2):
    """The seed's tiny LlamaModel and inputs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaModel

    config = LlamaConfig(
        hidden_size=16,
        num_hidden_layers=1,
        vocab_size=1024,
        intermediate_size=16,
        max_position_embeddings=1024,
        num_attention_heads=2,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LlamaModel(config)
    ids = torch.randint(0, 1023, (batch, seq))
    mask = torch.tril(torch.ones(batch, seq, dtype=torch.float32))
    return model, (ids, mask)


def make_mlp(batch: int = 256, width: int = 512):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, width),
        torch.nn.Sigmoid(),
        torch.nn.Linear(width, 10),
    )
    return model, (torch.randn(batch, 64),)


def compiled(model: torch.nn.Module, backend: str) -> torch.nn.Module:
    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model, fullgraph=True)
    if backend == "ort":
        from ..torch_models.training_helper import make_aot_ort

        options = None
        if THREADS[0]:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = THREADS[0]
        aot_ort, _ = make_aot_ort(dynamic=False, session_options=options)
        return torch.compile(model, backend=aot_ort, fullgraph=True)
    raise ValueError(f"unknown backend {backend!r}, expected one of {BACKENDS}")


def step_function(model: torch.nn.Module, args: tuple) -> Callable[[], None]:
    from ..torch_models.training_helper import default_loss

    def step():
        model.zero_grad()
        default_loss(model(*args)).backward()

    return step


def prepare(make: Callable, backend: str, warmup: int) -> tuple[Callable, float]:
    """Compiles and runs ``warmup`` steps; returns the step function and the time of
    the first step (compilation included)."""
    model, args = make()
    step = step_function(compiled(copy.deepcopy(model), backend), args)
    begin = time.perf_counter()
    step()
    first = time.perf_counter() - begin
    for _ in range(warmup - 1):
        step()
    return step, first


def run(models: list[str], backends: list[str], warmup: int, repeat: int, seq: int) -> list[dict]:
    """Measures every backend on every model. The timed steps of the backends are
    interleaved (one step of each in turn) so that a slower period of the machine
    weighs on all of them alike."""
    makers = {"llama": lambda: make_llama(seq), "mlp": make_mlp}
    rows = []
    for name in models:
        steps = {}
        for backend in backends:
            torch._dynamo.reset()
            row = {"model": name, "backend": backend}
            try:
                steps[backend], row["first"] = prepare(makers[name], backend, warmup)
            except Exception as e:  # inductor may miss a C++ compiler
                msg = str(e).strip().splitlines()
                row["error"] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:200]
            rows.append(row)
        times = {b: [] for b in steps}
        for _ in range(repeat):
            for backend, step in steps.items():
                begin = time.perf_counter()
                step()
                times[backend].append(time.perf_counter() - begin)
        for row in rows[-len(backends) :]:
            if row["backend"] in times:
                row["median"] = statistics.median(times[row["backend"]])
                row["min"] = min(times[row["backend"]])
    _add_ratios(rows)
    return rows


def _add_ratios(rows: list[dict]) -> None:
    for row in rows:
        base = {r["backend"]: r.get("median") for r in rows if r["model"] == row["model"]}
        if row.get("median") is None:
            continue
        for ref in ("eager", "inductor"):
            if base.get(ref):
                row[f"/{ref}"] = row["median"] / base[ref]


def format_rows(rows: list[dict]) -> str:
    lines = [
        f"{'model':6} {'backend':9} {'first call':>11} {'median step':>12} "
        f"{'/eager':>7} {'/inductor':>9}"
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']:6} {r['backend']:9} failed: {r['error']}")
            continue
        ratios = [f"{r[k]:.2f}" if k in r else "-" for k in ("/eager", "/inductor")]
        lines.append(
            f"{r['model']:6} {r['backend']:9} {r['first']:10.2f}s "
            f"{r['median'] * 1000:10.2f}ms {ratios[0]:>7} {ratios[1]:>9}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="llama,mlp", help="comma separated: llama,mlp")
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma separated: eager,ort,inductor"
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps")
    parser.add_argument("--repeat", type=int, default=20, help="timed steps")
    parser.add_argument("--seq", type=int, default=1024, help="llama sequence length")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="threads of torch and onnxruntime (0: their defaults)",
    )
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
        THREADS[0] = ns.threads
    rows = run(ns.models.split(","), ns.backends.split(","), ns.warmup, ns.repeat, ns.seq)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    print(format_rows(rows))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
