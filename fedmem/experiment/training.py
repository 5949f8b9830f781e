"""Training, without Flower: one client's round of local training (the ClientApp's work) and the centralized
baseline, each from the global adapter, on the records as training renders them, cut at the training length."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from fedmem.config.experiment import ExperimentConfig
from fedmem.engine.model.load import adapter_state, load_adapter_state
from fedmem.engine.train import TrainingDiverged, train_local
from fedmem.experiment.auditor import training_auditor
from fedmem.experiment.loading import cached, fresh_lora_model, rendered, sequence_length
from fedmem.federation.rounds import RoundFailedError, diverged_line, diverged_metrics, update_norm
from fedmem.federation.strategies import strategy_named


def with_length(cfg: ExperimentConfig, metrics: dict, truncated: int) -> dict:
    """A training log entry with the sequence length used and how many examples it cut."""
    return {**metrics, "truncated_examples": truncated, "max_seq_len": sequence_length(cfg)}


def train_examples(cfg: ExperimentConfig, client: int | None) -> tuple[list[list[int]], int]:
    """(token ids of a client's train split cut to the training length, how many were cut); ``client=None``: the
    union of all clients, for the centralized baseline."""

    def build():
        n = sequence_length(cfg)
        ids = rendered(cfg, client)
        return [x[:n] for x in ids], sum(len(x) > n for x in ids)

    return cached("examples", cfg, build, client)


_MODELS: dict[str, object] = {}


def check_partition(cfg: ExperimentConfig, client: int) -> int:
    """A SuperNode's partition id, which must name one of the config's clients (its canary clients included)."""
    nodes = cfg.num_clients + cfg.data.audit_canary_clients
    if client >= nodes:  # e.g. `flwr run` on a federation with more supernodes than clients
        raise ValueError(f"supernode partition-id {client} but the config has {nodes} clients: run with "
                         f"num-supernodes = data.num_clients + data.audit_canary_clients ({nodes})")
    return client


def client_round(cfg: ExperimentConfig, client: int, global_state: dict, sent: dict):
    """One client's local training from the global adapter and the train config the server sent (``server-round``,
    a resumed run's ``round-offset``, and whatever the strategy sends for its term in the local loss); returns (new
    adapter, metrics). Without progress bars: from a Ray actor, each update of a bar would reach the driver's
    console as a line of its own."""
    server_round = int(sent["server-round"]) + int(sent.get("round-offset", 0))  # a resumed run's numbering
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, progress=False))
    key = cfg.hash()
    if key not in _MODELS:  # one LoRA model per process (Ray actor), re-used across rounds and clients
        _MODELS.clear()
        _MODELS[key] = fresh_lora_model(cfg)
    model, tokenizer = _MODELS[key]
    load_adapter_state(model, global_state)
    examples, truncated = train_examples(cfg, client)
    try:
        metrics = train_local(
            model,
            examples,
            cfg.train,
            seed=cfg.seed * 1_000_003 + server_round * 1_009 + client,
            pad_id=tokenizer.pad_token_id,
            local_term=strategy_named(cfg.strategy.name).local_term(cfg.strategy, sent),
            desc=f"round {server_round} client {client}",
        )
    except TrainingDiverged as e:  # said in the reply; the server averages none of it (fedmem.federation.rounds)
        return global_state, {**diverged_metrics(e), "train_loss": e.loss, "steps": 0, "clients": 1,
                              "num_examples": len(examples), "update_norm": 0.0}
    state = adapter_state(model)
    return state, {**with_length(cfg, metrics, truncated), "clients": 1, "update_norm": update_norm(state, global_state)}


def run_centralized(cfg: ExperimentConfig, start_round: int = 0) -> Path:
    """Train the same model on the union of the clients' train splits, one epoch per 'round', same hook.
    ``start_round`` > 0 continues a run after that epoch, from its saved adapter."""
    torch.set_num_threads(cfg.simulation.torch_threads)  # the clients' setting: the baseline trains like them
    auditor, state = training_auditor(cfg, "cl", start_round)
    load_adapter_state(auditor.model, state)
    model, tokenizer = auditor.model, auditor.tokenizer
    examples, truncated = train_examples(cfg, None)
    if not start_round:
        auditor.evaluate(0, adapter_state(model))
    for epoch in range(start_round + 1, cfg.strategy.num_rounds + 1):
        try:
            metrics = train_local(
                model, examples, cfg.train, seed=cfg.seed * 1_000_003 + epoch * 1_009, pad_id=tokenizer.pad_token_id,
                epochs=cfg.train.local_epochs, desc=f"centralized epoch {epoch}",
            )
        except TrainingDiverged as e:
            raise RoundFailedError(diverged_line(epoch, {"centralized": diverged_metrics(e)}, cfg.train)) from None
        metrics = with_length(cfg, metrics, truncated)
        auditor.evaluate(epoch, adapter_state(model), {"centralized": metrics})
    auditor.finish()
    return auditor.run_dir


