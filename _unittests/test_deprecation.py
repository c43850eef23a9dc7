"""The one helper every deprecated path of the package warns through."""

import warnings

import pytest

from experimental_experiment._deprecation import REMOVAL, deprecated


def _old_api():
    deprecated("old_api()", "new_api()")


def test_message_names_the_replacement_and_the_release():
    with pytest.warns(DeprecationWarning) as record:
        _old_api()
    assert str(record[0].message) == (
        f"old_api() is deprecated and will be removed in {REMOVAL}; use new_api() instead"
    )
    assert record[0].filename == __file__ and REMOVAL == "0.3"


def test_the_package_tests_turn_it_into_an_error():
    # pyproject.toml's filterwarnings: the package never calls its own deprecated API
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "error", ".*is deprecated and will be removed in 0.3", DeprecationWarning
        )
        with pytest.raises(DeprecationWarning, match="new_api"):
            _old_api()
