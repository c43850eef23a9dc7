"""bench._isolated.run_isolated: a result, a crash and a hang of the child process."""

import operator
import os
import time

from experimental_experiment.bench._isolated import run_isolated


def test_value_crash_and_timeout():
    ok = run_isolated(operator.add, (1, 2), timeout=60)
    assert (ok.value, ok.stage, ok.exitcode) == (3, "ok", 0)
    crash = run_isolated(os._exit, (3,), timeout=60)
    assert (crash.value, crash.stage, crash.exitcode) == (None, "crash", 3)
    hang = run_isolated(time.sleep, (60,), timeout=2)
    assert (hang.value, hang.stage) == (None, "timeout")
    assert 2 <= hang.seconds < 30
