"""A run's life on disk, in one place: it starts (validated, checked, its resolved config written), it runs
(``status.json``: running), and it ends finished, failed with its error, or stopped (Ctrl-C, with the round it
reached and the command that continues it); an interrupted run resumes after its last completed round. One process
at a time writes a run directory (``fedmem.common.lock``: the caller holds the lock from before the run is started
or resumed until it ends).

The config is validated and resolved once, here, and handed down as an ``ExperimentConfig``; only the Flower
clients, in their own processes, read the written ``config.yaml`` back. How the rounds are trained is the caller's:
the CLI passes the Flower simulation in (``server.simulation``), so this module never imports the Flower apps; the
centralized baseline trains here (``fedmem.experiment.training``). A round that falls short of its trained clients is recorded
by the ServerApp with :func:`record_failure` (Flower only logs an exception of the ServerApp) and raised here.
"""

from __future__ import annotations

import json
import shutil
import threading
import traceback
from pathlib import Path
from typing import Callable

import yaml

from fedmem.common.io import FileProblem, atomic_write_json
from fedmem.config.experiment import ExperimentConfig, from_dict, write_config
from fedmem.experiment.archive import damaged_adapter, damaged_report
from fedmem.experiment.preflight import preflight
from fedmem.federation.rounds import RoundFailedError
from fedmem.federation.strategies import CENTRALIZED, strategy_named
from fedmem.tracking import run_tracker

STATUS = "status.json"  # {"status": running | finished | failed | stopped, ...}
FAILURE = "round_failure.json"  # a round that fell short of its trained clients, as the ServerApp saw it


def set_status(run_dir, status: str, **details) -> None:
    atomic_write_json(Path(run_dir) / STATUS, {"status": status, **details})


def record_failure(run_dir, error: str) -> None:
    atomic_write_json(Path(run_dir) / FAILURE, {"error": error})


# The run execute() is running in this process, (its directory, its rounds): a second Ctrl-C ends the process before
# execute's own handler can mark the run stopped, so it does so itself (stop_running).
_running: tuple[Path, int] | None = None
_stopped_line: str | None = None  # the line of the last run this process marked stopped
# Ctrl-C was pressed. Its KeyboardInterrupt lands in whichever call the main thread is in, and Flower or Ray may turn
# it, or the clients' deaths it causes, into an error of their own (a round short of its clients, "the core worker
# has already been shutdown"): once a stop was asked for, whatever ends the run ends it stopped.
_stop_asked = threading.Event()


def ask_stop() -> None:
    """Record that the user asked the run in progress to stop (the CLI's Ctrl-C handler calls it)."""
    _stop_asked.set()


def stop_running() -> str | None:
    """Mark the run in progress stopped and return the line that says so: the line already written when the run
    was marked stopped a moment ago, None when no run was in progress."""
    return stop(*_running) if _running is not None else _stopped_line


def unfinished(run_dir) -> Exception | None:
    """Why a run whose rounds have all returned did not finish (a round that failed, or a last round never audited),
    or None when it finished. Flower's runtimes return normally either way."""
    run_dir = Path(run_dir)
    if (run_dir / FAILURE).is_file():
        return RoundFailedError(json.loads((run_dir / FAILURE).read_text())["error"])
    if not (run_dir / "summary.json").is_file():  # the audit hook never reached the end of the run
        return RuntimeError(f"the run ended before its last round was audited; see the log above ({run_dir})")
    return None


class RunStopped(KeyboardInterrupt):
    """A run stopped by Ctrl-C, its status written: the message says where it stopped and how to continue."""


def stop(run_dir, rounds: int) -> str:
    """Mark a run stopped (``status.json``: the last completed round and the command that continues it) and return
    the line that says so."""
    global _stopped_line
    last = completed_round(run_dir)
    if last is None:
        set_status(run_dir, "stopped", round=None, rounds=rounds)
        _stopped_line = f"stopped before round 0 was complete; nothing to resume in {run_dir}: start the run again"
        return _stopped_line
    resume = f"fedmem run resume={run_dir}"
    set_status(run_dir, "stopped", round=last, rounds=rounds, resume=resume)
    _stopped_line = f"stopped after round {last} of {rounds}; continue with: {resume}"
    return _stopped_line


def start(d: dict, run_dir: str) -> tuple[ExperimentConfig, str]:
    """(the validated config, the preflight summary) of a new run: everything checked (``runtime.preflight``), then
    its directory created and the resolved config written into it. Bad input raises ValueError before any of that."""
    from fedmem.experiment.loading import audit_plan, audited_config  # torch: loaded by the preflight anyway

    cfg = from_dict({**d, "run_dir": run_dir})
    summary = preflight(cfg)  # data, model and audit pool: before the run directory exists or Ray starts
    cfg = audited_config(cfg, audit_plan(cfg))  # the sizes audit.size=auto chose, as the run records them
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_config(cfg, Path(run_dir) / "config.yaml")
    return cfg, summary


def completed_round(run_dir) -> int | None:
    """The last round of a run whose report and adapter were both written: a resumed run continues after it.
    Rounds are written in order, so this is the longest unbroken prefix of complete rounds."""
    r = -1
    while (Path(run_dir) / f"round_{r + 1}" / "report.json").is_file() and \
            (Path(run_dir) / f"round_{r + 1}" / "adapter" / "adapter_model.safetensors").is_file():
        r += 1
    return None if r < 0 else r


def prepare_resume(run_dir: str) -> tuple[ExperimentConfig, int]:
    """(config, the last completed round) of an interrupted run; refuses a finished run, a run without a completed
    round and a strategy whose server state was not saved. Removes the rounds after the last complete one."""
    run = Path(run_dir)
    if not (run / "config.yaml").is_file():
        raise ValueError(f"resume={run_dir}: not a fedmem run directory (no config.yaml)")
    cfg = from_dict({**yaml.safe_load((run / "config.yaml").read_text()), "run_dir": str(run)})
    if _status(run) == "finished":
        raise ValueError(f"resume={run_dir}: the run already finished")
    if strategy_named(cfg.strategy.name).server_optimizer:
        raise ValueError(f"resume={run_dir}: strategy {cfg.strategy.name} keeps server optimizer state that a run does "
                         f"not save; fedavg, fedprox and centralized runs can be resumed")
    last = completed_round(run)
    if last is None:
        raise ValueError(f"resume={run_dir}: no round was completed (round_0 with its report and adapter); "
                         f"start the run again")
    for r in range(last + 1):  # the reports of every round and the last round's adapter are read back
        if problem := damaged_report(run, r) or (r == last and damaged_adapter(run, r)):
            then = f"remove {run / f'round_{r}'} and every later round to resume after round {r - 1}" if r else \
                "it is the first round: start the run again"
            raise FileProblem(f"resume={run_dir}: {problem}; {then}")
    preflight(cfg)
    for partial in run.glob("round_*"):  # a round interrupted while it was written
        if int(partial.name.removeprefix("round_")) > last:
            shutil.rmtree(partial)
    (run / FAILURE).unlink(missing_ok=True)
    return cfg, last


def _status(run: Path) -> str | None:
    try:
        return json.loads((run / STATUS).read_text()).get("status")
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise FileProblem(f"{run / STATUS} is damaged ({e}); remove it if the run did not finish") from None


def execute(cfg: ExperimentConfig, federated: Callable[[ExperimentConfig, int], None], start_round: int = 0) -> Path:
    """Train and audit a started run (after ``start_round`` when resuming): the centralized baseline here, a
    federated strategy through ``federated(cfg, start_round)``. ``status.json`` says running, then finished; or
    stopped (Ctrl-C: RunStopped is raised, saying how to continue); or failed with the error and its traceback (the
    error re-raised)."""
    global _running
    run_dir = Path(cfg.run_dir)
    running = {"rounds": cfg.strategy.num_rounds} | ({"resumed_after": start_round} if start_round else {})
    set_status(run_dir, "running", **running)
    tracker = run_tracker(cfg)  # closed with the status the run ends with
    _running = (run_dir, cfg.strategy.num_rounds)
    try:
        if cfg.strategy.name == CENTRALIZED:
            from fedmem.experiment.training import run_centralized  # torch: loaded for a run, not for a refusal

            run_centralized(cfg, start_round)
        else:
            federated(cfg, start_round)
        if problem := unfinished(run_dir):
            raise problem
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) or _stop_asked.is_set():
            line = stop(run_dir, cfg.strategy.num_rounds)
            tracker.close()
            raise RunStopped(line) from None
        set_status(run_dir, "failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        tracker.close()
        raise
    finally:
        _running = None
    set_status(run_dir, "finished", rounds=cfg.strategy.num_rounds)
    tracker.close()
    return run_dir
