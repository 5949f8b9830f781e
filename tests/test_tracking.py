"""Experiment trackers (``tracker=mlflow|tensorboard|wandb``), each read back through its own library: MLflow's
client, TensorBoard's event reader, W&B's offline run files. A real test-sized run per tracker (the centralized
baseline: rounds 0 and 1 audited in this process) with a method registered from a test module, whose figures must
arrive with no tracker code; and a run that fails after round 0, which each tracker must mark failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedmem.audit import AUDIT_METHODS, register
from fedmem.cli import main, run_experiment
from fedmem.config.compose import compose_dict
from fedmem.experiment import lifecycle
from fedmem.experiment.auditor import training_auditor
from fedmem.tracking.run import parameters, round_metrics
from tests.conftest import FAST
from tests.helpers import wandb_items, wandb_records
from tests.test_extending import Confident

pytestmark = pytest.mark.usefixtures("wandb_offline")
ERROR = "RuntimeError: the disk is full"


@pytest.fixture(scope="module", autouse=True)
def confident():
    """A method fedmem does not ship (tests/test_extending.py's), registered for this module's runs."""
    register(Confident)
    yield
    AUDIT_METHODS.pop(Confident.name)


@pytest.fixture(scope="module")
def wandb_offline():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")  # never a server, whatever the machine has set up
        mp.setenv("WANDB_SILENT", "true")
        yield


def _config(cache_dir, tracker: str, *overrides: str) -> dict:
    return compose_dict([*FAST, f"cache_dir={cache_dir}", "audit.methods=[utility,confident]", "audit.confident.n=2",
                         f"tracker={tracker}", *overrides])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache_dir, one_torch_thread, wandb_offline):
    """tracker -> (a finished run's directory, a failed run's directory), the MLflow store under ``mlruns``."""
    root = tmp_path_factory.mktemp("tracked")
    store = (root / "mlruns").as_uri()
    out = {}
    for tracker in ("mlflow", "tensorboard", "wandb"):
        extra = [f"tracker.uri={store}"] if tracker == "mlflow" else []
        finished = run_experiment(_config(cache_dir, tracker, "strategy=centralized", *extra),
                                  str(root / tracker / "finished"))
        cfg, _ = lifecycle.start(_config(cache_dir, tracker, *extra), str(root / tracker / "failed"))

        def fails_after_round_0(cfg, start_round):
            auditor, _ = training_auditor(cfg, "fl")
            auditor.evaluate(0, None)
            raise RuntimeError("the disk is full")

        with pytest.raises(RuntimeError, match="the disk is full"):
            lifecycle.execute(cfg, fails_after_round_0)
        out[tracker] = (finished, Path(cfg.run_dir))
    out["store"] = store
    return out


def _reports(run_dir: Path) -> dict[int, dict]:
    return {int(p.parent.name.removeprefix("round_")): json.loads(p.read_text())
            for p in run_dir.glob("round_*/report.json")}


def _params(run_dir: Path) -> dict:
    return parameters(yaml.safe_load((run_dir / "config.yaml").read_text()))


def test_round_metrics_are_the_declared_figures_with_their_bounds(runs):
    report = _reports(runs["mlflow"][0])[1]
    metrics = round_metrics(report)
    assert metrics["confident/rate"] == report["audit"]["confident"]["headline"]["rate"]  # a plugin's, no tracker code
    assert [metrics["confident/rate_ci95_lo"], metrics["confident/rate_ci95_hi"]] == \
        report["audit"]["confident"]["headline"]["rate_ci95"]
    assert metrics["confident/confident"] == report["audit"]["confident"]["headline"]["confident"]  # a count: no ci
    assert "confident/confident_ci95_lo" not in metrics and "confident/audited" not in metrics  # undeclared
    declared = {f"{m}/{f.key}" for m in ("utility", "confident") for f in AUDIT_METHODS[m].figures
                if f.key in report["audit"][m]["headline"]}
    assert {k for k in metrics if "_ci95_" not in k} == declared | {"train/train_loss"}


def test_mlflow_holds_the_config_every_rounds_figures_the_pages_and_the_status(runs):
    from mlflow import MlflowClient

    finished, failed = runs["mlflow"]
    client = MlflowClient(runs["store"])
    experiment = client.get_experiment_by_name("fedmem")
    by_dir = {r.data.tags["fedmem.run_dir"]: r for r in client.search_runs([experiment.experiment_id])}
    run = by_dir[str(finished.resolve())]
    assert run.info.status == "FINISHED" and run.info.run_name == finished.name
    assert run.data.params == {k: str(v) for k, v in _params(finished).items()}
    reports = _reports(finished)
    for key in round_metrics(reports[1]):
        history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
        assert history == {r: round_metrics(rep)[key] for r, rep in reports.items() if key in round_metrics(rep)}
    for r in (0, 1):
        files = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, f"round_{r}")}
        assert {"report.json", "report.md", "report.html"} <= files
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.md", "report.html", "summary.json", "config.yaml", "panel_train.png"} <= top
    local = Path(client.download_artifacts(run.info.run_id, "round_1/report.md"))
    assert local.read_text() == (finished / "round_1" / "report.md").read_text()
    bad = by_dir[str(failed.resolve())]
    assert bad.info.status == "FAILED" and ERROR in bad.data.tags["fedmem.error"]
    assert [m.step for m in client.get_metric_history(bad.info.run_id, "utility/rouge_l")] == [0]


def test_a_resumed_run_continues_its_mlflow_run(runs):
    """``fedmem run resume=DIR`` opens the tracker again in a new process: the run id kept in the run directory
    continues the same MLflow run, which ends as status.json says."""
    from mlflow import MlflowClient

    from fedmem.config import read_config
    from fedmem.tracking import run_tracker

    finished, _ = runs["mlflow"]
    cfg = read_config(finished / "config.yaml")
    run_id = json.loads((finished / "tracker.json").read_text())["id"]
    tracker = run_tracker(cfg)
    assert tracker.backend.run_id == run_id
    assert MlflowClient(runs["store"]).get_run(run_id).info.status == "RUNNING"
    tracker.close()
    assert MlflowClient(runs["store"]).get_run(run_id).info.status == "FINISHED"


def test_tensorboard_holds_the_config_every_rounds_figures_the_pages_and_the_status(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    finished, failed = runs["tensorboard"]
    events = EventAccumulator(str(finished), size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    events.Reload()
    reports = _reports(finished)
    for key in round_metrics(reports[1]):
        scalars = {e.step: e.value for e in events.Scalars(key)}
        assert scalars == pytest.approx({r: round_metrics(rep)[key] for r, rep in reports.items()
                                         if key in round_metrics(rep)})  # TensorBoard keeps float32
    text = lambda tag: {e.step: e.tensor_proto.string_val[0].decode() for e in events.Tensors(tag)}  # noqa: E731
    assert text("round/report.md/text_summary") == {r: (finished / f"round_{r}" / "report.md").read_text()
                                                    for r in (0, 1)}
    assert list(text("status/text_summary").values()) == ["finished"]
    (image,) = events.Images("run/panel_train")
    assert image.encoded_image_string == (finished / "panel_train.png").read_bytes()
    start = HParamsPluginData.FromString(events.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    hparams = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
               for k, v in start.session_start_info.hparams.items()}
    assert hparams == pytest.approx({k: float(v) if isinstance(v, (int, float)) else v  # bools as numbers too
                                     for k, v in _params(finished).items()})
    events = EventAccumulator(str(failed), size_guidance={"tensors": 0})
    events.Reload()
    (status,) = text("status/text_summary").values()
    assert status.startswith("failed: ") and ERROR in status


def test_wandb_offline_holds_the_config_every_rounds_figures_the_pages_and_the_status(runs):
    finished, failed = runs["wandb"]
    records = wandb_records(finished)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.run_group, run.display_name) == ("fedmem", "", finished.name)
    assert run.run_id == json.loads((finished / "tracker.json").read_text())["id"]
    config = {}
    for r in records:
        if r.WhichOneof("record_type") == "config":
            config |= wandb_items(r.config.update)
    assert {k: v for k, v in config.items() if not k.startswith("_")} == _params(finished)
    history = {r.history.step.num: wandb_items(r.history.item) for r in records
               if r.WhichOneof("record_type") == "history"}
    for step, report in _reports(finished).items():
        logged = {k: v for k, v in history[step].items() if not k.startswith("_")}
        assert logged == round_metrics(report)
    (exit_record,) = [r.exit for r in records if r.WhichOneof("record_type") == "exit"]
    assert exit_record.exit_code == 0
    (files,) = finished.glob("wandb/offline-run-*/files")
    for page in ("round_0/report.md", "round_1/report.html", "report.md", "summary.json", "panel_train.png"):
        assert (files / page).read_bytes() == (finished / page).read_bytes()
    records = wandb_records(failed)
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary |= wandb_items(r.summary.update)
    assert summary["status"] == "failed" and ERROR in summary["error"]
    assert [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"] == [1]


def test_a_tracker_whose_package_is_missing_is_refused_naming_the_extra(tmp_path, monkeypatch, capsys):
    from fedmem.tracking import config

    monkeypatch.setitem(config.PACKAGES, "mlflow", ("fedmem_no_such_package", "mlflow"))  # as if not installed
    with pytest.raises(SystemExit):
        main(["run", "tracker=mlflow", f"hydra.run.dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("fedmem: invalid configuration: tracker=mlflow needs the fedmem_no_such_package package: "
                       "pip install 'fedmem[mlflow]'")
    assert not (tmp_path / "run").exists()


def test_mlflow_follows_mlflow_tracking_uri_where_tracker_uri_is_unset(tmp_path, monkeypatch):
    """MLflow's own convention, which clusters set: with ``tracker.uri`` unset the run goes to
    ``$MLFLOW_TRACKING_URI``, not to ``./mlruns``; ``tracker.uri`` still wins."""
    from mlflow import MlflowClient

    from fedmem.tracking.config import TrackerConfig
    from fedmem.tracking.mlflow_backend import Backend

    store = (tmp_path / "cluster-store").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(tmp_path)
    backend = Backend(TrackerConfig(name="mlflow"), tmp_path / "run", "a run", None)
    backend.end("finished", None)
    assert backend.identity["uri"] == store and not (tmp_path / "mlruns").exists()
    assert MlflowClient(tracking_uri=store).get_run(backend.run_id).info.status == "FINISHED"
    own = (tmp_path / "own").as_uri()
    assert Backend(TrackerConfig(name="mlflow", uri=own), tmp_path / "run", "b", None).identity["uri"] == own
