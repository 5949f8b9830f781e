"""Adaptive clipping as Andrew et al. (2021) define it (SPEC §9), on Flower's real wrappers and FedAvg: the clipping
norm tracks the target quantile of the update norms, and each round's noise is scaled by the norm that clipped it.
Flower 1.42's own wrappers, run beside them on the same replies, shrink the norm under updates far above it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    FedAvg,
)
from flwr.supercore.differential_privacy import KEY_NORM_BIT
from flwr.supercore.task_identity import TaskIdentity

from server.adaptive_clipping import ClientSideAdaptiveClipping, ServerSideAdaptiveClipping

NORMS = [float(n) for n in range(1, 11)]  # ten clients' update norms, every round: the median lies in (5, 6)


@pytest.fixture(autouse=True)
def server_identity():
    """The ids a ServerApp's process has (messages are built in it); restored afterwards."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def replies(current: np.ndarray, norms: list[float], rng, clipped: list[bool] | None = None) -> list[Message]:
    """One reply per client: the current arrays plus an update of the given norm in a random direction (and, for
    client-side clipping, the clip bit its mod would have reported)."""
    out = []
    for i, norm in enumerate(norms):
        update = rng.normal(size=current.shape)
        update *= norm / np.linalg.norm(update)
        metrics = {"num-examples": 1} | ({KEY_NORM_BIT: int(clipped[i])} if clipped is not None else {})
        sent = Message(RecordDict({"arrays": ArrayRecord({"w": Array((current + update).astype(np.float64))}),
                                   "metrics": MetricRecord(metrics)}), dst_node_id=i + 1, message_type="train")
        out.append(Message(sent.content, reply_to=sent))
    return out


def server_side(cls, current: np.ndarray, initial: float, noise: float = 0.5):
    wrapper = cls(FedAvg(), noise_multiplier=noise, num_sampled_clients=len(NORMS), initial_clipping_norm=initial)
    wrapper.current_arrays = ArrayRecord({"w": Array(current)})  # what configure_train keeps of the round's model
    return wrapper


def test_the_clipping_norm_converges_to_the_target_quantile_of_the_update_norms():
    """From C = 0.01, a hundred times below every update, Andrew et al.'s rule raises C by exp(lr * gamma) a round
    while all are clipped (about 62 rounds to the median), then holds it at the median of the norms; Flower's own
    wrapper, on the same replies, drives it towards 0."""
    rng = np.random.default_rng(0)
    current = np.zeros(1000)
    ours, flowers = server_side(ServerSideAdaptiveClipping, current, 0.01), \
        server_side(DifferentialPrivacyServerSideAdaptiveClipping, current, 0.01)
    trace = {"ours": [], "flower": []}
    for t in range(1, 201):
        for name, wrapper in (("ours", ours), ("flower", flowers)):
            wrapper.aggregate_train(t, replies(current, NORMS, rng))
            trace[name].append(wrapper.clipping_norm)
    assert all(4.0 <= c <= 7.0 for c in trace["ours"][80:])  # between the 40% and 70% quantiles, from round 81 on
    assert 5.0 <= float(np.median(trace["ours"][80:])) <= 6.0
    assert trace["flower"][9] < 0.01 and trace["flower"][-1] < 1e-4  # the wrong way


def test_each_rounds_noise_is_scaled_by_the_norm_that_clipped_it():
    """Updates far below C (none clipped): after the round, C moves (Andrew et al.: down by exp(-lr (1 - gamma)),
    about 0.905). The noise on that round's average has standard deviation z_updates * C_t / m with the C_t that
    clipped it; Flower's own wrapper scales it by the norm after its update."""
    current = np.zeros(400_000)
    for cls in (ServerSideAdaptiveClipping, DifferentialPrivacyServerSideAdaptiveClipping):
        np.random.seed(1)  # Flower draws its noise from numpy's global generator
        wrapper = server_side(cls, current, initial=2.0)
        arrays, _ = wrapper.aggregate_train(1, replies(current, [1e-6] * len(NORMS), np.random.default_rng(2)))
        clipped_by = wrapper.noise_multiplier * 2.0 / len(NORMS)  # Flower's split of z between count and updates
        ratio = float(np.std(arrays.to_numpy_ndarrays()[0])) / clipped_by
        if cls is ServerSideAdaptiveClipping:
            assert wrapper.clipping_norm == pytest.approx(2.0 * math.exp(-0.2 * (1 - 0.5)), rel=0.03)
            assert ratio == pytest.approx(1.0, rel=0.01) and wrapper.round_noise_stddev == pytest.approx(clipped_by)
        else:
            assert ratio == pytest.approx(wrapper.clipping_norm / 2.0, rel=0.01) and abs(ratio - 1) > 0.05


def test_client_side_adaptive_clipping_grows_the_norm_when_every_update_was_clipped():
    """The clients' mod reports whether it clipped; with every update clipped the norm grows by exp(lr * gamma)
    (Andrew et al.), where Flower's own wrapper shrinks it by exp(-lr * (1 - gamma))."""
    rng = np.random.default_rng(3)
    current = np.zeros(100)
    grown = {}
    for cls in (ClientSideAdaptiveClipping, DifferentialPrivacyClientSideAdaptiveClipping):
        wrapper = cls(FedAvg(), noise_multiplier=0.5, num_sampled_clients=len(NORMS), initial_clipping_norm=1.0,
                      clipped_count_stddev=1e-9 + 0.5)
        wrapper.aggregate_train(1, replies(current, [1.0] * len(NORMS), rng, clipped=[True] * len(NORMS)))
        grown[cls] = wrapper.clipping_norm
    assert grown[ClientSideAdaptiveClipping] == pytest.approx(math.exp(0.2 * 0.5), rel=0.03)
    assert grown[DifferentialPrivacyClientSideAdaptiveClipping] == pytest.approx(math.exp(-0.2 * 0.5), rel=0.03)
