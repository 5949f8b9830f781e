"""The data model shared by every source: a record, a client's splits, the federated dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Record:
    """One rendered sample. ``mem_text`` (the memorization text, SPEC §2) appears verbatim inside ``user``."""

    id: str
    user: str
    assistant: str
    mem_text: str
    client: int | None = None
    label: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)  # synthetic ground truth: canary / generic


@dataclass
class ClientSplit:
    train: list[Record]
    test: list[Record]


@dataclass
class FederatedData:
    clients: list[ClientSplit]
    public_corpus: list[str]  # disjoint from every client's data; trains the tiny tokenizer and prior
    ground_truth: dict[str, Any]
    source: str
