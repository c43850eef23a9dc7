"""A progress bar over the steps of a package (export, optimize, ...), shown on a
terminal only."""

from __future__ import annotations

import contextlib
import logging
import sys
import time

from ..progress import progress_enabled

logger = logging.getLogger("experimental_experiment.genai")


class StepBar:
    """One tick per step; the step in progress is the bar's description.

    .. code-block:: python

        with StepBar(["export", "save"], enabled=True) as bar:
            with bar.step("export"):
                ...
    """

    def __init__(self, steps: list[str], enabled: bool):
        self.steps = list(steps)
        self.enabled = enabled
        self.bar = None
        self.durations: dict[str, float] = {}

    def __enter__(self):
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # the steps are still logged
                logger.info("tqdm is not installed, no progress bar")
                return self
            self.bar = tqdm(
                total=len(self.steps),
                desc="genai package",
                unit="step",
                file=sys.stderr,
                leave=True,
            )
        return self

    @contextlib.contextmanager
    def step(self, name: str):
        if self.bar is not None:
            self.bar.set_description(f"genai package: {name}")
        logger.info("step %s", name)
        begin = time.perf_counter()
        yield
        self.durations[name] = time.perf_counter() - begin
        if self.bar is not None:
            self.bar.update(1)

    def __exit__(self, *args):
        if self.bar is not None:
            self.bar.set_description("genai package")
            self.bar.close()
        return False


__all__ = ["StepBar", "progress_enabled"]
