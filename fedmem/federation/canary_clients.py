"""Canary clients (Andrew et al., "One-shot Empirical Privacy Estimation for Federated Learning", ICLR 2024): clients
with no data whose update is a fixed random direction, sampled, clipped, averaged and noised like the real clients.

The data names k of them (``data.audit_canary_clients``, partitions ``N .. N+k-1`` after the N real clients). Canary j's
update is direction j of the run (``fedmem.engine.directions``), always the same, sent at ``SCALE`` times the clipping
norm under DP, so that the clipping that bounds a real update (on the server, or Flower's mod on the client) is what
gives it its norm C. They never train.

**Sampling.** Flower samples m of the N real clients each round, as without canaries; the canaries of the round are a
seeded draw of k m / N of the k (an integer, or the run is refused), so each is in a round with the real clients'
probability m / N.

**A release of their own.** The global model is DP-FedAvg over the real clients exactly as without canaries: the
same replies, the same noise (the round's draw of ``privacy.NOISE_STREAM``), bit for bit. The canaries enter a second
release of the round, the *canary release*, that the client-level audit reads and nothing trains on: Flower's same
wrapper averages the real replies with the round's canaries (clipping them, its noise calibrated to the m + c replies
so that the noise on the sum is z C) with a noise draw of its own (``RELEASE_STREAM``), and the server scales that
average's change by (m + c) / m (:func:`released`). It is what the round would have released had the canaries taken
part: each real update keeps its share of an average over the real clients, each canary adds its update over their
number, the noise on the real clients' average is z C / m. Given the real clients' models, which never saw a canary,
the canary releases are T rounds of the Gaussian mechanism with a client of norm C in or out, which is what the
accountant bounds; the real clients' figures (model, utility, every other audit, budget) are those of the run
without canaries. Without DP a canary counts as a client of the round's mean weight, with the norm of the round's
median real update (nothing clips it). They enter no per-client table, no participation count and no train metric.

The feature's other parts: their messages and release in Flower's round (``server/canary_clients.py``), what the run
keeps of the release (``fedmem.experiment.archive``), the estimate (``fedmem.audit.canary_clients``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fedmem.federation.privacy import sampled_clients
from fedmem.federation.rounds import EQUAL_WEIGHT_KEY, WEIGHT_KEY
from fedmem.federation.strategies import CENTRALIZED, strategy_named

if TYPE_CHECKING:
    import torch

SCALE = 10.0  # a canary is sent at 10 C: the clipping, not the canary client, gives it its norm
SAMPLING_STREAM = 11  # the seed's generator stream of the canaries' draw each round
RELEASE_STREAM = 13  # the seed's generator stream of the canary release's DP noise each round


def per_round(canary_clients: int, strategy, num_clients: int) -> int:
    """The canaries in each round: k m / N, so each is sampled with the real clients' probability."""
    return canary_clients * sampled_clients(strategy, num_clients) // num_clients


def check(canary_clients: int, strategy, defense, num_clients: int) -> None:
    """Refuse, in one line, a run whose canary clients would not be sampled, clipped and aggregated as real clients
    are, or would move the real clients' figures."""
    if not canary_clients:
        return
    if strategy.name == CENTRALIZED:
        raise ValueError("data.audit_canary_clients: the centralized baseline has no clients to sample canaries "
                         "beside; set data.audit_canary_clients=0")
    if strategy_named(strategy.name).server_optimizer:
        raise ValueError(f"data.audit_canary_clients with strategy={strategy.name}: the canary release is a second "
                         "aggregation of the round, which a server optimizer would take as a step of its own; use "
                         "fedavg or fedprox")
    if defense.active and defense.clipping == "adaptive":
        raise ValueError("data.audit_canary_clients with defense.clipping=adaptive: the canary release is a second "
                         "aggregation of the round, which would move the clipping norm the real clients get a second "
                         "time; use defense.clipping=fixed")
    m = sampled_clients(strategy, num_clients)
    if canary_clients * m % num_clients:
        raise ValueError(f"data.audit_canary_clients={canary_clients}: each round samples {m} of {num_clients} "
                         f"clients, so the canaries' share k m / N must be whole; use a multiple of "
                         f"{num_clients // np.gcd(m, num_clients)}")


def is_canary(partition: int, num_clients: int) -> bool:
    return partition >= num_clients


def drawn(seed: int, server_round: int, canary_clients: int, count: int) -> list[int]:
    """The canaries (indices 0..k-1) of round ``server_round``: ``count`` of them, drawn without replacement."""
    rng = np.random.default_rng([seed, SAMPLING_STREAM, server_round])
    return sorted(int(j) for j in rng.choice(canary_clients, size=count, replace=False))


def update(global_state: dict[str, torch.Tensor], index: int, seed: int, norm: float) -> dict[str, torch.Tensor]:
    """Canary ``index``'s reply: the global adapter plus ``norm`` times its direction."""
    from fedmem.engine.directions import as_state, unit_direction

    step = as_state(norm * unit_direction(seed, index, sum(t.numel() for t in global_state.values())), global_state)
    return {k: global_state[k] + step[k] for k in global_state}


def reply(global_state: dict[str, torch.Tensor], partition: int, num_clients: int, seed: int, defense
          ) -> tuple[dict[str, torch.Tensor], dict]:
    """(adapter, train metrics) a canary client sends: its direction at :func:`sent_norm`, with the weight of one
    client (the server sets its weight without DP); its partition id tells the server it is a canary."""
    metrics = {"partition_id": partition, EQUAL_WEIGHT_KEY: 1, WEIGHT_KEY: 1}
    return update(global_state, partition - num_clients, seed, sent_norm(defense)), metrics


def sent_norm(defense) -> float:
    """The norm a canary client sends its direction at: past the clipping norm under DP (the clipping gives it C),
    one without (the server gives it the round's median real update norm, :func:`with_norm`)."""
    return SCALE * defense.clipping_norm if defense.active else 1.0


def with_norm(reply: list[np.ndarray], current: list[np.ndarray], norm: float) -> list[np.ndarray]:
    """A canary's reply with its change from ``current`` set to ``norm`` (no DP: nothing else bounds it)."""
    change = [a - b for a, b in zip(reply, current)]
    scale = norm / float(np.sqrt(sum(float(np.square(c, dtype=np.float64).sum()) for c in change)))
    return [b + (c * scale).astype(b.dtype) for b, c in zip(current, change)]


def release_scale(defense, clipping_norm: float | None, sampled: int, real: int, canaries: int) -> dict:
    """The canary release's scale, in the units of its change from the round's global model: the noise's standard
    deviation per weight (Flower's z C / (m + c) on the average of the m + c sampled replies, times the (real + c) /
    real of :func:`released`) and one canary's norm in it (C / real); their ratio is the noise multiplier of the
    Gaussian mechanism that puts one canary in or out. Without DP there is no noise and no fixed norm."""
    if not defense.active or clipping_norm is None:
        return {"noise_sd": 0.0, "canary_norm": None, "multiplier": None}
    noise_sd = defense.noise_multiplier * clipping_norm / (sampled + canaries) * (real + canaries) / real
    canary_norm = clipping_norm / real
    return {"noise_sd": noise_sd, "canary_norm": canary_norm, "multiplier": noise_sd / canary_norm}


def released(current: list[np.ndarray], averaged: list[np.ndarray], real: int, canaries: int) -> list[np.ndarray]:
    """The round's canary release from Flower's average of ``real`` + ``canaries`` replies: its change from
    ``current`` scaled by (real + canaries) / real, so each real update keeps its share of an average over the real
    clients and each canary adds its update over their number."""
    factor = (real + canaries) / real
    return [b + ((a.astype(np.float64) - b) * factor).astype(b.dtype) for a, b in zip(averaged, current)]
