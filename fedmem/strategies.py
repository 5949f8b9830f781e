"""The training strategies a run can name (``strategy.name``): each Flower aggregation strategy fedmem drives, and
the centralized baseline. Registered like audit methods, so a new one is one entry (in its own module, listed in
``plugins`` when it lives outside fedmem) and its YAML in ``conf/strategy/``.

Only ``server/`` imports Flower: an entry names its Flower class (``flower_class``, a class of
``flwr.serverapp.strategy`` or ``module:Class``) and says which ``strategy.*`` settings it reads and how they
become the class's keyword arguments; the server builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

CENTRALIZED = "centralized"  # the CL baseline: one process trains on the union of the clients' data, no Flower


@dataclass(frozen=True)
class Strategy:
    """``name``: its ``strategy.name``. ``flower_class``: the Flower strategy it runs (None: the centralized
    baseline). ``arguments``: its keyword arguments from the strategy config. ``uses``: the ``strategy.*`` settings
    it reads beyond the shared ones (shown on the run page; setting one that no strategy of the run reads is an
    error). ``keeps_server_state``: a server optimizer whose state a run does not save, so the run cannot resume."""

    name: str
    flower_class: str | None
    arguments: Callable[[Any], dict] = field(default=lambda s: {})
    uses: tuple[str, ...] = ()
    keeps_server_state: bool = False


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    if strategy.name in STRATEGIES and STRATEGIES[strategy.name] != strategy:
        raise ValueError(f"strategy {strategy.name!r} is registered twice")
    STRATEGIES[strategy.name] = strategy
    return strategy


def strategy_named(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"strategy.name: unknown strategy {name!r}; known: {sorted(STRATEGIES)} (a strategy of your "
                         f"own: register it in a module listed in plugins)")
    return STRATEGIES[name]


register_strategy(Strategy(CENTRALIZED, None))
register_strategy(Strategy("fedavg", "FedAvg"))
# FedProx sends mu to the clients, which add (mu/2)·||w − w_global||² over the LoRA weights
register_strategy(Strategy("fedprox", "FedProx", lambda s: {"proximal_mu": s.proximal_mu}, ("proximal_mu",)))
register_strategy(Strategy("fedavgm", "FedAvgM", lambda s: {"server_learning_rate": 1.0,
                                                            "server_momentum": s.server_momentum},
                           ("server_momentum",), keeps_server_state=True))
register_strategy(Strategy("fedadam", "FedAdam", lambda s: {"eta": s.server_lr}, ("server_lr",),
                           keeps_server_state=True))
register_strategy(Strategy("fedyogi", "FedYogi", lambda s: {"eta": s.server_lr}, ("server_lr",),
                           keeps_server_state=True))
