"""A fedmem command staged as a user's terminal runs it, for the tests of faults and the bench that tables them
(tests/test_faults.py, bench/faults.py): the test-sized settings, the command in a process group of its own with
SIGINT at its default, every process it starts watched, and the damaged or interrupted runs they start from."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]

# Every process this session (a test session, a bench) starts (CLI runs, Ray's daemons and workers) inherits this mark,
# so that a check for processes left behind sees this session's only, not those of another one on the same machine.
SESSION_MARK = f"{os.getpid()}-{os.urandom(4).hex()}"
os.environ["FEDMEM_TEST_SESSION"] = SESSION_MARK

# A smaller tiny preset and dataset than the default experiment, so the real pipeline runs in seconds.
FAST = [
    "model.tiny.vocab_size=512",
    "model.tiny.hidden_size=64",
    "model.tiny.intermediate_size=128",
    "model.tiny.num_hidden_layers=2",
    "model.tiny.num_attention_heads=4",
    "model.tiny.num_key_value_heads=2",
    "model.tiny.pretrain_epochs=1",
    "model.max_seq_len=128",
    "data.train_per_client=24",
    "data.test_per_client=6",
    "data.public_size=200",
    "data.canary_copies=[1,4]",
    "data.shared_canary_copies=[]",
    "audit.samples_per_client=6",
    "audit.test_per_client=3",
    "audit.mr.n=6",
    "audit.mr.heldout=3",
    "audit.pa.n=6",
    "audit.pa.suffix_len=16",
    "audit.mr.max_new_tokens=32",
    "audit.pearl.max_new_tokens=16",
    "audit.pearl.n=2",
    "audit.pearl.nonmembers=2",
    "audit.common_draw=2",
    "audit.prefix_len=16",
    "audit.methods=[utility]",
    "audit.utility.n=2",
    "audit.utility.max_new_tokens=8",
    "train.progress=false",
    "strategy.num_rounds=1",
    "data.num_clients=2",
    "data.audit_canaries=0",
    # one ClientApp actor, the clients one after another: an actor's start (torch and peft imported) costs more CPU
    # than a client's training here. Tests of clients at work side by side set simulation.num_cpus_per_client=auto.
    f"simulation.num_cpus_per_client={os.cpu_count() or 1}",
]

# Strategies whose clients never answer: every client's local loss notes that the client reached it (a file in
# $FAULT_MARKS), then sleeps. "hang" waits for the clients until the round times out; "broken" sends the round's
# messages itself, and fails once the clients are at work.
PLUGIN = '''
import os
import time

from flwr.serverapp.strategy import FedAvg

from fedmem.federation.strategies import Strategy, StrategyConfig, register_strategy


class Broken(FedAvg):
    def configure_train(self, server_round, arrays, config, grid):
        messages = list(super().configure_train(server_round, arrays, config, grid))
        grid.push_messages(messages)
        while len(os.listdir(os.environ["FAULT_MARKS"])) < len(messages):
            time.sleep(0.2)
        raise RuntimeError("the strategy broke mid-round")


def hanging(settings, sent):
    def term(params, start):
        open(os.path.join(os.environ["FAULT_MARKS"], str(os.getpid())), "w").close()
        time.sleep(3600)
    return term


register_strategy(Strategy("hang", "FedAvg", StrategyConfig, local_term=hanging))
register_strategy(Strategy("broken", f"{__name__}:Broken", StrategyConfig, local_term=hanging))
'''


def fedmem(*args) -> list[str]:
    return [sys.executable, "-m", "fedmem.cli", *args]


def fedmem_env(cache_dir, *paths) -> dict:
    return {**os.environ, "FEDMEM_CACHE": cache_dir, "PYTHONPATH": os.pathsep.join([*map(str, paths), str(ROOT)])}


def start(args, env, log: Path) -> subprocess.Popen:
    """``fedmem`` in a process group of its own with SIGINT at its default (a process started in the background
    inherits it ignored), as a terminal starts it; its output in ``log``."""
    with open(log, "w") as out:
        proc = subprocess.Popen(fedmem(*args), env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.log = log  # what ``watch`` quotes when the awaited point never comes
    return proc


def end(*procs: subprocess.Popen) -> None:
    """Kill the process group of each of ``procs`` still running (what ``start`` started), and reap it: a test that
    fails midway leaves none of its runs behind."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


def watch(proc: subprocess.Popen, until, seconds: float = 600) -> dict[psutil.Process, str]:
    """Wait until ``until()`` holds (the process still running), noting every process it started meanwhile, with
    its command line."""
    seen, deadline, me = {}, time.time() + seconds, psutil.Process(proc.pid)
    while True:
        reached = until()
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in me.children(recursive=True):  # read again each time: a child forked a moment ago has
                with contextlib.suppress(psutil.NoSuchProcess):  # its parent's command line until it execs
                    seen[child] = " ".join(child.cmdline())
        if reached:
            return seen
        if proc.poll() is not None or time.time() >= deadline:
            raise AssertionError(f"the run {'ended' if proc.poll() is not None else f'stalled past {seconds:g} s'} "
                                 f"before the awaited point; its output ends:\n{_tail(getattr(proc, 'log', None))}")
        time.sleep(0.2)


def _tail(log: Path | None, lines: int = 15) -> str:
    """The last lines of a run's output (progress bars' carriage returns read as line ends)."""
    if log is None or not Path(log).is_file():
        return "(no log)"
    return "\n".join(Path(log).read_text(errors="replace").replace("\r", "\n").splitlines()[-lines:])


def left(processes, seconds: float = 10) -> list[str]:
    """The processes of a run that still run ``seconds`` after it ended (Ray's daemons exit asynchronously)."""
    _, alive = psutil.wait_procs(list(processes), timeout=seconds)
    left = []
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(p.cmdline()[:2]))
    return left


def interrupted(finished: Path, to: Path) -> Path:
    """A copy of the finished run as a kill during its last epoch leaves it: rounds 0-1 written, status running."""
    shutil.copytree(finished, to)
    shutil.rmtree(to / "round_2")
    (to / "summary.json").unlink()
    (to / "status.json").write_text(json.dumps({"status": "running", "rounds": 2}))
    return to


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def runs(proc: subprocess.Popen, fragment: str) -> bool:
    """Whether one of the run's processes has ``fragment`` in its command line."""
    for child in psutil.Process(proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if fragment in " ".join(child.cmdline()):
                return True
    return False


def ray_started(proc: subprocess.Popen) -> bool:
    """Whether Ray's raylet is among the run's processes (the simulation's backend has started)."""
    return runs(proc, "raylet")


def clients_train(proc: subprocess.Popen) -> bool:
    """Whether a client's call is under way: a Flower ClientApp actor (a client's Ray worker) running its ``run``
    method, as Ray titles the process while the call lasts (``ray::ClientAppActor.run``)."""
    return runs(proc, "ClientAppActor.run")


def printed(log: Path, line: str) -> bool:
    """Whether ``line`` is a whole line of ``log`` (what a started command has printed so far)."""
    return line in log.read_text().splitlines()
