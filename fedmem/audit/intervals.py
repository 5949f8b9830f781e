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
