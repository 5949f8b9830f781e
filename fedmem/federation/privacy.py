"""DP-FedAvg: the defense's settings (``defense.*``), the Flower wrapper and client mod that apply it, and the
privacy budget it spends.

Flower's own wrappers (``flwr.serverapp.strategy.DifferentialPrivacy{Server,Client}Side{Fixed,Adaptive}Clipping``)
clip each client's update (its adapter minus the round's global adapter: only the LoRA adapter crosses the wire, so
only it is clipped and noised) to an L2 norm C, average the clipped updates with equal weights, and add Gaussian
noise of standard deviation z*C/m to the average of m sampled clients. This module names the wrapper and its
arguments; ``server/`` builds it, ``clients/`` adds the clipping mod a client-side wrapper needs.

The budget is client-level (epsilon, delta)-DP of the sequence of released global adapters, for a fixed population
of N clients of which Flower samples m uniformly without replacement each round (why, and the neighbouring
relation, in docs/spec.md §9). Replacing one client's data moves the sum of clipped updates by at most 2C, so each
round is a Gaussian of z/2 sensitivities. Without sampling (m = N) the T composed rounds are exactly one Gaussian
mechanism, mu-GDP with mu = 2 sqrt(sum 1/z_t^2) (Dong, Roth and Su 2022), and its epsilon is exact
(:func:`gdp_epsilon`). With sampling the figure is the smaller of that exact bound (releasing a function of a subset
is no less private) and Google's ``dp-accounting`` RDP accountant of ``SampledWithoutReplacementDpEvent(N, m,
Gaussian(z/2))`` rounds (the backend Flower's own accountant wraps); its privacy-loss-distribution accountant
analyses Poisson sampling only, which is not what Flower does.

``fedmem.common.accounting.mechanism_epsilon`` is the epsilon of the same Gaussian sums for one client of norm C added
or removed (the relation the canary clients' estimate is about, docs/spec.md §10).

Where the proof holds (SPEC §9): the noise Flower adds is calibrated to the m sampled clients, so a round that
averages m' < m replies (failed clients under ``strategy.min_trained_clients``) carries z·m'/m noise on its sum and
is accounted so; a server optimizer (FedAvgM, FedAdam, FedYogi) builds its state from un-noised averages, which the
wrapper's noise does not cover, and is refused; adaptive clipping follows Andrew et al. (the corrected wrappers in
``server/adaptive_clipping.py``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedmem.common.accounting import composed_mu, gdp_epsilon
from fedmem.common.fields import check_fields, option
from fedmem.federation.strategies import strategy_named

NOISE_STREAM = 12  # the seed's generator stream of the DP noise on each round's release
ACCOUNTANTS = {
    "exact": "exact (composed Gaussian, mu-GDP), client-level, replace-one, every client in every round",
    "rdp": "RDP (dp-accounting), client-level, replace-one, fixed-size sampling without replacement",
    "exact_unsampled": "exact without sampling (mu-GDP), client-level, replace-one: tighter here than RDP with "
                       "fixed-size sampling without replacement",
}


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
    target_clipped_quantile: float = option(
        0.5, "adaptive: gamma, the quantile of the update norms the clipping norm tracks, i.e. the share of updates "
        "meant to stay unclipped (Andrew et al.)")
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


def check_defense(defense: DefenseConfig, sampled: int, population: int, rounds: int, strategy=None) -> None:
    """Refuse, in one line, a DP setting whose budget cannot be computed or would not hold: before the run, not after
    it. ``strategy``: the run's strategy settings (a server optimizer is refused)."""
    if not defense.active:
        return
    if strategy is not None and strategy_named(strategy.name).server_optimizer:
        raise ValueError(f"defense=dp with strategy={strategy.name}: its server optimizer builds its state from the "
                         "clients' un-noised average, which Flower's DP wrapper noises only after the optimizer, so no "
                         "privacy budget holds for what is released; use strategy=fedavg or fedprox")
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
    final = privacy_budget(defense, [sampled] * rounds, sampled, population)
    if rounds and final["epsilon"] == float("inf"):
        raise ValueError(f"defense.noise_multiplier={defense.noise_multiplier}: the accountant finds no finite "
                         f"epsilon at delta={defense.delta:g} after {rounds} rounds")


def count_stddev(defense: DefenseConfig, sampled: int) -> float:
    """Adaptive clipping's noise on the clipped-update count (Flower's default: sampled clients / 20)."""
    return defense.clipped_count_stddev if defense.clipped_count_stddev is not None else sampled / 20


def update_multiplier(defense: DefenseConfig, sampled: int) -> float:
    """The noise multiplier on the clipped updates: z, or under adaptive clipping the larger one that leaves room
    for the count's noise so that the round as a whole is a Gaussian of multiplier z (Andrew et al.; Flower's
    ``compute_adaptive_noise_params``)."""
    z = defense.noise_multiplier
    if defense.clipping != "adaptive":
        return z
    return (z ** -2 - (2 * count_stddev(defense, sampled)) ** -2) ** -0.5


def effective_multiplier(defense: DefenseConfig, sampled: int, averaged: int) -> float:
    """The round's noise multiplier on the sum of the updates it averaged: the noise is calibrated to ``sampled``
    clients, so averaging ``averaged`` < ``sampled`` replies scales the updates' share by averaged / sampled;
    adaptive clipping's count noise is unchanged."""
    z_updates = update_multiplier(defense, sampled) * averaged / sampled
    if defense.clipping != "adaptive":
        return z_updates
    return (z_updates ** -2 + (2 * count_stddev(defense, sampled)) ** -2) ** -0.5


def _multipliers(defense: DefenseConfig, averaged: list[int], sampled: int) -> list[float]:
    return [effective_multiplier(defense, sampled, m) for m in averaged]


def _rdp_epsilon(multipliers: list[float], sampled: int, population: int, delta: float) -> float:
    """dp-accounting's RDP bound for replace-one rounds sampled without replacement (``SampledWithoutReplacement``)."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    for z in multipliers:
        gaussian = dp_accounting.GaussianDpEvent(z / 2)  # sensitivity 2C under replace-one
        accountant.compose(dp_accounting.SampledWithoutReplacementDpEvent(population, sampled, gaussian))
    return float(accountant.get_epsilon(delta))


def privacy_budget(defense: DefenseConfig, averaged: list[int], sampled: int, population: int) -> dict:
    """Epsilon at ``defense.delta`` after the released rounds, round t having averaged ``averaged[t]`` of the
    ``sampled`` clients drawn from ``population``, with the settings that decide it (the report's ``defense.dp``):
    exact with every client sampled, else the tighter of the exact unsampled bound and the RDP accountant's."""
    multipliers = _multipliers(defense, averaged, sampled)
    exact = gdp_epsilon(composed_mu(multipliers, 2.0), defense.delta)
    if not averaged:
        eps, accountant = 0.0, ACCOUNTANTS["exact"]
    elif sampled >= population:
        eps, accountant = exact, ACCOUNTANTS["exact"]
    else:
        rdp = _rdp_epsilon(multipliers, sampled, population, defense.delta)
        eps, accountant = (rdp, ACCOUNTANTS["rdp"]) if rdp <= exact else (exact, ACCOUNTANTS["exact_unsampled"])
    return {"epsilon": eps, "delta": defense.delta, "rounds": len(averaged), "noise_multiplier": defense.noise_multiplier,
            "clipping": defense.clipping, "clipping_norm": defense.clipping_norm, "side": defense.side,
            "sampled": sampled, "population": population, "sampling_rate": sampled / population,
            "averaged": list(averaged), "accountant": accountant}


def round_privacy(defense: DefenseConfig, strategy, num_clients: int, averaged: list[int],
                  clipping_norm: float | None = None, update_norms: list[float] = (), releases: int = 1
                  ) -> dict | None:
    """The report's ``defense.dp`` after the rounds so far (``averaged``: how many replies each averaged; None
    without DP): the budget, the clipping norm this round used (adaptive clipping moves it) and how many of the
    clients' updates it clipped. ``releases``: noisy copies of every round's sum the run keeps (2 where it writes
    the canary clients' release beside the model, each with noise of its own), all of them counted."""
    if not defense.active:
        return None
    sampled = sampled_clients(strategy, num_clients)
    out = privacy_budget(defense, [m for m in averaged for _ in range(releases)], sampled, num_clients)
    out["rounds"], out["averaged"] = len(averaged), list(averaged)
    if releases > 1:
        out["releases_per_round"] = releases
        out["accountant"] += (f"; {releases} releases of every round counted (the model and the canary clients' "
                              "release kept beside it)")
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


@contextmanager
def seeded_noise(seed: int, stream: int, run_round: int):
    """numpy's global generator, from which Flower's DP wrappers draw their Gaussian noise, seeded for one round's
    aggregation from (``seed``, ``stream``, ``run_round``) and given back as it was. A seeded run (and a resumed one)
    then draws the same noise every time; a deployment would keep its noise secret, a study must repeat it. Each
    release has a stream of its own, so two releases of one round get independent draws."""
    state = np.random.get_state()
    np.random.seed(np.random.SeedSequence([seed, stream, run_round]).generate_state(8))
    try:
        yield
    finally:
        np.random.set_state(state)
