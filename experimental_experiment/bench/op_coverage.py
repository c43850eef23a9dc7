"""Operator coverage on PyTorch's OpInfo database (``op_db``).

Every sample of an OpInfo becomes a small module whose tensor arguments are graph
inputs (non-tensors are constants). It is captured once with
:func:`torch.export.export`, converted by each exporter, run with :epkg:`onnxruntime`
(or onnx's reference evaluator for bfloat16) and compared with eager PyTorch.

Statuses of a sample: ``pass``, ``capture-fail`` (torch.export.export itself fails:
not the exporter's fault), ``export-fail`` (conversion), ``runtime-fail``,
``mismatch``, ``skipped`` (random or uninitialized outputs, a captured graph drawing
random numbers, no tensor output, eager failure). Command line (writes a CSV, one row
per operator and exporter)::

    python -m experimental_experiment coverage --exporters to_onnx,torch.onnx \\
        --samples 2 --output op_coverage.csv
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import re
import signal
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import torch

from ._random import random_nodes
from .report_format import head_line

# ops whose results are random or uninitialized: they cannot be compared with eager
RANDOM_OPS: dict[str, str] = {
    **{
        name: "random numbers"
        for name in (
            "bernoulli",
            "cauchy",
            "exponential",
            "geometric",
            "log_normal",
            "multinomial",
            "normal",
            "normal.in_place",
            "normal.number_mean",
            "uniform",
            "rand_like",
            "randint",
            "randint_like",
            "randn",
            "randn_like",
            "nn.functional.rrelu",
            "nn.functional.dropout",
            "nn.functional.dropout2d",
            "nn.functional.dropout3d",
            "nn.functional.alpha_dropout",
            "nn.functional.feature_alpha_dropout.with_train",
            "nn.functional.fractional_max_pool2d",
            "nn.functional.fractional_max_pool3d",
            "svd_lowrank",
            "pca_lowrank",
        )
    },
    **{
        name: "uninitialized memory"
        for name in (
            "empty",
            "empty_like",
            "empty_permuted",
            "empty_strided",
            "new_empty",
            "new_empty_strided",
            "resize_",
            "resize_as_",
        )
    },
    "hash_tensor": "hash values depend on the implementation",
}

STATUSES = ("pass", "capture-fail", "export-fail", "runtime-fail", "mismatch", "skipped")
EXPORTERS = ("to_onnx", "torch.onnx")
TOLERANCES = {
    torch.float32: (1e-4, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
    torch.float64: (1e-6, 1e-5),
}


class SampleTimeout(Exception):
    """A sample took longer than the guard allows.

    Cause: raised inside the operator coverage benchmark (``make coverage``) when one
    OpInfo sample runs past its time limit; the sample is recorded as failed.

    Fix: nothing to do for a user; a benchmark run on a loaded machine may raise the
    limit (:ref:`l-bench-op-coverage`)."""


@dataclass
class SampleResult:
    """Outcome of one sample for one exporter."""

    status: str
    detail: str = ""
    duration: float = 0.0


@dataclass
class OpResult:
    """Outcome of one operator for one exporter (aggregated over its samples)."""

    op: str
    exporter: str
    samples: list[SampleResult] = field(default_factory=list)

    @property
    def status(self) -> str:
        tried = [s for s in self.samples if s.status not in ("skipped", "capture-fail")]
        if not tried:
            if any(s.status == "capture-fail" for s in self.samples):
                return "capture-fail"
            return "skipped"
        for s in tried:
            if s.status != "pass":
                return s.status
        return "pass"

    @property
    def detail(self) -> str:
        status = self.status
        return next((s.detail for s in self.samples if s.status == status), "")

    @property
    def n_passed(self) -> int:
        return sum(s.status == "pass" for s in self.samples)


def op_full_name(op) -> str:
    """``name.variant`` as OpInfo tests name them."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def load_op_db(names: list[str] | None = None) -> list:
    """The OpInfos of ``op_db`` (all of them or those named)."""
    from torch.testing._internal.common_methods_invocations import op_db

    if not names:
        return list(op_db)
    wanted = set(names)
    found = [op for op in op_db if op_full_name(op) in wanted or op.name in wanted]
    missing = wanted - {op_full_name(op) for op in found} - {op.name for op in found}
    if missing:
        raise ValueError(f"unknown OpInfo names: {sorted(missing)}")
    return found


def skip_reason(op, dtype: torch.dtype = torch.float32) -> str | None:
    """Why an OpInfo is not tried at all (None if it is)."""
    name = op_full_name(op)
    if name in RANDOM_OPS or op.name in RANDOM_OPS:
        return RANDOM_OPS.get(name, RANDOM_OPS.get(op.name))
    if dtype not in op.supported_dtypes("cpu"):
        return f"{dtype} is not supported by the op"
    return None


def iter_samples(op, dtype: torch.dtype = torch.float32, n: int = 2) -> Iterator:
    """At most ``n`` sample inputs of ``op`` on CPU."""
    torch.manual_seed(0)  # the same samples in every run and for every exporter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
            if i >= n:
                return
            yield sample


class SampleModule(torch.nn.Module):
    """Calls ``op`` on a sample: tensors are the module inputs, the rest constants.
    Complex results are returned as real views (ONNX runtimes lack complex types)."""

    def __init__(self, op, spec, constants: list[Any], tensor_pos: list[int]):
        super().__init__()
        self.op = op
        self.spec = spec
        self.constants = constants
        self.tensor_pos = tensor_pos

    def forward(self, *tensors):
        leaves = list(self.constants)
        for pos, t in zip(self.tensor_pos, tensors):
            leaves[pos] = t
        inp, args, kwargs = torch.utils._pytree.tree_unflatten(leaves, self.spec)
        out = self.op(inp, *args, **kwargs)
        return torch.utils._pytree.tree_map(
            lambda t: (
                torch.view_as_real(t.resolve_conj())
                if isinstance(t, torch.Tensor) and t.is_complex()
                else t
            ),
            out,
        )


def sample_to_module(op, sample) -> tuple[SampleModule, tuple[torch.Tensor, ...]]:
    """The module and its inputs for one sample."""
    leaves, spec = torch.utils._pytree.tree_flatten(
        (sample.input, tuple(sample.args), dict(sample.kwargs))
    )
    pos = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    constants = [None if i in pos else v for i, v in enumerate(leaves)]
    tensors = tuple(leaves[i].detach() for i in pos)
    return SampleModule(op, spec, constants, pos), tensors


@contextlib.contextmanager
def time_guard(seconds: float | None):
    """Raises SampleTimeout after ``seconds`` (main thread, Unix only, else no guard).
    Code stuck in C++ is only interrupted when it returns to Python."""
    usable = (
        seconds
        and hasattr(signal, "SIGALRM")
        and __import__("threading").current_thread() is __import__("threading").main_thread()
    )
    if not usable:
        yield
        return

    def handler(signum, frame):
        raise SampleTimeout(f"more than {seconds}s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def first_line(e: BaseException, limit: int = 600) -> str:
    """Type and first line of the exception, and of its root cause if any; a first
    line announcing a list (``... for``, ``...:``) is followed by the list's first line,
    which names the operator."""
    root = e
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    prefix = f"{type(e).__name__} <- " if root is not e else ""
    return f"{prefix}{type(root).__name__}: {head_line(str(root), limit)}"


def flat_tensors(value) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def export_with(exporter: str, ep: torch.export.ExportedProgram, args: tuple):
    """Converts the captured program with one exporter."""
    if exporter == "to_onnx":
        from ..torch_interpreter import to_onnx

        return to_onnx(ep, args)
    if exporter == "torch.onnx":
        import io

        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = torch.onnx.export(ep, args, dynamo=True, verbose=False, report=False)
        return prog.model_proto
    raise ValueError(f"unknown exporter {exporter!r}")


def run_model(onx, inputs: tuple, runtime: str = "onnxruntime") -> list[np.ndarray]:
    """Runs the ONNX model, inputs given by position."""
    from ..runtime import tensor_to_numpy

    names = [i.name for i in onx.graph.input]
    if len(names) != len(inputs):
        raise RuntimeError(f"the model has {len(names)} inputs, {len(inputs)} given")
    feeds = {n: tensor_to_numpy(t) for n, t in zip(names, inputs)}
    if any(o.type.tensor_type.elem_type == 16 for o in onx.graph.output):
        runtime = "reference"  # onnxruntime's python API cannot return bfloat16
    if runtime == "reference":
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(onx).run(None, feeds)
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = onnxruntime.InferenceSession(
        onx.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    return sess.run(None, feeds)


def compare(expected: list[torch.Tensor], got: list[np.ndarray]) -> str | None:
    """None if the results match, otherwise why not."""
    from ..runtime import tensor_to_numpy

    if len(expected) != len(got):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, r) in enumerate(zip(expected, got)):
        exp, r = tensor_to_numpy(e), np.asarray(r)
        if exp.shape != r.shape:
            return f"output {i}: shape {r.shape} != {exp.shape}"
        if str(exp.dtype) != str(r.dtype):
            return f"output {i}: dtype {r.dtype} != {exp.dtype}"
        if exp.dtype.kind in "iub":
            if not np.array_equal(exp, r):
                return f"output {i}: {int((exp != r).sum())} values differ"
            continue
        atol, rtol = TOLERANCES.get(e.dtype, (1e-4, 1e-3))
        a, b = exp.astype(np.float64), r.astype(np.float64)
        ok = np.isclose(b, a, atol=atol, rtol=rtol, equal_nan=True)
        if not ok.all():
            err = np.nan_to_num(np.abs(a - b), nan=np.inf)
            return f"output {i}: {int((~ok).sum())} values differ, max abs err {err.max():.3g}"
    return None


def capture_sample(op, sample):
    """(module, inputs, expected, ep) or a SampleResult telling why it stops."""
    try:
        model, inputs = sample_to_module(op, sample)
        with torch.no_grad():
            expected = flat_tensors(model(*[t.clone() for t in inputs]))
    except Exception as e:
        return SampleResult("skipped", f"eager fails: {first_line(e)}")
    if not expected:
        return SampleResult("skipped", "no tensor output")
    if any(t.is_complex() for t in inputs):
        return SampleResult("skipped", "complex input")
    try:
        ep = torch.export.export(model, tuple(t.clone() for t in inputs), strict=False)
    except Exception as e:
        return SampleResult("capture-fail", first_line(e))
    random = random_nodes(ep)
    if random:
        return SampleResult("skipped", f"random numbers: {', '.join(sorted(set(random)))}")
    return model, inputs, expected, ep


def check_sample(
    exporter: str,
    ep,
    inputs,
    expected,
    runtime: str = "onnxruntime",
) -> SampleResult:
    """Exports, runs and compares one captured sample."""
    try:
        onx = export_with(exporter, ep, tuple(t.clone() for t in inputs))
    except SampleTimeout:
        raise
    except Exception as e:
        return SampleResult("export-fail", first_line(e))
    try:
        got = run_model(onx, inputs, runtime)
    except SampleTimeout:
        raise
    except Exception as e:
        return SampleResult("runtime-fail", first_line(e))
    n_mut = _n_mutations(ep) if len(got) > len(expected) else 0
    if n_mut and len(got) == len(expected) + n_mut:
        got = got[: len(expected)]  # in-place updates of the inputs, added after
    why = compare(expected, got)
    return SampleResult("mismatch", why) if why else SampleResult("pass")


def _n_mutations(ep) -> int:
    from torch.export.graph_signature import OutputKind

    kinds = (OutputKind.USER_INPUT_MUTATION, OutputKind.BUFFER_MUTATION)
    try:  # the exporters functionalize in-place operators: mutations become outputs
        ep = ep.run_decompositions({})
    except Exception:
        return 0
    return sum(spec.kind in kinds for spec in ep.graph_signature.output_specs)


def run_op(
    op,
    exporters=EXPORTERS,
    *,
    dtype=torch.float32,
    n_samples: int = 2,
    timeout: float | None = 120,
    runtime: str = "onnxruntime",
) -> list[OpResult]:
    """Runs every exporter on the first samples of one OpInfo."""
    name = op_full_name(op)
    results = [OpResult(name, exp) for exp in exporters]
    reason = skip_reason(op, dtype)
    if reason:
        for r in results:
            r.samples.append(SampleResult("skipped", reason))
        return results
    try:
        samples = list(iter_samples(op, dtype, n_samples))
    except Exception as e:
        samples, reason = [], f"no sample: {first_line(e)}"
    if not samples:
        for r in results:
            r.samples.append(SampleResult("skipped", reason or "no sample"))
        return results
    for sample in samples:
        begin = time.perf_counter()
        try:
            with time_guard(timeout):
                captured = capture_sample(op, sample)
        except SampleTimeout as e:
            captured = SampleResult("capture-fail", f"timeout: {e}")
        if isinstance(captured, SampleResult):
            for r in results:
                r.samples.append(captured)
            continue
        _, inputs, expected, ep = captured
        for r in results:
            begin = time.perf_counter()
            try:
                with time_guard(timeout):
                    res = check_sample(r.exporter, ep, inputs, expected, runtime)
            except SampleTimeout as e:
                res = SampleResult("export-fail", f"timeout: {e}")
            res.duration = time.perf_counter() - begin
            r.samples.append(res)
    return results


def totals(results: list[OpResult]) -> dict[str, dict[str, int]]:
    """exporter -> status -> number of operators."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        d = out.setdefault(r.exporter, dict.fromkeys(STATUSES, 0))
        d[r.status] += 1
    return out


def pass_rate(counts: dict[str, int], exclude_capture: bool = False) -> float:
    """Passed operators over the tried (not skipped) ones."""
    excluded = counts["skipped"] + (counts["capture-fail"] if exclude_capture else 0)
    tried = sum(counts.values()) - excluded
    return counts["pass"] / tried if tried else 0.0


def write_csv(results: list[OpResult], filename: str) -> None:
    with open(filename, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["op", "exporter", "status", "samples", "passed", "detail"])
        for r in results:
            w.writerow(
                [
                    r.op,
                    r.exporter,
                    r.status,
                    len(r.samples),
                    r.n_passed,
                    re.sub(r"\s+", " ", r.detail)[:1000],
                ]
            )


def format_totals(results: list[OpResult]) -> str:
    lines = []
    for exporter, counts in totals(results).items():
        n = sum(counts.values())
        text = ", ".join(f"{k}={v}" for k, v in counts.items())
        lines.append(
            f"{exporter}: {n} ops, {text}; pass rate {pass_rate(counts):.1%} over "
            f"non-skipped ops, {pass_rate(counts, True):.1%} excluding capture failures"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The coverage command: runs the OpInfo samples through the exporters, writes
    a CSV (one row per operator and exporter) and prints the totals."""
    parser = argparse.ArgumentParser(prog="coverage", description=main.__doc__)
    parser.add_argument("--exporters", default="to_onnx,torch.onnx")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names")
    parser.add_argument("--output", default="op_coverage.csv")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per sample")
    parser.add_argument("--runtime", default="", help="onnxruntime or reference")
    parser.add_argument("--no-progress", action="store_true")
    ns = parser.parse_args(argv)
    exporters = [e for e in ns.exporters.split(",") if e]
    for e in exporters:
        if e not in EXPORTERS:
            parser.error(f"unknown exporter {e!r}, expected one of {EXPORTERS}")
    dtype = getattr(torch, ns.dtype)
    runtime = ns.runtime or ("reference" if dtype == torch.bfloat16 else "onnxruntime")
    ops = load_op_db([o for o in ns.ops.split(",") if o])
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    it = ops if ns.no_progress or tqdm is None else tqdm(ops)
    results: list[OpResult] = []
    begin = time.perf_counter()
    for op in it:
        if tqdm is not None and not ns.no_progress:
            it.set_description(op_full_name(op)[:30])
        results.extend(
            run_op(
                op,
                exporters,
                dtype=dtype,
                n_samples=ns.samples,
                timeout=ns.timeout,
                runtime=runtime,
            )
        )
    duration = time.perf_counter() - begin
    write_csv(results, ns.output)
    write_metadata(results, ns.output, vars(ns), duration)
    print(format_totals(results))
    print(f"{len(ops)} OpInfos in {duration:.0f}s, written to {ns.output}")
    return 0


def write_metadata(results: list[OpResult], csv_name: str, args: dict, duration: float) -> str:
    """Writes ``<csv name>.json``: date, versions, arguments and totals of the run."""
    import datetime
    import json
    import os

    import onnx
    import onnxruntime

    meta = {
        "date": datetime.date.today().isoformat(),
        "duration_s": round(duration),
        "versions": {
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "onnxscript": _version("onnxscript"),
        },
        "args": args,
        "totals": totals(results),
    }
    name = os.path.splitext(csv_name)[0] + ".json"
    with open(name, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return name


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "?"


if __name__ == "__main__":
    import sys

    sys.exit(main())
