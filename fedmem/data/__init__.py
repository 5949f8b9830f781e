"""Data: the paper's tasks and templates, sources (synthetic, Hugging Face, local files), partitioners."""

from __future__ import annotations

import json
from pathlib import Path

from fedmem.data.config import DataConfig, TaskConfig
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.templates import TEMPLATES, format_example, format_prompt

__all__ = ["ClientSplit", "DataConfig", "FederatedData", "Record", "TaskConfig", "TEMPLATES", "format_example",
           "format_prompt", "load_federated", "write_ground_truth", "read_ground_truth"]


def load_federated(task: TaskConfig, data: DataConfig, seed: int, cache_dir: str | None = None) -> FederatedData:
    """The clients' train/test splits for ``task`` from ``data.source``; deterministic in ``seed``."""
    if data.source == "synthetic":
        if task.name != "dialog":
            raise ValueError(f"the synthetic source is in the dialog format; use task=dialog (got task={task.name})")
        from fedmem.data.synthetic import make_synthetic

        return make_synthetic(data, seed)
    from fedmem.data.sources import load_tabular

    return load_tabular(task, data, seed)


def write_ground_truth(fd: FederatedData, path) -> None:
    from fedmem.report import atomic_write_text

    atomic_write_text(path, json.dumps(fd.ground_truth, indent=2))


def read_ground_truth(path) -> dict:
    return json.loads(Path(path).read_text())
