"""What a process of an experiment needs, without Flower: the data and models (loaded once per process), a
client's round of local training, the auditor, and the centralized baseline. ``clients/`` and ``server/`` are
thin Flower wrappers around these functions.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
from pathlib import Path

import torch
from safetensors.torch import load_file

from fedmem.audit import AUDIT_METHODS
from fedmem.config.experiment import ExperimentConfig, method_configs
from fedmem.data import load_federated
from fedmem.engine.model.gguf import gguf_identity
from fedmem.engine.model.load import (
    adapter_state,
    device,
    load_adapter_state,
    load_base,
    wrap_lora,
)
from fedmem.engine.train import tokenize_examples, train_local
from fedmem.experiment.auditor import Auditor, audit_pool
from fedmem.federation.rounds import update_norm
from fedmem.federation.strategies import CENTRALIZED, strategy_named

_CACHE: dict[tuple, object] = {}


# What each cached object depends on: audits with other settings over the same data reuse the data and models.
_DEPENDS = {"data": ("task", "data"), "base": ("task", "data", "model"), "examples": ("task", "data", "model"),
            "rendered": ("task", "data", "model"), "seq_len": ("task", "data", "model"),
            "pool": ("task", "data", "model", "audit")}


def _cached(kind: str, cfg: ExperimentConfig, build, *extra):
    """Per-process memo keyed by what the object depends on: Ray actors and the server load data and models once."""
    key = (kind, cfg.part_hash(*_DEPENDS[kind]), cfg.cache_dir, *extra)
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


def federated_data(cfg: ExperimentConfig):
    """The clients' splits (deterministic from the config; loaded once per process)."""
    return _cached("data", cfg, lambda: load_federated(cfg.task, cfg.data, seed=cfg.seed, cache_dir=cfg.cache_dir))


def base_model(cfg: ExperimentConfig):
    """(frozen base model, tokenizer, where it came from); loaded once per process."""
    return _cached("base", cfg, lambda: load_base(cfg.model, federated_data(cfg).public_corpus, cfg.seed,
                                                 cfg.cache_dir, progress=cfg.train.progress))


def run_audit_pool(cfg: ExperimentConfig) -> tuple:
    """(the run's audit pool, each enabled method's config), checked against every method's needs and built once per
    process: the preflight's pool is the one the auditor audits."""
    return _cached("pool", cfg, lambda: audit_pool(cfg, federated_data(cfg), base_model(cfg)[1], sequence_length(cfg)))


def fresh_lora_model(cfg: ExperimentConfig):
    """Base + a LoRA adapter seeded by ``cfg.seed`` (identical in every process), on the compute device.

    peft injects adapter layers into the module it wraps, so each LoRA model wraps its own copy of the
    cached base rather than the cached base itself.
    """
    base, tokenizer, _ = base_model(cfg)
    torch.manual_seed(cfg.seed)
    model = wrap_lora(copy.deepcopy(base), cfg.model).to(device())
    return model, tokenizer


def _rendered(cfg: ExperimentConfig, client: int | None) -> list[list[int]]:
    """Token ids of a client's train records as trained on, uncut (``None``: every client's), once per process."""
    def build():
        data = federated_data(cfg)
        _, tokenizer, _ = base_model(cfg)
        records = [r for c in data.clients for r in c.train] if client is None else data.clients[client].train
        return tokenize_examples(records, tokenizer, cfg.task.plain)

    return _cached("rendered", cfg, build, client)


def sequence_length(cfg: ExperimentConfig) -> int:
    """The training length: ``model.max_seq_len``, or for ``auto`` the longest rendered train example of any
    client, at most the base model's positions (the same in every process: it depends on the data only)."""
    def build():
        if cfg.model.max_seq_len != "auto":
            return int(cfg.model.max_seq_len)
        base, _, _ = base_model(cfg)
        longest = max(len(ids) for ids in _rendered(cfg, None))
        return min(longest, getattr(base.config, "max_position_embeddings", None) or longest)

    return _cached("seq_len", cfg, build)


def with_length(cfg: ExperimentConfig, metrics: dict, truncated: int) -> dict:
    """A training log entry with the sequence length used and how many examples it cut."""
    return {**metrics, "truncated_examples": truncated, "max_seq_len": sequence_length(cfg)}


def train_examples(cfg: ExperimentConfig, client: int | None) -> tuple[list[list[int]], int]:
    """(token ids of a client's train split cut to :func:`sequence_length`, how many were cut); ``client=None``:
    the union of all clients, for the centralized baseline."""

    def build():
        n = sequence_length(cfg)
        ids = _rendered(cfg, client)
        return [x[:n] for x in ids], sum(len(x) > n for x in ids)

    return _cached("examples", cfg, build, client)


_MODELS: dict[str, object] = {}


def check_partition(cfg: ExperimentConfig, client: int) -> int:
    """A SuperNode's partition id, which must name one of the config's clients."""
    if client >= cfg.num_clients:  # e.g. `flwr run` on a federation with more supernodes than clients
        raise ValueError(f"supernode partition-id {client} but the config has {cfg.num_clients} clients: "
                         f"run with num-supernodes = data.num_clients ({cfg.num_clients})")
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
    metrics = train_local(
        model,
        examples,
        cfg.train,
        seed=cfg.seed * 1_000_003 + server_round * 1_009 + client,
        pad_id=tokenizer.pad_token_id,
        local_term=strategy_named(cfg.strategy.name).local_term(cfg.strategy, sent),
        desc=f"round {server_round} client {client}",
    )
    state = adapter_state(model)
    return state, {**with_length(cfg, metrics, truncated), "clients": 1, "update_norm": update_norm(state, global_state)}


def client_cpus(cfg: ExperimentConfig) -> float:
    """Ray CPUs each ClientApp reserves: ``simulation.num_cpus_per_client``, or for ``auto`` this machine's cores
    shared by a round's clients when they number at most two per core, else two clients per core, each share at
    most ``simulation.torch_threads`` (the threads a client trains on). Training is the same either way (each
    client trains alone on its own threads): only how many run at once changes. On an attached cluster, auto
    reserves the threads."""
    sim = cfg.simulation
    if sim.num_cpus_per_client != "auto":
        return float(sim.num_cpus_per_client)
    if sim.ray_address:
        return float(sim.torch_threads)
    per_round = max(1, math.ceil(cfg.strategy.fraction_train * cfg.num_clients))
    share = math.floor(100 * (os.cpu_count() or 1) / per_round) / 100  # rounded down, so that all of them fit
    return min(float(sim.torch_threads), max(sim.torch_threads / 2, share))


def preflight(cfg: ExperimentConfig) -> str:
    """Everything that can be checked before a run directory exists or Ray starts: the machine's resources, the
    data (read, partitioned and split), the base model and tokenizer, and the audit pool against every method's
    needs. A problem is a ValueError with one line naming the key, file or row. Returns a summary of the run."""
    cpus = os.cpu_count() or 1
    attached = bool(cfg.simulation.ray_address)  # a cluster's CPUs are its own, not this machine's
    if cfg.strategy.name != CENTRALIZED and not attached and client_cpus(cfg) > cpus:
        raise ValueError(f"simulation.num_cpus_per_client={cfg.simulation.num_cpus_per_client} but this machine has "
                         f"{cpus} CPUs: no client could be scheduled")
    for name, method_cfg in method_configs(cfg).items():
        AUDIT_METHODS[name].preflight(method_cfg)
    data = federated_data(cfg)
    _, _, where = base_model(cfg)
    run, configs = run_audit_pool(cfg)
    names = [c.get("name", str(c["client"])) for c in data.ground_truth.get("clients", [])] or [
        str(c) for c in range(data.num_clients)]
    clients = ", ".join(f"{n} {len(s.train)}/{len(s.test)}" for n, s in zip(names, data.clients))
    work = "; ".join(f"{name}: {AUDIT_METHODS[name].work(c, data.num_clients)}" for name, c in configs.items())
    return (f"{data.num_clients} clients (train/test: {clients}); public corpus {len(data.public_corpus)} texts; "
            f"model {cfg.model.name} ({where}); {cfg.strategy.num_rounds} rounds of {cfg.strategy.name}; audit "
            f"pool per client {len(run.train[0])} train / {len(run.test[0])} test samples; audit work per round "
            f"({cfg.strategy.num_rounds + 1} rounds audited): {work}")


def make_auditor(cfg: ExperimentConfig, label: str = "fl", source: dict | None = None,
                 save_adapters: bool = True) -> Auditor:
    """The run's auditor over the global model (its own LoRA model, seeded like every client's). ``source`` (what is
    audited; a training run unless told) also gets a GGUF base model's file and sha256, so that every report names
    the exact weights that were fine-tuned."""
    source = {**(source or {"kind": "training"}), **gguf_identity(cfg.model)}
    return Auditor(cfg, *fresh_lora_model(cfg), run_audit_pool(cfg), label=label, source=source,
                   save_adapters=save_adapters)


def saved_adapter(run_dir, server_round: int) -> dict:
    """The global adapter written after ``server_round`` (``round_<r>/adapter``)."""
    return load_file(str(Path(run_dir) / f"round_{server_round}" / "adapter" / "adapter_model.safetensors"))


def run_auditor(cfg: ExperimentConfig, label: str, start_round: int = 0) -> tuple[Auditor, dict]:
    """(the run's auditor, the global adapter to train from): a new run's initial adapter, or, continuing after
    ``start_round``, that round's saved adapter, with the reports of rounds 0..``start_round`` as the history."""
    auditor = make_auditor(cfg, label=label)
    if not start_round:
        return auditor, auditor.initial_adapter()
    auditor.restore([json.loads((Path(cfg.run_dir) / f"round_{r}" / "report.json").read_text())
                     for r in range(start_round + 1)])
    return auditor, saved_adapter(cfg.run_dir, start_round)


def run_centralized(cfg: ExperimentConfig, start_round: int = 0) -> Path:
    """Train the same model on the union of the clients' train splits, one epoch per 'round', same hook.
    ``start_round`` > 0 continues a run after that epoch, from its saved adapter."""
    torch.set_num_threads(cfg.simulation.torch_threads)  # the clients' setting: the baseline trains like them
    auditor, state = run_auditor(cfg, "cl", start_round)
    load_adapter_state(auditor.model, state)
    model, tokenizer = auditor.model, auditor.tokenizer
    examples, truncated = train_examples(cfg, None)
    if not start_round:
        auditor.evaluate(0, adapter_state(model))
    for epoch in range(start_round + 1, cfg.strategy.num_rounds + 1):
        metrics = train_local(
            model, examples, cfg.train, seed=cfg.seed * 1_000_003 + epoch * 1_009, pad_id=tokenizer.pad_token_id,
            epochs=cfg.train.local_epochs, desc=f"centralized epoch {epoch}",
        )
        metrics = with_length(cfg, metrics, truncated)
        auditor.evaluate(epoch, adapter_state(model), {"centralized": metrics})
    auditor.finish()
    return auditor.run_dir


def data_check(cfg: ExperimentConfig) -> str:
    """What the data gives MR before any model is trained (``fedmem data check``): each client's sizes, the data's
    own floor (the held-out texts' true continuations through MR's retrieval and detector, SPEC §3b) on all text and
    on distinctive text, and the passages several clients (or the public share) hold. The audit pool and MR's
    settings are the run's own."""
    from fedmem.audit.mr import MemorizationRatio
    from fedmem.common.fmt import pct_ci

    data = federated_data(cfg)
    run, configs = run_audit_pool(cfg)
    mr_cfg = configs.get("mr") or method_configs(dataclasses.replace(
        cfg, audit=dataclasses.replace(cfg.audit, methods=["mr"])))["mr"]
    if not mr_cfg.heldout_size:
        raise ValueError("audit.mr.heldout=0: the data's floor needs held-out texts")
    mr = MemorizationRatio(mr_cfg, run)
    try:
        names = run.client_names
        lines = [f"{len(run.clients)} clients (train/test records: "
                 + ", ".join(f"{names[c]} {len(s.train)}/{len(s.test)}" for c, s in zip(run.clients, data.clients))
                 + f"); public share {len(data.public_corpus)} texts",
                 "Held-out texts left out as training text (their normalized text, or under near dedup a near "
                 "duplicate, is in a training split or the public share): "
                 + ", ".join(f"{names[c]} {run.heldout_trained.get(c, 0)}" for c in run.clients),
                 f"MR's floor: {mr_cfg.heldout_size} held-out texts per client, their true continuations matched as "
                 f"generations against {mr_cfg.n} training suffixes per client (top {mr_cfg.top_k}, the detector)"]
        for text, figures in (("all text", mr.floor["all"]), ("distinctive text", mr.floor["distinctive"])):
            f = figures["any"]
            row = [f"MR_Intra {pct_ci(f['intra'], f['intra_ci95'])}"]
            if f["inter"] is not None:
                row.append(f"MR_Inter {pct_ci(f['inter'], f['inter_ci95'])}")
            row.append(f"MR_Total {pct_ci(f['total'], f['total_ci95'])}")
            lines.append(f"  {text}: " + ", ".join(row))
        held = mr.matcher.shared_suffixes()
        lines.append("Indexed suffixes holding a passage that another client or the public share also holds: "
                     + ", ".join(f"{names[c]} {held[c]}/{mr_cfg.n}" for c in run.clients))
        for p in mr.matcher.shared_passages(10):
            lines.append(f"  {p['suffixes']:>5} suffixes, clients {','.join(names[c] for c in p['clients'])}"
                         f"{' and the public share' if p['public'] else ''}: {run.redact(p['text'])[:100]}")
        return "\n".join(lines)
    finally:
        mr.close()
