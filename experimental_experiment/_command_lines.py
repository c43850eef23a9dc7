"""The command line: ``python -m experimental_experiment <subcommand> ...``.

Every subcommand imports what it needs when it runs, so that ``--help`` and the
torch-free subcommands (``print``, ``stats``, ``optimize``) start quickly.
Subcommands backed by a module with its own parser (the benchmarks, the coverage
of operators, the models) give it the remaining arguments unchanged.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys

from ._command_lines_common import (  # noqa: F401
    CommandLineError,
    add_progress,
    check_output,
    save_model,
    wants_progress,
)
from ._command_lines_common import load_model as _load

PROG = "python -m experimental_experiment"

# subcommand -> (module, one line help); the module's main(argv) parses the rest
DELEGATED = {
    "export-speed": (
        "experimental_experiment.bench.export_speed",
        "measures the export speed of tiny Llama models (torch.export, to_onnx, torch.onnx)",
    ),
    "backend-speed": (
        "experimental_experiment.bench.backend_speed",
        "measures a training step with the onnxruntime backend against eager and inductor",
    ),
    "coverage": (
        "experimental_experiment.bench.op_coverage",
        "checks the converters on the sample inputs of torch's operator database (CSV)",
    ),
    "models": (
        "experimental_experiment.torch_models.llm_models",
        "exports small language models and checks them with onnxruntime",
    ),
}

# subcommand -> its arguments naming a file it writes, checked before it works
OUTPUTS = {
    "optimize": ("output",),
    "fill-weights": ("output",),
    "quantize": ("output",),
    "export": ("output", "report"),
    "report": ("output",),
    "lighten": ("output", "weights"),
    "unlighten": ("output",),
}


def _cmd_print(ns: argparse.Namespace) -> int:
    from .helpers.onnx_text import pretty_onnx

    print(pretty_onnx(_load(ns.model), max_values=ns.values))
    return 0


def _cmd_stats(ns: argparse.Namespace) -> int:
    from .helpers.onnx_stats import format_statistics, model_statistics

    model = _load(ns.model, load_external_data=False)  # sizes, not the weights
    folder = os.path.dirname(os.path.abspath(ns.model))
    print(format_statistics(model_statistics(model, folder), top=ns.top))
    return 0


def _cmd_optimize(ns: argparse.Namespace) -> int:
    try:
        from .xoptim import optimize
    except ImportError as e:
        print(
            f"optimize: experimental_experiment.xoptim.optimize is not available "
            f"in this version ({e})",
            file=sys.stderr,
        )
        return 1
    model = _load(ns.input)
    before = len(model.graph.node)
    res = optimize(model, patterns=ns.patterns, verbose=ns.verbose)
    optimized, report = res.model, res.report
    save_model(optimized, ns.output)
    print(
        f"optimize: {before} -> {len(optimized.graph.node)} nodes, "
        f"{len(report)} report entries, saved {ns.output!r}"
    )
    if ns.verbose:
        print(_format_report(report, everything=ns.verbose > 1))
    return 0


def _cmd_fill_weights(ns: argparse.Namespace) -> int:
    from .large import fill_weights
    from .torch_interpreter.errors import ExportError
    from .xbuilder.model_container import ExternalDataError

    _load(ns.model, load_external_data=False)  # a folder, empty, truncated: one line
    try:
        report = fill_weights(
            ns.model, ns.checkpoints, output=ns.output, progress=wants_progress(ns)
        )
    except (ExportError, ExternalDataError) as e:
        raise CommandLineError(str(e)) from e
    print(report)
    return 0


def _cmd_quantize(ns: argparse.Namespace) -> int:
    from .quantize import QuantizeError, node_type_counts, quantize_model

    model = _load(ns.input)
    try:
        quantized = quantize_model(
            model,
            ns.precision,
            block_size=ns.block_size,
            accuracy_level=ns.accuracy_level,
            quantize_lm_head=ns.lm_head,
            quantize_embeddings=ns.embeddings,
            symmetric=not ns.asymmetric,
            keep_io_types=ns.keep_io_types,
            progress=wants_progress(ns),
        )
    except QuantizeError as e:
        raise CommandLineError(str(e)) from e
    save_model(quantized, ns.output)  # atomic, external data above 2 GB
    counts = node_type_counts(quantized)
    kinds = (
        "com.microsoft.MatMulNBits",
        "MatMulInteger",
        "com.microsoft.GatherBlockQuantized",
        "MatMul",
    )
    print(
        f"quantize: {ns.precision}, "
        + ", ".join(f"{k.split('.')[-1]}: {counts[k]}" for k in kinds if counts[k])
        + f", {os.path.getsize(ns.output)} bytes, saved {ns.output!r}"
    )
    return 0


def _cmd_package(ns: argparse.Namespace) -> int:
    from .errors import ExportError
    from .genai import package_model

    try:
        report = package_model(
            ns.model,
            ns.output,
            precision=ns.precision,
            tokenizer=ns.tokenizer,
            model_type=ns.model_type,
            require_tokenizer=ns.require_tokenizer,
            overwrite=ns.overwrite,
            progress=wants_progress(ns),
            block_size=ns.block_size,
        )
    except ExportError as e:  # typed errors, quantizer's and exporter's included
        raise CommandLineError(str(e)) from e
    print(f"package: {report}")
    return 0


def _format_report(report: list, everything: bool = False) -> str:
    "One line per pass or pattern which matched something (every one if everything)."
    keys = ["matched", "applied", "refused"]
    rows = [r for r in report if everything or any(getattr(r, k) for k in keys)]
    width = max([len(r.name) for r in rows] + [4])
    lines = [f"  {'name':<{width}} {'kind':<8} " + " ".join(f"{k:>8}" for k in keys)]
    for r in rows:
        lines.append(
            f"  {r.name:<{width}} {r.kind:<8} " + " ".join(f"{getattr(r, k):>8}" for k in keys)
        )
        if everything:
            lines.extend(f"      refused: {reason}" for reason in r.refusals)
    return "\n".join(lines)


def get_parser() -> argparse.ArgumentParser:
    """The parser of the command line, with one subparser per subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Tools of experimental_experiment: look at an ONNX model, optimize it, "
        "run the benchmarks. Use '<subcommand> --help' for the options of a subcommand.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>")
    _add_model_subcommands(sub)  # print, stats, optimize, fill-weights
    from ._command_lines_investigate import add_subcommands

    add_subcommands(sub)  # run, compare, find, report, export
    for name, (module, text) in DELEGATED.items():
        sub.add_parser(
            name,
            help=text,
            add_help=False,
            description=f"{text}. Arguments go to {module}.main(argv).",
        )
    return parser


def _add_model_subcommands(sub) -> None:
    """The subcommands working on an ONNX file."""
    p = sub.add_parser(
        "print",
        help="prints an ONNX model as text, one node per line",
        description="Prints an ONNX model as text: opsets, inputs and "
        "outputs with their types and dimensions, initializers with "
        "their first values, one node per line, subgraphs indented.",
    )
    p.add_argument("model", help="ONNX file")
    p.add_argument(
        "--values", type=int, default=4, help="number of values shown for each initializer"
    )
    p.set_defaults(func=_cmd_print)

    p = sub.add_parser(
        "stats",
        help="counts nodes per operator type, measures initializers",
        description="Prints the number of nodes per operator type "
        "(subgraphs included, local functions apart) and the size "
        "of the initializers, the largest first.",
    )
    p.add_argument("model", help="ONNX file")
    p.add_argument("--top", type=int, default=10, help="number of initializers listed")
    p.set_defaults(func=_cmd_stats)
    _add_optimize(sub)
    _add_fill_weights(sub)
    _add_quantize(sub)
    _add_package(sub)


def _add_optimize(sub) -> None:
    p = sub.add_parser(
        "optimize",
        help="optimizes an ONNX model with the pattern optimizer",
        description="Optimizes an ONNX model with "
        "experimental_experiment.xoptim.optimize and saves the result.",
    )
    p.add_argument("input", help="ONNX file to optimize")
    p.add_argument("output", help="where to save the optimized model")
    p.add_argument(
        "--patterns",
        default="default",
        help="pattern set: 'default', 'default+onnxruntime', '-Name' removes a pattern",
    )
    p.add_argument(
        "--verbose",
        type=int,
        default=0,
        help="1 prints what matched, 2 every pass and pattern with the reasons "
        "of the refused matches",
    )
    p.set_defaults(func=_cmd_optimize)


def _add_fill_weights(sub) -> None:
    p = sub.add_parser(
        "fill-weights",
        help="fills the external data of a model from checkpoints (.safetensors, .pt, .bin)",
        description="Writes the tensors of checkpoints into the external "
        "data of a model exported without its weights, names matched "
        "exactly, then dots as underscores, then by suffix; prints the "
        "report (matched by rule, unfilled, unused).",
    )
    p.add_argument("model", help="ONNX file with external data")
    p.add_argument(
        "checkpoints",
        nargs="+",
        help=".safetensors, .pt, .bin files, an index file (*.safetensors.index.json) or a folder",
    )
    p.add_argument("-o", "--output", default=None, help="filled model (default: in place)")
    add_progress(p, quiet=True)
    p.set_defaults(func=_cmd_fill_weights)


def _add_quantize(sub) -> None:
    p = sub.add_parser(
        "quantize",
        help="quantizes the weights of an ONNX model to int4, "
        "int8 or float16 with onnxruntime's quantization tools",
        description="Quantizes an ONNX model with "
        "experimental_experiment.quantize.quantize_model: int4 "
        "(MatMulNBits, weight-only, per block), int8 (dynamic "
        "quantization) or fp16; the language model head stays in float "
        "unless --lm-head. The output is written atomically, with "
        "external data when it exceeds 2 GB.",
    )
    p.add_argument("input", help="float ONNX model (its external data next to it)")
    p.add_argument("output", help="where to save the quantized model")
    p.add_argument(
        "--precision", required=True, help="int4, int8 or fp16 (another one: a one-line error)"
    )
    p.add_argument(
        "--block-size",
        type=int,
        default=32,
        help="int4: weights sharing one scale, a power of two >= 16",
    )
    p.add_argument(
        "--accuracy-level",
        type=int,
        default=None,
        help="int4: MatMulNBits accuracy_level (4: int8 activations, the fastest on CPU)",
    )
    p.add_argument(
        "--lm-head", action="store_true", help="quantizes the MatMul producing the logits too"
    )
    p.add_argument(
        "--embeddings",
        action="store_true",
        help="int4: quantizes the token embeddings (GatherBlockQuantized)",
    )
    p.add_argument(
        "--asymmetric", action="store_true", help="zero points (int4) or uint8 weights (int8)"
    )
    p.add_argument(
        "--keep-io-types", action="store_true", help="fp16: inputs and outputs stay float32"
    )
    add_progress(p)
    p.set_defaults(func=_cmd_quantize)


def _add_package(sub) -> None:
    p = sub.add_parser(
        "package",
        help="writes an onnxruntime-genai package of a causal "
        "language model (model.onnx, genai_config.json, tokenizer)",
        description="Exports the causal language model saved in MODEL_DIR "
        "(save_pretrained) with to_onnx and the onnxruntime patterns, and "
        "writes a folder onnxruntime_genai.Model loads: model.onnx and its "
        "data, genai_config.json, the tokenizer files. The folder appears "
        "whole at the end or not at all.",
    )
    p.add_argument("model", help="folder written by save_pretrained")
    p.add_argument("output", help="package folder (missing or empty)")
    p.add_argument(
        "--precision", default="fp32", help="fp32, or int4 (weights in int4 blocks, MatMulNBits)"
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer folder (default: the tokenizer files of MODEL_DIR)",
    )
    p.add_argument(
        "--require-tokenizer", action="store_true", help="fails when no tokenizer is found"
    )
    p.add_argument(
        "--model-type",
        default=None,
        help="genai's model type (default: the configuration's, or llama)",
    )
    p.add_argument("--block-size", type=int, default=32, help="int4 block size")
    p.add_argument("--overwrite", action="store_true", help="replaces a non-empty OUTPUT")
    add_progress(p, quiet=True)
    p.set_defaults(func=_cmd_package)


@contextlib.contextmanager
def _prog(name: str):
    "Parsers using sys.argv[0] as their name show the subcommand."
    saved = sys.argv[0] if sys.argv else ""
    if sys.argv:
        sys.argv[0] = f"{PROG} {name}"
    try:
        yield
    finally:
        if sys.argv:
            sys.argv[0] = saved


def _run_delegated(name: str, argv: list[str]) -> int:
    module_name = DELEGATED[name][0]
    try:
        module = importlib.import_module(module_name)
        entry = module.main
    except (ImportError, AttributeError) as e:
        print(f"{name}: {module_name}.main is not available in this version ({e})", file=sys.stderr)
        return 1
    with _prog(name):
        result = entry(argv)
    return result if isinstance(result, int) else 0


def get_help(name: str | None = None) -> str:
    """The help of the command line (``name=None``) or of one subcommand, as printed
    by ``--help``; used by the documentation to generate its page."""
    parser = get_parser()
    if name is None:
        return parser.format_help()
    if name not in DELEGATED:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return sub.choices[name].format_help()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = _run_delegated(name, ["--help"])
        except SystemExit:
            rc = 0
    text = out.getvalue()
    return text if rc == 0 else f"({name} is not available)\n{text}"


def main(argv: list[str] | None = None) -> int:
    """Runs the command line, returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return _run_delegated(argv[0], argv[1:])
    parser = get_parser()
    ns = parser.parse_args(argv)
    if ns.command is None:
        parser.print_help()
        return 0
    from .xbuilder.safe_paths import ExternalDataError, OutputPathError, UnsafePathError

    try:
        for name in OUTPUTS.get(ns.command, ()):
            check_output(getattr(ns, name, None), what=name)
        return ns.func(ns)
    except (CommandLineError, ExternalDataError, OutputPathError, UnsafePathError) as e:
        print(f"{ns.command}: {e}", file=sys.stderr)
        return 2
