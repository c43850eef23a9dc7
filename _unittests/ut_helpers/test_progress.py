"""Progress bars (:mod:`experimental_experiment.progress`): drawn on a terminal only,
silent when stderr is redirected or when disabled; a Progress over steps with inner
bars."""

import io

from experimental_experiment import progress
from experimental_experiment.ext_test_case import fake_terminal
from experimental_experiment.progress import Progress, progress_enabled, sub_bar


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


def _work(enabled: bool) -> Progress:
    with Progress(["convert", "save"], "work", enabled) as p:
        with p.step("convert"), p.bar(3, "nodes", unit="node") as bar:
            for name in ["a_node", "b_node", "c_node"]:
                bar.set_postfix_str(name, refresh=False)
                bar.update(1)
        with p.step("save"):
            pass
    return p


def test_steps_and_counts_on_a_terminal(monkeypatch):
    tty = fake_terminal(monkeypatch)
    p = _work(progress_enabled(True))
    text = tty.getvalue()
    for expected in ["work: convert", "work: save", "2/2", "3/3", "c_node", "node/s"]:
        assert expected in text, (expected, text)
    assert set(p.durations) == {"convert", "save"}


def test_silent_when_redirected(monkeypatch):
    redirected = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", redirected)
    p = _work(progress_enabled(True))
    assert redirected.getvalue() == ""
    assert set(p.durations) == {"convert", "save"}  # still timed


def test_silent_when_asked(monkeypatch):
    tty = fake_terminal(monkeypatch)
    _work(progress_enabled(False))
    assert tty.getvalue() == ""


def test_sub_bar_of_none_is_silent(monkeypatch):
    tty = fake_terminal(monkeypatch)
    with sub_bar(None, 4, "rounds") as bar:
        bar.update(1)
        bar.set_postfix_str("x")
        bar.set_description("y")
    assert tty.getvalue() == ""
    with Progress(["one"], "work", True) as p, p.step("one"), sub_bar(p, None, "rounds") as bar:
        bar.update(2)
    assert "rounds: 2" in tty.getvalue(), tty.getvalue()
