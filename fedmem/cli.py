"""``fedmem`` command line.

    fedmem run [overrides]        one experiment (Flower simulation, or the centralized baseline)
    fedmem run -m [overrides]     a Hydra multirun sweep (ends with the sweep tables)
    fedmem run resume=DIR         continue an interrupted run after its last completed round
    fedmem audit run=DIR [...]    re-audit a run's saved rounds with other audit settings (-m: a sweep of them)
    fedmem audit model.path=DIR [model.adapter=DIR] ...   audit a model fedmem did not train
    fedmem resolve [overrides]    write the resolved config into a new run directory (its path is printed), for
                                  ``flwr run . --run-config "config-path='...'"``
    fedmem sweep-report DIR       (re)build the sweep tables of a finished sweep
    fedmem data check [overrides] what the data gives MR before any training: its floor and its shared passages
    fedmem run -v|-vv [...]       (run and audit) more of Flower's log: INFO, DEBUG (without: its warnings only)

The config is composed by Hydra from the config tree shipped with the package (conf/), validated (every section
and every enabled audit method) and written to the run directory before anything is trained. While it runs, a
line per audited round and progress bars go to stderr; the last line printed (stdout) is the run directory.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from fedmem.config import (
    compose_dict,
    conf_dir,
    from_dict,
    register_schemas,
    write_config,
)
from fedmem.experiment import lifecycle, sweeps
from fedmem.experiment.reaudit import prepare_audit
from fedmem.reports.console import configure_logging
from fedmem.reports.sweep import write_sweep_report
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
    try:
        cfg, summary = lifecycle.start(d, run_dir)
    except (ValueError, TypeError) as e:
        if Path(run_dir).is_dir() and not any(Path(run_dir).iterdir()):
            Path(run_dir).rmdir()  # Hydra made it before calling us: leave nothing behind
        _fail(str(e))
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
    """Train and audit a started run (``fedmem.experiment.lifecycle.execute``, federated rounds in Flower's simulation); a round
    that fell short of its clients ends the run with one line, recorded as failed, not a traceback."""
    try:
        return lifecycle.execute(cfg, simulate, start_round)
    except lifecycle.RoundFailedError as e:  # an expected outcome, recorded: one line, not a traceback
        print(f"fedmem: run failed: {e}", file=sys.stderr)
        sys.exit(1)


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
    cmd, rest = argv[0], argv[1:]
    if cmd in ("run", "audit"):
        level, rest = verbosity(rest)
        configure_logging(level)
    if cmd == "run" and rest and rest[0].startswith("resume="):
        if len(rest) > 1:
            _fail("fedmem run resume=DIR takes no other overrides: the run's config.yaml fixes everything")
        try:
            cfg, last = lifecycle.prepare_resume(rest[0].partition("=")[2])
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
    elif cmd == "data" and rest[:1] == ["check"]:
        from fedmem.experiment.preflight import data_check

        try:
            cfg = from_dict(compose_dict(rest[1:]))  # nothing is written: no run directory
            print(data_check(cfg), flush=True)
        except (ValueError, TypeError) as e:
            _fail(str(e))
    elif cmd == "sweep-report":
        if not rest:
            _fail("sweep-report needs the sweep directory")
        print(write_sweep_report(Path(rest[0])))
    else:
        print(f"fedmem: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
