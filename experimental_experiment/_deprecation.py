"""The one place the package warns about its deprecated API: every shim calls
:func:`deprecated`, so that the messages, the removal release and the test filter
(``pyproject.toml`` turns them into errors inside the package's own tests) agree."""

from __future__ import annotations

import warnings

#: the release removing what is deprecated now (deprecated in 0.1)
REMOVAL = "0.3"


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Emits ``DeprecationWarning("<old> is deprecated and will be removed in 0.3;
    use <new> instead")``.

    :param old: the deprecated call, as the user wrote it
    :param new: what to write instead
    :param stacklevel: frames between the user's call and this function plus one
        (3: the user calls a function which calls this one)
    """
    warnings.warn(
        f"{old} is deprecated and will be removed in {REMOVAL}; use {new} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
