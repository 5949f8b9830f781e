"""FedProx: FedAvg's aggregation, plus a proximal term in each client's local loss, (mu/2)·||w − w_global||² over
the LoRA weights, which keeps a client's update near the global adapter. Flower's FedProx strategy sends mu to the
clients in each round's train config ("proximal-mu"); mu = 0 is FedAvg."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedmem.common.fields import option
from fedmem.federation.strategies import (
    LocalTerm,
    Strategy,
    StrategyConfig,
    register_strategy,
)

if TYPE_CHECKING:
    import torch


@dataclass
class FedProxConfig(StrategyConfig):
    proximal_mu: float = option(0.0, "FedProx mu (sent by the server)")

    def __post_init__(self):
        super().__post_init__()
        if self.proximal_mu < 0:
            raise ValueError(f"strategy.proximal_mu must be >= 0, got {self.proximal_mu}")


def proximal_term(params: dict[str, torch.Tensor], start: dict[str, torch.Tensor]) -> torch.Tensor:
    """||w − w_start||² over the trainable (LoRA) weights only; the frozen base never moves."""
    import torch

    return torch.stack([((p - start[n]) ** 2).sum() for n, p in params.items()]).sum()


def local_term(settings: FedProxConfig, sent: dict) -> LocalTerm | None:
    """(mu/2)·||w − w_global||², with the mu the server sent (none: 0, FedAvg's loss)."""
    mu = float(sent.get("proximal-mu", 0.0))
    if mu <= 0:
        return None
    return lambda params, start: mu / 2 * proximal_term(params, start)


register_strategy(Strategy("fedprox", "FedProx", FedProxConfig, lambda s: {"proximal_mu": s.proximal_mu},
                           local_term=local_term))
