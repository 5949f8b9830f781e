"""Hugging Face and local-file sources: table -> rendered records -> client partitions -> train/test splits."""

from __future__ import annotations

import random
from typing import Any

from fedmem.data import partition
from fedmem.data.grouping import assign_groups
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.schema import Schema, resolve_schema
from fedmem.data.seeding import rng_for
from fedmem.data.templates import one_line, render_record


def _column(ds, name: str, schema_key: str) -> list[Any]:
    """A column's values; class-label ids become their names."""
    from datasets import ClassLabel

    if name not in ds.column_names:
        raise ValueError(
            f"{schema_key}: column {name!r} not found; the data has columns {sorted(ds.column_names)} "
            f"(nested fields are reached with dots, e.g. context.contexts)"
        )
    values = ds[name]
    feature = ds.features.get(name)
    if isinstance(feature, ClassLabel):
        values = [None if v is None or v < 0 else feature.int2str(int(v)) for v in values]
    return list(values)


def canonical_label(value: Any, labels: tuple[str, ...]) -> str | None:
    """``value`` as spelled in the label set (case-insensitive; a missing plural 's' is tolerated)."""
    s = one_line(value)
    if not labels:
        return s or None
    upper = {lab.upper(): lab for lab in labels}
    key = s.upper()
    return upper.get(key) or upper.get(key + "S")


def load_tabular(task, data, seed: int, cache_dir: str | None = None) -> FederatedData:
    """The federated dataset from the task's Hugging Face dataset or from ``data.path``."""
    from fedmem.data.hub import load_table

    schema = resolve_schema(task, data)
    ds = load_table(task, data, cache_dir)
    n = ds.num_rows
    fields = {f: _column(ds, col, f"task.columns.{f}") for f, col in schema.columns.items() if f in task.fields}
    labels = (_column(ds, schema.label_column, "task.label_column") if schema.label_column else [None] * n)
    if schema.label_column:
        labels = [canonical_label(v, schema.labels) if v is not None else None for v in labels]
        if schema.labels:
            raw = _column(ds, schema.label_column, "task.label_column")
            unknown = sorted({one_line(r) for r, c in zip(raw, labels) if r is not None and c is None})
            if unknown:
                raise ValueError(f"task.labels {list(schema.labels)} does not contain the label(s) {unknown[:10]}")
    if schema.label_column and schema.labels:  # the assistant turn shows the label as the task spells it
        for f, col in schema.columns.items():
            if col == schema.label_column and f in fields:
                fields[f] = labels
    # A row is usable when its memorization text and every other field is non-empty.
    usable = [i for i in range(n) if all(one_line(vals[i]) for vals in fields.values())]
    if schema.partition == "dirichlet":
        usable = [i for i in usable if labels[i] is not None]
    dropped_empty = n - len(usable)
    if not usable:
        raise ValueError(f"no usable rows: every row has an empty field among {list(fields)}")

    if schema.partition == "natural":
        values = _column(ds, schema.client_column, "client column")
        vals = [values[i] for i in usable]
        if schema.client_groups:
            ids: list[Any] = assign_groups(vals, schema.client_groups, schema.group_by, schema.tag_separator)
            names = list(schema.client_groups)[: data.num_clients]
        else:
            ids = [one_line(v) or None for v in vals]
            names = sorted({x for x in ids if x is not None})
        parts = partition.natural(ids, data.num_clients)
    elif schema.partition == "dirichlet":
        parts = partition.dirichlet([labels[i] for i in usable], data.num_clients, task.dirichlet_alpha, seed)
        names = [f"client{j}" for j in range(data.num_clients)]
    else:
        parts = partition.iid(len(usable), data.num_clients, seed)
        names = [f"client{j}" for j in range(data.num_clients)]
    parts = [[usable[k] for k in part] for part in parts]  # back to row numbers of the table
    left_out = len(usable) - sum(len(p) for p in parts)

    clients, truth_clients = [], []
    for c, rows in enumerate(parts):
        train_rows, test_rows = partition.split_train_test(
            rows, data.train_per_client, data.test_per_client, rng_for(seed, "split", c), c
        )

        def rec(i: int) -> Record:
            return render_record(
                task.user_template, task.assistant_template, task.mem_field,
                {f: vals[i] for f, vals in fields.items()}, f"row{i}", client=c, label=labels[i],
            )

        clients.append(ClientSplit(train=[rec(i) for i in train_rows], test=[rec(i) for i in test_rows]))
        truth_clients.append({
            "client": c,
            "name": str(names[c]),
            "rows_in_partition": len(rows),
            "train_ids": [f"row{i}" for i in train_rows],
            "test_ids": [f"row{i}" for i in test_rows],
        })
    truth = {
        "source": data.source,
        "dataset": data.path or task.hf_dataset,
        "hf_config": None if data.path else task.hf_config,
        "hf_split": None if data.path else task.hf_split,
        "task": task.name,
        "seed": seed,
        "partition": schema.partition,
        "dirichlet_alpha": task.dirichlet_alpha if schema.partition == "dirichlet" else None,
        "client_column": schema.client_column if schema.partition == "natural" else None,
        "rows": n,
        "rows_dropped_empty": dropped_empty,
        "rows_in_no_client": left_out,
        "clients": truth_clients,
        "canaries": [],
        "boilerplate": [],
    }
    return FederatedData(clients=clients, public_corpus=[], ground_truth=truth, source=data.source)


__all__ = ["load_tabular", "canonical_label", "Schema"]
