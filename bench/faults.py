"""Faults beyond bad input, on the real command line: what ``fedmem`` does when a client never answers, on Ctrl-C
(once, twice), when a second process writes the same run or audit directory, when the disk fills, when a file of a
finished run is damaged.

    FEDMEM_CACHE=<cache dir> python bench/faults.py [--keep] [hang ctrl-c ...]

Each fault is staged as tests/test_faults.py stages it (its helpers are imported from there, so the two stay the
same): ``fedmem`` started in a process group of its own with SIGINT at its default, as a terminal starts it, and
every process it starts noted while it runs. Ctrl-C is also sent later than the tests send it, once the clients'
actors train. One markdown row per fault: the exit code, the seconds to exit and what the clock counts from, the
last line the command printed (verbatim) and how many it printed after the fault, the run's ``status.json`` status,
and how many of the processes it started (Ray's daemons and actors included) still run 10 s after it ended. The
full disk is a 512 kB tmpfs, as in the test, which needs root; without it that row says it was not staged. A few
minutes in all on a 2-core machine, with the tiny base already in the cache.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers: `tests` is a folder of the checkout, not an installed package

import psutil

# Importing the tests' conftest marks this process's environment (FEDMEM_TEST_SESSION), and with it every process a
# fault starts: the count of processes left behind finds Ray's daemons by that mark even when they left the tree.
from bench.staging import FAST, PLUGIN, SESSION_MARK, clients_train, cut, fedmem_env, interrupted, left, start, watch
from fedmem.cli import STOPPING

CACHE = os.environ.get("FEDMEM_CACHE", str(ROOT / ".cache" / "fedmem"))
COMMON = [*FAST, f"cache_dir={CACHE}"]


def marked() -> set[psutil.Process]:
    """Every process, other than this one, that carries this bench's mark in its environment."""
    found = set()
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if p.pid != os.getpid() and p.environ().get("FEDMEM_TEST_SESSION") == SESSION_MARK:
                found.add(p)
    return found


def left_behind(seen, keep: psutil.Process | None = None) -> int:
    """How many of the processes a fault started (``seen``, and any carrying the mark) still run after a grace of
    10 s (Ray's daemons exit asynchronously); ``keep`` and its children are a process the bench itself holds."""
    held = set()
    if keep is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            held = {keep, *keep.children(recursive=True)}
    return len(left((set(seen) | marked()) - held))


def printed(log: Path) -> list[str]:
    """The lines a command has printed so far (stdout and stderr together), blank ones left out."""
    return [line for line in log.read_text().splitlines() if line.strip()]


def finish(proc: subprocess.Popen, seen: dict, log: Path, note=lambda: None) -> tuple[float, list[str]]:
    """Wait for ``proc`` to end, noting the processes it starts meanwhile in ``seen`` (and calling ``note`` at each
    look, every 0.2 s: the times below are as fine as that); (the time it was seen ended, the lines it printed)."""
    def ended() -> bool:
        note()
        return proc.poll() is not None

    seen.update(watch(proc, ended, seconds=600))
    return time.time(), printed(log)


def status(run: Path) -> str:
    try:
        return json.loads((run / "status.json").read_text())["status"]
    except FileNotFoundError:
        return "(no status.json)"


def killed(proc: subprocess.Popen) -> None:
    """The bench's own cleanup: a process a fault was meant to end, still running, is killed with its group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def row(fault: str, code, seconds: str, after: list[str], state: str, left) -> None:
    """One row; ``after``: the lines the command printed after the fault (all of them for a command that meets a
    fault already there), of which the last is shown."""
    last = f"`{after[-1]}`" if after else ""
    cells = [fault, str(code), seconds, last, str(len(after)), state, str(left)]
    print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |", flush=True)


def hang(work: Path) -> None:
    """Clients whose local loss sleeps for an hour (the tests' plugin strategy "hang"), with the issue's timeout of
    60 s: the ServerApp records the round's failure (round_failure.json), and the clock runs from then."""
    plugin, marks, run, log = work / "plugin", work / "marks", work / "run", work / "run.log"
    plugin.mkdir()
    marks.mkdir()
    (plugin / "fedmem_fault_plugin.py").write_text(PLUGIN)
    proc = start(["run", *COMMON, "plugins=[fedmem_fault_plugin]", "strategy.name=hang",
                   "strategy.round_timeout=60", f"hydra.run.dir={run}"],
                  {**fedmem_env(CACHE, plugin), "FAULT_MARKS": str(marks)}, log)
    failed, seen = [], {}

    def note() -> None:
        if not failed and (run / "round_failure.json").is_file():
            failed.extend([time.time(), len(printed(log))])

    try:
        ended, lines = finish(proc, seen, log, note)
    finally:
        killed(proc)
    since = f"{ended - failed[0]:.1f} from round_failure.json" if failed else "no round_failure.json seen"
    row("a client that never answers (`strategy.round_timeout=60`)", proc.returncode, since,
        lines[failed[1]:] if failed else lines, status(run), left_behind(seen))


def ctrl_c(work: Path, twice: bool, actors: bool) -> None:
    """SIGINT to the run's process group, as a terminal's Ctrl-C, and a second one once the first was taken (its line
    printed) when ``twice``; the clock runs from the last SIGINT. Sent where the tests send it, once round 0 is
    written (round 1 begins: Flower's simulation is still starting Ray), or, with ``actors``, once a client's call is
    under way."""
    run, log = work / "run", work / "run.log"
    proc = start(["run", *COMMON, f"hydra.run.dir={run}"], fedmem_env(CACHE), log)
    try:
        seen = watch(proc, lambda: (run / "round_0" / "report.json").is_file(), seconds=600)
        if actors:
            seen.update(watch(proc, lambda: clients_train(proc), seconds=600))
        before = len(printed(log))
        os.killpg(proc.pid, signal.SIGINT)
        if twice:
            seen.update(watch(proc, lambda: STOPPING.strip() in printed(log), seconds=60))
            os.killpg(proc.pid, signal.SIGINT)
        sent = time.time()
        ended, lines = finish(proc, seen, log)
    finally:
        killed(proc)
    when = "once a client's call is under way" if actors else "once round 0 is written (Ray starting)"
    fault = f"Ctrl-C twice, the second once the first was taken, {when}" if twice else f"Ctrl-C {when}"
    since = "from the second SIGINT" if twice else "from SIGINT"
    row(fault, proc.returncode, f"{ended - sent:.1f} {since}", lines[before:], status(run), left_behind(seen))


def two_writers(work: Path, finished: Path, audit: bool) -> None:
    """A second ``fedmem run resume=DIR`` (or ``fedmem audit`` into the same audit directory) while the first holds
    the directory's lock, frozen (SIGSTOP) right after taking it as in the tests; the clock runs from the second's
    start. The first is then let go, and its own end is noted beside the run's status."""
    if audit:
        run = work / "run"
        shutil.copytree(finished, run)
        args, lock = ["audit", f"run={run}", "name=again"], run / "audits" / "again" / ".fedmem.lock"
    else:
        run = interrupted(finished, work / "run")
        args, lock = ["run", f"resume={run}"], run / ".fedmem.lock"
    first = start(args, fedmem_env(CACHE), work / "first.log")
    second = None
    try:
        watch(first, lambda: lock.is_file() and lock.read_text().strip() == str(first.pid), seconds=300)
        os.kill(first.pid, signal.SIGSTOP)
        began = time.time()
        second = start(args, fedmem_env(CACHE), work / "second.log")
        seen = {}
        ended, lines = finish(second, seen, work / "second.log")
        left = left_behind(seen, keep=psutil.Process(first.pid))
        state = status(run)
        os.kill(first.pid, signal.SIGCONT)
        first_seen = {}
        finish(first, first_seen, work / "first.log")
        left += left_behind(first_seen)
    finally:
        killed(first)
        if second is not None:
            killed(second)
    fault = "a second `fedmem audit` into the same audit directory" if audit else \
        "a second `fedmem run resume=DIR` on the same interrupted run"
    row(fault, second.returncode, f"{ended - began:.1f} from its start", lines,
        f"{state}; the first then exited {first.returncode}, {status(run)}", left)


def full_disk(work: Path) -> None:
    """The run directory on a 512 kB tmpfs (room for round 0 of the test-sized centralized run, not for round 1's
    adapter). The clock runs from when round_1/ appeared (polled every 10 ms): fedmem creates it as it starts to
    write round 1's adapter, the write the disk refuses."""
    disk = work / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        row(f"the run directory on a full disk: not staged ({mounted.stderr.strip()})", "", "", [], "", "")
        return
    try:
        run, log = disk / "run", work / "run.log"
        proc = start(["run", *COMMON, "strategy=centralized", f"hydra.run.dir={run}"], fedmem_env(CACHE), log)
        began, before, seen = None, 0, {}
        try:
            while proc.poll() is None:  # finer than _watch's 0.2 s: the write fails within milliseconds
                if began is None and (run / "round_1").exists():
                    began, before = time.time(), len(printed(log))
                with contextlib.suppress(psutil.NoSuchProcess):
                    for child in psutil.Process(proc.pid).children(recursive=True):
                        seen.setdefault(child, "")
                time.sleep(0.01)
            ended, lines = time.time(), printed(log)
        finally:
            killed(proc)
        hidden = [str(p.relative_to(run)) for p in run.rglob(".*")]
        written = sorted(str(p.relative_to(run)) for p in (run / "round_1").rglob("*")) \
            if (run / "round_1").exists() else []
        since = f"{ended - began:.1f} from round_1/ created" if began else "round_1/ never seen"
        row("the run directory on a full disk (a 512 kB tmpfs)", proc.returncode, since, lines[before:],
            f"{status(run)}; in round_1: {written or 'nothing'}; temp files: {hidden or 'none'}", left_behind(seen))
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def damaged(work: Path, finished: Path, resume: bool) -> None:
    """Round 1's adapter cut to half its size, then ``fedmem audit run=DIR rounds=1`` on the finished run, or
    ``fedmem run resume=DIR`` on an interrupted copy whose last complete round is 1. The fault is there before the
    command starts: the clock runs from its start."""
    run = interrupted(finished, work / "run") if resume else Path(shutil.copytree(finished, work / "run"))
    cut(run / "round_1" / "adapter" / "adapter_model.safetensors")
    args = ["run", f"resume={run}"] if resume else ["audit", f"run={run}", "rounds=1"]
    began, seen = time.time(), {}
    proc = start(args, fedmem_env(CACHE), work / "cmd.log")
    try:
        ended, lines = finish(proc, seen, work / "cmd.log")
    finally:
        killed(proc)
    audits = "; no audits/ written" if not (run / "audits").exists() else "; audits/ written"
    fault = "`resume=` meets a truncated adapter in its last round" if resume else \
        "a truncated adapter in a finished run, then `fedmem audit run=DIR rounds=1`"
    row(fault, proc.returncode, f"{ended - began:.1f} from its start", lines, status(run) + ("" if resume else audits),
        left_behind(seen))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("faults", nargs="*", help=f"some of {', '.join(FAULTS)} (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (each command's log)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="faults-"))
    print(f"cache {CACHE}; work directory {work}\n", flush=True)
    try:
        # A finished centralized run of two epochs (rounds 0-2), as the tests' `finished` fixture: the faults of
        # locks and files start from copies of it.
        finished = work / "finished"
        subprocess.run([sys.executable, "-m", "fedmem.cli", "run", *COMMON, "strategy=centralized",
                        "strategy.num_rounds=2", f"hydra.run.dir={finished}"], env=fedmem_env(CACHE), cwd=ROOT,
                       check=True, capture_output=True, timeout=600)
        print("| fault | exit | seconds to exit | last line printed | lines after the fault | status.json | "
              "processes left |")
        print("|---|---|---|---|---|---|---|", flush=True)
        for name in args.faults or FAULTS:
            (work / name).mkdir()
            FAULTS[name](work / name, finished)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


FAULTS = {
    "hang": lambda work, finished: hang(work),
    "ctrl-c": lambda work, finished: ctrl_c(work, twice=False, actors=False),
    "ctrl-c-twice": lambda work, finished: ctrl_c(work, twice=True, actors=False),
    "ctrl-c-training": lambda work, finished: ctrl_c(work, twice=False, actors=True),
    "ctrl-c-twice-training": lambda work, finished: ctrl_c(work, twice=True, actors=True),
    "resume-twice": lambda work, finished: two_writers(work, finished, audit=False),
    "audit-twice": lambda work, finished: two_writers(work, finished, audit=True),
    "full-disk": lambda work, finished: full_disk(work),
    "damaged-audit": lambda work, finished: damaged(work, finished, resume=False),
    "damaged-resume": lambda work, finished: damaged(work, finished, resume=True),
}


if __name__ == "__main__":
    main()
