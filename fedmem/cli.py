"""``fedmem`` command line.

    fedmem run [overrides]        one experiment (Flower simulation, or the centralized baseline)
    fedmem run -m [overrides]     a Hydra multirun sweep (ends with the sweep tables)
    fedmem run resume=DIR         continue an interrupted run after its last completed round
    fedmem audit run=DIR [...]    re-audit a run's saved rounds with other audit settings (-m: a sweep of them)
    fedmem audit model.path=DIR [model.adapter=DIR] ...   audit a model fedmem did not train
    fedmem resolve [overrides]    write the resolved config into a new run directory (its path is printed), for
                                  ``flwr run . --run-config "config-path='...'"``
    fedmem sweep-report DIR       (re)build the sweep tables of a finished sweep
    fedmem study-report DIR       the paper's tables and trends of a study directory (make study-paper)
    fedmem data check [overrides] what the data gives MR before any training: its floor and its shared passages
    fedmem model export F.gguf D  a local Hugging Face model directory from a GGUF file, for model.path=D
    fedmem run -v|-vv [...]       (run and audit) more of Flower's log: INFO, DEBUG (without: its warnings only)

The config is composed by Hydra from the config tree shipped with the package (conf/), validated (every section
and every enabled audit method) and written to the run directory before anything is trained. While it runs, a
line per audited round and progress bars go to stderr; the last line printed (stdout) is the run directory.

Whatever ends a command early ends it with one line on stderr and an exit code: 2, refused before anything was
written (a bad setting, a damaged file of a run, a directory another fedmem process writes); 1, a run or audit that
failed (``status.json`` says failed, with the error); 130, stopped by Ctrl-C (``status.json`` says stopped, and the
line how to continue; a second Ctrl-C ends the process at once).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Iterator, NoReturn

import psutil

from fedmem.common.io import FileProblem, write_fault
from fedmem.common.lock import exclusive, release_held
from fedmem.config import (
    compose_dict,
    conf_dir,
    from_dict,
    register_schemas,
    write_config,
)
from fedmem.config.compose import override_problems
from fedmem.experiment import lifecycle, sweeps
from fedmem.reports.console import configure_logging, say_last
from fedmem.reports.sweep import write_sweep_report

USAGE = __doc__.split("\n\n")[1]


def verbosity(args: list[str]) -> tuple[int, list[str]]:
    """(how verbose: the number of v's in ``-v``, ``-vv``, ... and ``--verbose``, the other arguments)."""
    level, rest = 0, []
    for a in args:
        if re.fullmatch(r"-v+", a) or a == "--verbose":
            level += 1 if a == "--verbose" else len(a) - 1
        else:
            rest.append(a)
    return level, rest


def _exit(line: str, code: int) -> NoReturn:
    print(f"fedmem: {line}", file=sys.stderr, flush=True)
    sys.exit(code)


def _fail(msg: str) -> NoReturn:
    _exit(f"invalid configuration: {msg}", 2)


def _checked(step, *args):
    """``step(*args)``, a step that writes nothing or, for what it does write, fails before anything else: what it
    refuses (ValueError, TypeError; a FileProblem says it all) ends the command with exit code 2, a write the disk
    refused with exit code 1."""
    try:
        return step(*args)
    except (ValueError, TypeError) as e:
        _exit(str(e), 2) if isinstance(e, FileProblem) else _fail(str(e))
    except OSError as e:
        if fault := write_fault(e):
            _exit(fault, 1)
        raise


@contextlib.contextmanager
def _one_writer(directory) -> Iterator[None]:
    """This process writes ``directory`` while the block runs (``fedmem.common.lock``); another one that does ends
    this command in one line naming it."""
    with contextlib.ExitStack() as held:
        _checked(held.enter_context, exclusive(directory))
        yield


def run_experiment(d: dict, run_dir: str) -> Path:
    """Validate, write the resolved config into ``run_dir``, then train and audit. Returns the run dir. The directory
    Hydra made for a run that is refused is removed with the lock, left empty."""
    with _one_writer(run_dir):
        cfg, summary = _checked(lifecycle.start, d, run_dir)
        print(f"fedmem: {summary}", flush=True)
        return execute(cfg)


def new_run_dir(d: dict) -> Path:
    """A new directory for a run started outside ``fedmem run`` (``flwr run`` with a resolved config), named like
    Hydra's run directories and never an existing one; created when the validated config is written into it."""
    stem = f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{d['strategy']['name']}-{d['task']['name']}-s{d['seed']}"
    path, n = Path(stem), 1
    while path.exists():
        path, n = Path(f"{stem}-{n}"), n + 1
    return path.resolve()  # absolute: the SuperLink and SuperNodes may run from other directories


def execute(cfg, start_round: int = 0) -> Path:
    """Train and audit a started run (``fedmem.experiment.lifecycle.execute``, federated rounds in Flower's
    simulation). A failure, recorded as failed in ``status.json``, ends the run with one line and exit code 1: a
    round short of its clients, a write the disk refused (and how to continue once it is fixed), or any other error
    (its traceback is in ``status.json``)."""
    try:
        from server.simulation import simulate  # Flower and Ray: loaded for a run, not for a refusal or --help

        return lifecycle.execute(cfg, simulate, start_round)
    except lifecycle.RoundFailedError as e:
        _exit(f"run failed: {e}", 1)
    except Exception as e:
        if fault := write_fault(e):
            last = lifecycle.completed_round(cfg.run_dir)
            then = f"continue with: fedmem run resume={cfg.run_dir}" if last is not None else "start the run again"
            _exit(f"run failed: {fault}; once it can be written, {then}", 1)
        first = next(iter(str(e).strip().splitlines()), "")
        status = Path(cfg.run_dir) / lifecycle.STATUS
        _exit(f"run failed: {type(e).__name__}: {first} (its traceback is in {status})", 1)


def _stop_on_ctrl_c() -> None:
    """Ctrl-C (SIGINT) stops fedmem: the first raises KeyboardInterrupt, which marks a run stopped on its way out
    (``lifecycle.execute``) and ends the process (:func:`main`); a second marks the run stopped itself and ends the
    process at once. SIGINT stays ignored where it was ignored from the start (a process started in the
    background).

    The first prints that the run is stopping, at once: the stop itself takes seconds.

    A terminal's Ctrl-C reaches the whole process group, the clients' Ray workers too: they die, and Flower and Ray
    would log each death with its traceback. The run's outcome is fedmem's one line, so from the first Ctrl-C on
    their error logs are dropped."""
    def first(signum, frame):
        signal.signal(signal.SIGINT, second)
        lifecycle.ask_stop()
        for name in ("flwr", "ray"):
            logging.getLogger(name).addFilter(_drop)
        # a write of its own to the descriptor: the handler may run while the main thread is inside a print
        os.write(2, STOPPING.encode())
        raise KeyboardInterrupt

    def second(signum, frame):
        line = None
        with contextlib.suppress(Exception):  # ending at once matters more than the status line
            line = lifecycle.stop_running()
        with contextlib.suppress(Exception):
            release_held()
        say_last(f"fedmem: {line} (a second Ctrl-C: ended at once)" if line else "fedmem: stopped at once (a second "
                 "Ctrl-C)")
        _exit_now(130)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, first)


# what the first Ctrl-C prints at once: stopping takes seconds (Flower's teardown, Ray's shutdown, the status written)
STOPPING = "fedmem: stopping (Ctrl-C again ends at once)\n"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler ending the job) during an audit: it ends as Ctrl-C does, its status written and its lock
    released on the way out."""


def _terminated(signum, frame) -> NoReturn:
    raise Terminated


def _drop(record: logging.LogRecord) -> bool:
    return False


def _exit_now(code: int) -> NoReturn:
    """End the process without joining its threads, and the processes it started with it. After Ctrl-C, Flower's
    simulation may still have threads waiting on Ray actors that the shutdown of Ray took away, and its ServerApp
    thread may be in the middle of an audit: the interpreter would wait for them. After one Ctrl-C, Ray is stopped by
    then (Flower's teardown, ``server.simulation``); after a second, its processes are killed here (Ray's agents would
    otherwise outlive their raylet by a minute or so). Every file a thread was writing is either whole or a temp file
    (``fedmem.common.io``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    os._exit(code)


def _hydra_main(argv: list[str]) -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    @hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
    def task(cfg) -> None:
        d = OmegaConf.to_container(cfg, resolve=True)
        d.pop("hydra", None)
        hc = HydraConfig.get()
        if str(hc.mode) != "RunMode.MULTIRUN":
            print(run_experiment(d, hc.runtime.output_dir), flush=True)
            return
        try:  # a sweep's job, in whichever process Hydra's launcher runs it
            print(run_experiment(sweeps.job_config(d, hc.sweep.dir), hc.runtime.output_dir), flush=True)
        finally:
            sweeps.job_ended(hc.sweep.dir)  # the sweep's last job to end writes its tables

    sys.argv = [sys.argv[0], *argv]
    register_schemas(argv)  # the dataclasses' defaults, which every preset in conf/ extends
    try:
        task()
    except SystemExit as e:
        if e.code not in (0, None):
            raise


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    previous = signal.getsignal(signal.SIGINT)
    _stop_on_ctrl_c()
    try:
        _command(argv[0], argv[1:])
    except KeyboardInterrupt as e:
        if isinstance(e, Terminated):
            say_last("fedmem: stopped by SIGTERM (the audit's status.json says stopped)")
            _exit_now(143)
        say_last(f"fedmem: {e if isinstance(e, lifecycle.RunStopped) else 'stopped'}")
        _exit_now(130)
    finally:
        signal.signal(signal.SIGINT, previous)


def _refuse_bad_overrides(overrides: list[str]) -> None:
    """Every override Hydra would refuse, said at once in one line naming each key as typed (Hydra's own message
    is a block, suggests ``+key=`` for a misspelt key, and stops at the first)."""
    if problems := override_problems([o for o in overrides if not re.fullmatch(r"-v+|--verbose|-m|--multirun", o)]):
        _fail("; ".join(problems))


def _command(cmd: str, rest: list[str]) -> None:
    if cmd in ("run", "audit"):
        level, rest = verbosity(rest)
        configure_logging(level)
    if cmd == "run" and rest and rest[0].startswith("resume="):
        if len(rest) > 1:
            _fail("fedmem run resume=DIR takes no other overrides: the run's config.yaml fixes everything")
        run_dir = rest[0].partition("=")[2]
        with _one_writer(run_dir):
            cfg, last = _checked(lifecycle.prepare_resume, run_dir)
            print(f"fedmem: resuming {cfg.run_dir} after round {last}", flush=True)
            print(execute(cfg, last), flush=True)
    elif cmd == "run":
        _refuse_bad_overrides(rest)
        _hydra_main(rest)
    elif cmd == "audit":
        from fedmem.experiment.reaudit import prepare_audit  # the model's loaders: for an audit, not for --help

        audit = _checked(prepare_audit, rest)
        signal.signal(signal.SIGTERM, _terminated)  # a scheduler's end: the audit marked stopped, its lock released
        try:
            print(audit(), flush=True)
        except (ValueError, OSError) as e:  # the audit directory in use, or a write the disk refused
            if isinstance(e, FileProblem):
                _exit(str(e), 2)
            if fault := write_fault(e):
                _exit(f"audit failed: {fault}; once it can be written, run the audit again", 1)
            raise
    elif cmd == "resolve":
        _refuse_bad_overrides(rest)
        try:
            d = compose_dict(rest)
            cfg = from_dict({**d, "run_dir": str(new_run_dir(d))})
        except (ValueError, TypeError) as e:
            _fail(str(e))
        out = Path(cfg.run_dir) / "config.yaml"  # the run's own directory: a later resolve never overwrites it
        write_config(cfg, out)
        print(out.resolve())
    elif cmd == "data" and rest[:1] == ["check"]:
        from fedmem.experiment.preflight import data_check

        _refuse_bad_overrides(rest[1:])
        try:
            cfg = from_dict(compose_dict(rest[1:]))  # nothing is written: no run directory
            print(data_check(cfg), flush=True)
        except (ValueError, TypeError) as e:
            _fail(str(e))
    elif cmd == "model" and rest[:1] == ["export"]:
        if len(rest) != 3:
            _fail("fedmem model export takes a GGUF file and a new directory: fedmem model export FILE.gguf DIR")
        from fedmem.engine.model.gguf import export

        # the conversion is cached where runs cache it (cache_dir: $FEDMEM_CACHE or .cache/fedmem)
        print(_checked(export, rest[1], rest[2], compose_dict([])["cache_dir"]), flush=True)
    elif cmd == "sweep-report":
        if not rest:
            _fail("sweep-report needs the sweep directory")
        print(write_sweep_report(Path(rest[0])))
    elif cmd == "study-report":
        if not rest or not Path(rest[0]).is_dir():
            _fail("study-report needs the study directory (make study-paper writes one)")
        from fedmem.reports.paper_study import write_study_report

        print(write_study_report(Path(rest[0])))
    else:
        print(f"fedmem: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
