"""Partitioners: natural (a column names the client), Dirichlet(alpha) over a label, IID. Seeded.

They wrap flwr-datasets' partitioners (``flwr_datasets`` is a data library, separate from the Flower framework
``flwr`` that only clients/ and server/ import) around a ``datasets.Dataset`` of row indices, and return for
every client the sorted list of row indices it owns. Every input row is owned by at most one client (exactly
one, except rows a natural partition leaves out because they belong to no client group).
"""

from __future__ import annotations

import contextlib
import io
import random
from typing import Any

import numpy as np


def _column(ds, name: str) -> list:
    """A column as a Python list through Arrow (iterating a ``Dataset`` column is a slow per-row loop)."""
    return ds.with_format("arrow")[name].to_pylist()


def _index_dataset(**columns: list):
    from datasets import Dataset

    n = len(next(iter(columns.values()))) if columns else 0
    return Dataset.from_dict({"_row": list(range(n)), **columns})


def natural(client_ids: list[Any], num_clients: int) -> list[list[int]]:
    """Rows grouped by their client id (None = left out); clients are the ids in sorted order.

    Integer ids (client-group indices) keep their order; raw column values are sorted as strings.
    """
    from flwr_datasets.partitioner import NaturalIdPartitioner

    kept = [(row, cid) for row, cid in enumerate(client_ids) if cid is not None]
    if not kept:
        raise ValueError("natural partition: no row belongs to any client group (check the client column and groups)")
    ints = all(isinstance(cid, (int, np.integer)) for _, cid in kept)
    ids = [int(cid) if ints else str(cid) for _, cid in kept]
    distinct = sorted(set(ids))
    if ints:
        missing = [g for g in range(num_clients) if g not in distinct]
        if missing:
            raise ValueError(f"natural partition: client group(s) {missing} have no rows in this dataset")
        distinct = [g for g in distinct if g < num_clients]
    elif len(distinct) != num_clients:
        shown = distinct[:8] + (["..."] if len(distinct) > 8 else [])
        raise ValueError(
            f"natural partition: the client column has {len(distinct)} distinct values {shown}, but data.num_clients "
            f"is {num_clients}; set data.num_clients={len(distinct)} or define client groups"
        )
    p = NaturalIdPartitioner(partition_by="client")
    p.dataset = _index_dataset(client=ids, src=[row for row, _ in kept])
    with contextlib.redirect_stderr(io.StringIO()):  # its per-row progress bar says nothing to a fedmem user
        _ = p.num_partitions  # builds the (lazy) partition id <-> natural id mapping
        order = {nat: pid for pid, nat in p.partition_id_to_natural_id.items()}
        return [sorted(_column(p.load_partition(order[nat]), "src")) for nat in distinct]


def dirichlet(labels: list[Any], num_clients: int, alpha: float, seed: int) -> list[list[int]]:
    """Label-skewed split: for every label, client shares drawn from Dirichlet(alpha) (flwr-datasets)."""
    from flwr_datasets.partitioner import DirichletPartitioner

    if any(x is None for x in labels):
        raise ValueError("dirichlet partition: some rows have no label")
    p = DirichletPartitioner(num_partitions=num_clients, partition_by="label", alpha=float(alpha),
                             min_partition_size=1, self_balancing=False, shuffle=True, seed=seed)
    p.dataset = _index_dataset(label=[str(x) for x in labels])
    return [sorted(_column(p.load_partition(i), "_row")) for i in range(num_clients)]


def iid(n_rows: int, num_clients: int, seed: int) -> list[list[int]]:
    """Uniformly random, equal-size split (IidPartitioner shards in order, so the rows are shuffled first)."""
    from flwr_datasets.partitioner import IidPartitioner

    if n_rows < num_clients:
        raise ValueError(f"iid partition: {n_rows} rows cannot fill {num_clients} clients")
    rows = np.random.default_rng(seed).permutation(n_rows).tolist()
    p = IidPartitioner(num_partitions=num_clients)
    p.dataset = _index_dataset(src=rows)
    return [sorted(_column(p.load_partition(i), "src")) for i in range(num_clients)]


def split_train_test(rows: list[int], n_train: int, n_test: int, rng: random.Random,
                     client: int | str) -> tuple[list[int], list[int]]:
    """A seeded sample of a client's rows: ``n_test`` test rows and ``n_train`` train rows, disjoint. A client
    that owns fewer rows than asked is an error naming both numbers (no silent shrinking of what was asked)."""
    if len(rows) < n_train + n_test:
        raise ValueError(
            f"client {client!r} owns {len(rows)} rows, fewer than data.train_per_client + data.test_per_client = "
            f"{n_train} + {n_test}: lower them"
        )
    rows = list(rows)
    rng.shuffle(rows)
    return rows[n_test : n_test + n_train], rows[:n_test]
