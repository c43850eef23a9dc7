"""Runs one benchmark case in a fresh process: a crash or a hang of the case becomes
a result the table records, not the end of the run."""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Isolated:
    """What the process gave: ``value`` (None when it died or timed out), ``stage``
    (``"ok"``, ``"timeout"`` or ``"crash"``), its exit code and its wall time."""

    value: Any
    stage: str
    exitcode: int | None
    seconds: float


def _child(conn, function, args) -> None:
    conn.send(function(*args))


def run_isolated(function: Callable, args: tuple, timeout: float) -> Isolated:
    """Calls ``function(*args)`` in a new process (spawned: a fork of a process whose
    torch started its threads may hang) and waits ``timeout`` seconds for its result.
    ``function`` must be importable (a module-level function) and return a picklable
    value."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, function, args))
    begin = time.perf_counter()
    proc.start()
    child.close()
    value, received = None, False
    if parent.poll(timeout):
        try:
            value, received = parent.recv(), True
        except EOFError:
            pass
    proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    seconds = time.perf_counter() - begin
    stage = "ok" if received else ("timeout" if seconds >= timeout else "crash")
    return Isolated(value, stage, proc.exitcode, round(seconds, 1))
