"""Progress bars for long work (packaging, quantization, weight filling, export): shown
on a terminal only, quiet when stderr is redirected or when the caller asks for
``progress=False``.

A long function opens a ``Progress`` over its steps and passes it, as an argument,
to the functions doing each step; these open an inner bar with ``sub_bar`` (the
count of nodes, rounds or bytes), which is a silent object when they were given None.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any, Iterator

logger = logging.getLogger(__name__)


def progress_enabled(progress: bool) -> bool:
    """True when ``progress`` is True and stderr is a terminal.

    :param progress: what the caller asked for
    :return: whether a bar should be drawn

    .. code-block:: python

        from experimental_experiment.progress import progress_enabled

        print(progress_enabled(True))  # False when stderr is redirected
    """
    if not progress:
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, text: str) -> None:
        pass

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass


@contextlib.contextmanager
def progress_bar(total: int, desc: str, *, unit: str = "it", enabled: bool = True):
    """A tqdm bar on stderr, or an object with the same ``update`` and
    ``set_description`` doing nothing (disabled, or tqdm not installed).

    :param total: the number of units of the whole work
    :param desc: what the bar shows before the count
    :param unit: the unit (``"B"`` scales bytes to kB, MB...)
    :param enabled: False gives the silent object
    :return: a context manager yielding the bar

    .. code-block:: python

        from experimental_experiment.progress import progress_bar

        with progress_bar(3, "steps", enabled=False) as bar:
            for _ in range(3):
                bar.update(1)
    """
    bar = None
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            bar = tqdm(
                total=total,
                desc=desc,
                unit=unit,
                file=sys.stderr,
                leave=True,
                unit_scale=unit == "B",
                unit_divisor=1024 if unit == "B" else 1000,
            )
    try:
        yield bar if bar is not None else _NoBar()
    finally:
        if bar is not None:
            bar.close()


def _tqdm(**kwargs) -> Any:
    "A tqdm bar on stderr, None when tqdm is not installed (the steps are still logged)."
    try:
        from tqdm import tqdm
    except ImportError:
        logger.info("tqdm is not installed, no progress bar")
        return None
    return tqdm(file=sys.stderr, leave=None, **kwargs)


class Progress:
    """The progress of one long work: one tick per step on an outer bar whose
    description is the step in progress; the functions doing a step open an inner bar
    (``bar``, ``sub_bar``) for the count within the step. The outer bar stays
    on the terminal only when no other bar was open (a nested work's bars vanish).

    :param steps: the names of the steps, in order
    :param desc: what the bar shows before the step's name
    :param enabled: False: nothing is drawn (the steps are still timed and logged)

    .. code-block:: python

        from experimental_experiment.progress import Progress, progress_enabled, sub_bar

        with Progress(["convert", "save"], "work", progress_enabled(True)) as p:
            with p.step("convert"), sub_bar(p, 3, "nodes", unit="node") as bar:
                for name in ["a", "b", "c"]:
                    bar.set_postfix_str(name, refresh=False)
                    bar.update(1)
            with p.step("save"):
                pass
        print(p.durations)
    """

    def __init__(self, steps: list[str], desc: str, enabled: bool):
        self.steps = list(steps)
        self.desc = desc
        self.enabled = enabled
        self.outer: Any = None
        self.durations: dict[str, float] = {}

    def __enter__(self) -> Progress:
        if self.enabled:
            self.outer = _tqdm(total=len(self.steps), desc=self.desc, unit="step")
        return self

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Times the step ``name``, shown on the bar while it runs, one tick at its end."""
        if self.outer is not None:
            self.outer.set_description(f"{self.desc}: {name}")
        logger.debug("[%s] step %s", self.desc, name)
        begin = time.perf_counter()
        yield
        self.durations[name] = time.perf_counter() - begin
        if self.outer is not None:
            self.outer.update(1)

    @contextlib.contextmanager
    def bar(self, total: int | None, desc: str, *, unit: str = "it") -> Iterator[Any]:
        """An inner bar (``update``, ``set_postfix_str``), removed when it closes;
        the silent object when the progress is disabled."""
        inner = None
        if self.enabled:
            inner = _tqdm(
                total=total,
                desc=desc,
                unit=unit,
                unit_scale=unit == "B",
                unit_divisor=1024 if unit == "B" else 1000,
            )
        try:
            yield inner if inner is not None else _NoBar()
        finally:
            if inner is not None:
                inner.close()

    def __exit__(self, *args) -> bool:
        if self.outer is not None:
            self.outer.set_description(self.desc)
            self.outer.close()
        return False


def sub_bar(
    progress: Progress | None, total: int | None, desc: str, *, unit: str = "it"
) -> contextlib.AbstractContextManager:
    """The inner bar of ``progress`` (``Progress.bar``), the silent object when
    ``progress`` is None: a function given a progress as an argument counts its work.

    :param progress: the caller's progress, or None
    :param total: the number of units, None when unknown (a count without percentage)
    :param desc: the bar's description
    :param unit: the unit (``"B"``: bytes scaled to kB, MB...)
    :return: a context manager yielding the bar

    .. code-block:: python

        from experimental_experiment.progress import sub_bar

        with sub_bar(None, 10, "rounds") as bar:  # silent
            bar.update(1)
    """
    if progress is None:
        return contextlib.nullcontext(_NoBar())
    return progress.bar(total, desc, unit=unit)


__all__ = ["Progress", "progress_bar", "progress_enabled", "sub_bar"]
