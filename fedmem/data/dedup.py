"""Deduplicating each client's training data before training (``data.dedup``), the defense that removes repeated
text, which is what a model memorizes first.

Within each client separately (a client cannot see another's data): ``exact`` keeps the first record of each
memorization text (whitespace and case aside); ``near`` also drops a record whose word-shingle set has an
estimated Jaccard similarity of at least ``data.dedup_threshold`` with a record already kept (MinHash with
locality-sensitive hashing, ``datasketch``). Held-out records stay as they are: they are the audits' control.
What was removed is written into the data's ground truth (``dedup``), per client, canary copies counted apart.
"""

from __future__ import annotations

import dataclasses

from fedmem.data.records import FederatedData, Record

SHINGLE_WORDS = 5  # word 5-grams: long enough that two unrelated texts share few, short enough to survive an edit
NUM_PERM = 128  # MinHash permutations: the estimate's standard error is about 0.03 at Jaccard 0.8


def normalized(text: str) -> str:
    return " ".join(text.lower().split())


def shingles(text: str, size: int = SHINGLE_WORDS) -> set[str]:
    """The text's word ``size``-grams (the whole text for a shorter one)."""
    words = normalized(text).split()
    return {" ".join(words[i:i + size]) for i in range(max(len(words) - size + 1, 1))}


def exact_duplicates(records: list[Record]) -> list[int]:
    """Indices of records whose memorization text an earlier record already has."""
    seen, out = set(), []
    for i, r in enumerate(records):
        key = normalized(r.mem_text)
        if key in seen:
            out.append(i)
        seen.add(key)
    return out


def near_duplicates(records: list[Record], threshold: float) -> list[int]:
    """Indices of records an earlier kept record resembles (estimated Jaccard similarity >= ``threshold``)."""
    from datasketch import MinHash, MinHashLSH

    index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    out = []
    for i, r in enumerate(records):
        sketch = MinHash(num_perm=NUM_PERM)  # a fixed seed: the same records give the same decisions
        sketch.update_batch([s.encode() for s in shingles(r.mem_text)])
        if index.query(sketch):
            out.append(i)
        else:
            index.insert(str(i), sketch)
    return out


def deduplicate(fd: FederatedData, mode: str, threshold: float) -> FederatedData:
    """``fd`` with duplicates removed from each client's training split (``mode``: off, exact or near), and what
    was removed under ``ground_truth["dedup"]``."""
    if mode == "off":
        return fd
    clients, report = [], []
    for c, split in enumerate(fd.clients):
        # an exact duplicate has the same shingles, hence the same sketch: near finds it among the near ones
        drop = set(exact_duplicates(split.train) if mode == "exact" else near_duplicates(split.train, threshold))
        train = [r for i, r in enumerate(split.train) if i not in drop]
        canaries = sum("canary" in split.train[i].tags for i in drop)
        report.append({"client": c, "before": len(split.train), "removed": len(drop), "canary_copies_removed": canaries})
        clients.append(dataclasses.replace(split, train=train))
    dedup = {"mode": mode, "threshold": threshold if mode == "near" else None, "clients": report}
    return dataclasses.replace(fd, clients=clients, ground_truth={**fd.ground_truth, "dedup": dedup})
