"""MLflow: one MLflow run per fedmem run, through ``MlflowClient`` by run id (no active-run state, so any process
can continue it). The store is ``tracker.uri``, else ``$MLFLOW_TRACKING_URI`` (MLflow's own convention, which
clusters and MLflow's docs set), else a file store, ``mlruns/`` in the directory fedmem runs from:
jobs running side by side, on one machine or on a cluster's shared file system, each write their own run's
folder, with no database to lock. MLflow keeps its file store in maintenance mode and asks for
``MLFLOW_ALLOW_FILE_STORE`` to use it; fedmem sets it for a ``file:`` store only."""

from __future__ import annotations

import os
import time
from pathlib import Path

STATUS = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}


def tracking_uri(uri: str | None) -> str:
    """``tracker.uri``, else ``$MLFLOW_TRACKING_URI``, else the default file store (an absolute ``file:`` URI)."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or (Path.cwd() / "mlruns").resolve().as_uri()


class Backend:
    def __init__(self, settings, run_dir: Path, name: str, identity: dict | None):
        from mlflow import MlflowClient

        uri = identity["uri"] if identity else tracking_uri(settings.uri)  # a resumed run keeps its store
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        if identity is not None:
            self.run_id = identity["id"]
            self.client.update_run(self.run_id, status="RUNNING")  # a resumed run goes on
        else:
            experiment = f"{settings.project}/{settings.group}" if settings.group else settings.project
            tags = {"fedmem.run_dir": str(run_dir), **({"fedmem.group": settings.group} if settings.group else {})}
            self.run_id = self.client.create_run(self._experiment(experiment), run_name=name,
                                                 tags=tags).info.run_id
        self.identity = {"id": self.run_id, "uri": uri}

    def _experiment(self, name: str) -> str:
        """The experiment's id, created when missing (a sweep's jobs may create it at the same moment)."""
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except MlflowException:  # another job created it first
            return self.client.get_experiment_by_name(name).experiment_id

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def log_metrics(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in values.items()])

    def log_files(self, files: list[Path], folder: str, step: int | None) -> None:
        for path in files:
            self.client.log_artifact(self.run_id, str(path), folder or None)

    def end(self, status: str, error: str | None) -> None:
        if error:
            self.client.set_tag(self.run_id, "fedmem.error", error[:5000])
        self.client.set_terminated(self.run_id, STATUS[status])
