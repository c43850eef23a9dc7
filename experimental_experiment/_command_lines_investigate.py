"""Investigation subcommands of the command line: run, compare, find, report, export,
lighten, unlighten.

Each ``_cmd_*`` returns the exit code and raises :class:`CommandLineError` for a
one-line reason (a missing, malformed or truncated file included).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time


def _error(text: str):
    from ._command_lines_common import CommandLineError

    return CommandLineError(text)


def _load(path: str):
    from ._command_lines_common import load_model as load

    return load(path)


_NP_TYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
}


def random_inputs(model, dims: dict[str, int], seed: int = 0) -> dict:
    """Random inputs of the model's input types; symbolic dims from ``dims`` (else 2)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        dtype = _NP_TYPES.get(tt.elem_type)
        if dtype is None:
            raise _error(
                f"input {inp.name!r} has an element type ({tt.elem_type}) "
                "random inputs do not cover; give --inputs"
            )
        shape = [
            d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, 2)
            for d in tt.shape.dim
        ]
        if dtype == "bool":
            feeds[inp.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.startswith("float"):
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(0, 10, size=shape).astype(dtype)
    return feeds


def load_inputs(path: str, model) -> dict:
    """Inputs saved as .npz (names or arr_0...) or .pt (a dict or a list of tensors)."""
    import numpy as np

    if not os.path.isfile(path):
        raise _error(f"no file {path!r}")
    names = [i.name for i in model.graph.input]
    try:
        if path.endswith(".npz"):
            with np.load(path) as data:
                values = {k: data[k] for k in data.files}
        elif path.endswith(".pt"):
            import torch

            values = torch.load(path, weights_only=True)
        else:
            raise _error(f"inputs are read from .npz or .pt files, not {path!r}")
    except Exception as e:
        if type(e).__name__ == "CommandLineError":
            raise
        raise _error(f"cannot read inputs from {path!r} ({type(e).__name__}: {e})") from e
    if isinstance(values, dict) and set(values) != set(names):
        values = list(values.values())  # arr_0, arr_1... or other names: by position
    if isinstance(values, (list, tuple)):
        if len(values) != len(names):
            raise _error(f"{path!r} holds {len(values)} inputs, the model has {len(names)}")
        values = dict(zip(names, values))
    return {k: v.numpy() if hasattr(v, "numpy") else np.asarray(v) for k, v in values.items()}


def _dims(items: list[str] | None) -> dict[str, int]:
    out = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if not value.isdigit():
            raise _error(f"--dim expects name=integer, not {item!r}")
        out[name] = int(value)
    return out


def _session(model):
    import onnxruntime

    try:
        return onnxruntime.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise _error(
            f"onnxruntime cannot load the model ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from e


def _feeds(ns, model) -> dict:
    if ns.inputs:
        return load_inputs(ns.inputs, model)
    return random_inputs(model, _dims(ns.dim), ns.seed)


def _cmd_run(ns: argparse.Namespace) -> int:
    from tqdm import tqdm

    model = _load(ns.model)
    feeds = _feeds(ns, model)
    sess = _session(model)
    times = []
    outputs = None
    for _ in tqdm(range(ns.repeat), desc="run", disable=ns.repeat < 5, file=sys.stderr):
        begin = time.perf_counter()
        try:
            outputs = sess.run(None, feeds)
        except Exception as e:
            raise _error(
                f"onnxruntime failed ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''})"
            ) from e
        times.append(time.perf_counter() - begin)
    for out, value in zip(sess.get_outputs(), outputs):
        print(f"{out.name}: {value.dtype} {tuple(value.shape)}")
    print(f"median time: {statistics.median(times) * 1000:.3f} ms over {len(times)} runs")
    return 0


def _import_class(spec: str):
    module_name, _, cls_name = spec.partition(":")
    if not module_name or not cls_name:
        raise _error(f"expected module:Class, not {spec!r}")
    try:
        obj = importlib.import_module(module_name)
        for part in cls_name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise _error(f"cannot import {spec!r} ({type(e).__name__}: {e})") from e
    return obj


def _max_diff(expected, got) -> float:
    import numpy as np

    e, g = np.asarray(expected), np.asarray(got)
    if e.shape != g.shape:
        return float("inf")
    if e.size == 0:
        return 0.0
    d = np.abs(e.astype(np.float64) - g.astype(np.float64))
    return float(np.nan_to_num(d, nan=np.inf).max())


def _cmd_compare(ns: argparse.Namespace) -> int:
    model = _load(ns.model)
    feeds = _feeds(ns, model)
    expected = _session(model).run(None, feeds)
    if ":" in ns.other and not os.path.exists(ns.other):
        import torch

        module = _import_class(ns.other)()
        with torch.no_grad():
            got = module(*[torch.from_numpy(v) for v in feeds.values()])
        got = [t.numpy() for t in (got if isinstance(got, (list, tuple)) else [got])]
        other = ns.other
    else:
        got = _session(_load(ns.other)).run(None, feeds)
        other = ns.other
    if len(got) != len(expected):
        raise _error(f"{ns.model!r} has {len(expected)} outputs, {other!r} {len(got)}")
    worst = 0.0
    for i, (e, g) in enumerate(zip(expected, got)):
        diff = _max_diff(e, g)
        worst = max(worst, diff)
        print(f"output {i}: shape {tuple(e.shape)}, max abs diff {diff:.3g}")
    if worst > ns.atol:
        print(f"compare: max abs diff {worst:.3g} > atol {ns.atol}", file=sys.stderr)
        return 1
    print(f"same results (max abs diff {worst:.3g} <= {ns.atol})")
    return 0


def _cmd_find(ns: argparse.Namespace) -> int:
    model = _load(ns.model)
    graphs = [("main graph", model.graph)] + [
        (f"function {f.domain}.{f.name}", f) for f in model.functions
    ]
    found = False
    for where, graph in graphs:
        inputs = [i.name if hasattr(i, "name") else i for i in graph.input]
        inits = {t.name for t in getattr(graph, "initializer", [])}
        for name in ns.names:
            if name in inputs:
                found = True
                print(f"{name}: input of the {where}")
            if name in inits:
                found = True
                print(f"{name}: initializer of the {where}")
        for k, node in enumerate(graph.node):
            for name in ns.names:
                role = "produced" if name in node.output else "used" if name in node.input else None
                if role:
                    found = True
                    print(f"{name}: {role} by node {k} {node.op_type}({node.name}) in the {where}")
    if not found:
        print(f"find: {', '.join(ns.names)} not found in {ns.model!r}", file=sys.stderr)
        return 1
    return 0


def _cmd_report(ns: argparse.Namespace) -> int:
    from .report import ExportReport
    from .report.render import render, save_report

    if not os.path.isfile(ns.report):
        raise _error(f"no file {ns.report!r}")
    try:
        report = ExportReport.load(ns.report)
    except (ValueError, UnicodeDecodeError) as e:
        raise _error(str(e)) from e
    if ns.output:
        try:
            save_report(report, ns.output)
        except ValueError as e:
            raise _error(str(e)) from e
        print(f"report: saved {ns.output!r}")
    else:
        print(render(report, ns.format))
    return 0


def _export_inputs(ns):
    """(model, args, kwargs, dynamic_shapes, patched) for --model."""
    import torch

    if ":" not in ns.model:
        from .torch_models.llm_helper import TINY_ARCHITECTURES, get_tiny_llm

        if ns.model not in TINY_ARCHITECTURES:
            raise _error(
                f"unknown architecture {ns.model!r}, expected module:Class or one "
                f"of {', '.join(sorted(TINY_ARCHITECTURES))}"
            )
        data = get_tiny_llm(ns.model, with_cache=ns.with_cache)
        return data["model"], (), data["inputs"], data["dynamic_shapes"], True
    cls = _import_class(ns.model)
    try:
        model = cls().eval()
    except Exception as e:
        raise _error(f"{ns.model}() failed ({type(e).__name__}: {e})") from e
    shapes = ns.shape or ["2x4"]
    try:
        args = tuple(torch.randn(*[int(d) for d in s.split("x")]) for s in shapes)
    except ValueError as e:
        raise _error(f"--shape expects sizes like 2x4, not {shapes}") from e
    axes = [int(a) for a in ns.dynamic.split(",")] if ns.dynamic else []
    ds = tuple({a: f"dim{a}" for a in axes} for _ in args) if axes else None
    return model, args, {}, ds, False


def _cmd_export(ns: argparse.Namespace) -> int:
    import contextlib

    from .torch_interpreter import to_onnx
    from .torch_interpreter.errors import ExportError
    from .torch_interpreter.onnx_export_errors import bypass_export_some_errors

    model, args, kwargs, ds, patched = _export_inputs(ns)
    ctx = (
        bypass_export_some_errors(patch_transformers=True)
        if patched
        else (contextlib.nullcontext())
    )
    try:
        with ctx:
            to_onnx(
                model,
                args,
                kwargs,
                dynamic_shapes=ds,
                filename=ns.output,
                report=ns.report,
                optimize=not ns.no_optimize,
                progress=ns.progress,
            )
    except ExportError as e:
        where = f" (report: {ns.report})" if ns.report else ""
        raise _error(f"{type(e).__name__}: {str(e).splitlines()[0]}{where}") from e
    print(f"export: saved {ns.output!r}" + (f", report {ns.report!r}" if ns.report else ""))
    return 0


def add_subcommands(sub) -> None:
    """Adds run, compare, find, report, export, lighten and unlighten to ``sub``."""
    _add_run_compare(sub)
    _add_find_report(sub)
    _add_export(sub)
    add_weight_subcommands(sub)


def _common_inputs(p) -> None:
    p.add_argument(
        "--inputs",
        default=None,
        help="inputs from a .npz or .pt file (names or positions), random ones otherwise",
    )
    p.add_argument(
        "--dim",
        action="append",
        help="size of a symbolic dimension for random inputs, name=value (default 2), repeatable",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def _add_run_compare(sub) -> None:
    p = sub.add_parser(
        "run",
        help="runs an ONNX model with onnxruntime, median time",
        description="Runs an ONNX model with onnxruntime on random or "
        "given inputs, prints the outputs' shapes and the median time.",
    )
    p.add_argument("model", help="ONNX file")
    _common_inputs(p)
    p.add_argument("--repeat", type=int, default=10, help="number of runs")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "compare",
        help="compares an ONNX model with another one or a torch module",
        description="Runs an ONNX model and another ONNX "
        "model or a torch module given as module:Class (built without "
        "arguments) on the same inputs; exit code 1 when a difference "
        "exceeds --atol.",
    )
    p.add_argument("model", help="ONNX file")
    p.add_argument("other", help="another ONNX file or module:Class")
    _common_inputs(p)
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance")
    p.set_defaults(func=_cmd_compare)


def _add_find_report(sub) -> None:
    p = sub.add_parser(
        "find",
        help="tells where names are produced and used",
        description="Lists the nodes producing and using each name, and "
        "whether it is an input or an initializer, in the main graph and "
        "the local functions.",
    )
    p.add_argument("model", help="ONNX file")
    p.add_argument("names", nargs="+", help="result names")
    p.set_defaults(func=_cmd_find)

    p = sub.add_parser(
        "report",
        help="renders a saved export report as Markdown or SARIF",
        description="Reads an export report saved as JSON "
        "(to_onnx(..., report='r.json')) and prints it as Markdown, SARIF "
        "2.1.0 or JSON, or writes it (-o, format from the extension).",
    )
    p.add_argument("report", help="JSON report")
    p.add_argument("--format", choices=["md", "sarif", "json"], default="md")
    p.add_argument("-o", "--output", default=None, help=".md, .sarif or .json file")
    p.set_defaults(func=_cmd_report)


def _add_export(sub) -> None:
    from ._command_lines_common import add_progress

    p = sub.add_parser(
        "export",
        help="exports a tiny transformers model or module:Class",
        description="Exports a transformers architecture (llama, phi3, "
        "...: a tiny config with random weights) or a module given as "
        "module:Class (built without arguments, random float inputs) to "
        "ONNX, with an export report.",
    )
    p.add_argument("model", help="architecture name or module:Class")
    p.add_argument("-o", "--output", required=True, help="ONNX file")
    p.add_argument("--report", default=None, help="report file (.json, .md, .sarif)")
    p.add_argument(
        "--shape",
        action="append",
        help="input shape for module:Class, like 2x4, one per input (default one input 2x4)",
    )
    p.add_argument(
        "--dynamic",
        default=None,
        help="dynamic axes of every input for module:Class, like 0 or 0,1",
    )
    p.add_argument("--with-cache", action="store_true", help="gives a KV cache to a decoder")
    p.add_argument("--no-optimize", action="store_true", help="skips the optimizer")
    add_progress(p)
    p.set_defaults(func=_cmd_export)


def _save_npz(arrays: dict, path: str) -> None:
    import numpy as np

    from .xbuilder.model_container import AtomicFiles

    path = os.path.abspath(path)
    with AtomicFiles(os.path.dirname(path)) as files:
        np.savez(files.open(path), **arrays)


def _cmd_lighten(ns: argparse.Namespace) -> int:
    from ._command_lines_common import save_model
    from .helpers.lighten import lighten_model

    light, removed = lighten_model(_load(ns.model), threshold=ns.threshold)
    weights = ns.weights or ns.output + ".npz"
    _save_npz(removed, weights)
    save_model(light, ns.output)
    size = sum(a.nbytes for a in removed.values())
    print(
        f"lighten: {len(removed)} initializers ({size:,} bytes) moved to {weights!r}, "
        f"saved {ns.output!r}"
    )
    return 0


def _cmd_unlighten(ns: argparse.Namespace) -> int:
    from ._command_lines_common import save_model
    from .helpers.lighten import load_weights, unlighten_model

    light = _load(ns.model)
    weights = None
    if not ns.random:
        path = ns.weights or ns.model + ".npz"
        if not os.path.isfile(path):
            raise _error(f"no file {path!r} (give --weights or --random)")
        try:  # every array's header checked against the bytes that hold it
            weights = load_weights(path)
        except ValueError as e:
            raise _error(f"cannot read weights from {path!r}: {e}") from e
    try:
        model = unlighten_model(light, weights, seed=ns.seed)
    except ValueError as e:
        raise _error(str(e)) from e
    save_model(model, ns.output)
    print(f"unlighten: saved {ns.output!r}")
    return 0


def add_weight_subcommands(sub) -> None:
    """Adds lighten and unlighten."""
    p = sub.add_parser(
        "lighten",
        help="moves the weights of an ONNX model to a .npz file",
        description="Writes a light model whose initializers larger than "
        "--threshold elements have no data (type, shape and statistics "
        "kept in their doc_string) and the weights in a .npz file; "
        "unlighten puts them back.",
    )
    p.add_argument("model", help="ONNX file")
    p.add_argument("output", help="light ONNX file")
    p.add_argument("--weights", default=None, help="the .npz file (default <output>.npz)")
    p.add_argument(
        "--threshold", type=int, default=128, help="initializers with more elements are moved"
    )
    p.set_defaults(func=_cmd_lighten)

    p = sub.add_parser(
        "unlighten",
        help="puts back the weights lighten removed",
        description="Restores the weights of a model written by lighten "
        "from its .npz file, or random values with the recorded mean and "
        "standard deviation (--random).",
    )
    p.add_argument("model", help="light ONNX file")
    p.add_argument("output", help="ONNX file")
    p.add_argument("--weights", default=None, help="the .npz file (default <model>.npz)")
    p.add_argument("--random", action="store_true", help="random weights instead")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.set_defaults(func=_cmd_unlighten)
