"""A training sweep (``fedmem run -m``) under any of Hydra's launchers: the jobs run in this process (Hydra's basic
launcher), side by side in worker processes (``hydra/launcher=joblib``) or as cluster jobs
(``hydra/launcher=submitit_slurm``, or ``submitit_local``: the same pickled jobs and job files, on this machine).

Its tables are written when its last job ends, in whichever process ran that job: the launching process records
how many jobs the sweep has (``sweep.json``) before any starts, and each job, as it ends, counts the jobs whose
``status.json`` says they ended. The launching process writes them again once its launcher has seen every job
return (a job refused before its run started has no status), and prints where they are. A sweep's jobs share a
tracker group, named after the sweep's directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hydra.experimental.callback import Callback

from fedmem.common.io import atomic_write_json
from fedmem.reports.sweep import write_sweep_report

MARKER = "sweep.json"  # {"jobs": n, "overrides": [...]}: written before the first job starts
ENDED = ("finished", "failed", "stopped")


def job_config(d: dict, sweep_dir: str) -> dict:
    """A sweep job's resolved config dict, its tracker grouped with the sweep's other jobs unless told otherwise."""
    tracker = d.get("tracker") or {}
    return {**d, "tracker": {**tracker, "group": tracker.get("group") or Path(sweep_dir).name}}


def ended_jobs(sweep_dir: Path) -> int:
    """How many of the sweep's jobs have ended: their status.json says finished, failed or stopped."""
    return sum(json.loads(p.read_text()).get("status") in ENDED for p in Path(sweep_dir).glob("*/status.json"))


def job_ended(sweep_dir: str) -> Path | None:
    """Called by every job of a sweep as it ends: the sweep's tables once every job has ended (this job was the
    last), else None. Two jobs ending together may both write them, atomically and alike."""
    marker = Path(sweep_dir) / MARKER
    jobs = json.loads(marker.read_text()).get("jobs") if marker.is_file() else None
    if jobs is None or ended_jobs(Path(sweep_dir)) < jobs:
        return None
    report = write_sweep_report(Path(sweep_dir))
    print(f"fedmem: the sweep's last job wrote its tables: {report}", file=sys.stderr, flush=True)
    return report


def sweep_jobs(config) -> list[list[str]]:
    """The jobs of a multirun as Hydra's basic sweeper makes them: its ``hydra.sweeper.params`` (a study preset's
    grid), then the command line's overrides, a later value of a key replacing an earlier one."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    overrides = OverridesParser.create().parse_overrides([*params, *config.hydra.overrides.task])
    return BasicSweeper.split_arguments(overrides, None)[0]


class SweepTables(Callback):
    """Hydra's callback in the launching process (``conf/config.yaml``: ``hydra.callbacks``)."""

    def on_multirun_start(self, config, **kwargs) -> None:
        sweep = Path(config.hydra.sweep.dir)
        jobs = {"jobs": len(sweep_jobs(config))} if config.hydra.sweeper.get("_target_", "").endswith(
            "BasicSweeper") else {}  # another sweeper decides its jobs as it goes: the launching process writes
        atomic_write_json(sweep / MARKER, {**jobs, "overrides": list(config.hydra.overrides.task)})

    def on_multirun_end(self, config, **kwargs) -> None:
        print(write_sweep_report(Path(config.hydra.sweep.dir)), flush=True)
