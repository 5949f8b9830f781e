"""`fedmem run -m` through Hydra's launchers: joblib (jobs side by side in worker processes) and submitit's local
executor (the pickled jobs and job files of its SLURM launcher, on this machine). Each runs the same two-job sweep
of the test-sized configuration as the in-process sweep (the centralized baseline, audit.utility.n=1,2) and must
give the same tables, written by the sweep's last job in its own process; every job's tracker run lands in the
sweep's group."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedmem.cli import main
from fedmem.experiment.sweeps import job_ended
from tests.conftest import FAST
from tests.helpers import wandb_records

ROOT = Path(__file__).resolve().parents[1]
SWEEP = [*FAST, "strategy=centralized", "audit.utility.n=1,2"]
pytestmark = pytest.mark.slow


def _tables(sweep: Path) -> dict:
    tables = json.loads((sweep / "sweep_tables.json").read_text())
    return {k: tables[k] for k in ("runs", "unfinished", "factors", "tables")}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory, cache_dir):
    """The reference: the same sweep with Hydra's basic launcher, in this process, tracked by TensorBoard."""
    sweep = tmp_path_factory.mktemp("in_process")
    main(["run", "-m", *SWEEP, f"cache_dir={cache_dir}", "tracker=tensorboard", f"hydra.sweep.dir={sweep}"])
    return sweep


def _launched(sweep: Path, cache_dir: str, launcher: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    proc = subprocess.run([sys.executable, "-m", "fedmem.cli", "run", "-m", f"hydra/launcher={launcher}", *SWEEP,
                           f"cache_dir={cache_dir}", *overrides, f"hydra.sweep.dir={sweep}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_in_process_sweep_writes_its_tables_and_one_tensorboard_log_directory(in_process):
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    tables = _tables(in_process)
    assert tables["runs"] == 2 and tables["factors"] == ["audit.utility.n"]
    (row_1, row_2) = tables["tables"]["audit.utility.n"]["rows"]
    assert (row_1["key"], row_2["key"]) == ({"audit.utility.n": 1}, {"audit.utility.n": 2})
    assert {"mean", "lo", "hi"} <= set(row_1["figures"]["performance"])  # the figure the launchers' tables must match
    assert json.loads((in_process / "sweep.json").read_text())["jobs"] == 2
    runs = EventMultiplexer().AddRunsFromDirectory(str(in_process))  # the sweep's directory is one log directory
    runs.Reload()
    assert sorted(runs.Runs()) == ["0", "1"]
    assert all("utility/rouge_l" in runs.GetAccumulator(r).Tags()["scalars"] for r in ("0", "1"))


def test_joblib_runs_the_jobs_in_worker_processes_with_the_same_tables_and_one_mlflow_experiment(
        in_process, tmp_path, cache_dir, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's opt-in to read a file store
    sweep, store = tmp_path / "joblib", (tmp_path / "mlruns").as_uri()
    proc = _launched(sweep, cache_dir, "joblib", "hydra.launcher.n_jobs=2", "tracker=mlflow",
                     f"tracker.uri={store}")
    assert proc.stdout.strip().splitlines()[-1] == str(sweep / "sweep_report.md")
    assert _tables(sweep) == _tables(in_process)
    experiment = MlflowClient(store).get_experiment_by_name(f"fedmem/{sweep.name}")
    runs = MlflowClient(store).search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"{sweep.name}/0", f"{sweep.name}/1"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert f"fedmem: the sweep's last job wrote its tables: {sweep / 'sweep_report.md'}" in proc.stderr


def test_submitit_runs_pickled_jobs_whose_last_writes_the_tables_with_no_literal_job_id_folder(
        in_process, tmp_path, cache_dir):
    sweep = tmp_path / "submitit"
    proc = _launched(sweep, cache_dir, "submitit_local", "tracker=wandb")
    assert proc.stdout.strip().splitlines()[-1] == str(sweep / "sweep_report.md")
    assert _tables(sweep) == _tables(in_process)
    assert not [p for p in sweep.rglob("*") if "%" in p.name]
    submitted = list((sweep / ".submitit").glob("*_submitted.pkl"))  # each job pickled and run by submitit
    assert len(submitted) == 2
    logs = "".join(p.read_text() for p in (sweep / ".submitit").glob("*_log.err"))
    assert f"fedmem: the sweep's last job wrote its tables: {sweep / 'sweep_report.md'}" in logs
    for job in ("0", "1"):
        (run,) = [r.run for r in wandb_records(sweep / job) if r.WhichOneof("record_type") == "run"]
        assert (run.run_group, run.display_name) == (sweep.name, f"{sweep.name}/{job}")


def test_the_last_job_to_end_writes_the_tables_and_sweep_report_rebuilds_them(in_process, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    shutil.copytree(in_process, sweep)
    expected = _tables(in_process)
    for name in ("sweep_tables.json", "sweep_report.md"):
        (sweep / name).unlink()
    status = sweep / "1" / "status.json"
    ended = status.read_text()
    status.write_text(json.dumps({"status": "running"}))
    assert job_ended(str(sweep)) is None and not (sweep / "sweep_tables.json").exists()  # job 1 still runs
    status.write_text(ended)
    assert job_ended(str(sweep)) == sweep / "sweep_report.md" and _tables(sweep) == expected
    (sweep / "sweep_tables.json").unlink()
    main(["sweep-report", str(sweep)])
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(sweep / "sweep_report.md")
    assert _tables(sweep) == expected


def test_the_documented_slurm_settings_compose():
    """The settings README's "Sweeps on a cluster" gives a SLURM user reach submitit's SLURM launcher as written."""
    from hydra import compose, initialize_config_dir

    from fedmem.config.compose import conf_dir, register_schemas

    overrides = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=1",
                 "hydra.launcher.cpus_per_task=8", "hydra.launcher.mem_gb=64", "hydra.launcher.timeout_min=240",
                 "hydra.launcher.account=my-account", "hydra.launcher.setup=[source .venv/bin/activate]",
                 "+hydra.launcher.additional_parameters.mail-type=END"]
    register_schemas(overrides)
    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        launcher = compose("config", overrides, return_hydra_config=True).hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.gpus_per_node, launcher.cpus_per_task, launcher.mem_gb,
            launcher.timeout_min, launcher.account) == ("gpu", 1, 8, 64, 240, "my-account")
    assert list(launcher.setup) == ["source .venv/bin/activate"] and launcher.additional_parameters == {
        "mail-type": "END"}
