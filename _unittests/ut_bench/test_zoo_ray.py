"""The zoo on a Ray cluster: a local head started by the test, the same rows as the
local runner, a fast typed error when no cluster answers."""

import os
import shutil
import socket
import subprocess
import sys

import pytest

from experimental_experiment.bench.zoo import main, read_rows
from experimental_experiment.bench.zoo_ray import RayUnavailableError, check_reachable

ray = pytest.importorskip("ray", reason="ray is an optional dependency of the zoo runner")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    return shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    port = _free_port()
    tmp = tmp_path_factory.mktemp("ray")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    subprocess.run(
        [
            _ray_cli(),
            "start",
            "--head",
            "--num-cpus",
            "2",
            "--port",
            str(port),
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={tmp}",
        ],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([_ray_cli(), "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_ray_rows_equal_local_rows(tmp_path, ray_head):
    types = "no_such_model_type,other_missing_type"
    common = ["--types", types, "--exporters", "to_onnx", "--timeout", "60"]
    assert main(["--output", str(tmp_path / "local.csv"), *common]) == 0
    assert main(["--output", str(tmp_path / "ray.csv"), "--ray", ray_head, *common]) == 0

    def rows(name):
        return sorted(
            (r["model_type"], r["exporter"], r["status"], r["stage"], r["cause"])
            for r in read_rows(str(tmp_path / name))
        )

    assert rows("ray.csv") == rows("local.csv")
    assert [r[3] for r in rows("ray.csv")] == ["config", "config"]
    # resumable: the rows are there, nothing runs again
    assert main(["--output", str(tmp_path / "ray.csv"), "--ray", ray_head, *common]) == 0
    assert len(read_rows(str(tmp_path / "ray.csv"))) == 2


def test_unreachable_cluster_fails_fast():
    with pytest.raises(RayUnavailableError, match="no Ray cluster answers"):
        check_reachable(f"127.0.0.1:{_free_port()}", timeout=2)
    with pytest.raises(RayUnavailableError, match="expected 'auto'"):
        check_reachable("not-an-address")
    check_reachable("auto")  # resolved by ray itself
