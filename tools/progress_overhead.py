"""The cost of to_onnx's progress bar: exports a tiny Llama (random weights, a KV
cache) with ``progress=False`` and ``progress=True`` (stderr replaced by a fake terminal
so that the bars are drawn), alternating, and prints the median time of each: the
whole export, and the part after the capture (conversion, optimization,
serialization: where the bars count nodes, rounds and bytes; the capture is one step).

::

    python tools/progress_overhead.py --runs 5
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _export(progress: bool) -> tuple[float, float]:
    from experimental_experiment.torch_interpreter import export_program
    from experimental_experiment.torch_interpreter.onnx_export_errors import (
        bypass_export_some_errors,
    )
    from experimental_experiment.torch_models.llm_helper import get_tiny_llm

    data = get_tiny_llm("llama")
    saved = sys.stderr
    sys.stderr = _Terminal() if progress else io.StringIO()
    try:
        begin = time.perf_counter()
        with bypass_export_some_errors(patch_transformers=True) as modificator:
            res = export_program(
                data["model"],
                (),
                modificator(data["inputs"]),
                dynamic_shapes=data["dynamic_shapes"],
                progress=progress,
            )
        total = time.perf_counter() - begin
        return total, total - res.report.timings["capture"]
    finally:
        drawn = sys.stderr.getvalue()
        sys.stderr = saved
        if progress and "to_onnx: convert" not in drawn:
            raise RuntimeError("the progress bar was not drawn")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    ns = parser.parse_args(argv)
    _export(False)  # warm up: imports, first capture
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(ns.runs):
        for progress in (False, True):
            times[progress].append(_export(progress))
    for i, part in enumerate(["whole export", "after the capture"]):
        off = statistics.median(t[i] for t in times[False])
        on = statistics.median(t[i] for t in times[True])
        print(
            f"{part}: runs={ns.runs}, median progress=False {off:.3f}s, "
            f"progress=True {on:.3f}s, difference {on - off:+.3f}s ({(on - off) / off:+.1%})"
        )
        print("  off:", " ".join(f"{t[i]:.3f}" for t in times[False]))
        print("  on: ", " ".join(f"{t[i]:.3f}" for t in times[True]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
