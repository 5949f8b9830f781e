"""Weights & Biases: one W&B run per fedmem run, its files under ``<run>/wandb/``. Offline unless the user set W&B
up (``WANDB_MODE=online`` after ``wandb login``): an offline run contacts no server, and ``wandb sync
<run>/wandb/offline-run-*`` uploads it later. A sweep's jobs share a W&B group. The round and run pages and plots
are the run's files (``round_<r>/...``), the status its exit code (0 finished, 1 failed, 130 stopped) and the
``status`` summary value."""

from __future__ import annotations

import os
from pathlib import Path

EXIT = {"finished": 0, "failed": 1, "stopped": 130}


class Backend:
    def __init__(self, settings, run_dir: Path, name: str, identity: dict | None):
        import wandb

        self.run_dir = run_dir
        self.run = wandb.init(
            dir=str(run_dir), project=settings.project, group=settings.group, name=name,
            id=identity["id"] if identity else None, resume="allow" if identity else None,
            mode=os.environ.get("WANDB_MODE") or "offline",
            settings=wandb.Settings(console="off", silent=True),  # fedmem's own console lines stay as they are
            reinit="create_new")
        self.identity = {"id": self.run.id}

    def log_params(self, params: dict) -> None:
        self.run.config.update(params, allow_val_change=True)

    def log_metrics(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def log_files(self, files: list[Path], folder: str, step: int | None) -> None:
        for path in files:
            self.run.save(str(path), base_path=str(self.run_dir), policy="now")

    def end(self, status: str, error: str | None) -> None:
        self.run.summary["status"] = status
        if error:
            self.run.summary["error"] = error
        self.run.finish(exit_code=EXIT[status])
