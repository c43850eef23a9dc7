"""``verbose=`` without touching the user's logging configuration for good.

:func:`verbose_logging` lowers the level of the package's logger and attaches a handler
printing to stderr for the duration of a call, then puts back the level and the
handlers as they were. It imports nothing from the package (bottom layer).

.. code-block:: python

    from experimental_experiment.verbosity import verbose_logging

    with verbose_logging(1):
        onx = to_onnx(model, (x,))  # INFO messages of the package are printed
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys

PACKAGE_LOGGER = "experimental_experiment"


@contextlib.contextmanager
def verbose_logging(verbose: int, logger_name: str = PACKAGE_LOGGER):
    """Within the block, messages of ``logger_name`` at INFO (``verbose=1``) or DEBUG
    (``verbose>=2``) reach stderr; nothing changes when ``verbose`` is 0 or when the
    logger already lets them through to a handler the user configured."""
    if not verbose:
        yield
        return
    logger = logging.getLogger(logger_name)
    level = logging.INFO if verbose == 1 else logging.DEBUG
    old_level = logger.level
    handler = None
    if not logger.hasHandlers() or logger.getEffectiveLevel() > level:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old_level)
        if handler is not None:
            logger.removeHandler(handler)


def with_verbose_logging(fn):
    """Decorates a function taking ``verbose=``: it runs within :func:`verbose_logging`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with verbose_logging(kwargs.get("verbose", 0) or 0):
            return fn(*args, **kwargs)

    return wrapper


__all__ = ["verbose_logging", "with_verbose_logging"]
