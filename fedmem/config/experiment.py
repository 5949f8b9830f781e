"""The whole experiment's configuration: composed by Hydra from conf/, validated completely, written and read back.

``conf/`` ships inside the package (as ``fedmem.conf``), so an installed fedmem composes the same defaults from
any directory. Validation covers every section and every enabled audit method's own config, so a wrong value
stops the run with one message naming the key before any data is loaded or anything is trained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from fedmem.audit import AUDIT_METHODS, build_method_config
from fedmem.audit.config import AuditConfig
from fedmem.common.fields import (
    build_section,
    check_fields,
    option,
    positive,
)
from fedmem.common.io import atomic_write_text
from fedmem.data import (
    DataConfig,
    DataSourceConfig,
    TaskConfig,
    check_configs,
)
from fedmem.engine.config import ModelConfig, TrainConfig
from fedmem.federation import canary_clients
from fedmem.federation.privacy import DefenseConfig, check_defense, sampled_clients
from fedmem.federation.strategies import (
    CENTRALIZED,
    StrategyConfig,
    strategy_config,
)
from fedmem.tracking.config import TrackerConfig


@dataclass
class SimulationConfig:
    """How the Flower simulation runs the clients."""

    backend: Literal["ray"] = option("ray", "Flower simulation backend")
    num_cpus_per_client: float | Literal["auto"] = option(
        "auto", "Ray CPUs per ClientApp; auto = a round's clients all at once when they number at most two per "
                "core (a third client on two cores shares them instead of waiting for a second wave), else two per "
                "core; never more ClientApp actors than a round's clients (fedmem.experiment.preflight.client_cpus)")
    num_gpus_per_client: float = option(0.0, "Ray GPUs per ClientApp")
    torch_threads: int = option(1, "torch threads inside each ClientApp")
    ray_address: str | None = option(
        None, "an existing Ray cluster to run the ClientApps on (host:port of its head, e.g. one started with "
        "`ray start --head`, or auto: $RAY_ADDRESS, else the cluster `ray start` last recorded on this machine); "
        "None = a private Ray instance the run starts and stops, whatever cluster is up or $RAY_ADDRESS names")

    def __post_init__(self):
        check_fields(self, "simulation")
        positive(self, "simulation", "torch_threads")
        if (self.num_cpus_per_client != "auto" and self.num_cpus_per_client <= 0) or self.num_gpus_per_client < 0:
            raise ValueError("simulation.num_cpus_per_client must be > 0 and num_gpus_per_client >= 0")

    @property
    def attached(self) -> bool:
        """Whether the run's clients go to an existing cluster (Ray's own word for a private instance is local)."""
        return bool(self.ray_address) and self.ray_address != "local"


@dataclass
class ExperimentConfig:
    task: TaskConfig
    data: DataSourceConfig
    model: ModelConfig
    train: TrainConfig
    strategy: StrategyConfig
    audit: AuditConfig
    simulation: SimulationConfig
    defense: DefenseConfig = dataclasses.field(default_factory=DefenseConfig)
    tracker: TrackerConfig = dataclasses.field(default_factory=TrackerConfig)  # where else the figures go
    experiment: str = "none"  # the experiment preset (conf/experiment/) that set the audit's decision rules
    plugins: list[str] = dataclasses.field(default_factory=list)  # modules imported first: methods, sources, strategies
    seed: int = 0
    run_dir: str = "runs/latest"
    cache_dir: str = ".cache/fedmem"

    @property
    def num_clients(self) -> int:
        return int(self.data.num_clients)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict in the layout of conf/ (method sections back under ``audit``): ``from_dict`` inverts it."""
        d = dataclasses.asdict(self)
        d["audit"] = {**{k: v for k, v in d["audit"].items() if k != "sections"}, **d["audit"]["sections"]}
        return d

    def hash(self) -> str:
        """A short hash of everything that changes results (not where they are written)."""
        return self._memo("hash", self._hash)

    def part_hash(self, *sections: str) -> str:
        """A short hash of the named sections and the seed: what a cached object (data, base model) depends on,
        so that a change of the audit settings alone reuses it."""
        return self._memo(sections, lambda: self._part_hash(sections))

    def _memo(self, key, compute):
        """A figure of the config, computed once: a config is never changed in place (``dataclasses.replace``
        makes a new one), and the runtime's caches look their hashes up on every call."""
        memo = self.__dict__.setdefault("_memo_values", {})
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def _hash(self) -> str:
        d = self.to_dict()
        for key in ("run_dir", "cache_dir", "experiment", "tracker"):
            d.pop(key, None)
        if not d["plugins"]:  # without plugins the key changes nothing: it need not be written to hash the same
            d.pop("plugins")
        d["train"].pop("progress", None)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def _part_hash(self, sections: tuple[str, ...]) -> str:
        d = self.to_dict()
        blob = {name: d[name] for name in sections} | {"seed": self.seed}
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def from_dict(d: dict[str, Any]) -> ExperimentConfig:
    """Build and validate the whole configuration from a plain (resolved) dict."""
    d = dict(d)
    unknown = sorted(set(d) - {f.name for f in dataclasses.fields(ExperimentConfig)})
    if unknown:
        raise ValueError(f"unknown top-level option(s) {unknown}")
    audit = dict(d.get("audit") or {})
    shared = {f.name for f in dataclasses.fields(AuditConfig)} - {"sections"}
    # method sections sit under `audit` (conf/ layout); an explicit `sections` key is accepted too
    sections = {**(audit.pop("sections", None) or {}), **{k: v for k, v in audit.items() if k not in shared}}
    audit = {k: v for k, v in audit.items() if k in shared}
    plugins = import_plugins(d.get("plugins"))
    if "seed" in d and (isinstance(d["seed"], bool) or not isinstance(d["seed"], int)):
        raise ValueError(f"seed must be an integer, got {d['seed']!r}")
    cfg = ExperimentConfig(
        task=build_section(TaskConfig, d.get("task"), "task"),
        data=DataConfig(**(d.get("data") or {})),
        model=build_section(ModelConfig, d.get("model"), "model"),
        train=build_section(TrainConfig, d.get("train"), "train"),
        strategy=strategy_config(d.get("strategy")),
        audit=build_section(AuditConfig, {**audit, "sections": _method_sections(sections, audit.get("methods"))},
                            "audit"),
        simulation=build_section(SimulationConfig, d.get("simulation"), "simulation"),
        defense=build_section(DefenseConfig, d.get("defense"), "defense"),
        tracker=build_section(TrackerConfig, d.get("tracker"), "tracker"),
        experiment=str(d.get("experiment", "none")),
        plugins=plugins,
        seed=int(d.get("seed", 0)),
        run_dir=str(d.get("run_dir", "runs/latest")),
        cache_dir=str(d.get("cache_dir", ".cache/fedmem")),
    )
    validate(cfg)
    return cfg


def import_plugins(plugins: Any) -> list[str]:
    """Import the modules ``plugins`` names (before anything is validated, in every process that reads the config):
    the audit methods, data sources and strategies they register become known by name."""
    if plugins is None:
        return []
    if not isinstance(plugins, (list, tuple)) or not all(isinstance(m, str) for m in plugins):
        raise ValueError(f"plugins must be a list of module names, got {plugins!r}")
    for module in plugins:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ValueError(f"plugins: cannot import {module!r} ({e}); is it on PYTHONPATH or installed?") from None
    return list(plugins)


def _method_sections(sections: dict[str, Any], enabled: Any) -> dict[str, Any]:
    """Every audit method's config section, built and validated once, by name: each section the config holds (the
    schema holds one per registered method) and each enabled method's (its defaults when the config has none)."""
    enabled = list(enabled) if isinstance(enabled, (list, tuple)) else list(AuditConfig().methods)
    for name in enabled:
        if name not in AUDIT_METHODS:
            raise ValueError(f"audit.methods: unknown method {name!r}; known: {sorted(AUDIT_METHODS)}")
    for name in sections:
        if name not in AUDIT_METHODS:
            raise ValueError(f"audit.{name}: no audit method is named {name!r}; known: {sorted(AUDIT_METHODS)} (a "
                             f"method of your own: register it in a module listed in plugins)")
    return {name: build_method_config(name, sections.get(name)) for name in dict.fromkeys([*sections, *enabled])}


def method_configs(cfg: ExperimentConfig) -> dict[str, Any]:
    """Each enabled audit method's config, by name, in the order of ``audit.methods``."""
    return {name: cfg.audit.sections[name] for name in cfg.audit.methods}


def validate(cfg: ExperimentConfig) -> None:
    """Checks across sections, and every enabled audit method's own config: all before training starts."""
    check_configs(cfg.task, cfg.data)
    if cfg.strategy.name != CENTRALIZED and cfg.strategy.min_train_nodes > cfg.num_clients:
        raise ValueError(
            f"strategy.min_train_nodes ({cfg.strategy.min_train_nodes}) exceeds data.num_clients ({cfg.num_clients})"
        )
    if cfg.defense.active:
        if cfg.strategy.name == CENTRALIZED:
            raise ValueError("defense=dp clips and noises the clients' updates in federated rounds; the centralized "
                             "baseline has none (strategy=centralized takes defense=none)")
        check_defense(cfg.defense, sampled_clients(cfg.strategy, cfg.num_clients), cfg.num_clients,
                      cfg.strategy.num_rounds, cfg.strategy)
    canary_clients.check(cfg.data.audit_canary_clients, cfg.strategy, cfg.defense, cfg.num_clients)
    if cfg.model.offline and not cfg.data.has_public_corpus:
        raise ValueError(f"model={cfg.model.name} trains its tokenizer and prior on the data's public corpus, and "
                         "data.public_share=0 with no data.public gives none: set one of them")
    pool = {"train": cfg.audit.samples_per_client, "test": cfg.audit.test_per_client}
    pool_key = {"train": "audit.samples_per_client", "test": "audit.test_per_client"}
    for name, method_cfg in method_configs(cfg).items():
        method = AUDIT_METHODS[name]
        method.check(method_cfg, cfg)
        for split, needed in method.samples_needed(method_cfg).items():
            if pool[split] != "all" and needed > pool[split]:
                raise ValueError(f"audit.{name} audits {needed} {split} samples per client, but "
                                 f"{pool_key[split]} prepares {pool[split]}: raise {pool_key[split]} (or set it "
                                 f"to all) or lower audit.{name}'s size")


# ---------------------------------------------------------------- files


def read_config(path: str | os.PathLike) -> ExperimentConfig:
    """A resolved config written by ``fedmem run`` / ``fedmem resolve`` (YAML), validated."""
    with open(path) as f:
        return from_dict(yaml.safe_load(f))


def write_config(cfg: ExperimentConfig, path: str | os.PathLike) -> None:
    atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
