"""Client-level privacy estimate from canary clients (Andrew et al., "One-shot Empirical Privacy Estimation for
Federated Learning", ICLR 2024): how far what a round releases reveals one client's update, in ε.

The data names k canary clients (``data.audit_canary_clients``); the federation sends each one's fixed random direction
through the round like a real client's update, into the round's *canary release*: the round's aggregate with the
canaries averaged in, noised like the global model with a draw of its own, that nothing trains on
(``fedmem.federation.canary_clients``). This method draws the same k directions and k' more that were never inserted
(``unseen``), all from the run's seed (``fedmem.engine.directions``), and after each round takes the cosine between
each direction and the release's change, Δ_s = (canary release of round s) − θ_(s−1):

- **final model** (the adversary sees the model of this round only): the change since round 0, Δ_1 + ... + Δ_r;
- **every round** (the adversary sees every round's model): each round's change Δ_s, s = 1..r, and per direction the
  largest of those cosines.

A direction never inserted is independent of the release, so its cosine is distributed as the null (about N(0, 1/d)
in d dimensions); an inserted one is shifted by its own contribution. As the paper does, a Gaussian is fitted to each
set of statistics (unseen, inserted) and the estimate is the ε at the run's δ of telling the two Gaussians apart
(:func:`gaussian_pair_epsilon`): for one round of the Gaussian mechanism it is that mechanism's ε for a client whose
update has norm C (the paper's analysis, asymptotically in d). It is an estimate, not a bound: its interval is a
percentile bootstrap over the canaries (inserted and unseen resampled apart). At round 0 nothing has changed and it is
0. The releases and earlier rounds' adapters are read back from the run (``AuditedModel.canary_release``,
``AuditedModel.global_adapter``), so a resumed run or a re-audit of some rounds gives the same figures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, register
from fedmem.common.fields import check_fields, option, positive

THREATS = {"final": "final model", "every_round": "every round"}
BOOTSTRAP_STREAM = 5  # a generator stream of the seed, apart from other methods' draws
MAX_EPSILON = 1e6  # an estimate is reported at most at this (unbounded: no noise, or a resample without spread)
MIN_SD = 1e-12  # a fit to equal cosines (a bootstrap draw of one canary) has no spread: far below any cosine's


@dataclass
class CanaryClientsConfig:
    """audit.canary_clients: the client-level estimate (the canary clients themselves are data.audit_canary_clients)."""

    unseen: int = option(64, "directions never inserted, whose cosines are the null (a dot product each, no model "
                             "pass): enough that the null's spread is well estimated beside a few canary clients")
    fit: Literal["pooled", "separate"] = option(
        "pooled", "the Gaussians fitted to the inserted and unseen statistics: pooled (one variance for both, the "
                  "Gaussian mechanism's; a shift of the inserted above the unseen counts) or separate (a variance "
                  "each, as the paper's code fits them: biased upward unless hundreds of canaries are inserted)")
    resamples: int = option(200, "bootstrap resamples of the estimate's 95% interval")
    delta: float | None = option(None, "δ of the estimate; null = the run's defense.delta (filled in when the "
                                       "config is checked)")

    def __post_init__(self):
        check_fields(self, "audit.canary_clients")
        positive(self, "audit.canary_clients", "resamples")
        if self.unseen < 2:
            raise ValueError(f"audit.canary_clients.unseen must be >= 2 (a Gaussian is fitted to them), got "
                             f"{self.unseen}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"audit.canary_clients.delta must be in (0, 1), got {self.delta}")


# ---------------------------------------------------------------- ε of two Gaussians


def _log_mass(lo: float, hi: float, mu: float, sd: float) -> float:
    """log P[lo < Y < hi], Y ~ N(mu, sd²), from the nearer tail so that far-out intervals keep their digits."""
    from scipy.stats import norm

    if hi <= lo:
        return -math.inf
    if lo > mu:  # upper tail: sf(lo) - sf(hi)
        a, b = norm.logsf(lo, mu, sd), norm.logsf(hi, mu, sd)
    else:  # cdf(hi) - cdf(lo)
        a, b = norm.logcdf(hi, mu, sd), norm.logcdf(lo, mu, sd)
    return float(a + math.log1p(-math.exp(b - a))) if b < a else -math.inf


def _log_delta(eps: float, p: tuple[float, float], q: tuple[float, float]) -> float:
    """log of P(S) - e^ε Q(S) at its largest over sets S, P = N(p) and Q = N(q) given as (mean, sd): S is where the
    privacy loss log p(y) / q(y) = a y² + b y + c exceeds ε."""
    (mp, sp), (mq, sq) = p, q
    a = 0.5 / sq ** 2 - 0.5 / sp ** 2
    b = mp / sp ** 2 - mq / sq ** 2
    c = 0.5 * (mq / sq) ** 2 - 0.5 * (mp / sp) ** 2 + math.log(sq / sp) - eps
    if abs(a) * max(sp, sq) ** 2 < 1e-12:  # equal variances: the loss is linear in y, S a half-line
        if b == 0:
            return -math.inf
        parts = [(-c / b, math.inf)] if b > 0 else [(-math.inf, -c / b)]
    else:
        disc = b * b - 4 * a * c
        if disc <= 0:  # the loss never crosses ε: S is empty or everything, and P(S) - e^ε Q(S) <= 0
            return -math.inf
        half = -0.5 * (b + math.copysign(math.sqrt(disc), b))  # the roots without cancellation
        r1, r2 = sorted((half / a, c / half))
        parts = [(-math.inf, r1), (r2, math.inf)] if a > 0 else [(r1, r2)]
    log_p = float(np.logaddexp.reduce([_log_mass(lo, hi, mp, sp) for lo, hi in parts]))
    log_q = float(np.logaddexp.reduce([_log_mass(lo, hi, mq, sq) for lo, hi in parts]))
    gap = eps + log_q - log_p
    return -math.inf if gap >= 0 or log_p == -math.inf else float(log_p + math.log1p(-math.exp(gap)))


def gaussian_pair_epsilon(null: tuple[float, float], alternative: tuple[float, float], delta: float) -> float:
    """The smallest ε >= 0 at which N(null) and N(alternative) ((mean, sd) each) are (ε, δ)-indistinguishable, both
    ways: the ε of a mechanism whose output with and without a client is distributed so."""
    from scipy.optimize import brentq

    target = math.log(delta)
    worst = lambda eps: max(_log_delta(eps, alternative, null), _log_delta(eps, null, alternative))  # noqa: E731
    if worst(0.0) <= target:
        return 0.0
    if worst(MAX_EPSILON) > target:
        return MAX_EPSILON
    hi = 1.0
    while worst(hi) > target:
        hi *= 2
    return float(brentq(lambda eps: worst(eps) - target, 0.0 if hi == 1 else hi / 2, min(hi, MAX_EPSILON), xtol=1e-9))


def estimate(inserted: np.ndarray, unseen: np.ndarray, delta: float, fit: str = "pooled") -> float:
    """The paper's estimate: a Gaussian fitted to each set of statistics and the ε between the two. ``separate``: each
    with its own variance, as the paper's code fits them; ``pooled``: one variance for both, the Gaussian mechanism's
    (both sets have variance about 1/d), and only a shift of the inserted canaries above the unseen ones counts."""
    if fit == "separate":
        gaussian = lambda x: (float(np.mean(x)), max(float(np.std(x, ddof=1)), MIN_SD))  # noqa: E731
        return gaussian_pair_epsilon(gaussian(unseen), gaussian(inserted), delta)
    k, j = len(inserted), len(unseen)
    sd = math.sqrt(((k - 1) * np.var(inserted, ddof=1) + (j - 1) * np.var(unseen, ddof=1)) / (k + j - 2))
    shift = (float(np.mean(inserted)) - float(np.mean(unseen))) / max(sd, MIN_SD)
    return gaussian_pair_epsilon((0.0, 1.0), (shift, 1.0), delta) if shift > 0 else 0.0


def bootstrap_ci95(inserted: np.ndarray, unseen: np.ndarray, delta: float, fit: str, resamples: int,
                   rng: np.random.Generator) -> list[float]:
    """Percentile 95% interval of :func:`estimate`, inserted and unseen canaries resampled apart."""
    draws = [estimate(inserted[rng.integers(len(inserted), size=len(inserted))],
                      unseen[rng.integers(len(unseen), size=len(unseen))], delta, fit) for _ in range(resamples)]
    return [float(x) for x in np.percentile(draws, [2.5, 97.5])]


# ---------------------------------------------------------------- the method


@register
class CanaryClients(AuditMethod):
    name = "canary_clients"
    Config = CanaryClientsConfig
    title = "Client-level privacy estimate (canary clients)"
    size_keys = ("unseen",)
    figures = (
        Figure("epsilon_final", "client-level ε estimate (final model)", kind="score", console=True, epsilon=True),
        Figure("epsilon_every_round", "client-level ε estimate (every round)", kind="score", epsilon=True),
    )

    @classmethod
    def check(cls, cfg: CanaryClientsConfig, experiment) -> None:
        if experiment.data.audit_canary_clients < 2:
            raise ValueError(f"audit.canary_clients fits a Gaussian to the canary clients' cosines, and "
                             f"data.audit_canary_clients={experiment.data.audit_canary_clients}: set it to 2 or more")
        if cfg.delta is None:
            cfg.delta = experiment.defense.delta

    @classmethod
    def round_cost(cls, cfg: CanaryClientsConfig, clients: int) -> str:
        return "no model pass: cosines of the canary release's change with each canary direction"

    def __init__(self, cfg: CanaryClientsConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        planted = pool.ground_truth.get("canary_clients") or {}
        self.inserted = int(planted.get("count", 0))
        if self.inserted < 2:
            raise ValueError("audit.canary_clients measures the data's canary clients, and this data has fewer than "
                             "2: set data.audit_canary_clients")
        self.unseen = cfg.unseen
        self.round_cosines: dict[int, np.ndarray] = {}  # round s -> each direction's cosine with Δ_s

    def _cosines(self, deltas: list[np.ndarray]) -> np.ndarray:
        """[len(deltas), inserted + unseen]: each change's cosine with each direction (nan for no change). Each dot
        product is taken alone, so a round's cosines have the same bits whatever else is computed with them (a
        re-audit of one round reads the same figures as the run)."""
        from fedmem.engine.directions import unit_direction

        size = len(deltas[0])
        norms = np.array([np.linalg.norm(d) for d in deltas])
        dots = np.empty((len(deltas), self.inserted + self.unseen))
        for j in range(self.inserted + self.unseen):
            u = unit_direction(self.pool.seed, j, size)
            dots[:, j] = [float(d @ u) for d in deltas]
        with np.errstate(invalid="ignore", divide="ignore"):
            return dots / norms[:, None]

    def audit(self, audited: AuditedModel) -> dict:
        from fedmem.engine.directions import flat

        r = audited.round
        out = {"config": asdict(self.cfg), "inserted": self.inserted, "unseen": self.unseen, "delta": self.cfg.delta}
        if r == 0:  # the model has not changed: nothing to see of any canary
            return {**out, "headline": {"epsilon_final": 0.0, "epsilon_every_round": 0.0}, "canaries": []}
        states, changes = {}, {}

        def state(s: int) -> np.ndarray | None:
            if s not in states:
                adapter = audited.global_adapter(s)
                states[s] = None if adapter is None else flat(adapter)
            return states[s]

        def change(s: int) -> np.ndarray | None:  # Δ_s
            if s not in changes:
                release, before = audited.canary_release(s), state(s - 1)
                changes[s] = None if release is None or before is None else flat(release) - before
            return changes[s]

        missing = [s for s in range(1, r + 1) if s not in self.round_cosines and change(s) is not None]
        total = None  # Δ_1 + ... + Δ_r, summed in round order: a re-audit of one round has the same bits
        if all(change(s) is not None for s in range(1, r + 1)):
            total = change(1).copy()
            for s in range(2, r + 1):
                total += change(s)
        wanted = [change(s) for s in missing] + ([total] if total is not None else [])
        cosines = self._cosines(wanted) if wanted else []
        self.round_cosines.update(zip(missing, cosines))
        statistics = {}
        if total is not None:
            statistics["final"] = cosines[-1]
        if all(s in self.round_cosines for s in range(1, r + 1)):
            statistics["every_round"] = np.max([self.round_cosines[s] for s in range(1, r + 1)], axis=0)
        headline, fits = {}, {}
        for threat in THREATS:
            x = statistics.get(threat)
            if x is None or np.isnan(x).any():
                headline[f"epsilon_{threat}"], headline[f"epsilon_{threat}_ci95"] = None, None
                continue
            seen, null = x[: self.inserted], x[self.inserted:]
            headline[f"epsilon_{threat}"] = estimate(seen, null, self.cfg.delta, self.cfg.fit)
            rng = np.random.default_rng([self.pool.seed, BOOTSTRAP_STREAM, r])  # the same draws for either threat
            headline[f"epsilon_{threat}_ci95"] = bootstrap_ci95(seen, null, self.cfg.delta, self.cfg.fit,
                                                                self.cfg.resamples, rng)
            fits[threat] = {"inserted": [float(seen.mean()), float(seen.std(ddof=1))],
                            "unseen": [float(null.mean()), float(null.std(ddof=1))]}
        rows = [{"direction": j, "inserted": j < self.inserted,
                 **{threat: float(x[j]) for threat, x in statistics.items()}}
                for j in range(self.inserted + self.unseen)]
        out = {**out, "headline": headline, "fits": fits, "canaries": rows}
        if len(statistics) < len(THREATS):
            out["note"] = ("The run did not keep every round's canary release or global adapter up to this one: a "
                           "figure that needs them is n/a.")
        return out
