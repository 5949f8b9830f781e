"""``load_federated``: one entry point for every source, seeded and validated."""

from __future__ import annotations

from pathlib import Path

from fedmem.common.cache import building
from fedmem.data.audit_canaries import plant
from fedmem.data.config import DataSourceConfig, TaskConfig, check_configs
from fedmem.data.dedup import deduplicate
from fedmem.data.records import FederatedData
from fedmem.data.storage import GROUND_TRUTH_FILE, data_key, save_federated


def validate_federated(fd: FederatedData, data: DataSourceConfig) -> None:
    """Invariants every source must satisfy; a violation is a bug, reported with what broke."""
    if len(fd.clients) != data.num_clients:
        raise AssertionError(f"{len(fd.clients)} clients built, data.num_clients is {data.num_clients}")
    seen: dict[str, tuple[int, str]] = {}
    for c, split, r in fd.all_records():
        if r.client != c:
            raise AssertionError(f"record {r.id} says client {r.client} but sits in client {c}")
        if r.mem_text not in r.user:
            raise AssertionError(f"record {r.id}: the memorization text is not inside the user turn")
        if r.id in seen:
            raise AssertionError(f"record id {r.id} appears twice: {seen[r.id]} and {(c, split)}")
        seen[r.id] = (c, split)
    for c, split in enumerate(fd.clients):
        if not split.train or not split.test:
            raise AssertionError(f"client {c} has an empty train or test split")


def load_federated(task: TaskConfig, data: DataSourceConfig, seed: int, cache_dir: str | None = None) -> FederatedData:
    """The clients' train/test splits of ``task`` from ``data.source``, with the privacy audits' canaries planted
    and deduplicated as ``data.dedup`` says; deterministic in ``seed``.

    With ``cache_dir``, Hugging Face downloads are cached under ``<cache_dir>/hf-datasets`` and the result is
    saved to ``<cache_dir>/data/<source>-<hash>/`` (records.jsonl, public_corpus.jsonl, ground_truth.json),
    so later audits can be scored against the ground truth next to the data.
    """
    if not isinstance(task, TaskConfig) or not isinstance(data, DataSourceConfig):
        raise TypeError("load_federated(task: TaskConfig, data: a data source's config, seed, cache_dir)")
    check_configs(task, data)
    fd = data.load(task, seed, cache_dir)
    validate_federated(fd, data)
    fd = plant(fd, task, data, seed)  # the privacy audits' canaries, before any defense acts on the data
    fd = deduplicate(fd, data.dedup, data.dedup_threshold)
    if cache_dir:
        target = Path(cache_dir) / "data" / f"{data.source}-{data_key(task, data, seed)}"
        with building(target):
            if not (target / GROUND_TRUTH_FILE).exists():
                save_federated(fd, target)
        fd.saved_to = str(target)
    return fd
