"""Progress bars for long work (packaging, weight filling): shown on a terminal only,
quiet when stderr is redirected or when the caller asks for ``progress=False``."""

from __future__ import annotations

import contextlib
import sys


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


__all__ = ["progress_bar", "progress_enabled"]
