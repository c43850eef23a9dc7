"""A progress bar over the steps of a package (export, optimize, ...), shown on a
terminal only."""

from __future__ import annotations

from ..progress import Progress, progress_enabled


class StepBar(Progress):
    """One tick per step; the step in progress is the bar's description
    (a ``experimental_experiment.progress.Progress`` named
    ``genai package``).

    .. code-block:: python

        with StepBar(["export", "save"], enabled=True) as bar:
            with bar.step("export"):
                ...
    """

    def __init__(self, steps: list[str], enabled: bool):
        super().__init__(steps, "genai package", enabled)


__all__ = ["StepBar", "progress_enabled"]
