"""The Deployment Engine on loopback: a real `flower-superlink`, three `flower-supernode` processes and `flwr run`,
with one SuperNode killed during round 1. The run must end within its round timeout, never hang: with the default
minimum (every sampled client) it stops naming the lost node; with `strategy.min_trained_clients=2` it completes
on the two that remain and records who took part. Ctrl-C on the CLI stops a run on the SuperLink. The module's
three federations run side by side."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import FAST

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (BIN / "flower-superlink").exists(), reason="needs flwr's SuperLink")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port}")


def _federation(tmp_path, cache_dir, *overrides, round_timeout: int = 60):
    """Start the SuperLink and three SuperNodes; resolve a config; return (env, config path, node processes)."""
    home = tmp_path / "flwr-home"
    home.mkdir()
    port = _free_port()
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "loop"\n\n[superlink.loop]\naddress = "127.0.0.1:{port}"\ninsecure = true\n')
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "FLWR_HOME": str(home), "FEDMEM_CACHE": cache_dir,
           "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
    procs = [subprocess.Popen([str(BIN / "flower-superlink"), "--insecure", "--port", str(port)], env=env,
                              cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    _wait_port(port)
    for i in range(3):
        procs.append(subprocess.Popen(
            [str(BIN / "flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{port}",
             "--port", str(_free_port()), "--node-config", f"partition-id={i} num-partitions=3"],
            env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    out = subprocess.run([sys.executable, "-m", "fedmem.cli", "resolve", *FAST, f"cache_dir={cache_dir}",
                          "data.num_clients=3", "strategy.num_rounds=2", f"strategy.round_timeout={round_timeout}", *overrides],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=True)
    return env, Path(out.stdout.strip().splitlines()[-1]), procs


def _tear_down(tmp_path, processes) -> None:
    """Kill every process group the test started and forget the federation's Flower home."""
    for p in processes:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(tmp_path / "flwr-home", ignore_errors=True)


def _run_losing_a_node(tmp_path, cache_dir, *overrides):
    """A run through ``server.flwr_cli`` (what `make flwr-run` runs) losing a SuperNode in round 1: (its directory,
    seconds, the wrapper's exit code, its last line). The round timeout is what ends the round when Flower has not
    yet seen the node go: long enough for the live clients to train on a machine busy with other tests."""
    env, cfg, procs = _federation(tmp_path, cache_dir, *overrides)
    run_dir = cfg.parent
    repo = Path(__file__).resolve().parents[1]
    started = time.time()
    log = open(tmp_path / "flwr_cli.log", "w")
    run = subprocess.Popen([sys.executable, "-m", "server.flwr_cli", str(cfg), "loop"], env=env, cwd=repo,
                           start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    try:
        while not (run_dir / "round_0" / "report.json").is_file():  # round 1 starts right after round 0's audit
            assert time.time() - started < 300 and run.poll() is None, "round 0 was never audited"
            time.sleep(0.1)
        os.killpg(procs[3].pid, signal.SIGKILL)  # SuperNode of partition 2, lost during round 1
        run.wait(timeout=400)  # bounded: the 60 s round timeout, then the rest of the run
        last = (tmp_path / "flwr_cli.log").read_text().strip().splitlines()[-1]
        return run_dir, time.time() - started, run.returncode, last
    finally:
        log.close()
        _tear_down(tmp_path, [run, *procs])


@pytest.fixture(scope="module")
def federations(tmp_path_factory, cache_dir):
    """The module's three federations, one after another from the first test that asks: two losing a node and one
    stopped from its CLI. Side by side, their twelve Flower processes and the other test worker's load starved the
    live clients past the round timeout, and the suite's cores are busy either way. ``{name: future of what the
    test checks}``."""
    with ThreadPoolExecutor(1) as pool:
        yield {"default": pool.submit(_run_losing_a_node, tmp_path_factory.mktemp("lost-default"), cache_dir),
               "min2": pool.submit(_run_losing_a_node, tmp_path_factory.mktemp("lost-min2"), cache_dir,
                                   "strategy.min_trained_clients=2"),
               "stopped": pool.submit(_stop_the_cli, tmp_path_factory.mktemp("stopped"), cache_dir)}


def test_a_lost_supernode_stops_the_run_naming_it(federations):
    run_dir, seconds, code, last = federations["default"].result()
    failure = json.loads((run_dir / "round_failure.json").read_text())["error"]
    # `flwr run` itself ends 0 after a ServerApp that failed: the wrapper says the run failed
    assert code == 1 and last.startswith("fedmem: run ") and f"failed: {failure}" in last, last
    assert json.loads((run_dir / "status.json").read_text())["status"] == "failed"
    assert "round 1: 2 of 3 sampled clients trained (clients [0, 1])" in failure
    # Flower reports the lost node as unavailable once its heartbeat expires; if the round timeout comes first, the
    # node is counted as sending no reply. Either way the run stops within the timeout and says what happened.
    assert ("1 failed" in failure and "Node Unavailable" in failure) or "1 sent no reply" in failure, failure
    assert not (run_dir / "round_1" / "report.json").exists() and not (run_dir / "summary.json").exists()


def test_a_lost_supernode_is_survived_with_a_lower_minimum(federations):
    run_dir, seconds, code, _ = federations["min2"].result()
    assert code == 0 and (run_dir / "summary.json").is_file() and not (run_dir / "round_failure.json").exists()
    for r in (1, 2):
        part = json.loads((run_dir / f"round_{r}" / "report.json").read_text())["participation"]
        assert part["trained"] == [0, 1] and part["sampled"] in (2, 3)


def _stop_the_cli(tmp_path, cache_dir) -> dict:
    """Ctrl-C on `python -m server.flwr_cli` (what `make flwr-run` runs) once round 1 is audited: what followed (its
    exit code and log, status.json, the round reports written when it ended and 15 s later, `flwr ls`)."""
    # a round timeout no client nears, even on a loaded machine: this run is stopped, it does not lose a client
    env, cfg, procs = _federation(tmp_path, cache_dir, "strategy.num_rounds=50", round_timeout=300)
    run_dir = cfg.parent
    repo = Path(__file__).resolve().parents[1]
    log = open(tmp_path / "flwr_cli.log", "w")  # a file, not a pipe: an unread pipe would block the wrapper
    cli = subprocess.Popen([sys.executable, "-m", "server.flwr_cli", str(cfg), "loop"], env=env, cwd=repo,
                           start_new_session=True, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        started = time.time()
        while not (run_dir / "round_1" / "report.json").is_file():
            assert time.time() - started < 300 and cli.poll() is None, "round 1 was never audited"
            time.sleep(0.1)
        os.kill(cli.pid, signal.SIGINT)
        cli.wait(timeout=180)
        seen = {"code": cli.returncode, "log": (tmp_path / "flwr_cli.log").read_text(), "run_dir": run_dir,
                "status": json.loads((run_dir / "status.json").read_text()),
                "written": sorted(run_dir.glob("round_*/report.json"))}
        time.sleep(15)  # a run still going would write its next round in a few seconds
        seen["written_later"] = sorted(run_dir.glob("round_*/report.json"))
        seen["ls"] = subprocess.run([str(BIN / "flwr"), "ls", "loop", "--format", "json"], env=env,
                                    capture_output=True, text=True, timeout=60).stdout
        return seen
    finally:
        log.close()
        _tear_down(tmp_path, [cli, *procs])


def test_stopping_the_cli_stops_the_run(federations):
    """Ctrl-C on the CLI stops the run on the SuperLink, not only the log stream: no round is written after it, the
    SuperLink lists the run as stopped, status.json says stopped."""
    seen = federations["stopped"].result()
    assert seen["code"] == 130, seen["log"][-2000:]
    status = seen["status"]
    assert (status["status"], status["resume"]) == ("stopped", f"fedmem run resume={seen['run_dir']}")
    assert status["round"] >= 1
    assert seen["written_later"] == seen["written"] and len(seen["written"]) < 51
    assert "finished:stopped" in seen["ls"], seen["ls"][-2000:]
