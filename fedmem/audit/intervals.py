"""Uncertainty of a rate estimated from a sample, shared by every audit method, and of a mean over a few
independent values (seeds, canaries).

A rate k / n of sampled items is reported with its binomial standard error and a Wilson score 95% interval. The
Wilson interval is used rather than ± 1.96 se because audited rates are often 0 or near it, where the normal
interval collapses to a point (0 ± 0) and claims a certainty the sample does not have.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(k: float, n: float, z: float = Z95) -> list[float] | None:
    """Wilson score interval [lo, hi] of the proportion k / n; None without items. k and n may be fractional (an
    effective sample size)."""
    if n <= 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exact at the ends: no hit (all hits) has a lower (upper) bound of exactly 0 (1), not a rounding error away
    return [0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half)]


def rate(k: int, n: int) -> dict:
    """``{"rate", "se", "ci95"}`` of k hits among n sampled items (all None without items)."""
    if n <= 0:
        return {"rate": None, "se": None, "ci95": None}
    p = k / n
    return {"rate": p, "se": math.sqrt(p * (1 - p) / n), "ci95": wilson(k, n)}


def newcombe(p1: float, ci1: list[float], p2: float, ci2: list[float]) -> list[float]:
    """Newcombe's interval of p1 − p2 from each rate's own (Wilson) interval, as for independent rates."""
    import numpy as np

    return [p1 - p2 - float(np.hypot(p1 - ci1[0], ci2[1] - p2)), p1 - p2 + float(np.hypot(ci1[1] - p1, p2 - ci2[0]))]


def mean_t_interval(values, lo: float = -math.inf, hi: float = math.inf) -> list[float] | None:
    """95% Student-t interval of the mean of ``values`` (independent draws), clipped to what the figure can be,
    [``lo``, ``hi``]; None below two values."""
    import numpy as np
    from scipy import stats

    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        return None
    mean = float(values.mean())
    half = float(stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return [max(mean - half, lo), min(mean + half, hi)]


# ---------------------------------------------------------------- the smallest effect an audit can see

POWER = 0.8  # the chance an audit's test detects an effect of the reported size (two-sided 5% level)


def _binomial_window(n: int, p: float, width: float = 7.0):
    """The counts k of Binomial(n, p) within ``width`` standard deviations of its mean, with their probabilities
    (what lies outside is below 1e-11 of the mass)."""
    import numpy as np
    from scipy.stats import binom

    sd = math.sqrt(max(n * p * (1 - p), 1.0))
    k = np.arange(max(0, math.floor(n * p - width * sd)), min(n, math.ceil(n * p + width * sd)) + 1)
    return k, binom.pmf(k, n, p)


def _wilson_arrays(k, n: int):
    import numpy as np

    p = k / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return np.where(k == 0, 0.0, np.maximum(0, centre - half)), np.where(k == n, 1.0, np.minimum(1, centre + half))


def excess_power(p0: float, d: float, n1: int, n0: int) -> float:
    """The chance that the audits' own test of an excess, Newcombe's 95% interval of p1 − p0 from the two rates'
    Wilson intervals (:func:`newcombe`), lies wholly above 0 when the true rates are p1 = p0 + d on n1 items and
    p0 on n0 items: summed over both arms' binomial counts, exactly."""
    import numpy as np

    k1, w1 = _binomial_window(n1, min(1.0, p0 + d))
    k0, w0 = _binomial_window(n0, p0)
    r1, r0 = k1 / n1, k0 / n0
    lo1, _ = _wilson_arrays(k1, n1)
    _, hi0 = _wilson_arrays(k0, n0)
    lower = (r1[:, None] - r0[None, :]) - np.hypot((r1 - lo1)[:, None], (hi0 - r0)[None, :])
    return float(w1 @ (lower > 0) @ w0)


def detectable_excess(p0: float, n1: float, n0: float, power: float = POWER) -> float | None:
    """The smallest true excess d of a rate over its control rate ``p0`` that the audits' test (Newcombe's interval
    excluding 0, two-sided 5%) detects with probability ``power`` at n1 and n0 items (effective sizes rounded):
    "an interval containing 0 means an effect under d", never "none". None without items; 1 - p0 when no excess
    can be seen at these sizes (the rate's ceiling)."""
    n1, n0 = round(n1), round(n0)
    if n1 < 1 or n0 < 1 or p0 is None:
        return None
    if excess_power(p0, 1.0 - p0, n1, n0) < power:
        return 1.0 - p0
    lo, hi = 0.0, 1.0 - p0
    for _ in range(40):  # bisection: the power rises with d
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess_power(p0, mid, n1, n0) < power else (lo, mid)
    return hi


def items_needed(p0: float, d: float, power: float = POWER, most: int = 1_000_000) -> int | None:
    """Items per arm (equal arms, to 1%) at which the audits' test detects an excess ``d`` over ``p0`` with
    probability ``power``; None above ``most``."""
    hi = 16
    while excess_power(p0, d, hi, hi) < power:
        if hi >= most:
            return None
        hi = min(2 * hi, most)
    lo = hi // 2
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if excess_power(p0, d, mid, mid) < power else (lo, mid)
    return hi


def detectable_auc(n1: int, n0: int, power: float = POWER) -> float | None:
    """The smallest true ROC AUC above 0.5 that a 95% interval of the AUC from n1 members and n0 non-members
    excludes 0.5 with probability ``power``: A − 0.5 = (z_0.975 + z_power) · se(A), with Hanley and McNeil's
    standard error of an AUC (1982) at A itself. None without both."""
    if not n1 or not n0:
        return None
    from scipy.optimize import brentq
    from scipy.stats import norm

    z = Z95 + float(norm.ppf(power))

    def se(a: float) -> float:
        q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
        return math.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0))

    gap = lambda a: a - 0.5 - z * se(a)  # noqa: E731
    return 1.0 if gap(1 - 1e-9) < 0 else float(brentq(gap, 0.5, 1 - 1e-9, xtol=1e-6))


def mean_difference(a, b, power: float = POWER) -> dict:
    """``{"diff", "ci95", "mde"}`` of mean(a) − mean(b), two independent samples: Welch's 95% interval, and the
    smallest true difference its test detects with probability ``power`` at these sizes and spreads (the same
    standard error, (z_0.975 + z_power) se). All None below two values on a side."""
    import numpy as np
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return {"diff": None, "ci95": None, "mde": None}
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    if se == 0:
        return {"diff": diff, "ci95": [diff, diff], "mde": 0.0}
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stats.t.ppf(0.975, dof)) * se
    return {"diff": diff, "ci95": [diff - half, diff + half], "mde": (Z95 + float(stats.norm.ppf(power))) * se}
