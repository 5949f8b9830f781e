"""DP-FedAvg: the defense's settings (``defense.*``), the Flower wrapper and client mod that apply it, and the
privacy budget it spends.

Flower's own wrappers (``flwr.serverapp.strategy.DifferentialPrivacy{Server,Client}Side{Fixed,Adaptive}Clipping``)
clip each client's update (its adapter minus the round's global adapter: only the LoRA adapter crosses the wire, so
only it is clipped and noised) to an L2 norm C, average the clipped updates with equal weights, and add Gaussian
noise of standard deviation z*C/m to the average of m sampled clients. This module names the wrapper and its
arguments; ``server/`` builds it, ``clients/`` adds the clipping mod a client-side wrapper needs.

The budget is computed by Google's ``dp-accounting`` RDP accountant (the backend Flower's own accountant wraps; why
this one, and the neighbouring relation, in docs/spec.md §9): client-level (epsilon, delta)-DP of the sequence of
released global adapters, for a fixed population of N clients of which Flower samples m uniformly without
replacement each round. Replacing one client's data moves the sum of clipped updates by at most 2C, so the noise
is z/2 sensitivities; each round is a ``SampledWithoutReplacementDpEvent(N, m, Gaussian(z/2))``, and the figure is
the smaller of that bound and the bound without sampling (the subsampled bound is loose for small z).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedmem.common.fields import check_fields, option

ACCOUNTANT = "RDP (dp-accounting), client-level, replace-one, fixed-size sampling without replacement"


@dataclass
class DefenseConfig:
    """What protects the clients' data during training (``defense=none`` or ``defense=dp``)."""

    name: Literal["none", "dp"] = option("none", "none | dp (DP-FedAvg through Flower's differential-privacy wrappers)")
    noise_multiplier: float = option(
        1.0, "z: the Gaussian noise's standard deviation on the sum of clipped updates, in units of the clipping "
        "norm (Flower adds z*C/m to the average of m clients)")
    clipping: Literal["fixed", "adaptive"] = option(
        "fixed", "fixed: every round clips at clipping_norm; adaptive: the norm follows a quantile of the clients' "
        "update norms (Andrew et al.), starting at clipping_norm")
    clipping_norm: float = option(0.1, "C: the L2 norm each client's adapter update is clipped to (adaptive: the "
                                  "first round's)")
    side: Literal["server", "client"] = option(
        "server", "where updates are clipped: server (the server clips what it received) or client (each client "
        "clips before sending, Flower's clipping mod; the server never sees an unclipped update)")
    delta: float = option(1e-5, "the delta at which epsilon is reported (below 1/number of clients)")
    target_clipped_quantile: float = option(0.5, "adaptive: the quantile of update norms the clipping norm tracks")
    clip_norm_lr: float = option(0.2, "adaptive: the clipping norm's geometric learning rate")
    clipped_count_stddev: float | None = option(
        None, "adaptive: noise on the count of clipped updates (None: Flower's default, sampled clients / 20); it "
        "must exceed noise_multiplier / 2, or the update noise cannot keep the overall multiplier at z")

    def __post_init__(self):
        check_fields(self, "defense")
        if self.name == "none":
            return
        if not self.noise_multiplier > 0:
            raise ValueError(f"defense.noise_multiplier must be > 0 (with no noise the privacy budget is infinite), "
                             f"got {self.noise_multiplier}")
        if not self.clipping_norm > 0:
            raise ValueError(f"defense.clipping_norm must be > 0, got {self.clipping_norm}")
        if not 0 < self.delta < 1:
            raise ValueError(f"defense.delta must be in (0, 1), got {self.delta}")
        if not 0 <= self.target_clipped_quantile <= 1:
            raise ValueError(f"defense.target_clipped_quantile must be in [0, 1], got {self.target_clipped_quantile}")
        if not self.clip_norm_lr > 0:
            raise ValueError(f"defense.clip_norm_lr must be > 0, got {self.clip_norm_lr}")

    @property
    def active(self) -> bool:
        return self.name != "none"


def sampled_clients(strategy, num_clients: int) -> int:
    """How many clients Flower's FedAvg samples each round from ``num_clients`` connected ones under ``strategy``'s
    settings (``strategy.*``; Flower's own rule)."""
    return max(int(num_clients * strategy.fraction_train), strategy.min_train_nodes)


def check_defense(defense: DefenseConfig, sampled: int, population: int, rounds: int) -> None:
    """Refuse, in one line, a DP setting whose budget cannot be computed: before the run, not after it."""
    if not defense.active:
        return
    if defense.clipping == "adaptive":
        stddev = count_stddev(defense, sampled)
        if defense.noise_multiplier >= 2 * stddev:
            raise ValueError(
                f"defense.noise_multiplier={defense.noise_multiplier} needs defense.clipped_count_stddev above "
                f"{defense.noise_multiplier / 2:g} (it is {stddev:g}): adaptive clipping spends part of the budget on "
                f"the count of clipped updates, and at this setting the update noise cannot keep the overall "
                f"multiplier at z")
    if defense.delta >= 1 / population:
        raise ValueError(f"defense.delta={defense.delta:g} is not below 1/{population} clients: a budget at this "
                         f"delta protects no one (it allows one client's data to leak outright)")
    final = privacy_budget(defense, rounds, sampled, population)
    if rounds and final["epsilon"] == float("inf"):
        raise ValueError(f"defense.noise_multiplier={defense.noise_multiplier}: the accountant finds no finite "
                         f"epsilon at delta={defense.delta:g} after {rounds} rounds")


def count_stddev(defense: DefenseConfig, sampled: int) -> float:
    """Adaptive clipping's noise on the clipped-update count (Flower's default: sampled clients / 20)."""
    return defense.clipped_count_stddev if defense.clipped_count_stddev is not None else sampled / 20


def privacy_budget(defense: DefenseConfig, rounds: int, sampled: int, population: int) -> dict:
    """Epsilon at ``defense.delta`` after ``rounds`` released rounds of ``sampled`` of ``population`` clients, with
    the settings that decide it (the report's ``defense.dp``)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    replace_one = dp_accounting.NeighboringRelation.REPLACE_ONE
    gaussian = dp_accounting.GaussianDpEvent(defense.noise_multiplier / 2)  # sensitivity 2C under replace-one

    def epsilon(event) -> float:
        accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=replace_one)
        accountant.compose(event, rounds)
        return float(accountant.get_epsilon(defense.delta))

    sampled_event = dp_accounting.SampledWithoutReplacementDpEvent(population, sampled, gaussian)
    eps = 0.0 if rounds == 0 else min(epsilon(sampled_event), epsilon(gaussian))
    return {"epsilon": eps, "delta": defense.delta, "rounds": rounds, "noise_multiplier": defense.noise_multiplier,
            "clipping": defense.clipping, "clipping_norm": defense.clipping_norm, "side": defense.side,
            "sampled": sampled, "population": population, "sampling_rate": sampled / population,
            "accountant": ACCOUNTANT}


def round_privacy(defense: DefenseConfig, strategy, num_clients: int, rounds: int, clipping_norm: float | None = None,
                  update_norms: list[float] = ()) -> dict | None:
    """The report's ``defense.dp`` after ``rounds`` rounds (None without DP): the budget, the clipping norm this round
    used (adaptive clipping moves it) and how many of the clients' updates it clipped."""
    if not defense.active:
        return None
    sampled = sampled_clients(strategy, num_clients)
    out = privacy_budget(defense, rounds, sampled, num_clients)
    if clipping_norm is not None:
        out["clipping_norm"] = clipping_norm
    if update_norms:
        out["update_norms"] = list(update_norms)
        out["clipped"] = sum(n > out["clipping_norm"] for n in update_norms)
    return out


def flower_wrapper(defense: DefenseConfig, sampled: int) -> tuple[str, dict] | None:
    """(class name in ``flwr.serverapp.strategy``, keyword arguments besides the wrapped strategy) of the Flower
    DP wrapper ``defense`` selects; None without one."""
    if not defense.active:
        return None
    side = "ServerSide" if defense.side == "server" else "ClientSide"
    if defense.clipping == "fixed":
        return (f"DifferentialPrivacy{side}FixedClipping",
                {"noise_multiplier": defense.noise_multiplier, "clipping_norm": defense.clipping_norm,
                 "num_sampled_clients": sampled})
    return (f"DifferentialPrivacy{side}AdaptiveClipping",
            {"noise_multiplier": defense.noise_multiplier, "num_sampled_clients": sampled,
             "initial_clipping_norm": defense.clipping_norm, "target_clipped_quantile": defense.target_clipped_quantile,
             "clip_norm_lr": defense.clip_norm_lr, "clipped_count_stddev": defense.clipped_count_stddev})


def client_mod(defense: DefenseConfig) -> str | None:
    """The name of the ``flwr.clientapp.mod`` a client-side wrapper needs on every client (it clips the update
    before it leaves the client); None when the server clips or there is no defense."""
    if not defense.active or defense.side != "client":
        return None
    return "fixedclipping_mod" if defense.clipping == "fixed" else "adaptiveclipping_mod"
