"""Runs benchmark cases each in a fresh process (a crash or a hang of a case becomes a
result the table records, not the end of the run) and keeps their table resumable."""

from __future__ import annotations

import csv
import logging
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

logger = logging.getLogger(__name__)


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


def write_rows(rows: list[dict], path: str, fields: list[str]) -> None:
    """Writes ``rows`` as a CSV of ``fields`` (missing values empty), replacing ``path``
    at once: an interrupted run never leaves half a table."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in fields} for r in rows)
    os.replace(tmp, path)


def run_resumable(
    names: list[str],
    output: str,
    key: str,
    fields: list[str],
    run_one: Callable[[str], dict],
    order: Callable[[dict], Any],
    rerun: bool = False,
) -> list[dict]:
    """Runs ``run_one(name)`` for every name and rewrites ``output`` after each one,
    its rows sorted by ``order``. Names already in ``output`` (column ``key``) are
    skipped (the run resumes) unless ``rerun``, which replaces their rows; the rows of
    other names are kept."""
    rows: list[dict] = []
    if os.path.exists(output):
        with open(output, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    if rerun:
        rows = [r for r in rows if r[key] not in set(names)]
    done = {r[key] for r in rows}
    for name in names:
        if name in done:
            continue
        row = run_one(name)
        logger.info("%s: %s %s", name, row.get("status"), row.get("reason", ""))
        rows.append(row)
        rows.sort(key=order)
        write_rows(rows, output, fields)
    return rows


def read_with_counts(csv_path: str) -> tuple[list[dict], str]:
    """The rows of a table and a sentence counting them by status (``"3 model types:
    1 fail, 2 pass."``); no rows and an empty sentence when there is no table."""
    if not os.path.exists(csv_path):
        return [], ""
    with open(csv_path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    total = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    return rows, f"{len(rows)} model types: {total}."
