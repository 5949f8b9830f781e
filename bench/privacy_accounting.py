"""Bench: the privacy budget fedmem reports against the RDP accountant alone, and the ε of the mechanism the canary
clients' estimate is about, for the defenses frontier's settings and a sampled federation.

    python bench/privacy_accounting.py

Columns, each at δ = 1e-5 after T rounds of DP-FedAvg at noise multiplier z with m of N clients sampled per round:
  rdp           dp-accounting's RDP accountant, replace-one (fedmem's figure before it used the exact curve)
  exact         the composed Gaussian's exact ε, replace-one (mu-GDP, mu = 2 sqrt(T) / z), ignoring sampling
  reported      what a round's report says (docs/spec.md §9): exact with every client sampled, else the smaller of
                exact and rdp
  add/remove    the same Gaussian sums for one client of norm C added or removed (the canary clients' relation,
                docs/spec.md §10): exact, or dp-accounting's PLD accountant of Poisson-sampled rounds
  2 releases    reported, had a second independent noisy copy of every round's sum been released beside the model
"""

from __future__ import annotations

from fedmem.common.accounting import mechanism_epsilon
from fedmem.federation.privacy import DefenseConfig, _rdp_epsilon, privacy_budget

SETTINGS = [  # (z, rounds, sampled, population): the frontier (3 clients, 3 rounds), z = 1, and a sampled federation
    (0.001, 3, 3, 3), (0.01, 3, 3, 3), (0.1, 3, 3, 3), (1.0, 3, 3, 3), (1.0, 10, 10, 100), (4.0, 50, 10, 100),
]


def main() -> None:
    print(f"{'z':>6} {'T':>3} {'m/N':>7} | {'rdp':>10} {'exact':>10} {'reported':>10} {'rdp/reported':>12} | "
          f"{'add/remove':>10} {'2 releases':>10}")
    for z, rounds, sampled, population in SETTINGS:
        dp = DefenseConfig(name="dp", noise_multiplier=z)
        rdp = _rdp_epsilon([z] * rounds, sampled, population, dp.delta)
        exact = privacy_budget(dp, [population] * rounds, population, population)["epsilon"]
        reported = privacy_budget(dp, [sampled] * rounds, sampled, population)["epsilon"]
        twice = privacy_budget(dp, [sampled] * 2 * rounds, sampled, population)["epsilon"]
        add_remove = mechanism_epsilon([z] * rounds, sampled / population, dp.delta)
        print(f"{z:>6g} {rounds:>3} {sampled:>3}/{population:<3} | {rdp:>10.4g} {exact:>10.4g} {reported:>10.4g} "
              f"{rdp / reported:>12.3f} | {add_remove:>10.4g} {twice:>10.4g}")


if __name__ == "__main__":
    main()
