"""The exact privacy of composed Gaussian mechanisms, in ε at δ: what DP-FedAvg's budget (``fedmem.federation.
privacy``) and the canary clients' yardstick (``fedmem.audit.canary_clients``) both compute, through Google's
dp-accounting. Without sampling, Gaussian rounds compose exactly into one Gaussian (mu-GDP, Dong, Roth and Su 2022),
whose privacy curve is known in closed form; with Poisson sampling, dp-accounting's privacy-loss-distribution
accountant."""

from __future__ import annotations

import math


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε at which a mu-GDP mechanism (one Gaussian of standard deviation sensitivity / mu, or a
    composition of Gaussians whose mus add in squares) is (ε, δ)-DP: exact, not a bound (dp-accounting's analytic
    Gaussian mechanism, Balle and Wang 2018)."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    return 0.0 if mu <= 0 else float(get_epsilon_gaussian(1 / mu, delta))


def composed_mu(multipliers: list[float], sensitivity: float) -> float:
    """mu of the composition of Gaussian rounds of the given noise multipliers (noise standard deviation over the
    clipping norm C), for a neighbouring relation that moves the sum by ``sensitivity`` C."""
    return sensitivity * math.sqrt(sum(z ** -2 for z in multipliers)) if multipliers else 0.0


def mechanism_epsilon(multipliers: list[float], sampling_rate: float, delta: float) -> float:
    """Epsilon at ``delta`` of the Gaussian sums for one client of norm C added or removed, each round of noise
    multiplier ``multipliers[t]`` including the client with probability ``sampling_rate``: exact (mu-GDP) when every
    round includes it, else dp-accounting's PLD accountant of Poisson-sampled Gaussians (never above the exact
    unsampled figure)."""
    exact = gdp_epsilon(composed_mu(multipliers, 1.0), delta)
    if sampling_rate >= 1 or not multipliers:
        return exact
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    # the loss's grid scaled to the ε it is read at (upward rounding: still a bound): a fixed 1e-4 grid costs minutes
    # and gigabytes once ε reaches the thousands, for digits no reader needs
    accountant = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                                      value_discretization_interval=max(1e-4, exact * 1e-5))
    for z in multipliers:
        accountant.compose(dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(z)))
    return min(exact, float(accountant.get_epsilon(delta)))
