"""Hugging Face and local-file sources for the paper's four tasks.

Both go through ``datasets.load_dataset``: a hub id (online) or the ``json`` / ``csv`` / ``parquet`` builder on
a local file in the same schema (offline, and what the tests exercise). Columns may be dotted paths into
nested fields (PubMedQA's ``context.contexts``); list values are joined with spaces.
"""

from __future__ import annotations

import random
from pathlib import Path

from fedmem.data import partition
from fedmem.data.records import ClientSplit, FederatedData
from fedmem.data.templates import TEMPLATES, render

BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def _get(row: dict, path: str):
    value = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return value


def load_rows(task, data) -> list[dict]:
    """All rows of the configured dataset, as plain dicts."""
    import datasets

    if data.path:
        path = Path(data.path)
        builder = BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise ValueError(f"data.path must end in one of {sorted(BUILDERS)}, got {path.name!r}")
        if not path.exists():
            raise ValueError(f"data.path {str(path)!r} does not exist")
        ds = datasets.load_dataset(builder, data_files=str(path), split="train")
    else:
        if not task.hf_dataset:
            raise ValueError(f"task {task.name!r} names no hf_dataset; set data.path to a local file")
        try:
            ds = datasets.load_dataset(task.hf_dataset, task.hf_config, split=task.hf_split)
        except Exception as e:  # the hub is unreachable offline: say what to do instead
            raise RuntimeError(
                f"could not load the Hugging Face dataset {task.hf_dataset!r} ({type(e).__name__}). Without "
                f"network access, download it elsewhere and point data.path to a .jsonl/.csv/.parquet file with "
                f"the same columns."
            ) from None
    return [dict(r) for r in ds]


def _client_of(task, row: dict) -> object:
    value = _get(row, task.client_column)
    if not task.client_groups:
        return value
    text = str(value or "").lower()
    for client, keys in sorted(task.client_groups.items(), key=lambda kv: int(kv[0])):
        if any(k.lower() in text for k in keys):
            return int(client)
    return None  # in no group: not used (documented in the task YAML)


def load_tabular(task, data, seed: int) -> FederatedData:
    rows = load_rows(task, data)
    fields = {f: task.columns.get(f, f) for f in _template_fields(task.name)}
    missing = [col for col in fields.values() if rows and _get(rows[0], col) is None]
    if missing:
        raise ValueError(f"task {task.name!r}: column(s) {missing} not found; columns are {sorted(rows[0])}")
    if task.partition == "natural":
        if not task.client_column:
            raise ValueError("task.partition=natural needs task.client_column")
        parts = partition.natural([_client_of(task, r) for r in rows], data.num_clients)
    elif task.partition == "dirichlet":
        parts = partition.dirichlet([_get(r, task.label_column) for r in rows], data.num_clients,
                                    task.dirichlet_alpha, seed)
    else:
        parts = partition.iid(len(rows), data.num_clients, seed)
    rng = random.Random(seed)
    clients = []
    for c, idx in enumerate(parts):
        idx = list(idx)
        rng.shuffle(idx)
        test_idx, train_idx = idx[: data.test_per_client], idx[data.test_per_client:][: data.train_per_client]
        if not train_idx:
            raise ValueError(f"client {c} has no training rows after the split ({len(idx)} rows in its partition)")

        def rec(i: int, split: str):
            row = rows[i]
            label = str(_get(row, task.label_column)) if task.label_column else None
            values = {f: "" if _get(row, col) is None else str(_get(row, col)) for f, col in fields.items()}
            return render(task.name, values, f"c{c}-{split}-{i}", c, label)

        clients.append(ClientSplit([rec(i, "train") for i in train_idx], [rec(i, "test") for i in test_idx]))
    return FederatedData(clients, [], {"source": task.hf_dataset or str(data.path)}, data.source)


def _template_fields(task: str) -> list[str]:
    import string

    t = TEMPLATES[task]
    return sorted({f for s in (t.user, t.assistant) for _, f, _, _ in string.Formatter().parse(s) if f})
