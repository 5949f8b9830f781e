"""The tracker's settings (``tracker=none|mlflow|tensorboard|wandb``, ``tracker.*``) and what each tracker needs
installed."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Literal

from fedmem.common.fields import check_fields, option

# tracker: (the module it imports, the fedmem extra that installs it)
PACKAGES = {"mlflow": ("mlflow", "mlflow"), "tensorboard": ("tensorboard", "tensorboard"),
            "wandb": ("wandb", "wandb")}


@dataclass
class TrackerConfig:
    """Where a run's figures go besides its own reports: an experiment tracker, one run per fedmem run."""

    name: Literal["none", "mlflow", "tensorboard", "wandb"] = option(
        "none", "the experiment tracker that also receives the resolved config, every round's declared figures with "
                "their 95% interval bounds (step = round), the round and run pages with their plots, and the run's "
                "final status: none, mlflow (tracker.uri, $MLFLOW_TRACKING_URI, or a local file store), tensorboard "
                "(event files in the run directory), wandb (offline unless WANDB_MODE says otherwise)")
    uri: str | None = option(
        None, "MLflow's tracking URI (http://host:5000, sqlite:///mlflow.db, file:/path); None = $MLFLOW_TRACKING_URI "
              "where it is set, else a file store, mlruns/ in the directory fedmem runs from")
    project: str = option("fedmem", "the MLflow experiment or W&B project of a run outside a sweep")
    group: str | None = option(
        None, "the runs' group: a W&B group, and the MLflow experiment <project>/<group>; a sweep (fedmem run -m) "
              "sets it to its directory's name, so that its jobs land together")

    def __post_init__(self):
        check_fields(self, "tracker")
        if self.uri is not None and self.name != "mlflow":
            raise ValueError(f"tracker.uri is MLflow's tracking URI, not used by tracker={self.name}")
        if not self.project.strip() or (self.group is not None and not self.group.strip()):
            raise ValueError("tracker.project and tracker.group must not be empty")


def check_installed(settings: TrackerConfig) -> None:
    """Refuse a tracker whose package is not installed, in one line naming the extra that installs it (checked
    before a run starts, not when a saved config is read: a re-audit never tracks)."""
    if settings.name in PACKAGES:
        module, extra = PACKAGES[settings.name]
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"tracker={settings.name} needs the {module} package: pip install 'fedmem[{extra}]'")
