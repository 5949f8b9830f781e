"""``fedmem`` command line.

    fedmem run [overrides]        one experiment (Flower simulation, or the centralized baseline)
    fedmem run -m [overrides]     a Hydra multirun sweep (ends with the sweep tables)
    fedmem run resume=DIR         continue an interrupted run after its last completed round
    fedmem audit run=DIR [...]    re-audit a run's saved rounds with other audit settings (-m: a sweep of them)
    fedmem audit model.path=DIR [model.adapter=DIR] ...   audit a model fedmem did not train
    fedmem resolve [overrides]    write the resolved config into a new run directory (its path is printed), for
                                  ``flwr run . --run-config "config-path='...'"``
    fedmem sweep-report DIR       (re)build the sweep tables of a finished sweep
    fedmem run -v|-vv [...]       (run and audit) more of Flower's log: INFO, DEBUG (without: its warnings only)

The config is composed by Hydra from the config tree shipped with the package (conf/), validated (every section
and every enabled audit method) and written to the run directory before anything is trained. While it runs, a
line per audited round and progress bars go to stderr; the last line printed (stdout) is the run directory.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import yaml

from fedmem.console import configure_logging
from fedmem.experiment_config import (
    compose_dict,
    conf_dir,
    from_dict,
    register_schemas,
    write_config,
)
from fedmem.io import atomic_write_json
from fedmem.offline_audit import prepare_audit
from fedmem.runtime import completed_round, preflight, run_centralized
from fedmem.strategies import CENTRALIZED, strategy_named
from fedmem.sweep import write_sweep_report
from server.server_app import FAILURE_FILE, RoundFailedError
from server.simulation import simulate

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


def _fail(msg: str) -> None:
    print(f"fedmem: invalid configuration: {msg}", file=sys.stderr)
    sys.exit(2)


def run_experiment(d: dict, run_dir: str) -> Path:
    """Validate, write the resolved config into ``run_dir``, then train and audit. Returns the run dir."""
    d = {**d, "run_dir": run_dir}
    try:
        cfg = from_dict(d)
        summary = preflight(cfg)  # data, model and audit pool: before the run directory exists or Ray starts
    except (ValueError, TypeError) as e:
        if Path(run_dir).is_dir() and not any(Path(run_dir).iterdir()):
            Path(run_dir).rmdir()  # Hydra made it before calling us: leave nothing behind
        _fail(str(e))
    print(f"fedmem: {summary}", flush=True)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_config(cfg, Path(run_dir) / "config.yaml")
    return execute(cfg)


def new_run_dir(d: dict) -> Path:
    """A new directory for a run started outside ``fedmem run`` (``flwr run`` with a resolved config), named like
    Hydra's run directories and never an existing one; created when the validated config is written into it."""
    stem = f"runs/{time.strftime('%Y%m%d-%H%M%S')}-{d['strategy']['name']}-{d['task']['name']}-s{d['seed']}"
    path, n = Path(stem), 1
    while path.exists():
        path, n = Path(f"{stem}-{n}"), n + 1
    return path.resolve()  # absolute: the SuperLink and SuperNodes may run from other directories


def prepare_resume(run_dir: str) -> tuple:
    """(config, the last completed round) of an interrupted run; refuses a finished run, a run without a completed
    round and a strategy whose server state was not saved. Removes the rounds after the last complete one."""
    run = Path(run_dir)
    if not (run / "config.yaml").is_file():
        raise ValueError(f"resume={run_dir}: not a fedmem run directory (no config.yaml)")
    d = yaml.safe_load((run / "config.yaml").read_text())
    cfg = from_dict({**d, "run_dir": str(run)})
    status = run / "status.json"
    if status.is_file() and json.loads(status.read_text()).get("status") == "finished":
        raise ValueError(f"resume={run_dir}: the run already finished")
    if strategy_named(cfg.strategy.name).keeps_server_state:
        raise ValueError(f"resume={run_dir}: strategy {cfg.strategy.name} keeps server optimizer state that a run does "
                         f"not save; fedavg, fedprox and centralized runs can be resumed")
    last = completed_round(run)
    if last is None:
        raise ValueError(f"resume={run_dir}: no round was completed (round_0 with its report and adapter); "
                         f"start the run again")
    preflight(cfg)
    for partial in run.glob("round_*"):  # a round interrupted while it was written
        if int(partial.name.removeprefix("round_")) > last:
            shutil.rmtree(partial)
    (run / FAILURE_FILE).unlink(missing_ok=True)
    return cfg, last


def execute(cfg, start_round: int = 0) -> Path:
    """Train and audit a validated, written config (after ``start_round`` when resuming); ``status.json`` says
    running / finished / failed with the error."""
    run_dir = Path(cfg.run_dir)
    status = run_dir / "status.json"
    running = {"status": "running", "rounds": cfg.strategy.num_rounds}
    atomic_write_json(status, {**running, "resumed_after": start_round} if start_round else running)
    try:
        if cfg.strategy.name == CENTRALIZED:
            run_centralized(cfg, start_round)
        else:
            simulate(str(run_dir / "config.yaml"), start_round)
        failure = run_dir / FAILURE_FILE
        if failure.is_file():
            raise RoundFailedError(json.loads(failure.read_text())["error"])
        if not (run_dir / "summary.json").is_file():  # the audit hook never reached the end of the run
            raise RuntimeError(f"the run ended before its last round was audited; see the log above ({run_dir})")
    except BaseException as e:
        atomic_write_json(status, {"status": "failed", "error": f"{type(e).__name__}: {e}"})
        if isinstance(e, RoundFailedError):  # an expected outcome, recorded: one line, not a traceback
            print(f"fedmem: run failed: {e}", file=sys.stderr)
            sys.exit(1)
        raise
    atomic_write_json(status, {"status": "finished", "rounds": cfg.strategy.num_rounds})
    return run_dir


def _hydra_main(argv: list[str]) -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    sweeps: set[str] = set()

    @hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
    def task(cfg) -> None:
        d = OmegaConf.to_container(cfg, resolve=True)
        d.pop("hydra", None)
        hc = HydraConfig.get()
        if str(hc.mode) == "RunMode.MULTIRUN":
            sweeps.add(hc.sweep.dir)
        print(run_experiment(d, hc.runtime.output_dir), flush=True)

    sys.argv = [sys.argv[0], *argv]
    register_schemas()  # the dataclasses' defaults, which every preset in conf/ extends
    try:
        task()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    for sweep in sorted(sweeps):
        print(write_sweep_report(Path(sweep)), flush=True)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    cmd, rest = argv[0], argv[1:]
    if cmd in ("run", "audit"):
        level, rest = verbosity(rest)
        configure_logging(level)
    if cmd == "run" and rest and rest[0].startswith("resume="):
        if len(rest) > 1:
            _fail("fedmem run resume=DIR takes no other overrides: the run's config.yaml fixes everything")
        try:
            cfg, last = prepare_resume(rest[0].partition("=")[2])
        except (ValueError, TypeError) as e:
            _fail(str(e))
        print(f"fedmem: resuming {cfg.run_dir} after round {last}", flush=True)
        print(execute(cfg, last), flush=True)
    elif cmd == "run":
        _hydra_main(rest)
    elif cmd == "audit":
        try:
            audit = prepare_audit(rest)
        except (ValueError, TypeError) as e:
            _fail(str(e))
        print(audit(), flush=True)
    elif cmd == "resolve":
        try:
            d = compose_dict(rest)
            cfg = from_dict({**d, "run_dir": str(new_run_dir(d))})
        except (ValueError, TypeError) as e:
            _fail(str(e))
        out = Path(cfg.run_dir) / "config.yaml"  # the run's own directory: a later resolve never overwrites it
        write_config(cfg, out)
        print(out.resolve())
    elif cmd == "sweep-report":
        if not rest:
            _fail("sweep-report needs the sweep directory")
        print(write_sweep_report(Path(rest[0])))
    else:
        print(f"fedmem: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
