"""Client-level privacy estimate from canary clients (Andrew et al., "One-shot Empirical Privacy Estimation for
Federated Learning", ICLR 2024): how far what a round releases reveals one client's update, in ε.

The data names k canary clients (``data.audit_canary_clients``); the federation sends each one's fixed random direction
through the round like a real client's update, into the round's *canary release*: the round's aggregate with the
canaries averaged in, noised like the global model with a draw of its own, that nothing trains on
(``fedmem.federation.canary_clients``). It is a second draw of the same mechanism, not the released model: the model
never carries a canary. The run keeps, per round, that release's change Δ_s = (canary release of round s) − θ_(s−1)
along the k directions and k' more that were never inserted (``unseen``), all from the run's seed
(``fedmem.engine.directions``), and Δ_s's norm (``fedmem.experiment.archive``); the release itself is written only
with ``keep_release``, and the run's budget then counts it as a second release of every round. After each round:

- **final model** (the adversary sees the model of this round only): each direction's projection of the change since
  round 0, Δ_1 + ... + Δ_r (the cosine of the paper up to the one norm every direction shares, which no ε depends on);
- **every round** (the adversary sees every round's model): each round's cosine with Δ_s, s = 1..r, and per
  direction the largest.

A direction never inserted is independent of the release, so its statistic is distributed as the null; an inserted
one is shifted by its own contribution. As the paper does, a Gaussian is fitted to each set of statistics (unseen,
inserted) and the estimate is the ε at the run's δ of telling the two Gaussians apart (:func:`gaussian_pair_epsilon`):
for the Gaussian mechanism it is that mechanism's ε for a client whose update has norm C (the paper's analysis,
asymptotically in d). It is an estimate, not a bound: its interval is a percentile bootstrap over the canaries
(inserted and unseen resampled apart). At round 0 nothing has changed and it is 0.

**Its yardstick** is the ε of the mechanism it estimates, computed exactly (``fedmem.federation.privacy.
mechanism_epsilon``): the Gaussian sums of the rounds so far for one client of norm C added or removed, at each
round's noise multiplier and the canaries' sampling rate. The accountant's budget beside it is for another relation
(one client replaced, 2C) and reads looser by that alone. Read per threat model:

- *saturated*: the release's noise makes up less than half of the null's variance (the real clients' own updates
  spread the unseen directions more than the noise does), so the statistic measures the updates, not the noise, and
  reaches no further than it would without DP: no ratio to the mechanism's ε is read;
- *above the mechanism*: the estimate's interval lies wholly above the mechanism's ε, so the release carries less
  noise than the configuration says, or the accounting is wrong: an alert on the console and the page;
- otherwise the ratio estimate / mechanism ε, with its interval.

The feature's other parts: the canary clients' rules (``fedmem.federation.canary_clients``), their messages and
release in Flower's round (``server/canary_clients.py``, ``server/server_app.py``), what the run keeps of the release
(``fedmem.experiment.archive``), and how the section reads (``fedmem.reports.views.canary_clients``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, register
from fedmem.common.accounting import mechanism_epsilon
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
    keep_release: bool = option(
        False, "also write each round's canary release (round_<r>/canary_release/): a second noisy copy of the real "
               "clients' sum, which the run's privacy budget then counts as a second release of every round")
    saturation: float = option(0.5, "the share of the null's variance the release's noise must make up for the "
                                    "estimate to be read against the mechanism's ε (below it: saturated)")

    def __post_init__(self):
        check_fields(self, "audit.canary_clients")
        positive(self, "audit.canary_clients", "resamples")
        if self.unseen < 2:
            raise ValueError(f"audit.canary_clients.unseen must be >= 2 (a Gaussian is fitted to them), got "
                             f"{self.unseen}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"audit.canary_clients.delta must be in (0, 1), got {self.delta}")
        if not 0 < self.saturation < 1:
            raise ValueError(f"audit.canary_clients.saturation must be in (0, 1), got {self.saturation}")


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


def reading(estimate_ci: list[float] | None, mechanism: float | None, share: float | None, saturation: float
            ) -> str:
    """How one threat model's estimate reads against the mechanism's ε: ``no noise`` (no DP: no mechanism to read it
    against), ``above the mechanism``, ``saturated`` or ``read``."""
    if mechanism is None or share is None:
        return "no noise"
    if estimate_ci is not None and estimate_ci[0] > mechanism:
        return "above the mechanism"
    return "saturated" if share < saturation else "read"


READINGS = {
    "no noise": "no DP: nothing to read the estimate against",
    "above the mechanism": "the estimate's interval lies wholly above the mechanism's ε: the release carries less "
                           "noise than configured, or the accounting is wrong",
    "saturated": "saturated: the release's noise is under its share of the null's spread, so the statistic measures "
                 "the clients' updates, as it would without DP; no ratio is read",
    "read": "read against the mechanism's ε",
}


@register
class CanaryClients(AuditMethod):
    name = "canary_clients"
    Config = CanaryClientsConfig
    title = "Client-level privacy estimate (canary clients)"
    size_keys = ("unseen",)
    figures = (
        Figure("epsilon_final", "client-level ε estimate (final model)", kind="score", console=True, epsilon=True),
        Figure("epsilon_every_round", "client-level ε estimate (every round)", kind="score", epsilon=True),
        Figure("epsilon_mechanism", "the mechanism's ε (one client added or removed)", kind="score", ci=None,
               memorization=None, console=True),
        Figure("ratio_final", "estimate ÷ the mechanism's ε (final model)", kind="score", memorization=None),
        Figure("ratio_every_round", "estimate ÷ the mechanism's ε (every round)", kind="score", memorization=None),
        Figure("epsilon_accountant", "the accountant's ε (one client replaced)", kind="score", ci=None,
               memorization=None, sweep=None),
        Figure("ratio_accountant_final", "estimate ÷ the accountant's ε (final model)", kind="score",
               memorization=None, sweep=None),
        Figure("noise_share_final", "the noise's share of the null's variance (final model)", ci=None,
               memorization=None, sweep=None),
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
        return "no model pass: the canary release's change along each direction, kept by the run"

    def __init__(self, cfg: CanaryClientsConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        planted = pool.ground_truth.get("canary_clients") or {}
        self.inserted = int(planted.get("count", 0))
        if self.inserted < 2:
            raise ValueError("audit.canary_clients measures the data's canary clients, and this data has fewer than "
                             "2: set data.audit_canary_clients")
        self.unseen = cfg.unseen

    def _kept(self, audited: AuditedModel, r: int) -> list[dict] | None:
        """Rounds 1..r of what the run kept of the canary release, cut to this audit's directions; None where a round
        is missing. A run that kept fewer directions than asked for is refused in one line."""
        rounds = [audited.canary_projections(s) for s in range(1, r + 1)]
        if any(p is None for p in rounds):
            return None
        wanted = self.inserted + self.unseen
        if (have := min(len(p["dots"]) for p in rounds)) < wanted:
            raise ValueError(f"audit.canary_clients.unseen={self.unseen}: the run kept its canary releases along "
                             f"{have} directions, {self.inserted} of them its canaries: set it to at most "
                             f"{have - self.inserted}")
        return [p | {"dots": np.asarray(p["dots"][:wanted])} for p in rounds]

    def audit(self, audited: AuditedModel) -> dict:
        r = audited.round
        out = {"config": asdict(self.cfg), "inserted": self.inserted, "unseen": self.unseen, "delta": self.cfg.delta}
        if r == 0:  # the model has not changed: nothing to see of any canary
            return {**out, "headline": {"epsilon_final": 0.0, "epsilon_every_round": 0.0}, "canaries": []}
        rounds = self._kept(audited, r)
        if rounds is None:
            return {**out, "headline": {f"epsilon_{t}": None for t in THREATS}, "canaries": [],
                    "note": "The run did not keep every round's canary release up to this one: the estimate is n/a."}
        noisy = all(p["multiplier"] is not None for p in rounds)
        mechanism = mechanism_epsilon([p["multiplier"] for p in rounds], rounds[0].get("sampling_rate", 1.0),
                                      self.cfg.delta) if noisy else None
        with np.errstate(invalid="ignore", divide="ignore"):
            statistics = {"final": np.sum([p["dots"] for p in rounds], axis=0),
                          "every_round": np.max([p["dots"] / p["norm"] for p in rounds], axis=0)}
        null = statistics["final"][self.inserted:]
        shares = {  # the release's noise over the null's variance: of the summed projections, of each round's cosine
            "final": min(1.0, sum(p["noise_sd"] ** 2 for p in rounds) / float(np.var(null, ddof=1))) if noisy else None,
            "every_round": min(1.0, min(p["size"] * p["noise_sd"] ** 2 / p["norm"] ** 2 for p in rounds))
            if noisy else None}
        headline, fits, readings = {"epsilon_mechanism": mechanism, "epsilon_accountant": audited.budget}, {}, {}
        for threat in THREATS:
            x = statistics[threat]
            headline[f"noise_share_{threat}"] = shares[threat]
            if np.isnan(x).any():  # a round whose release did not change
                headline[f"epsilon_{threat}"], headline[f"epsilon_{threat}_ci95"] = None, None
                continue
            seen, unseen = x[: self.inserted], x[self.inserted:]
            headline[f"epsilon_{threat}"] = estimate(seen, unseen, self.cfg.delta, self.cfg.fit)
            rng = np.random.default_rng([self.pool.seed, BOOTSTRAP_STREAM, r])  # the same draws for either threat
            ci = bootstrap_ci95(seen, unseen, self.cfg.delta, self.cfg.fit, self.cfg.resamples, rng)
            headline[f"epsilon_{threat}_ci95"] = ci
            readings[threat] = reading(ci, mechanism, shares[threat], self.cfg.saturation)
            for against, eps in (("", mechanism), ("accountant_", audited.budget)):  # each ratio labelled
                read = readings[threat] in ("read", "above the mechanism") and eps
                headline[f"ratio_{against}{threat}"] = headline[f"epsilon_{threat}"] / eps if read else None
                headline[f"ratio_{against}{threat}_ci95"] = [ci[0] / eps, ci[1] / eps] if read else None
            fits[threat] = {"inserted": [float(seen.mean()), float(seen.std(ddof=1))],
                            "unseen": [float(unseen.mean()), float(unseen.std(ddof=1))]}
        rows = [{"direction": j, "inserted": j < self.inserted,
                 **{threat: float(x[j]) for threat, x in statistics.items()}}
                for j in range(self.inserted + self.unseen)]
        out |= {"headline": headline, "fits": fits, "canaries": rows, "readings": readings,
                "mechanism": {"relation": "one client of norm C added or removed", "rounds": r,
                              "multipliers": [p["multiplier"] for p in rounds] if noisy else None,
                              "sampling_rate": rounds[0].get("sampling_rate", 1.0), "epsilon": mechanism,
                              "what": "the canary release: a second draw of the round's mechanism with the canaries "
                                      "averaged in, not the released model"}}
        if alerts := [f"{THREATS[t]}: {READINGS[v]}" for t, v in readings.items() if v == "above the mechanism"]:
            out["alert"] = "; ".join(alerts)
        return out
