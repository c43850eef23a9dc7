"""Timing of several functions in turns, shared by the latency benchmarks."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def interleaved_medians(
    runners: dict[str, Callable], warmup: int, repeat: int
) -> dict[str, tuple[float, float]]:
    """(median, minimum) seconds of every function; each repetition runs every function
    once, in an order rotating from one repetition to the next, so that a change of the
    machine's load affects every function alike.

    .. code-block:: python

        times = interleaved_medians({"a": lambda: sum(range(1000)),
                                     "b": lambda: sorted(range(1000))}, 2, 20)
        median_a, fastest_a = times["a"]
    """
    for fn in runners.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in runners}
    keys = list(runners)
    for i in range(repeat):
        # the order rotates: no function always runs after the same one
        for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
            begin = time.perf_counter()
            runners[key]()
            times[key].append(time.perf_counter() - begin)
    return {k: (statistics.median(v), min(v)) for k, v in times.items()}
