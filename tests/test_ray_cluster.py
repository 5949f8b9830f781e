"""Scale-out as far as one machine shows it: `fedmem run` attaches to an existing Ray cluster (`ray start --head` on
loopback), runs its clients there, finishes, and leaves the cluster running with none of the run's actors."""

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

from tests.conftest import FAST, of_this_session, ray_processes

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (BIN / "ray").exists(), reason="needs Ray's CLI")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _actors() -> set[int]:
    """The ClientApp actors among this test session's Ray processes (another study's on the machine are not)."""
    import psutil

    found = set()
    for pid in ray_processes():
        with contextlib.suppress(psutil.NoSuchProcess):
            if "ClientAppActor" in " ".join(psutil.Process(pid).cmdline()):
                found.add(pid)
    return found


def test_a_run_attaches_to_an_existing_ray_cluster_and_leaves_it_running(tmp_path, cache_dir):
    port = _free_port()
    env = {**os.environ, "FEDMEM_CACHE": cache_dir, "RAY_USAGE_STATS_ENABLED": "0"}
    before = ray_processes()
    subprocess.run([str(BIN / "ray"), "start", "--head", "--port", str(port), "--num-cpus", "2",
                    "--include-dashboard", "false", "--disable-usage-stats"],
                   check=True, env=env, capture_output=True, timeout=120)
    try:
        cluster = ray_processes() - before  # the cluster's own daemons
        run_dir = tmp_path / "run"
        out = subprocess.run([sys.executable, "-m", "fedmem.cli", "run", *FAST, f"cache_dir={cache_dir}",
                              f"simulation.ray_address=127.0.0.1:{port}", f"hydra.run.dir={run_dir}"],
                             env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
        assert (run_dir / "round_1" / "report.json").is_file()
        deadline = time.time() + 30  # the cluster ends the run's actors once the run has let them go
        while _actors() - before and time.time() < deadline:
            time.sleep(1)
        assert cluster <= ray_processes(), "the run stopped the cluster it attached to"
        daemons = {p for p in ray_processes() - before - cluster if p not in _actors()}
        assert not daemons, "the run started Ray daemons of its own instead of attaching"
        assert not _actors() - before, "the run's ClientApp actors outlived it by 30 s"
        status = subprocess.run([str(BIN / "ray"), "status", "--address", f"127.0.0.1:{port}"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and "Active" in status.stdout
    finally:
        _stop(port)


def _stop(port: int) -> None:
    """Stop this test's cluster only, found by its port: `ray stop --force` would stop every Ray instance on the
    machine, a user's runs included."""
    import psutil

    procs = []
    named = re.compile(rf"[=:]{port}(?!\d)")  # --port=P, --gcs_server_port=P, --gcs-address=127.0.0.1:P
    for p in psutil.process_iter(["pid", "cmdline"]):
        # this session's only: another Ray instance's numbers may hold the port's digits
        if named.search(" ".join(p.info["cmdline"] or [])) and of_this_session(p):
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
    # `ray start` records its address for later ray.init() calls to attach to: a run started after this test would
    # otherwise try to join the cluster just stopped
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.is_file() and current.read_text().strip().endswith(f":{port}"):
        current.unlink()
