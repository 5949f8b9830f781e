"""The data model shared by every source: a record, a client's splits, the federated dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Record:
    """One rendered sample.

    ``user`` is the Table-6 user turn with the task template applied (SPEC §2), ``assistant`` the assistant turn,
    ``mem_text`` the memorization text (abstract / patient / context / passage); it appears verbatim in ``user``.
    ``tags`` carries synthetic ground truth: ``{"canary": id, "copies": n}`` on canary copies,
    ``{"generic": True, "boilerplate": id}`` on records ending in shared boilerplate, ``{}`` otherwise.
    """

    id: str
    user: str
    assistant: str
    mem_text: str
    client: int | None = None
    label: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClientSplit:
    train: list[Record]
    test: list[Record]


@dataclass
class FederatedData:
    """The clients' splits plus what the rest of fedmem needs next to them.

    ``public_corpus`` is text disjoint from every client's private data (the lead trains the tiny tokenizer and
    pretrains the tiny base model on it); it is empty for the Hugging Face and local sources. ``ground_truth``
    describes the split (and, for the synthetic source, every planted canary and boilerplate); it is JSON-able.
    ``saved_to`` is the directory holding ``records.jsonl`` and ``ground_truth.json`` when ``load_federated``
    was given a cache directory.
    """

    clients: list[ClientSplit]
    public_corpus: list[str]
    ground_truth: dict[str, Any]
    source: str
    saved_to: str | None = None

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    def all_records(self):
        """(client, split, record) for every record, clients in order, train before test."""
        for c, split in enumerate(self.clients):
            for r in split.train:
                yield c, "train", r
            for r in split.test:
                yield c, "test", r
