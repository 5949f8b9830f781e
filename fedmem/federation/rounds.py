"""The rules of a federated round, as plain functions the ServerApp calls: which replies count, when a round
fails, who took part, how the clients' train metrics combine, and the Flower strategy's keyword arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedmem.federation.strategies import strategy_named

if TYPE_CHECKING:
    import torch

WEIGHT_KEY = "num_examples"  # a client's share of the average (FedAvg's weighting), sent in its train metrics
EQUAL_WEIGHT_KEY = "clients"  # 1 from every client: DP-FedAvg's equal weights (the noise is calibrated to them)
COUNTS = ("steps", "num_examples", "truncated_examples", EQUAL_WEIGHT_KEY)  # the round's totals
MAXIMA = ("max_seq_len", "update_norm")  # the round's largest
NOT_AGGREGATED = ("partition_id",)  # an id, not a figure


class RoundFailedError(RuntimeError):
    """Fewer clients trained than the round needs, or a client's training diverged: its aggregate must not pass as a
    trained round."""


DIVERGED = ("the loss", "the gradient's norm", "the weights")  # what became non-finite, by its code in a reply


def diverged_metrics(e) -> dict:
    """A reply's metrics for a client whose local training diverged (``fedmem.engine.train.TrainingDiverged``):
    numbers only, as Flower's metric records take them."""
    return {"diverged_step": e.step, "diverged_loss": float(e.loss), "diverged_what": DIVERGED.index(e.what),
            "diverged_untrained": int(e.untrained)}


def diverged_line(server_round: int, rows: dict, train) -> str | None:
    """The one line that fails a round whose clients' training diverged (``rows``: {client: metrics}), naming each
    with its step and what became non-finite, and the settings that govern it with their values; None when none
    did. A client given a model whose very first loss is not finite (a global model the noise destroyed, which the
    audit records as degenerate) trained nothing: it sent that model back unchanged, an update of 0, and the round
    goes on."""
    bad = {c: m for c, m in rows.items() if m.get("diverged_step") is not None and not m.get("diverged_untrained")}
    if not bad:
        return None
    def what(m: dict) -> str:
        loss = f"loss {m['diverged_loss']:.4g}"
        return loss if int(m["diverged_what"]) == 0 else f"{DIVERGED[int(m['diverged_what'])]} not finite, {loss}"

    where = "; ".join(f"{'the centralized baseline' if c == 'centralized' else f'client {c}'} at step "
                      f"{int(m['diverged_step'])} ({what(m)})" for c, m in sorted(bad.items(), key=lambda kv: str(kv[0])))
    clip = f"train.max_grad_norm={train.max_grad_norm:g}" if train.max_grad_norm > 0 else \
        "train.max_grad_norm=0 (no clipping)"
    return (f"round {server_round}: training diverged, {where}; nothing of it was averaged. Lower train.lr (now "
            f"{train.lr:g}) or clip the gradient ({clip})")


@dataclass(frozen=True)
class Reply:
    """One sampled client's reply as the server received it: its node, and either its partition id and train
    metrics or the error it sent."""

    node: int
    partition: int | None = None
    metrics: dict | None = None
    error: str | None = None


def last_line(reason: str) -> str:
    """The exception line at the end of a client's error (Ray sends the whole remote traceback)."""
    lines = [x.strip() for x in str(reason).splitlines() if x.strip()]
    return lines[-1] if lines else "no detail"


def aggregate_train_metrics(rows: list[dict], weight_key: str = WEIGHT_KEY) -> dict:
    """The round's train metrics over its clients: counts summed, the training length and the update norm the
    largest, the loss and any other figure weighted by the clients' examples; the partition id left out."""
    out = {}
    for key in dict.fromkeys(k for row in rows for k in row):
        if key in NOT_AGGREGATED:
            continue
        values = [(row[key], float(row[weight_key])) for row in rows if key in row]
        if key in COUNTS:
            out[key] = int(sum(v for v, _ in values))
        elif key in MAXIMA:
            out[key] = max(v for v, _ in values)
        else:
            out[key] = sum(float(v) * w for v, w in values) / (sum(w for _, w in values) or 1.0)
    return out


def participation(server_round: int, sampled: int, replies: list[Reply], min_trained: int | None) -> dict:
    """Who took part in a round: sampled, trained (partition ids, in client order), failed (node and error) and no
    reply. A round counts only if at least ``min_trained`` clients (None: every sampled one) trained; otherwise
    RoundFailedError names the failing clients and their errors."""
    trained = sorted(r.partition for r in replies if r.error is None)
    failed = [{"node": r.node, "error": r.error} for r in replies if r.error is not None]
    no_reply = sampled - len(trained) - len(failed)
    need = min_trained or sampled
    if len(trained) < need:
        errors = "; ".join(f"node {f['node']}: {f['error']}" for f in failed) or "no error reported"
        raise RoundFailedError(
            f"round {server_round}: {len(trained)} of {sampled} sampled clients trained (clients {trained}), "
            f"strategy.min_trained_clients needs {need}; {len(failed)} failed, {no_reply} sent no reply ({errors})")
    return {"sampled": sampled, "trained": trained, "failed": failed, "no_reply": no_reply}


def update_norm(state: dict[str, torch.Tensor], start: dict[str, torch.Tensor]) -> float:
    """The L2 norm of a client's update, its adapter minus the global adapter it started from (what DP clips)."""
    import torch

    return float(torch.sqrt(sum(((state[k].double() - start[k].double()) ** 2).sum() for k in state)))


def flower_strategy(settings, num_clients: int, equal_weights: bool = False) -> tuple[str, str, dict]:
    """(module, class name, keyword arguments) of the Flower strategy ``settings`` (``strategy.*``) names: a class of
    ``flwr.serverapp.strategy``, or ``module:Class``; the arguments every strategy shares plus its own.
    ``equal_weights``: every client's update counts the same (DP-FedAvg), not by its examples."""
    spec = strategy_named(settings.name)
    module, _, cls = spec.flower_class.rpartition(":") if ":" in spec.flower_class else (
        "flwr.serverapp.strategy", "", spec.flower_class)
    shared = dict(
        fraction_train=settings.fraction_train,
        fraction_evaluate=0.0,  # utility and audits run centrally on the global model (evaluate_fn)
        min_train_nodes=settings.min_train_nodes,
        # a round starts once this many nodes are connected: with a lower minimum, the run goes on without lost nodes
        min_available_nodes=settings.min_trained_clients or num_clients,
        weighted_by_key=EQUAL_WEIGHT_KEY if equal_weights else WEIGHT_KEY,
    )
    return module, cls, {**shared, **spec.arguments(settings)}
