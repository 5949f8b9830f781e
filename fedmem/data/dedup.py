"""Deduplicating each client's training data before training (``data.dedup``), the defense that removes repeated
text, which is what a model memorizes first.

Within each client separately (a client cannot see another's data): ``exact`` keeps the first record of each
memorization text (whitespace and case aside); ``near`` also drops a record whose word-shingle set has an
estimated Jaccard similarity of at least ``data.dedup_threshold`` with a record already kept (MinHash sketches,
``datasketch``; locality-sensitive hashing only proposes the candidates, each kept by its estimate). Held-out records
stay as they are: they are the audits' control, and the audit drops from it whatever is training text
(:class:`TrainedText`).
What was removed is written into the data's ground truth (``dedup``), per client, the copies of planted canaries (the
synthetic source's and the privacy audit's) counted apart.
"""

from __future__ import annotations

import dataclasses

from fedmem.data.audit_canaries import TAG as AUDIT_CANARY
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


def lsh_bands(threshold: float, miss: float = 1e-6) -> tuple[int, int]:
    """(bands, rows per band) of the MinHash LSH index: the most rows per band at which two sketches agreeing on a
    ``threshold`` share of their values still share a whole band with probability at least 1 - ``miss``. The index
    only proposes candidates; each is kept by its estimated similarity (:class:`NearIndex`), so a wide net costs a
    few comparisons, where a band tuned to the threshold would miss most pairs near it."""
    rows = 1
    while rows < NUM_PERM and (1 - threshold ** (rows + 1)) ** (NUM_PERM // (rows + 1)) <= miss:
        rows += 1
    return NUM_PERM // rows, rows


def sketch(text: str):
    """The MinHash sketch of a text's shingles (datasketch's fixed seed: the same text, the same sketch)."""
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM)
    m.update_batch([s.encode() for s in shingles(text)])
    return m


class NearIndex:
    """Texts whose estimated Jaccard similarity with a query reaches ``threshold``: MinHash LSH proposes candidates
    (banded by :func:`lsh_bands`), and a candidate counts only when its sketch's estimate reaches the threshold."""

    def __init__(self, threshold: float):
        from datasketch import MinHashLSH

        self.threshold = threshold
        self.lsh = MinHashLSH(num_perm=NUM_PERM, params=lsh_bands(threshold))
        self.sketches: dict[str, object] = {}

    def add(self, key: str, text_sketch) -> None:
        self.lsh.insert(key, text_sketch)
        self.sketches[key] = text_sketch

    def holds_near(self, text_sketch) -> bool:
        return any(text_sketch.jaccard(self.sketches[k]) >= self.threshold for k in self.lsh.query(text_sketch))


def near_duplicates(records: list[Record], threshold: float) -> list[int]:
    """Indices of records an earlier kept record resembles (estimated Jaccard similarity >= ``threshold``)."""
    index, out = NearIndex(threshold), []
    for i, r in enumerate(records):
        s = sketch(r.mem_text)
        if index.holds_near(s):
            out.append(i)
        else:
            index.add(str(i), s)
    return out


class TrainedText:
    """Whether a text is training text (SPEC §3b, "never trained on"): its normalized text is one of ``texts`` (every
    client's training texts and the public share), or, with a near-dedup ``threshold``, one of them resembles it as
    near dedup would judge."""

    def __init__(self, texts, threshold: float | None = None):
        texts = list(texts)
        self.exact = {normalized(t) for t in texts}
        self.near = None
        if threshold is not None:
            self.near = NearIndex(threshold)
            for i, t in enumerate(texts):
                self.near.add(str(i), sketch(t))

    def __contains__(self, text: str) -> bool:
        return normalized(text) in self.exact or (self.near is not None and self.near.holds_near(sketch(text)))


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
        canaries = sum("canary" in split.train[i].tags or AUDIT_CANARY in split.train[i].tags for i in drop)
        report.append({"client": c, "before": len(split.train), "removed": len(drop), "canary_copies_removed": canaries})
        clients.append(dataclasses.replace(split, train=train))
    dedup = {"mode": mode, "threshold": threshold if mode == "near" else None, "clients": report}
    return dataclasses.replace(fd, clients=clients, ground_truth={**fd.ground_truth, "dedup": dedup})
