"""Partitioners: natural (a column names the client), Dirichlet(alpha) over a label, IID. Seeded.

They use flwr-datasets' partitioners (a plain library: fedmem's no-flwr rule is about the Flower framework,
``flwr``, not this data package) on a ``datasets.Dataset`` of row indices, and return, for every client,
the list of row indices it owns; every row is owned by exactly one client.
"""

from __future__ import annotations

import numpy as np


def _dataset(columns: dict[str, list]):
    from datasets import Dataset

    return Dataset.from_dict({"_row": list(range(len(next(iter(columns.values()))))), **columns})


def iid(n_rows: int, num_clients: int, seed: int) -> list[list[int]]:
    from flwr_datasets.partitioner import IidPartitioner

    rows = np.random.default_rng(seed).permutation(n_rows).tolist()  # IidPartitioner splits in order: shuffle first
    p = IidPartitioner(num_partitions=num_clients)
    p.dataset = _dataset({"_src": rows})
    return [list(p.load_partition(i)["_src"]) for i in range(num_clients)]


def dirichlet(labels: list, num_clients: int, alpha: float, seed: int) -> list[list[int]]:
    from flwr_datasets.partitioner import DirichletPartitioner

    p = DirichletPartitioner(num_partitions=num_clients, partition_by="label", alpha=alpha, min_partition_size=1,
                             self_balancing=False, shuffle=True, seed=seed)
    p.dataset = _dataset({"label": [str(x) for x in labels]})
    return [sorted(p.load_partition(i)["_row"]) for i in range(num_clients)]


def natural(groups: list, num_clients: int) -> list[list[int]]:
    """Rows grouped by their client value; values are mapped to clients in sorted order."""
    values = sorted({g for g in groups if g is not None}, key=str)
    if len(values) != num_clients:
        raise ValueError(f"natural partition: the data has {len(values)} client groups {values[:6]}, "
                         f"but data.num_clients is {num_clients}")
    index = {v: i for i, v in enumerate(values)}
    out: list[list[int]] = [[] for _ in range(num_clients)]
    for row, g in enumerate(groups):
        if g is not None:
            out[index[g]].append(row)
    return out
