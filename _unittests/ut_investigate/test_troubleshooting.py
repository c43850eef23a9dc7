"""The troubleshooting page: every error class of the package found, documented
(cause and fix) and, where a trigger exists, raised with the message users see."""

import textwrap

import pytest

from experimental_experiment.investigate import error_triggers as et
from experimental_experiment.investigate.troubleshooting import (
    error_classes,
    index_rst,
    missing_cause_or_fix,
    parse_docstring,
    troubleshooting_rst,
)


def test_every_error_class_says_cause_and_fix():
    classes = error_classes()
    names = {e.name for e in classes}
    assert {
        "ExportError",
        "CaptureError",
        "UnsupportedOpError",
        "ConstrainedDimensionWarning",
    } <= names
    assert missing_cause_or_fix(classes) == []


def test_parse_docstring():
    doc = """Summary line.

    Cause: why it
    happens.

    Fix: what to do.

    :param x: a parameter
    """
    assert parse_docstring(doc) == ("Summary line.", "why it happens.", "what to do.")
    assert parse_docstring(None) == ("", "", "")


def test_discovery_finds_new_classes_and_missing_docstrings(tmp_path, monkeypatch):
    """A class added in any module, deriving from a builtin exception or from another
    package error in another file, is found without any list to update."""
    root = tmp_path / "fakepkg_tsh"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "errors.py").write_text(
        textwrap.dedent('''
        class BaseErr(RuntimeError):
            """Base.

            Cause: a cause.

            Fix: a fix.
            """
        class NotAnError:
            pass
        ''')
    )
    (root / "sub" / "more.py").write_text(
        textwrap.dedent('''
        from ..errors import BaseErr
        class NewError(BaseErr):
            """Only a summary."""
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    classes = error_classes(str(root))
    assert [e.path for e in classes] == [
        "fakepkg_tsh.errors.BaseErr",
        "fakepkg_tsh.sub.more.NewError",
    ]
    assert missing_cause_or_fix(classes) == [
        "fakepkg_tsh.sub.more.NewError: no cause, fix in its docstring"
    ]


def test_triggers_name_existing_classes():
    paths = {e.path for e in error_classes()}
    assert set(et.TRIGGERS) <= paths, set(et.TRIGGERS) - paths


@pytest.mark.parametrize("path", sorted(et.TRIGGERS))
def test_trigger_raises_its_class(path):
    cls = next(e.cls for e in error_classes() if e.path == path)
    message = et.raise_and_capture(cls)
    assert message and message.startswith(cls.__name__ + ":"), message
    assert all(
        len(line) <= et.WIDTH or " " not in line.strip()  # a long URL
        for line in message.splitlines()
    ), message


def test_capture_message_rejects_another_error():
    def wrong():
        raise KeyError("x")

    assert et.capture_message(wrong, ValueError) is None
    assert et.capture_message(lambda: None, ValueError) is None


@pytest.mark.parametrize("case", et.TORCH_EXPORT_CASES, ids=lambda c: c.title[:20])
def test_torch_export_cases_still_fail(case):
    """The index quotes the first words of each message: they must stay true."""
    message = et.capture_message(case.trigger)
    assert message and message.startswith(case.starts), message


def test_page_has_one_section_per_class():
    text, index = troubleshooting_rst(trigger=False), index_rst()
    for e in error_classes():
        assert f".. _l-error-{e.name.lower()}:" in text
        assert f":ref:`{e.name} <l-error-{e.name.lower()}>`" in index
    for case in et.TORCH_EXPORT_CASES:
        assert f"<{case.anchor}>`" in index
