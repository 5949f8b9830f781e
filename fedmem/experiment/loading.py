"""What every process of an experiment loads, once: the clients' data, the base model and its tokenizer, the records
as training renders them and the length training cuts them at, and the audit plan (the run's audit pool and each
enabled method's config).

Each object is cached per process by what it depends on, so a Ray actor and the server load data and models once,
and audits with other settings over the same data reuse them. Everything here only loads and checks: training is
``fedmem.experiment.training``'s, the audit ``fedmem.experiment.auditor``'s.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

import torch

from fedmem.audit import AUDIT_METHODS, AuditPool
from fedmem.audit.pool import build_audit_pool, check_common_draw, check_supply, place_common_draw
from fedmem.config.experiment import ExperimentConfig, method_configs
from fedmem.data import load_federated
from fedmem.engine.model.load import device, load_base, wrap_lora
from fedmem.engine.train import tokenize_examples
from fedmem.experiment.sizing import audit_sizes, chosen_line, sized
from fedmem.reports.console import say

_CACHE: dict[tuple, object] = {}

# What each cached object depends on: audits with other settings over the same data reuse the data and models.
_DEPENDS = {"data": ("task", "data"), "base": ("task", "data", "model"), "rendered": ("task", "data", "model"),
            "seq_len": ("task", "data", "model"), "examples": ("task", "data", "model"),
            "plan": ("task", "data", "model", "audit")}


def cached(kind: str, cfg: ExperimentConfig, build, *extra):
    """Per-process memo keyed by what the object depends on (``_DEPENDS[kind]``)."""
    key = (kind, cfg.part_hash(*_DEPENDS[kind]), cfg.cache_dir, *extra)
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


def federated_data(cfg: ExperimentConfig):
    """The clients' splits (deterministic from the config)."""
    return cached("data", cfg, lambda: load_federated(cfg.task, cfg.data, seed=cfg.seed, cache_dir=cfg.cache_dir))


def base_model(cfg: ExperimentConfig):
    """(frozen base model, tokenizer, where it came from)."""
    return cached("base", cfg, lambda: load_base(cfg.model, federated_data(cfg).public_corpus, cfg.seed,
                                                cfg.cache_dir, progress=cfg.train.progress))


def fresh_lora_model(cfg: ExperimentConfig):
    """Base + a LoRA adapter seeded by ``cfg.seed`` (identical in every process), on the compute device.

    peft injects adapter layers into the module it wraps, so each LoRA model wraps its own copy of the
    cached base rather than the cached base itself.
    """
    base, tokenizer, _ = base_model(cfg)
    torch.manual_seed(cfg.seed)
    model = wrap_lora(copy.deepcopy(base), cfg.model).to(device())
    return model, tokenizer


def rendered(cfg: ExperimentConfig, client: int | None) -> list[list[int]]:
    """Token ids of a client's train records as trained on, uncut (``None``: every client's)."""
    def build():
        data = federated_data(cfg)
        _, tokenizer, _ = base_model(cfg)
        records = [r for c in data.clients for r in c.train] if client is None else data.clients[client].train
        return tokenize_examples(records, tokenizer, cfg.task.plain)

    return cached("rendered", cfg, build, client)


def sequence_length(cfg: ExperimentConfig) -> int:
    """The training length: ``model.max_seq_len``, or for ``auto`` the longest rendered train example of any
    client, at most the base model's positions (the same in every process: it depends on the data only)."""
    def build():
        if cfg.model.max_seq_len != "auto":
            return int(cfg.model.max_seq_len)
        base, _, _ = base_model(cfg)
        longest = max(len(ids) for ids in rendered(cfg, None))
        return min(longest, getattr(base.config, "max_position_embeddings", None) or longest)

    return cached("seq_len", cfg, build)


class AuditPlan(NamedTuple):
    """What every round audits: the run's audit pool, each enabled method's validated config, and the sizes
    ``audit.size=auto`` chose (empty under ``fixed``), which the config a run records must hold
    (``audited_config``)."""

    pool: AuditPool
    configs: dict[str, Any]
    sizes: dict[str, Any]


def size_setting(name: str, cfg) -> str:
    """``audit.<method>.<key>=<value>`` of the method's first size key (``AuditMethod.size_keys``), for errors."""
    keys = AUDIT_METHODS[name].size_keys
    return f"audit.{name}.{keys[0]}={getattr(cfg, keys[0], '?')}" if keys else f"audit.{name}'s size"


def checked_plan(cfg: ExperimentConfig, data, tokenizer, trained_len: int | None = None) -> AuditPlan:
    """The audit plan built and checked against what every method audits, so that a pool the data cannot fill fails
    here, before anything is written. The pool carries the common draw (``audit.common_draw``), which every method
    that decides per train sample must audit. ``trained_len``: the length training cuts a record at (None: a model
    fedmem did not train)."""
    every = dataclasses.replace(cfg.audit, samples_per_client="all", test_per_client="all")
    fits, problems = audit_sizes(cfg, build_audit_pool(every, cfg.task, data, tokenizer, cfg.seed, trained_len),
                                 method_configs(cfg))
    sizes = {}
    if cfg.audit.size == "auto":
        say(chosen_line(fits, cfg))
        cfg, sizes = sized(cfg, fits), fits
    elif problems:  # every setting the data cannot fill, at once
        raise ValueError("; ".join(problems))
    pool = build_audit_pool(cfg.audit, cfg.task, data, tokenizer, cfg.seed, trained_len)
    configs = method_configs(cfg)
    check_supply(pool, {name: AUDIT_METHODS[name].samples_needed(c) for name, c in configs.items()})
    suffix = {name: AUDIT_METHODS[name].min_suffix(c) for name, c in configs.items()}
    longest = max(suffix, key=suffix.get, default="")
    min_suffix = suffix.get(longest, 0)
    pool = place_common_draw(pool, cfg.audit.common_draw, min_suffix, f"audit.{longest}" if min_suffix else "")
    for name, c in configs.items():
        AUDIT_METHODS[name].check_pool(c, pool)
    audited = {name: AUDIT_METHODS[name].audited_train(c, pool) for name, c in configs.items()}
    check_common_draw(pool, {name: ids for name, ids in audited.items() if ids is not None},
                      {name: size_setting(name, c) for name, c in configs.items()})
    return AuditPlan(pool, configs, sizes)


def audited_config(cfg: ExperimentConfig, plan: AuditPlan) -> ExperimentConfig:
    """The config as audited: under ``audit.size=auto``, every size the plan chose and the sizing fixed, so that a
    run's config.yaml, its pages and any later re-audit hold the sizes that were audited."""
    return sized(cfg, plan.sizes) if plan.sizes else cfg


def audit_plan(cfg: ExperimentConfig) -> AuditPlan:
    """The audit plan of a run fedmem trains (its pool cut at the training length): the preflight's plan is the one
    the auditor audits."""
    return cached("plan", cfg, lambda: checked_plan(cfg, federated_data(cfg), base_model(cfg)[1],
                                                    sequence_length(cfg)))
