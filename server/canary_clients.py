"""The canary clients in Flower's round (docs/spec.md §10): which nodes serve them, their messages, their replies'
share of the release. The rules are ``fedmem.federation.canary_clients``'; this file applies them to Flower's messages,
``server_app.Recording`` runs them in the round, and ``fedmem.audit.canary_clients`` reads what the run keeps.

A node's partition is known only to the node, so the server asks every node once (a ``query`` message the ClientApp
answers with its partition id) before the first round. Flower's strategy then samples among the real clients' nodes
only (the grid it is handed lists no other), exactly as it would without canaries, and the round's canaries get the
same message as the real clients (the clipping norm included, for Flower's client-side clipping mod).
"""

from __future__ import annotations

import time

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MessageType, MetricRecord, RecordDict

from fedmem.config import ExperimentConfig
from fedmem.federation import canary_clients as rules
from fedmem.federation.rounds import WEIGHT_KEY


def is_canary_reply(message: Message, num_clients: int) -> bool:
    return not message.has_error() and rules.is_canary(int(message.content["metrics"]["partition_id"]), num_clients)


def _record(like: ArrayRecord, arrays: list[np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(like.keys(), arrays, strict=True)})


class RealNodes:
    """A grid that lists the real clients' nodes only: what Flower's strategy samples from."""

    def __init__(self, grid, nodes: set[int]):
        self.grid, self.nodes = grid, nodes

    def get_node_ids(self):
        return [n for n in self.grid.get_node_ids() if n in self.nodes]

    def __getattr__(self, name):
        return getattr(self.grid, name)


class CanaryClients:
    """The run's canary clients on the server: their nodes, their messages each round, their share of the release."""

    def __init__(self, cfg: ExperimentConfig):
        self.cfg = cfg
        self.count = cfg.data.audit_canary_clients
        self.per_round = rules.per_round(self.count, cfg.strategy, cfg.num_clients)
        self.partitions: dict[int, int] | None = None  # node -> partition, asked once

    def real_nodes(self, grid) -> RealNodes:
        """The grid without the canary clients' nodes, once every node has said its partition."""
        if self.partitions is None:
            wanted = self.cfg.num_clients + self.count
            while len(nodes := list(grid.get_node_ids())) < wanted:
                time.sleep(1)
            asks = [Message(RecordDict(), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes]
            replies = list(grid.send_and_receive(asks, timeout=self.cfg.strategy.round_timeout))
            self.partitions = {int(r.metadata.src_node_id): int(r.content["metrics"]["partition_id"])
                               for r in replies if not r.has_error()}
            if len(self.partitions) < len(nodes):
                raise RuntimeError(f"only {len(self.partitions)} of {len(nodes)} nodes said which partition they serve")
        return RealNodes(grid, {n for n, p in self.partitions.items() if not rules.is_canary(p, self.cfg.num_clients)})

    def messages(self, run_round: int, sent: list[Message]) -> list[Message]:
        """The round's canaries' messages: the content the real clients got, to the nodes of the canaries drawn."""
        node = {p - self.cfg.num_clients: n for n, p in self.partitions.items()
                if rules.is_canary(p, self.cfg.num_clients)}
        content = sent[0].content
        return [Message(content=content, dst_node_id=node[j], message_type=MessageType.TRAIN)
                for j in rules.drawn(self.cfg.seed, run_round, self.count, self.per_round)]

    def prepared(self, replies: list[Message], real: list[Message], current: ArrayRecord) -> list[Message]:
        """The canaries' replies as Flower should average them, with the real replies' metric keys (Flower averages
        only replies whose metrics have the same keys; no canary's enters a train metric). Under DP as sent: Flower's
        clipping bounds them and every reply weighs one. Without DP each gets the round's median real update norm
        and the real clients' mean weight, which nothing else would give it."""
        if not real:
            return replies
        rows = [dict(r.content["metrics"]) for r in real]
        weight = float(np.mean([row[WEIGHT_KEY] for row in rows]))
        norm, base = float(np.median([row["update_norm"] for row in rows])), current.to_numpy_ndarrays()
        for r in replies:
            mine = dict(r.content["metrics"])
            r.content["metrics"] = MetricRecord({**rows[0], **mine, **({} if self.cfg.defense.active else
                                                                      {WEIGHT_KEY: weight})})
            if not self.cfg.defense.active:
                sent = r.content["arrays"]
                r.content["arrays"] = _record(sent, rules.with_norm(sent.to_numpy_ndarrays(), base, norm))
        return replies

    @staticmethod
    def released(averaged: ArrayRecord | None, current: ArrayRecord, real: int, canaries: int) -> ArrayRecord | None:
        """Flower's average of real + canary replies, as the round releases it (``rules.released``)."""
        if averaged is None or not canaries or not real:
            return averaged
        return _record(averaged, rules.released(current.to_numpy_ndarrays(), averaged.to_numpy_ndarrays(), real,
                                                canaries))
