"""Scale-out as far as one machine shows it: `fedmem run` attaches to an existing Ray cluster (`ray start --head` on
loopback), runs its clients there, finishes, and leaves the cluster running with none of the run's actors; a run
given no address keeps to a Ray of its own while that cluster runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bench.staging import end, start, watch
from tests.conftest import FAST, of_this_session

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (BIN / "ray").exists(), reason="needs Ray's CLI")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(port: int) -> list:
    """The cluster's daemons (psutil), found by its port: another Ray instance's numbers may hold the port's digits,
    so this session's only."""
    import psutil

    named = re.compile(rf"[=:]{port}(?!\d)")  # --port=P, --gcs_server_port=P, --gcs-address=127.0.0.1:P
    return [p for p in psutil.process_iter(["pid", "cmdline"])
            if named.search(" ".join(p.info["cmdline"] or [])) and of_this_session(p)]


def _cluster_actors(port: int) -> set[int]:
    """The ClientApp actors the cluster runs: its raylet's workers (a test beside this one runs actors of its own)."""
    import psutil

    found = set()
    for daemon in _cluster(port):
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in daemon.children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    if "ClientAppActor" in " ".join(child.cmdline()):
                        found.add(child.pid)
    return found


def _run(args: list[str], env: dict, log: Path, port: int) -> tuple[set[str], set[int]]:
    """``fedmem run`` to its end: the command lines of the processes it started, and the actors the cluster ran
    meanwhile."""
    proc, on_cluster = start(args, env, log), set()

    def finished() -> bool:
        on_cluster.update(_cluster_actors(port))
        return proc.poll() is not None

    try:
        started = set(watch(proc, finished).values())
    finally:
        end(proc)
    assert proc.returncode == 0, log.read_text()[-2000:]
    return started, on_cluster


def test_runs_attach_to_a_cluster_named_and_keep_to_their_own_ray_otherwise(tmp_path, cache_dir):
    port = _free_port()
    env = {**os.environ, "FEDMEM_CACHE": cache_dir, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([str(BIN / "ray"), "start", "--head", "--port", str(port), "--num-cpus", "2",
                    "--include-dashboard", "false", "--disable-usage-stats"],
                   check=True, env=env, capture_output=True, timeout=120)
    try:
        daemons = {p.pid for p in _cluster(port)}
        common = ["run", *FAST, f"cache_dir={cache_dir}", "simulation.num_cpus_per_client=auto"]  # fits 2 CPUs
        run_dir = tmp_path / "attached"
        started, on_cluster = _run([*common, f"simulation.ray_address=127.0.0.1:{port}", f"hydra.run.dir={run_dir}"],
                                   env, tmp_path / "attached.log", port)
        assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
        assert (run_dir / "round_1" / "report.json").is_file()
        assert on_cluster, "the run's clients did not run on the cluster it attached to"
        assert not [c for c in started if "gcs_server" in c or "raylet" in c], \
            "the run started Ray daemons of its own instead of attaching"
        deadline = time.time() + 30  # the cluster ends the run's actors once the run has let them go
        while _cluster_actors(port) and time.time() < deadline:
            time.sleep(1)
        assert not _cluster_actors(port), "the run's ClientApp actors outlived it by 30 s"
        assert daemons <= {p.pid for p in _cluster(port)}, "the run stopped the cluster it attached to"

        # no address: a Ray of the run's own, though `ray start` recorded this cluster for Ray's callers to join
        run_dir = tmp_path / "private"
        started, on_cluster = _run([*common, f"hydra.run.dir={run_dir}"], env, tmp_path / "private.log", port)
        assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
        assert not on_cluster, "a run given no Ray address ran its clients on a cluster it was not given"
        assert [c for c in started if "gcs_server" in c], "a run given no Ray address started no Ray of its own"

        status = subprocess.run([str(BIN / "ray"), "status", "--address", f"127.0.0.1:{port}"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and "Active" in status.stdout
    finally:
        _stop(port)


def _stop(port: int) -> None:
    """Stop this test's cluster only: `ray stop --force` would stop every Ray instance on the machine, a user's runs
    included."""
    import psutil

    procs = []
    for p in _cluster(port):
        try:
            procs += [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)
    # `ray start` records its address for Ray's callers given none (the `ray` CLI, a script's ray.init()) to join:
    # one started after this test would try to join the cluster just stopped
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.is_file() and current.read_text().strip().endswith(f":{port}"):
        current.unlink()
