"""Progress bars: drawn on a terminal only, and fill_weights' bar counts the bytes
it writes."""

import io

from experimental_experiment import progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_enabled_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    assert not progress.progress_enabled(True)
    monkeypatch.setattr(progress.sys, "stderr", _Tty())
    assert progress.progress_enabled(True)
    assert not progress.progress_enabled(False)


def test_bar_draws_on_a_terminal(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(progress.sys, "stderr", tty)
    with progress.progress_bar(2048, "fill", unit="B", enabled=True) as bar:
        bar.set_description("fill: w")
        bar.update(2048)
    text = tty.getvalue()
    assert "fill: w" in text and "100%" in text and "2.00k/2.00k" in text  # 2048 B scaled


def test_disabled_bar_writes_nothing(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(progress.sys, "stderr", tty)
    with progress.progress_bar(10, "x", enabled=False) as bar:
        bar.update(10)
    assert tty.getvalue() == ""
