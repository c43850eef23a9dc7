"""Model zoo: every transformers model type with a text, vision or speech head
(:mod:`experimental_experiment.bench.zoo_cases`), tiny and with random weights,
exported by :func:`to_onnx`, ``torch.onnx.export(dynamo=True)`` and transformers' own
``OnnxExporter`` (``--exporters transformers``,
:mod:`experimental_experiment.bench.zoo_transformers`) with dynamic batch, sequence and
cache dimensions, checked with onnxruntime against eager on other sizes.

.. code-block:: bash

    python -m experimental_experiment.bench.zoo --output _doc/bench/zoo.csv \\
        [--quick] [--types llama,bert] [--exporters to_onnx,torch.onnx,transformers]
        [--timeout 120] [--failed] [--rerun] [--jobs 2] [--ray ADDRESS]
        [--heads first|all|HEAD,HEAD] [--per-head 6]

Every case (model type, exporter) runs in a forked process with one thread and a
timeout: a crash or a hang is a row of the table, not the end of the run. ``--jobs N``
runs up to N cases at once (``make zoo`` uses 2). The CSV is rewritten atomically
after every case, its rows sorted by model type and exporter (the file does not depend
on the order cases end in), and the cases it already holds are skipped: the run is
resumable.
``--heads first`` (the default) exports every model type with its first head,
``--heads all`` every (model type, head) pair of transformers' auto mappings used
for inference (:mod:`experimental_experiment.bench.zoo_heads`), ``--per-head N`` a
sample of N model types per head; a row is keyed by (model type, head, exporter).
A case known not to work with random weights or a tiny configuration is a row with
status ``skip`` and the reason as its cause.
A JSON file next to it records the date, the versions and the number of types listed.
A failed case has a stage (``config`` for the configuration, the model or the eager
run, ``capture``, ``conversion``, ``runtime``, ``mismatch``, ``timeout``, ``memory``,
``crash``)
and a cause, a short label normalized from the error. A case transformers' exporter
refuses before tracing it (a check of its own) has the status ``skip``, stage
``refused`` and the exporter's message.
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import platform
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ConstrainedDimensionWarning
from .report_format import head_line
from .zoo_cases import QUICK_TYPES, ZooCase, ZooCaseSkipped, build_case, list_cases
from .zoo_transformers import TransformersExportRefusedError

FIELDS = [
    "model_type",
    "head",
    "model_class",
    "exporter",
    "cache",
    "status",
    "stage",
    "cause",
    "error",
    "export_time",
    "nodes",
    "max_diff",
    "wall_time",
]
EXPORTERS = {
    "to_onnx": "to_onnx",
    "torch.onnx": "torch.onnx.export",
    "torch.onnx.export": "torch.onnx.export",
    "transformers": "transformers",
}
_CAPTURE_ERRORS = (
    "CaptureError",
    "TorchExportError",
    "UserError",
    "Unsupported",
    "GuardOnDataDependentSymNode",
    "ConstraintViolationError",
)


def _text(e: BaseException) -> str:
    """The message of ``e`` without terminal colors."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(e))


#: the folder holding the package (a checkout): removed from the messages of a row
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def strip_paths(text: str) -> str:
    """``text`` without machine paths: the checkout's folder is dropped and an
    installed package's path starts at ``site-packages/``."""
    # the whole path before site-packages/, a virtual environment in the checkout too
    text = re.sub(r"[^\s'\"():,]*site-packages/", "site-packages/", text)
    return text.replace(_ROOT + os.sep, "")


def first_line(e: BaseException) -> str:
    """``Type: first non empty line of the message``, whole (up to 2,000 characters),
    with the next line when the first one announces it (:func:`head_line`)."""
    line = head_line(_text(e))
    return f"{type(e).__name__}: {line}" if line else type(e).__name__


def root_cause(e: BaseException) -> BaseException:
    """The innermost exception of the ``__cause__`` / ``__context__`` chain."""
    seen = {id(e)}
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__
        if id(e) in seen:
            break
        seen.add(id(e))
    return e


_CAUSES = [
    (r"in output, which is not a known type", "unsupported output type"),
    (r"GuardOnDataDependent|data.dependent", "data-dependent expression"),
    (
        r"Constraints violated|marked as dynamic|specializ|Not all values of|"
        r"conflicts between user-specified ranges and inferred",
        "dynamic dimension specialized",
    ),
    (r"max absolute difference .* was constrained to", "dynamic dimension constrained"),
    (r"max absolute difference", "numerical mismatch"),
    (r"ONNX outputs, \d+ eager outputs", "number of outputs differs"),
    (r"output \d+: shape", "output shape differs"),
    (r"ONNX inputs .* for \d+ tensors", "number of inputs differs"),
    (r"forward takes no cache argument", "no cache argument"),
    (r"has no head in|Unrecognized model identifier", "unknown model type"),
    (r"is valid only for sizes in", "dynamic dimension bounded by the capture"),
]


def cause_bucket(stage: str, error: str, detail: str = "") -> str:
    """A short label for a failure: known patterns first (in ``error`` and ``detail``,
    the full messages), then the operator or the onnxruntime status code, then the
    innermost exception (after ``<-``) as it is written (``capture: KeyError: 'l_1'``)."""
    for pattern, label in _CAUSES:
        if re.search(pattern, error) or re.search(pattern, detail):
            return label
    op = re.search(r"(aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)", error)
    if op and stage == "conversion":
        return f"conversion of {op.group(1)}"
    ort = re.search(r"\[ONNXRuntimeError\] : \d+ : (\w+)", error)
    if ort:
        node = re.search(r"node[^A-Za-z]*\(?([A-Za-z]+)", error)
        return f"onnxruntime {ort.group(1)}" + (f" ({node.group(1)})" if node else "")
    overload = re.search(r"OpOverload\(op='([\w.]+)', overload='(\w+)'\)", error)
    if overload:
        return f"{stage} of {overload.group(1)}.{overload.group(2)}"
    return f"{stage}: {error.split(' <- ')[-1].strip()}"


def _export(case_data: dict, exporter: str):
    from ..torch_models.llm_models import export_model

    if EXPORTERS[exporter] == "transformers":
        from .zoo_transformers import export_transformers

        return export_transformers(
            case_data["model"], case_data["inputs"], case_data["dynamic_shapes"]
        )
    return export_model(
        case_data["model"],
        copy.deepcopy(case_data["inputs"]),
        case_data["dynamic_shapes"],
        EXPORTERS[exporter],
    )


@dataclass(frozen=True)
class CheckResult:
    """What the check of a case measured: the largest absolute difference between
    onnxruntime and eager; when it exceeds the tolerance but float32 rounding explains
    it, the distances of eager float32 and of onnxruntime to eager float64."""

    max_diff: float
    eager_to_float64: float | None = None
    onnx_to_float64: float | None = None


def float64_outputs(model, inputs: dict) -> list | None:
    """The outputs of the model run in float64 on ``inputs`` (float32 tensors widened),
    None when it does not run so (a cache, an operator without a float64 kernel)."""
    import torch

    from ..torch_models.llm_models import eager_outputs

    def widen(v):
        return v.double() if isinstance(v, torch.Tensor) and v.dtype == torch.float32 else v

    try:
        wide = {k: widen(v) for k, v in inputs.items()}
        return eager_outputs(copy.deepcopy(model).double(), wide)
    except Exception:
        return None


def _check(case_data: dict, onx, atol: float, by_name: bool = False) -> CheckResult:
    """Max absolute difference between onnxruntime and eager on the check inputs;
    raises ``RuntimeError`` (runtime stage) or ``AssertionError`` (mismatch).
    ``by_name``: inputs and outputs matched by the path of each tensor (transformers'
    exporter, ``zoo_transformers.named_feeds``),
    otherwise by position. A difference above ``atol`` still passes when onnxruntime is
    at most twice as far as eager float32 from the model run in float64
    (:func:`float64_outputs`): the difference is float32 rounding, of eager as much as
    of onnxruntime."""
    import onnxruntime

    from ..torch_interpreter.patches.cache_registration import register_cache_classes
    from ..torch_models.llm_models import compare_outputs, eager_outputs, ort_feeds, user_outputs

    model, inputs = case_data["model"], case_data["check_inputs"]
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    try:
        sess = onnxruntime.InferenceSession(
            onx.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        if by_name:
            from .zoo_transformers import named_feeds

            feeds = named_feeds(sess, inputs)
        else:
            with register_cache_classes():
                feeds = ort_feeds(sess, inputs)
        got = sess.run(None, feeds) if by_name else user_outputs(sess, sess.run(None, feeds))
    except Exception as e:
        raise RuntimeError(first_line(e)) from e
    if by_name:
        from .zoo_transformers import named_expected

        expected = named_expected(sess, model, inputs)
    else:
        expected = eager_outputs(model, inputs)
    diff = compare_outputs(expected, got)
    if diff <= atol:
        return CheckResult(diff)
    exact = float64_outputs(model, inputs) if len(expected) == len(got) else None
    float64 = ""
    if exact is not None:
        eager_error = compare_outputs(exact, [e.detach().numpy() for e in expected])
        onnx_error = compare_outputs(exact, got)
        if onnx_error <= 2 * eager_error:
            return CheckResult(diff, eager_error, onnx_error)
        float64 = f"; from float64: onnxruntime {onnx_error:.3g}, eager {eager_error:.3g}"
    scale = max((float(e.detach().abs().max()) for e in expected if e.numel()), default=0)
    raise AssertionError(
        f"max absolute difference {diff:.3g} > {atol} (eager outputs up to {scale:.3g}){float64}"
    )


def outside_valid_ranges(onx, inputs: dict) -> bool:
    """Whether a size of ``inputs`` lies outside the valid sizes of its dimension written
    in the model's ``metadata_props['dynamic_dimension_ranges']`` (``min``, ``max``,
    ``step``): a warning of the capture bounding a dimension explains a failure on these
    inputs only then (True without that metadata or for a dimension not found)."""
    text = next((p.value for p in onx.metadata_props if p.key == "dynamic_dimension_ranges"), "")
    if not text:
        return True
    for dimension, entry in json.loads(text).items():
        m = re.fullmatch(r"(.+)\.shape\[(\d+)\]", dimension)
        value = inputs.get(m.group(1)) if m else None
        if not hasattr(value, "shape") or int(m.group(2)) >= len(value.shape):
            return True
        size = value.shape[int(m.group(2))]
        low, high, step = entry.get("min"), entry.get("max"), entry.get("step") or 1
        if (low is not None and size < low) or (high is not None and size > high):
            return True
        if step > 1 and (size - (low or 0)) % step:
            return True
    return False


def run_case_inline(
    case: ZooCase, exporter: str, *, atol: float = 1e-3, build=None
) -> dict[str, Any]:
    """Runs one case in this process; never raises, returns a row of :data:`FIELDS`.
    ``build`` makes the case data (default ``build_case``: the diffusers classes have
    their own)."""
    row: dict[str, Any] = dict(model_type=case.model_type, head=case.head, exporter=exporter)
    stage = "config"
    try:
        data = (build or build_case)(case)
        row.update(model_class=data["model_class"], cache=data["cache"])
        stage = "capture"
        begin = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConstrainedDimensionWarning)
                onx = _export(data, exporter)
        except Exception as e:
            name = type(e).__name__
            stage = (
                "capture"
                if name in _CAPTURE_ERRORS
                or "torch/_dynamo" in str(e)
                or (name == "ConversionError" and "torch.export" in str(e))
                else "conversion"
            )
            raise
        row["export_time"] = round(time.perf_counter() - begin, 3)
        row["nodes"] = len(onx.graph.node)
        by_name = EXPORTERS[exporter] == "transformers"
        stage = "runtime"
        bounded = [
            str(w.message) for w in caught if issubclass(w.category, ConstrainedDimensionWarning)
        ]
        try:
            checked = _check(data, onx, atol, by_name=by_name)
            row["max_diff"] = f"{checked.max_diff:.3g}"
        except (AssertionError, RuntimeError) as e:
            stage = "mismatch" if isinstance(e, AssertionError) else "runtime"
            # the capture bounded a dynamic dimension and the check sizes lie outside
            if bounded and outside_valid_ranges(onx, data["check_inputs"]):
                raise type(e)(f"{e}; {bounded[0]}") from e
            raise
        cause = (
            ""
            if checked.eager_to_float64 is None
            else f"float32 rounding: from float64, onnxruntime {checked.onnx_to_float64:.3g}, "
            f"eager {checked.eager_to_float64:.3g}"
        )
        row.update(status="pass", stage="", cause=cause, error="")
    except TransformersExportRefusedError as e:  # refused before tracing: not a failure
        row.update(
            status="skip", stage="refused", cause="refused by the exporter", error=first_line(e)
        )
    except ZooCaseSkipped as e:  # listed with its reason, never dropped
        row.update(status="skip", stage="", cause=str(e), error="")
    except Exception as e:  # the row records the failure
        root = root_cause(e)
        msg = first_line(e)
        if root is not e and not (stage == "runtime" and isinstance(e, RuntimeError)):
            msg = f"{msg} <- {first_line(root)}"
        # the lines the exporter's notes name (a dimension made constant by the model)
        named = [n[2:] for note in getattr(e, "__notes__", ()) for n in note.splitlines()]
        if named := [n for n in named if " became " in n]:
            msg = f"{msg}; {'; '.join(named)}"
        detail = f"{_text(e)[:5000]}\n{_text(root)[:5000]}"
        row.update(
            status="fail",
            stage=stage,
            error=strip_paths(msg),
            cause=strip_paths(cause_bucket(stage, msg, detail)),
        )
    return row


def _limit_child(cpu_seconds: float) -> None:
    """The child dies with its parent (Linux) and after ``cpu_seconds`` of CPU time."""
    import ctypes
    import resource
    import signal

    limit = max(1, int(cpu_seconds + 0.5))
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: an orphan ends at its CPU limit
        pass


def _child(
    conn, case: ZooCase, exporter: str, atol: float, quiet: bool, cpu_seconds: float, build=None
) -> None:
    import torch

    _limit_child(cpu_seconds)
    if quiet:  # the parent's progress bar stays readable
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)
    conn.send(run_case_inline(case, exporter, atol=atol, build=build))
    conn.close()


class _Job:
    """One case running in a forked child with the limits of :func:`run_case`."""

    def __init__(
        self,
        case: ZooCase,
        exporter: str,
        *,
        timeout: float = 120,
        atol: float = 1e-3,
        quiet: bool = True,
        wall_factor: float = 5,
        max_memory: float = 3,
        build=None,
    ):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe(duplex=False)
        self.case, self.exporter, self.timeout = case, exporter, timeout
        self.wall, self.max_memory = timeout * wall_factor, max_memory
        self.begin = time.perf_counter()
        self.proc = ctx.Process(
            target=_child, args=(child, case, exporter, atol, quiet, timeout, build)
        )
        self.proc.start()
        child.close()

    def poll(self) -> dict[str, Any] | None:
        """The row once the child sent it, ended or was killed; None while it runs."""
        done, row, killed = _poll(
            self.conn, self.proc, time.perf_counter() - self.begin, self.wall, self.max_memory
        )
        if not done:
            return None
        self.proc.join()
        if row is None:
            row = _failed_row(
                self.case, self.exporter, self.proc.exitcode, killed, self.timeout, self.max_memory
            )
        self.conn.close()
        row["wall_time"] = round(time.perf_counter() - self.begin, 2)
        return row


def run_cases(
    todo: list[tuple[ZooCase, str]], *, jobs: int = 1, **limits
) -> Iterator[dict[str, Any]]:
    """Runs the cases ``(case, exporter)`` of ``todo`` in that order, up to ``jobs`` at
    once, each in its forked child with the limits of :func:`run_case` (``limits``),
    and yields their rows as they end."""
    pending, running = list(todo), []
    while pending or running:
        while pending and len(running) < jobs:
            running.append(_Job(*pending.pop(0), **limits))
        multiprocessing.connection.wait([j.conn for j in running], timeout=1.0)
        for job in list(running):
            row = job.poll()
            if row is not None:
                running.remove(job)
                yield row


def run_case(
    case: ZooCase,
    exporter: str,
    *,
    timeout: float = 120,
    atol: float = 1e-3,
    quiet: bool = True,
    wall_factor: float = 5,
    max_memory: float = 3,
) -> dict[str, Any]:
    """Runs one case in a forked process; a timeout, a crash or too much memory becomes
    a failed row. ``timeout`` limits the CPU time of the case (a loaded machine does not
    make it time out), ``timeout * wall_factor`` its wall time (a dead lock),
    ``max_memory`` its resident memory in GB (the machine is shared).

    .. code-block:: python

        row = run_case(ZooCase("llama", "causal-lm"), "to_onnx", timeout=60)
        print(row["status"], row["stage"], row["cause"])
    """
    return next(
        run_cases(
            [(case, exporter)],
            timeout=timeout,
            atol=atol,
            quiet=quiet,
            wall_factor=wall_factor,
            max_memory=max_memory,
        )
    )


def _rss_gb(pid: int) -> float:
    """Resident memory of a process in GB (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (OSError, ValueError, IndexError):
        return 0.0


def _poll(
    conn, proc, elapsed: float, wall: float, max_memory: float
) -> tuple[bool, dict | None, str]:
    """One look at a child: whether it is over, its row (None when it sent none) and
    why it was killed ('wall', 'memory' or '')."""
    ready = conn.poll()
    if ready or not proc.is_alive():
        try:
            return True, (conn.recv() if ready or conn.poll(0.1) else None), ""
        except EOFError:  # the child died before sending its row
            return True, None, ""
    reason = "wall" if elapsed > wall else "memory" if _rss_gb(proc.pid) > max_memory else ""
    if reason:
        proc.kill()
    return bool(reason), None, reason


def _failed_row(case, exporter, exitcode, killed, timeout, max_memory) -> dict:
    """The row of a case whose process ended without a result."""
    import signal

    if killed == "memory":
        stage, msg = "memory", f"more than {max_memory:g} GB of resident memory"
    elif killed:
        stage, msg = "timeout", "no result within the wall time limit"
    elif exitcode == -signal.SIGXCPU:
        stage, msg = "timeout", f"more than {timeout:g}s of CPU time"
    else:
        stage, msg = "crash", f"process ended with exit code {exitcode}"
    cause = stage if stage in ("timeout", "memory") else f"crash (exit code {exitcode})"
    return dict(
        model_type=case.model_type,
        head=case.head,
        exporter=exporter,
        status="fail",
        stage=stage,
        error=msg,
        cause=cause,
    )


def read_rows(path: str) -> list[dict]:
    """The rows of a zoo CSV (an empty list when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("status")]


def _key(row: dict) -> tuple[str, str, str]:
    """A row's key: model type, head, exporter (a type has one row per head)."""
    return row["model_type"], row.get("head") or "", row["exporter"]


def write_rows(path: str, rows: list[dict]) -> None:
    """Writes the CSV atomically (a temporary file renamed), rows sorted by model type
    and exporter."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for r in sorted(rows, key=_key):
            writer.writerow({k: r.get(k, "") for k in FIELDS})
    os.replace(tmp, path)


def versions() -> dict[str, str]:
    """Versions of the packages the zoo depends on."""
    import importlib.metadata

    out = {"python": platform.python_version()}
    for name in (
        "torch",
        "transformers",
        "onnx",
        "onnxruntime",
        "onnxscript",
        "experimental-experiment",
    ):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    for name in ("diffusers", "timm", "torchvision"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_meta(
    path: str,
    listed: int,
    exporters: list[str] | None = None,
    previous: list[str] | None = None,
    **extra,
) -> None:
    """The JSON next to the CSV: date, versions, number of types listed (the last run),
    and under ``runs`` the date and commit of the last run of every exporter in
    ``exporters``; the exporters of ``previous`` (those with rows already) without an
    entry get the date and commit the file held (a run of one exporter does not date
    the rows of the others)."""
    old: dict = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    runs = dict(old.get("runs", {}))
    for e in previous or []:
        if e not in runs and old.get("date"):
            runs[e] = dict(date=old["date"], commit=old.get("commit", ""))
    for e in exporters or []:
        runs[e] = dict(date=date, commit=extra.get("commit", ""))
    meta = dict(date=date, versions=versions(), listed=listed, **extra)
    if runs:
        meta["runs"] = runs
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="zoo", description="exports every transformers model type, writes a CSV"
    )
    parser.add_argument("--output", default=os.path.join("_doc", "bench", "zoo.csv"))
    parser.add_argument("--quick", action="store_true", help=f"only {','.join(QUICK_TYPES)}")
    parser.add_argument("--types", default="", help="comma separated model types")
    parser.add_argument("--exporters", default="to_onnx,torch.onnx")
    parser.add_argument(
        "--timeout", type=float, default=120, help="CPU seconds per case (wall time: 5 times more)"
    )
    parser.add_argument("--atol", type=float, default=1e-3)
    parser.add_argument(
        "--max-memory", type=float, default=3, help="GB of resident memory per case"
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="run the selected types again (their rows are replaced)",
    )
    parser.add_argument(
        "--failed",
        action="store_true",
        help="only the types with a failed row (with --rerun: run them again)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit code 1 when a selected case fails (CI)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="cases run at once (one process of one thread each)"
    )
    parser.add_argument("--limit", type=int, default=0, help="run at most this many cases")
    parser.add_argument(
        "--ray",
        default="",
        metavar="ADDRESS",
        help="run the cases on this Ray cluster ('auto', 'ray://host:10001'),"
        " one task of one CPU each; --jobs is then ignored",
    )
    parser.add_argument(
        "--heads",
        default="first",
        help="first: the first head of every model type (the dashboard), "
        "all: every (model type, head) pair, or comma separated heads",
    )
    parser.add_argument(
        "--per-head", type=int, default=0, help="at most this many model types per head (0: all)"
    )
    parser.add_argument("--commit", default="", help="commit of the exporter, for the page")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Runs the cases not yet in the CSV, returns 0 (1 with ``--strict`` when a selected
    case failed)."""
    import torch  # noqa: F401  (imported once before forking: children start fast)
    import transformers  # noqa: F401
    from tqdm import tqdm

    from ..torch_interpreter import to_onnx  # noqa: F401

    args = _parse(argv)
    exporters = args.exporters.split(",")
    unknown = [e for e in exporters if e not in EXPORTERS]
    if unknown:
        raise SystemExit(f"unknown exporters {unknown}, expected some of {list(EXPORTERS)}")
    everything = list_cases(heads=args.heads)
    types = args.types.split(",") if args.types else (list(QUICK_TYPES) if args.quick else None)
    cases = (
        list_cases(types, heads=args.heads, per_head=args.per_head)
        if (types or args.per_head)
        else everything
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    rows = read_rows(args.output)
    if args.failed:
        failed = {(r["model_type"], r["head"]) for r in rows if r["status"] == "fail"}
        cases = [c for c in cases if (c.model_type, c.head) in failed]
    # with --rerun an old row is replaced when the new one is written (interruptible)
    again = {(c.model_type, c.head, e) for c in cases for e in exporters} if (args.rerun) else set()
    done = {_key(r) for r in rows} - again
    todo = [(c, e) for c in cases for e in exporters if (c.model_type, c.head, e) not in done]
    if args.limit:
        todo = todo[: args.limit]
    meta_path = os.path.splitext(args.output)[0] + ".json"
    previous = sorted({r["exporter"] for r in rows})
    write_meta(
        meta_path,
        len(everything),
        exporters,
        previous,
        timeout=args.timeout,
        atol=args.atol,
        commit=args.commit,
    )
    bar = tqdm(total=len(todo), desc="zoo")
    limits = dict(timeout=args.timeout, atol=args.atol, max_memory=args.max_memory)
    if args.ray:
        from .zoo_ray import run_cases_ray

        rows_in = run_cases_ray(todo, address=args.ray, run_case=run_case, **limits)
    else:
        rows_in = run_cases(todo, jobs=max(args.jobs, 1), **limits)
    for row in rows_in:
        key = _key(row)
        rows = [r for r in rows if _key(r) != key]
        rows.append(row)
        write_rows(args.output, rows)
        bar.set_postfix_str(f"{key[0]} {key[1]} {key[2]} {row['status']}")
        bar.update(1)
    bar.close()
    write_meta(
        meta_path,
        len(everything),
        exporters,
        previous,
        timeout=args.timeout,
        atol=args.atol,
        commit=args.commit,
    )
    selected = {(c.model_type, c.head) for c in cases}
    failed = sorted(
        f"{r['model_type']} {r['head']} ({r['exporter']}): {r['error']}"
        for r in rows
        if (r["model_type"], r["head"]) in selected
        and r["exporter"] in exporters
        and r["status"] == "fail"
    )
    if args.strict and failed:
        logging.getLogger(__name__).error("failed cases:\n%s", "\n".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
