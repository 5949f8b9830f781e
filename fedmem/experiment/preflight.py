"""What is checked before a run directory exists or Ray starts, and what it may use: the CPUs a client reserves,
the preflight of a run (resources, data, model, audit plan, each method's own check), and ``fedmem data check``
(what the data gives MR before any training)."""

from __future__ import annotations

import dataclasses
import math
import os
import socket

from fedmem.audit import AUDIT_METHODS
from fedmem.audit.pool import MIN_SUFFIX_TOKENS
from fedmem.config.experiment import ExperimentConfig, method_configs
from fedmem.federation.strategies import CENTRALIZED
from fedmem.reports.console import say
from fedmem.reports.views import view_for
from fedmem.tracking import check_installed


def client_cpus(cfg: ExperimentConfig) -> float:
    """Ray CPUs each ClientApp reserves: ``simulation.num_cpus_per_client``, or for ``auto`` this machine's cores
    shared by a round's clients when they number at most two per core, else two clients per core. Training is the
    same either way (each client trains alone on its ``simulation.torch_threads``): only how many run at once
    changes. Flower starts as many ClientApp actors as the reserved CPUs allow, each importing torch and peft, so
    on a machine with more cores than a round has clients the share is larger than the threads: one actor per
    client, none idle. On an attached cluster, auto reserves the threads."""
    sim = cfg.simulation
    if sim.num_cpus_per_client != "auto":
        return float(sim.num_cpus_per_client)
    if sim.attached:
        return float(sim.torch_threads)
    per_round = max(1, math.ceil(cfg.strategy.fraction_train * cfg.num_clients))
    share = math.floor(100 * (os.cpu_count() or 1) / per_round) / 100  # rounded down, so that all of them fit
    return max(sim.torch_threads / 2, share)


def check_cluster(address: str, seconds: float = 5) -> None:
    """A ``host:port`` cluster address must accept a connection: Ray, given one where nothing listens, retries for
    minutes before it fails. ``auto`` and ``ray://`` client addresses are left to Ray."""
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as e:
        raise ValueError(f"simulation.ray_address={address}: no Ray cluster answers there ({e.strerror or e}); "
                         "start one with `ray start --head`, or leave the key unset for a private Ray") from None


# DP noise whose expected norm on the round's average exceeds this many clipping norms drowns every update: the
# global model is likely destroyed (docs/results.md: the frontier's z = 1 point)
NOISE_WARNING = 10


def noise_warning(cfg: ExperimentConfig, adapter_size: int) -> str | None:
    """The line said before a DP run whose noise will dominate: its expected norm on the averaged update,
    z C / m · sqrt(d) for the adapter's d weights and m sampled clients, above ``NOISE_WARNING`` clipping norms (the
    largest norm one client's update can have)."""
    dp = cfg.defense
    if not dp.active or cfg.strategy.name == CENTRALIZED:
        return None
    from fedmem.federation.privacy import sampled_clients

    m = sampled_clients(cfg.strategy, cfg.num_clients)
    norm = dp.noise_multiplier * dp.clipping_norm / m * math.sqrt(adapter_size)
    if norm <= NOISE_WARNING * dp.clipping_norm:
        return None
    return (f"fedmem: warning: DP's noise on each round's average has an expected norm of {norm:.3g}, "
            f"{norm / dp.clipping_norm:.0f} times the clipping norm C = {dp.clipping_norm:g} that bounds a client's "
            f"update (z = {dp.noise_multiplier:g}, {m} clients a round, {adapter_size:,} adapter weights): the global "
            f"model will likely be noise; its rounds are audited as degenerate where it is")


def preflight(cfg: ExperimentConfig) -> str:
    """Everything that can be checked before a run directory exists or Ray starts: the machine's resources, the
    tracker's package, the data (read, partitioned and split), the base model and tokenizer, and the audit pool
    against every method's needs. A problem is a ValueError with one line naming the key, file or row. Returns a
    summary of the run."""
    cpus = os.cpu_count() or 1
    # a cluster's CPUs are its own, not this machine's
    if cfg.strategy.name != CENTRALIZED and not cfg.simulation.attached and client_cpus(cfg) > cpus:
        raise ValueError(f"simulation.num_cpus_per_client={cfg.simulation.num_cpus_per_client} but this machine has "
                         f"{cpus} CPUs: no client could be scheduled")
    if cfg.strategy.name != CENTRALIZED and cfg.simulation.attached:
        check_cluster(cfg.simulation.ray_address)
    check_installed(cfg.tracker)
    for name, method_cfg in method_configs(cfg).items():
        AUDIT_METHODS[name].preflight(method_cfg)
    from fedmem.engine.model.load import lora_size  # torch and transformers, as the loaders below
    from fedmem.experiment.loading import base_model

    data, (pool, configs, _) = data_and_plan(cfg)
    base, _, where = base_model(cfg)
    if (line := noise_warning(cfg, lora_size(base, cfg.model))) is not None:
        say(line)
    names = [c.get("name", str(c["client"])) for c in data.ground_truth.get("clients", [])] or [
        str(c) for c in range(data.num_clients)]
    clients = ", ".join(f"{n} {len(s.train)}/{len(s.test)}" for n, s in zip(names, data.clients))
    cost = "; ".join(f"{name}: {AUDIT_METHODS[name].round_cost(c, data.num_clients)}" for name, c in configs.items())
    dropped, left = dropped_rows(data.ground_truth), left_out_text(pool)
    rounds = cfg.strategy.num_rounds
    return (f"{data.num_clients} clients (train/test: {clients}){f'; {dropped}' if dropped else ''}; public corpus "
            f"{len(data.public_corpus)} texts; model {cfg.model.name} ({where}); {rounds} round{'s' * (rounds != 1)} "
            f"of {cfg.strategy.name}; audit pool per client {len(pool.train[0])} train / {len(pool.test[0])} test "
            f"samples{f' (left out, in all: {left})' if left else ''}; audit work per round ({rounds + 1} rounds "
            f"audited): {cost}")


def data_and_plan(cfg: ExperimentConfig):
    """(the clients' data, the audit plan), with every setting the data cannot take refused at once: where the data
    says which values it would take (the columns it has, the split its clients fill), the check goes on with them,
    and the one refusal names what those would still meet (the audit sizes the data cannot fill, at that split)."""
    from fedmem.data.tabular import DataRefused
    from fedmem.experiment.loading import audit_plan, federated_data  # torch and transformers

    try:
        return federated_data(cfg), audit_plan(cfg)
    except DataRefused as refused:
        problems, fitted = [str(refused)], cfg
        for _ in range(3):  # the columns, the split, the audit: each stage's values let the next one be checked
            if refused.fits is None:
                break
            fitted = dataclasses.replace(fitted, data=dataclasses.replace(fitted.data, **refused.fits))
            try:  # audit.size=auto sizes the audits to whatever the data gives: only the data can refuse
                federated_data(fitted) if cfg.audit.size == "auto" else audit_plan(fitted)
                break
            except DataRefused as more:
                problems.append(str(more))
                refused = more
            except ValueError as more:
                problems.append(str(more))
                break
        raise ValueError("; ".join(problems)) from None


def dropped_rows(truth: dict) -> str | None:
    """What the data lost before any client got it, in words: rows with an empty field (per client where the client
    column names their client) and rows in no client; None when nothing was dropped."""
    parts = []
    if empty := truth.get("rows_dropped_empty"):
        per = [(c.get("name", c["client"]), c["rows_dropped_empty"]) for c in truth.get("clients", [])
               if c.get("rows_dropped_empty")]
        parts.append(f"{empty} of {truth.get('rows')} rows dropped for an empty field"
                     + (f" ({', '.join(f'{name} {n}' for name, n in per)})" if per else ""))
    if missing := truth.get("rows_in_no_client"):
        parts.append(f"{missing} rows in no client (beyond data.num_clients)")
    return "; ".join(parts) or None


def left_out_text(pool, clients=None) -> str | None:
    """The records of ``clients`` (all by default) that no audit draw can take, by split and reason, summed over
    them, in words; None when there are none."""
    words = {"duplicate": "repeated", "too_short": f"under {pool.prefix_len + MIN_SUFFIX_TOKENS} tokens",
             "trained_elsewhere": "training text elsewhere"}
    parts = []
    for split, name in (("train", "train"), ("test", "held-out")):
        totals = {reason: sum(pool.left_out.get(c, {}).get(split, {}).get(reason, 0)
                              for c in (pool.clients if clients is None else clients)) for reason in words}
        if said := ", ".join(f"{n} {words[reason]}" for reason, n in totals.items() if n):
            parts.append(f"{name} {said}")
    return "; ".join(parts) or None


def data_check(cfg: ExperimentConfig) -> str:
    """What the data gives MR before any model is trained (``fedmem data check``): each client's sizes, then MR's own
    account of the data (``MemorizationRatio.before_training``, as its view writes it: the held-out texts left out as
    training text, the data's floor on all and on distinctive text, the passages several clients or the public share
    hold). The audit pool and MR's settings are the run's own."""
    data, (pool, configs, _) = data_and_plan(cfg)
    mr_cfg = configs.get("mr") or method_configs(dataclasses.replace(
        cfg, audit=dataclasses.replace(cfg.audit, methods=["mr"])))["mr"]
    mr = AUDIT_METHODS["mr"](mr_cfg, pool)
    try:
        names = pool.client_names
        dropped = dropped_rows(data.ground_truth)
        head = (f"{len(pool.clients)} clients (train/test records: "
                + ", ".join(f"{names[c]} {len(s.train)}/{len(s.test)}" for c, s in zip(pool.clients, data.clients))
                + f"){f'; {dropped}' if dropped else ''}; public share {len(data.public_corpus)} texts")
        left = [f"{names[c]}: {text}" for c in pool.clients if (text := left_out_text(pool, [c]))]
        left = ["Left out of the audit pool (no draw takes them): " + "; ".join(left)] if left else []
        return "\n".join([head, *left, *view_for(mr).data_check_lines(mr.before_training())])
    finally:
        mr.close()
