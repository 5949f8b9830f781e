"""The training strategies a run can name (``strategy.name``): each Flower aggregation strategy fedmem drives, and
the centralized baseline. Registered like data sources, so a new one is one entry (in its own module, listed in
``plugins`` when it lives outside fedmem), with its own config class when it has settings of its own, and its YAML
in ``conf/strategy/``. A strategy with a term in the clients' local loss carries it in its entry (``local_term``,
as FedProx does in ``fedmem.federation.fedprox``): the client passes on what the server sent, knowing no strategy.

Only ``server/`` imports Flower: an entry names its Flower class (``flower_class``, a class of
``flwr.serverapp.strategy`` or ``module:Class``) and how its settings become the class's keyword arguments; the
server builds it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from fedmem.common import registry
from fedmem.common.fields import build_variant, check_fields, option

CENTRALIZED = "centralized"  # the CL baseline: one process trains on the union of the clients' data, no Flower


@dataclass
class StrategyConfig:
    """The round schedule and client sampling every strategy shares; a strategy with settings of its own has a
    subclass with them (``FedProxConfig``, ...)."""

    name: str = option("fedavg", "the federated algorithm (fedavg, fedprox, fedavgm, fedadam, fedyogi, or one "
                       "registered by a plugin), or centralized for the CL baseline")
    num_rounds: int = option(3, "rounds (epochs for centralized)")
    fraction_train: float = option(1.0, "fraction of clients sampled per round")
    min_train_nodes: int = option(1, "minimum clients per round")
    round_timeout: float = option(
        3600.0, "seconds a round waits for the sampled clients' replies; a client that has not replied by then "
        "counts as failed (a lost SuperNode never replies)")
    min_trained_clients: int | None = option(
        None, "a round counts only if at least this many sampled clients trained successfully; None = every "
        "sampled client (a shortfall stops the run, marked failed, naming the failing clients and their errors)")

    def __post_init__(self):
        check_fields(self, "strategy")
        if self.num_rounds < 0:
            raise ValueError(f"strategy.num_rounds must be >= 0, got {self.num_rounds}")
        if not self.round_timeout > 0:
            raise ValueError(f"strategy.round_timeout must be > 0 seconds, got {self.round_timeout}")
        if self.min_trained_clients is not None and self.min_trained_clients < 1:
            raise ValueError(f"strategy.min_trained_clients must be >= 1 (or null), got {self.min_trained_clients}")
        if not 0 < self.fraction_train <= 1:
            raise ValueError(f"strategy.fraction_train must be in (0, 1], got {self.fraction_train}")

    def own_settings(self) -> dict[str, Any]:
        """The settings this strategy has beyond the shared ones (the run page shows them)."""
        shared = {f.name for f in dataclasses.fields(StrategyConfig)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in shared}


@dataclass
class ServerLearningRateConfig(StrategyConfig):
    server_lr: float = option(1e-2, "server learning rate (FedAdam, FedYogi)")


@dataclass
class ServerMomentumConfig(StrategyConfig):
    server_momentum: float = option(0.9, "server momentum (FedAvgM)")


# A term a strategy adds to every optimizer step's loss in a client's local training: a function of the trainable
# (LoRA) weights and their values when the round started (the global adapter), by name, giving a scalar tensor.
LocalTerm = Callable[[dict, dict], Any]


@dataclass(frozen=True)
class Strategy:
    """``name``: its ``strategy.name``. ``flower_class``: the Flower strategy it runs (None: the centralized
    baseline). ``Config``: its settings (``StrategyConfig`` or a subclass with its own). ``arguments``: the Flower
    class's keyword arguments from its config. ``local_term``: what it adds to a client's local loss, from its config
    and the train config the server sent the client (None: nothing, a server-only strategy).
    ``server_optimizer``: the server runs an optimizer with state of its own (momentum, second moments) over the
    clients' average: a run does not save that state, so it cannot resume, and DP's noise, which Flower's wrappers
    add after the wrapped strategy, would not cover it (``defense=dp`` refuses it)."""

    name: str
    flower_class: str | None
    Config: type = StrategyConfig
    arguments: Callable[[Any], dict] = field(default=lambda s: {})
    local_term: Callable[[Any, dict], LocalTerm | None] = field(default=lambda s, sent: None)
    server_optimizer: bool = False


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    return registry.add(STRATEGIES, strategy.name, strategy, "strategy")


def strategy_named(name: str) -> Strategy:
    return registry.named(STRATEGIES, name, "strategy.name", "strategy")


def strategy_config(settings: dict[str, Any] | None) -> StrategyConfig:
    """The config of the strategy ``settings["name"]`` names, from its settings (its config class's fields)."""
    settings = {"name": "fedavg", **(settings or {})}
    configs = {name: s.Config for name, s in STRATEGIES.items()}
    return build_variant(strategy_named(str(settings["name"])).Config, settings, "strategy", configs, "name")


register_strategy(Strategy(CENTRALIZED, None))
register_strategy(Strategy("fedavg", "FedAvg"))
register_strategy(Strategy("fedavgm", "FedAvgM", ServerMomentumConfig,
                           lambda s: {"server_learning_rate": 1.0, "server_momentum": s.server_momentum},
                           server_optimizer=True))
register_strategy(Strategy("fedadam", "FedAdam", ServerLearningRateConfig, lambda s: {"eta": s.server_lr},
                           server_optimizer=True))
register_strategy(Strategy("fedyogi", "FedYogi", ServerLearningRateConfig, lambda s: {"eta": s.server_lr},
                           server_optimizer=True))
