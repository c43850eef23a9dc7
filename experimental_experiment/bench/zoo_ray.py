"""Runs the zoo's cases on a Ray cluster (``zoo --ray ADDRESS``).

Each case is one Ray task holding one CPU; the task runs the case exactly as the local
runner does, in its own forked process with its CPU-time, wall-time and memory limits
(:func:`experimental_experiment.bench.zoo.run_case`), so a crash or a hang stays one
failed row. The rows come back to the driver as the tasks end, and the driver writes
them to the same resumable CSV. The package is shipped to the cluster's workers with the
job (``runtime_env``'s ``py_modules``), the other dependencies (torch, transformers...)
must be installed on every node.

.. code-block:: python

    from experimental_experiment.bench.zoo import run_case
    from experimental_experiment.bench.zoo_cases import list_cases
    from experimental_experiment.bench.zoo_ray import run_cases_ray

    todo = [(case, "to_onnx") for case in list_cases(["llama", "bert"])]
    for row in run_cases_ray(todo, address="ray://head:10001", run_case=run_case,
                             timeout=120):
        print(row["model_type"], row["status"])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ExportError

logger = logging.getLogger(__name__)


class RayUnavailableError(ExportError):
    """``--ray`` was given but Ray cannot be imported or the cluster cannot be reached.

    Cause: ray is not installed in this environment, or nothing answers at the address.

    Fix: ``pip install ray`` (the version of the cluster), check the address
    (``ray status`` on the head node), or run without ``--ray`` (local processes).
    """


def check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """Fails fast when nothing listens at ``host:port`` (``ray.init`` waits minutes).

    :param address: ``host:port`` or ``ray://host:port``; ``auto`` and None are not checked
    :param timeout: seconds to wait for the TCP connection
    :raises RayUnavailableError: the port does not answer
    """
    if not address or address == "auto":
        return
    import socket

    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailableError(
            f"--ray {address!r}: expected 'auto', 'host:port' or 'ray://host:port'"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise RayUnavailableError(
            f"no Ray cluster answers at {address!r} ({e}); start one with "
            "'ray start --head' or check the address with 'ray status'"
        ) from e


def connect(address: str | None):
    """Connects to the cluster at ``address`` (``auto``, ``ray://host:port``...), or
    uses the one this process already joined; returns the ``ray`` module.

    :param address: the cluster's address, None for the one already initialized
    :return: the imported ``ray`` module
    :raises RayUnavailableError: ray missing or the cluster unreachable
    """
    try:
        import ray
    except ImportError as e:
        raise RayUnavailableError(f"--ray {address}: ray is not installed ({e})") from e
    if ray.is_initialized():
        return ray
    check_reachable(address)
    import experimental_experiment

    package = os.path.dirname(os.path.abspath(experimental_experiment.__file__))
    try:
        ray.init(
            address=address,
            runtime_env={"py_modules": [package]},
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except Exception as e:  # ConnectionError, RuntimeError, ValueError depending on ray
        raise RayUnavailableError(f"cannot join the Ray cluster at {address!r}: {e}") from e
    return ray


def run_cases_ray(
    todo: list[tuple[Any, str]],
    *,
    address: str | None,
    run_case: Callable[..., dict[str, Any]],
    **limits: Any,
) -> Iterator[dict[str, Any]]:
    """Runs the cases ``(case, exporter)`` of ``todo`` as Ray tasks, one CPU each, and
    yields their rows in the order they end.

    :param todo: the cases and exporters to run
    :param address: the cluster (see :func:`connect`)
    :param run_case: runs one case in an isolated process and returns its row, called
        as ``run_case(case, exporter, **limits)`` inside each task (the zoo's own
        ``run_case``)
    :param limits: the limits of each case (``timeout``, ``atol``, ``max_memory``...),
        as for the local runner
    :return: an iterator over the rows
    """
    ray = connect(address)
    task = ray.remote(num_cpus=1, max_retries=0)(run_case)
    pending = [task.remote(case, exporter, **limits) for case, exporter in todo]
    logger.info(
        "%d cases submitted to Ray (%s CPUs)", len(pending), ray.cluster_resources().get("CPU")
    )
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


__all__ = ["RayUnavailableError", "check_reachable", "connect", "run_cases_ray"]
