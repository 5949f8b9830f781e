"""One fedmem run in a tracker: opened when the run starts (its resolved config as parameters), fed each audited
round (figures as metrics at step = round, the round's pages and plots as files) and the run's pages at the end,
and closed with the status its ``status.json`` ends with.

A run is trained in one process and audited by the ServerApp, which ``fedmem run`` hosts in the same process and
``flwr run`` in another; a resumed run continues in a new process. So the tracker's own run id is kept in the run
directory (``tracker.json``): whichever process touches the run continues the same tracker run, and within a
process every caller shares one open tracker per run directory.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from fedmem.common.fields import config_leaves
from fedmem.common.io import atomic_write_json
from fedmem.reports.pages import RUN_FIGURES, declared_headlines, headline

IDENTITY = "tracker.json"  # {"name": tracker, "id": its run id, ...}: the same tracker run from any process
ROUND_PAGES = ("report.json", "report.md", "report.html")
RUN_PAGES = ("report.md", "report.html", "summary.json", "config.yaml")
# status.json's last word -> the tracker's; a run still "running" when closed ended without saying so
ENDED = {"finished": "finished", "failed": "failed", "stopped": "stopped", "running": "failed"}
BACKENDS = {"mlflow": "fedmem.tracking.mlflow_backend", "tensorboard": "fedmem.tracking.tensorboard_backend",
            "wandb": "fedmem.tracking.wandb_backend"}


def round_metrics(report: dict) -> dict[str, float]:
    """A round report's figures for a tracker: every figure the methods declare, as ``<method>/<key>``, with its
    95% interval's bounds as ``<method>/<key>_ci95_lo`` and ``_hi``, then the run's own (mean train loss, ε)."""
    out: dict[str, float] = {}
    for name, figure, h in declared_headlines(report):
        key = f"{name}/{figure.key}"
        out[key] = float(h[figure.key])
        ci = h.get(figure.ci) if figure.ci else None
        if ci and all(isinstance(b, (int, float)) for b in ci):
            out[f"{key}_ci95_lo"], out[f"{key}_ci95_hi"] = float(ci[0]), float(ci[1])
        if figure.mde and isinstance(h.get(figure.mde_key), (int, float)):
            out[f"{key}_mde"] = float(h[figure.mde_key])
    own = headline(report)
    return out | {k: v for k, v in own.items() if k == "train/train_loss" or k in RUN_FIGURES}


def parameters(config: dict) -> dict[str, Any]:
    """The resolved config as flat parameters (``train.lr``), every value a number, a bool or text."""
    return {k: v if isinstance(v, (int, float, str, bool)) else json.dumps(v)
            for k, v in config_leaves(config).items()}


def pages(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """The pages of a round or run directory that exist, then its plots."""
    return [folder / n for n in names if (folder / n).is_file()] + sorted(folder.glob("*.png"))


class RunTracker:
    """A fedmem run as one run of the chosen tracker (``backend``: one of ``BACKENDS``' modules' ``Backend``)."""

    def __init__(self, run_dir: Path, backend):
        self.run_dir, self.backend = run_dir, backend

    def round(self, report: dict, out: Path) -> None:
        """An audited round: its figures at step = round, its pages and plots under ``round_<r>/``."""
        step = int(report["round"])
        self.backend.log_metrics(round_metrics(report), step)
        self.backend.log_files(pages(out, ROUND_PAGES), f"round_{step}", step)

    def finish(self) -> None:
        """The run's pages, ``summary.json`` and plots (the run page is written)."""
        self.backend.log_files(pages(self.run_dir, RUN_PAGES), "", None)

    def close(self) -> None:
        """End the tracker's run with the status ``status.json`` ends with (finished, failed, stopped)."""
        _OPEN.pop(str(self.run_dir), None)
        status_file = self.run_dir / "status.json"
        status = json.loads(status_file.read_text()) if status_file.is_file() else {"status": "running"}
        self.backend.end(ENDED.get(status.get("status"), "failed"), status.get("error"))


class NoTracker(RunTracker):
    """``tracker=none``: nothing is sent anywhere."""

    def __init__(self):
        super().__init__(Path(), None)

    def round(self, report: dict, out: Path) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass


NO_TRACKER = NoTracker()
_OPEN: dict[str, RunTracker] = {}  # run directory -> this process's open tracker of it


def run_tracker(cfg) -> RunTracker:
    """The tracker run of ``cfg``'s run (an ``ExperimentConfig``, its config written): this process's open one, or
    the one ``tracker.json`` names (a resumed run, another process), or a new one with the config as parameters."""
    settings = cfg.tracker
    if settings.name == "none":
        return NO_TRACKER
    run_dir = Path(cfg.run_dir).resolve()
    if str(run_dir) in _OPEN:
        return _OPEN[str(run_dir)]
    saved = run_dir / IDENTITY
    identity = json.loads(saved.read_text()) if saved.is_file() else None
    if identity is not None and identity.get("name") != settings.name:
        identity = None  # the run was tracked elsewhere before: a new run in this tracker
    name = f"{settings.group}/{run_dir.name}" if settings.group else run_dir.name
    backend = importlib.import_module(BACKENDS[settings.name]).Backend(settings, run_dir, name, identity)
    if identity is None:
        atomic_write_json(saved, {"name": settings.name, **backend.identity})
        backend.log_params(parameters(cfg.to_dict()))
    _OPEN[str(run_dir)] = tracker = RunTracker(run_dir, backend)
    return tracker
