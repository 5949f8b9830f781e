"""Faults a long run meets beyond bad input, on real parts: clients that never answer and a ServerApp that fails
mid-round (the real Flower simulation), Ctrl-C, two processes on one run or audit directory, a full disk, a damaged
file. Each ends in one line, the right exit code and status, and leaves no process of the run behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from safetensors.torch import load_file

from bench.staging import (
    FAST,
    PLUGIN,
    clients_train,
    cut,
    end,
    fedmem,
    fedmem_env,
    interrupted,
    left,
    printed,
    ray_started,
    start,
    watch,
)

ROOT = Path(__file__).resolve().parents[1]

def _last_line(log: Path) -> str:
    return log.read_text().strip().splitlines()[-1]


def _status(run: Path) -> dict:
    return json.loads((run / "status.json").read_text())


@pytest.fixture
def plugin(tmp_path):
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "fedmem_fault_plugin.py").write_text(PLUGIN)
    return tmp_path / "plugin"


@pytest.mark.slow
@pytest.mark.parametrize("strategy, settings, error", [
    ("hang", ["strategy.round_timeout=10"],
     "round 1: 0 of 2 sampled clients trained (clients []), strategy.min_trained_clients needs 2; 0 failed, 2 sent no "
     "reply (no error reported)"),
    ("broken", [], "the strategy broke mid-round"),
])
def test_clients_that_never_answer_end_the_run_at_once(strategy, settings, error, tmp_path, plugin, cache_dir):
    """A round that times out on clients that never answer, or a ServerApp that fails while its clients train: the
    run ends at once (Flower's simulation used to wait for its clients' calls forever), failed, in one line, with
    none of its processes (Ray's daemons and the clients' actors) left."""
    run, log, marks = tmp_path / "run", tmp_path / "run.log", tmp_path / "marks"
    marks.mkdir()
    proc = start(["run", *FAST, f"cache_dir={cache_dir}", "plugins=[fedmem_fault_plugin]",
                   f"strategy.name={strategy}", "simulation.num_cpus_per_client=auto", *settings, f"hydra.run.dir={run}"],
                  {**fedmem_env(cache_dir, plugin), "FAULT_MARKS": str(marks)}, log)
    try:
        started = watch(proc, lambda: proc.poll() is not None, seconds=300)  # hung for good before the change
    finally:
        end(proc)
    if strategy == "broken":  # it failed once both clients were in their local loss (a round may time out sooner)
        assert len(list(marks.iterdir())) == 2
    assert proc.returncode == 1, log.read_text()[-3000:]
    kind = "RoundFailedError" if strategy == "hang" else "RuntimeError"
    line = error if strategy == "hang" else f"{kind}: {error} (its traceback is in {run / 'status.json'})"
    assert _last_line(log) == f"fedmem: run failed: {line}"
    assert "Traceback" not in log.read_text()
    assert (_status(run)["status"], _status(run)["error"]) == ("failed", f"{kind}: {error}")
    assert not (run / ".fedmem.lock").exists() and not (run / "round_1").exists()
    assert any("raylet" in command for command in started.values())  # Ray's processes, started by the run
    assert not left(started), f"left running: {left(started)}"


@pytest.mark.slow
def test_ctrl_c_stops_the_run_and_resume_gives_the_uninterrupted_figures(tmp_path, cache_dir, ended):
    """SIGINT to the run's process group (as a terminal sends Ctrl-C) during round 1: status stopped with the round
    reached and the command that continues it, one line saying so, the process and every process it started gone
    within seconds; that command then ends the run with the adapters and figures of an uninterrupted run."""
    env = fedmem_env(cache_dir)
    common = [*FAST, f"cache_dir={cache_dir}", "audit.methods=[utility,pa]", "audit.pa.c=16"]
    full, stopped, log = tmp_path / "full", tmp_path / "stopped", tmp_path / "stopped.log"
    # the uninterrupted run first, then the one stopped: side by side, two Ray instances starting on a machine that
    # other tests load could miss Ray's 30 s start timeout, and the suite's cores are busy either way
    uninterrupted = ended(start(["run", *common, f"hydra.run.dir={full}"], env, tmp_path / "full.log"))
    assert uninterrupted.wait(timeout=600) == 0, (tmp_path / "full.log").read_text()[-2000:]

    proc = start(["run", *common, f"hydra.run.dir={stopped}"], env, log)
    try:
        # round 1 starts once round 0 is audited; Ray may start after that on a loaded machine
        started = watch(proc, lambda: (stopped / "round_0" / "report.json").is_file() and ray_started(proc))
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        end(proc)
    resume = f"fedmem run resume={stopped}"
    assert proc.returncode == 130, log.read_text()[-3000:]
    assert _last_line(log) == f"fedmem: stopped after round 0 of 1; continue with: {resume}"
    assert "Traceback" not in log.read_text()
    assert _status(stopped) == {"status": "stopped", "round": 0, "rounds": 1, "resume": resume}
    assert not (stopped / ".fedmem.lock").exists()
    assert any("raylet" in command for command in started.values())  # Ray's processes, started by the run
    assert not left(started), f"left running: {left(started)}"

    resumed = subprocess.run(fedmem(*resume.split()[1:]), env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _status(stopped)["status"] == "finished"
    for r in (0, 1):
        a, b = (load_file(str(run / f"round_{r}/adapter/adapter_model.safetensors")) for run in (full, stopped))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), f"round {r}: adapters differ"
        reports = [json.loads((run / f"round_{r}" / "report.json").read_text()) for run in (full, stopped)]
        assert reports[0]["audit"] == reports[1]["audit"] and reports[0]["train"] == reports[1]["train"]


@pytest.mark.slow
def test_a_second_ctrl_c_while_clients_train_ends_the_run_at_once_marked_stopped(tmp_path, cache_dir):
    """Ctrl-C twice while the clients train (their Ray workers, in the process group, die of it too): the second
    ends the run at once, marked stopped with the command that continues it, and every process the run started with
    it (Ray's agents outlived their raylet by a minute when fedmem only exited). The clients' deaths are not logged:
    the outcome is the one line. Each Ctrl-C waits for the state it is meant for: a client's call under way, then
    the first one taken (its line printed)."""
    from fedmem.cli import STOPPING

    run, log = tmp_path / "run", tmp_path / "run.log"
    proc = start(["run", *FAST, f"cache_dir={cache_dir}", f"hydra.run.dir={run}"], fedmem_env(cache_dir), log)
    try:
        started = watch(proc, lambda: (run / "round_0" / "report.json").is_file())
        started |= watch(proc, lambda: clients_train(proc), seconds=300)  # a client's call under way
        before = len(log.read_text().splitlines())
        os.killpg(proc.pid, signal.SIGINT)
        started |= watch(proc, lambda: printed(log, STOPPING.strip()), seconds=60)  # the first one was taken
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        end(proc)
    after = log.read_text().strip().splitlines()[before:]
    assert proc.returncode == 130, "\n".join(after)
    assert after == [STOPPING.strip(), f"fedmem: stopped after round 0 of 1; continue with: fedmem run resume={run} "
                     "(a second Ctrl-C: ended at once)"], after
    assert _status(run) | {"resume": None} == {"status": "stopped", "round": 0, "rounds": 1, "resume": None}
    assert not (run / ".fedmem.lock").exists()  # released: the resume that follows finds the run free
    assert any("raylet" in command for command in started.values())
    assert not left(started), f"left running: {left(started)}"


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cache_dir):
    """A finished centralized run of two epochs (rounds 0-2 saved): no Ray, so the faults of files and locks are
    quick to reach."""
    from fedmem.cli import run_experiment
    from fedmem.config.compose import compose_dict

    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "strategy=centralized", "strategy.num_rounds=2"])
    return run_experiment(d, str(tmp_path_factory.mktemp("finished") / "run"))


def _holding(proc: subprocess.Popen, lock: Path) -> None:
    """Wait until ``proc`` holds ``lock`` (its pid written in it), then freeze it there."""
    watch(proc, lambda: lock.is_file() and lock.read_text().strip() == str(proc.pid), seconds=300)
    os.kill(proc.pid, signal.SIGSTOP)


@pytest.mark.slow
def test_a_second_resume_is_refused_and_a_dead_holders_lock_is_taken_over(finished, tmp_path, cache_dir):
    """Two `fedmem run resume=DIR` at once: the second is refused in one line naming the first's process, whatever
    the first is doing (here: frozen right after taking the lock). Once the first is killed, its lock is stale: the
    next resume says it takes it over, and finishes the run."""
    run, env = interrupted(finished, tmp_path / "run"), fedmem_env(cache_dir)
    lock = run / ".fedmem.lock"
    first = start(["run", f"resume={run}"], env, tmp_path / "first.log")
    try:
        _holding(first, lock)
        second = subprocess.run(fedmem("run", f"resume={run}"), env=env, capture_output=True, text=True,
                                timeout=300)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.strip().splitlines()[-1] == (
            f"fedmem: {run} is in use by process {first.pid} (its lock: {lock}); wait for it to end, or stop it")
        assert "Traceback" not in second.stderr
        assert lock.read_text().strip() == str(first.pid)  # the refused one took nothing from the holder
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)

    third = subprocess.run(fedmem("run", f"resume={run}"), env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    assert (f"fedmem: {run} was left locked by process {first.pid}, which is no longer running; taking it over"
            in third.stderr.splitlines())
    assert _status(run)["status"] == "finished" and not lock.exists()


@pytest.mark.slow
def test_a_second_audit_into_the_same_directory_is_refused(finished, tmp_path, cache_dir):
    run, env = tmp_path / "run", fedmem_env(cache_dir)
    shutil.copytree(finished, run)
    out = run / "audits" / "again"
    first = start(["audit", f"run={run}", "name=again"], env, tmp_path / "first.log")
    try:
        _holding(first, out / ".fedmem.lock")
        second = subprocess.run(fedmem("audit", f"run={run}", "name=again"), env=env, capture_output=True,
                                text=True, timeout=300)
        os.kill(first.pid, signal.SIGCONT)
        first.wait(timeout=300)
    finally:
        end(first)
    assert second.returncode == 2, second.stderr[-2000:]
    assert second.stderr.strip().splitlines()[-1] == (
        f"fedmem: {out} is in use by process {first.pid} (its lock: {out / '.fedmem.lock'}); wait for it to end, "
        f"or stop it")
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-2000:]
    assert (out / "summary.json").is_file() and not (out / ".fedmem.lock").exists()


def _tmpfs(at: Path, size: str) -> None:
    """A tmpfs of ``size`` mounted at ``at``, a directory of the test's own; skips where none can be mounted."""
    at.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): the full-disk tests need a disk of "
                    "their own to fill")


@pytest.fixture
def small_disk(tmp_path):
    """A 512 kB tmpfs: room for round 0 of a test-sized run, not for round 1's adapter."""
    disk = tmp_path / "disk"
    _tmpfs(disk, "512k")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def full_disk(tmp_path):
    """A 64 kB tmpfs of the test's own, filled to its last byte: every write into it fails with the kernel's
    ENOSPC. (Never /dev/full: a library that writes a temp file and renames it over its target replaces the
    machine's device node when run as root.)"""
    disk = tmp_path / "full"
    _tmpfs(disk, "64k")
    try:
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
def test_a_full_disk_fails_the_run_in_one_line_and_it_resumes_once_there_is_room(small_disk, cache_dir):
    run, env = small_disk / "run", fedmem_env(cache_dir)
    out = subprocess.run(fedmem("run", *FAST, f"cache_dir={cache_dir}", "strategy=centralized",
                                 f"hydra.run.dir={run}"), env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stderr[-2000:]
    assert re.fullmatch(
        rf"fedmem: run failed: no space left on device writing {re.escape(str(run))}/round_1/adapter \(the disk at "
        rf"{re.escape(str(small_disk))}: [0-9.]+ of 0\.5 MB free\); once it can be written, continue with: fedmem "
        rf"run resume={re.escape(str(run))}", out.stderr.strip().splitlines()[-1]), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    status = _status(run)
    assert status["status"] == "failed" and status["error"].startswith("OSError: [Errno 28] No space left on device")
    assert not [p.name for p in run.rglob(".*")]  # no temp file or directory, no lock
    assert not (run / "round_1").exists() or not any((run / "round_1").iterdir())

    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    again = subprocess.run(fedmem("run", f"resume={run}"), env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _status(run)["status"] == "finished" and (run / "round_1" / "report.json").is_file()


def test_a_write_to_a_full_disk_names_the_file(full_disk):
    """The kernel's own ENOSPC, through a library that reports it in words of its own (safetensors, which writes a
    temp file beside its target): an OSError naming the file fedmem was writing, and one line for it."""
    import torch
    from safetensors.torch import save_file

    from fedmem.common.io import write_fault, writing

    target = full_disk / "adapter_model.safetensors"
    with pytest.raises(OSError) as raised, writing(target):
        save_file({"w": torch.zeros(4)}, str(target))
    assert (raised.value.errno, raised.value.filename) == (28, str(target))
    assert write_fault(raised.value).startswith(f"no space left on device writing {target} (the disk at {full_disk}:")
    assert write_fault(ValueError("not a disk's fault")) is None
    assert not target.exists()


@pytest.mark.parametrize("damaged, rounds, then", [
    ("round_1/adapter/adapter_model.safetensors", "1",
     "audit the other rounds (rounds=0,2) or train the run again to write round 1 anew"),
    ("round_0/report.json", "2", "restore it from a copy of the run, or train the run again"),  # every report is read
])
def test_a_damaged_file_of_a_run_is_named_before_an_audit_writes_anything(damaged, rounds, then, finished, tmp_path,
                                                                          capsys):
    from fedmem.cli import main

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    cut(run / damaged)
    with pytest.raises(SystemExit) as exited:
        main(["audit", f"run={run}", f"rounds={rounds}"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert exited.value.code == 2
    assert line.startswith(f"fedmem: run={run}: {run / damaged} is damaged (") and line.endswith(f"); {then}"), line
    assert not (run / "audits").exists()


def test_resume_names_a_damaged_last_round(finished, tmp_path, capsys):
    from fedmem.cli import main

    run = interrupted(finished, tmp_path / "run")
    adapter = run / "round_1" / "adapter" / "adapter_model.safetensors"
    cut(adapter)
    with pytest.raises(SystemExit) as exited:
        main(["run", f"resume={run}"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"fedmem: resume={run}: {adapter} is damaged (Error while deserializing header: incomplete metadata, file not "
        f"fully covered); remove {run / 'round_1'} and every later round to resume after round 0")
    assert _status(run) == {"status": "running", "rounds": 2} and not (run / ".fedmem.lock").exists()


def test_the_spacy_helper_leaves_ctrl_c_to_its_caller():
    """Ctrl-C reaches every process of the terminal's process group: MR's spaCy helper is not in it, so the caller
    alone handles it, and the helper ends with its caller (its stdin closed), printing nothing."""
    code = """if True:
        import sys, time
        from fedmem.audit.mr.detector.config import DetectorConfig
        from fedmem.audit.mr.detector.ner import NerWorker
        helper = NerWorker(DetectorConfig().ner_model)
        helper.submit(["Alice met Bob in Paris."], 8)
        assert helper.result() == [frozenset({"alice", "bob", "paris"})]  # the helper is waiting for work
        try:
            print(helper.proc.pid, flush=True)
            time.sleep(300)
        except KeyboardInterrupt:
            print("caller stopped", file=sys.stderr)
    """
    proc = subprocess.Popen([sys.executable, "-c", code], env=fedmem_env(""), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        helper = int(proc.stdout.readline())
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)  # returns once the helper has ended too: it writes to the same stderr
    finally:
        end(proc)
    assert err.strip().splitlines() == ["caller stopped"], err[-2000:]
    with contextlib.suppress(psutil.NoSuchProcess):
        assert not left([psutil.Process(helper)])


@pytest.mark.slow
def test_a_run_whose_ray_never_starts_exits_once_its_failure_is_recorded(tmp_path, cache_dir):
    """Ray still starting (here: a cluster address that accepts connections and never answers) when the run is
    ended (SIGTERM, as a scheduler ends a job): the failure is recorded and the process exits, though Flower's
    ServerApp thread, started before Ray, was waiting for its clients. That thread, no daemon, used to keep the
    process alive until the round's timeout, an hour by default."""
    run, log = tmp_path / "run", tmp_path / "run.log"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "%s:%d" % silent.getsockname()
        proc = start(["run", *FAST, f"cache_dir={cache_dir}", f"simulation.ray_address={address}",
                      f"hydra.run.dir={run}"], fedmem_env(cache_dir), log)
        try:
            # round 0's report is written by the ServerApp's own thread, which goes on to wait for round 1's
            # clients: from here on the thread exists and waits, or is about to
            started = watch(proc, lambda: (run / "round_0" / "report.json").is_file())
            proc.terminate()
            proc.wait(timeout=60)
        finally:
            end(proc)
    assert proc.returncode != 0
    assert _status(run)["status"] == "failed", _status(run)
    assert not (run / ".fedmem.lock").exists() and not (run / "round_1").exists()
    assert not left(started), f"left running: {left(started)}"


@pytest.mark.slow
def test_an_audit_never_writes_over_an_earlier_one(finished, tmp_path, cache_dir):
    """Under a name it chose from its overrides, a second audit goes to a numbered directory and says so; under a
    name the user gave, it is refused in one line."""
    run, env = tmp_path / "run", fedmem_env(cache_dir)
    shutil.copytree(finished, run)
    args = ["audit", f"run={run}", "rounds=1", "audit.methods=[utility]"]
    first = subprocess.run(fedmem(*args), env=env, capture_output=True, text=True, timeout=300)
    again = subprocess.run(fedmem(*args), env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == again.returncode == 0, again.stderr[-2000:]
    out = Path(first.stdout.strip().splitlines()[-1])
    assert Path(again.stdout.strip().splitlines()[-1]) == out.with_name(f"{out.name}-2")
    assert f"fedmem: {out} holds an earlier audit; this one goes to {out}-2" in again.stderr.splitlines()
    named = [*args, "name=mine"]
    assert subprocess.run(fedmem(*named), env=env, capture_output=True, timeout=300).returncode == 0
    refused = subprocess.run(fedmem(*named), env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == (
        f"fedmem: name=mine: {run / 'audits' / 'mine'} already holds an audit; choose another name, or remove it to "
        "audit into it again")


@pytest.mark.slow
def test_sigterm_ends_an_audit_marked_stopped_with_its_lock_released(finished, tmp_path, cache_dir):
    run, log = tmp_path / "run", tmp_path / "audit.log"
    shutil.copytree(finished, run)
    out = run / "audits" / "termed"
    # Prior-Aware with 512 prior prefixes a trial: seconds of work in every round after the status is written, so the
    # signal finds the audit at work however late the wait below sees the status (with the default 32 the whole
    # audit took about 2 s, and on a loaded machine it once finished first)
    proc = start(["audit", f"run={run}", "name=termed", "audit.methods=[utility,pa]", "audit.pa.c=512"],
                 fedmem_env(cache_dir), log)
    try:
        # frozen once the audit is under way (its status written), so the signal finds it at work, not finished
        watch(proc, lambda: (out / "status.json").is_file(), seconds=300)
        os.kill(proc.pid, signal.SIGSTOP)
        proc.terminate()
        os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=60)
    finally:
        end(proc)
    assert proc.returncode == 143, log.read_text()[-2000:]
    assert _last_line(log) == "fedmem: stopped by SIGTERM (the audit's status.json says stopped)"
    assert _status(out)["status"] == "stopped" and not (out / ".fedmem.lock").exists()
