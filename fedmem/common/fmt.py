"""How figures read in every report, page and console line: rates in percent with two decimals (at the paper's
sample sizes a rate moves in steps of under 0.01%), differences of rates in percentage points, intervals in
brackets. One place, so the same rate never reads two ways."""

from __future__ import annotations

import math

DECIMALS = 2


def pct(x: float | None, unit: str = "%") -> str:
    """A rate (a fraction) in percent: ``0.1922 -> '19.22%'``; ``n/a`` for None or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{100 * x:.{DECIMALS}f}{unit}"


def pct_ci(x: float | None, ci: list | None, unit: str = "%") -> str:
    """A rate with its 95% interval: ``19.22% [16.10, 22.51]``."""
    if not ci or ci[0] is None:
        return pct(x, unit)
    return f"{pct(x, unit)} [{100 * ci[0]:.{DECIMALS}f}, {100 * ci[1]:.{DECIMALS}f}]"


def pts_ci(d: float | None, ci: list | None) -> str:
    """A difference of two rates in percentage points with its 95% interval: ``+0.08 pts [-2.61, +2.78]``."""
    if d is None:
        return "n/a"
    out = f"{100 * d:+.{DECIMALS}f} pts"
    return out + (f" [{100 * ci[0]:+.{DECIMALS}f}, {100 * ci[1]:+.{DECIMALS}f}]" if ci else "")


def count(k: int | None, n: int | None) -> str:
    """``k of n``: a count out of the audited items."""
    return "n/a" if k is None or n is None else f"{k} of {n}"


def score_ci(x: float | None, ci: list | None) -> str:
    """A score that is not a rate (a ROC AUC) with its 95% interval: ``0.64 [0.49, 0.78]``; from 1,000 up (a privacy
    budget) to three significant digits, ``6.61e+04``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"

    def number(v: float) -> str:
        return f"{v:.3g}" if abs(v) >= 1000 else f"{v:.{DECIMALS}f}"

    return number(x) + (f" [{number(ci[0])}, {number(ci[1])}]" if ci and ci[0] is not None else "")


def figure_text(kind: str, x, ci: list | None = None, total=None, mde: float | None = None, null: float = 0.0
                ) -> str:
    """A figure by its kind (``fedmem.audit.base.Figure``): a rate in percent, a difference in points, a count (of
    ``total`` when given), a score as a number; each with its interval when it has one, and where that interval
    holds the ``null`` (no effect), the smallest effect the audit detects (``mde``): ``(under 2.94 pts)``,
    ``(under 0.61)`` for an AUC; an excess over a control rate of 100% says that no excess can show."""
    if kind == "rate":
        return pct_ci(x, ci)
    if kind == "difference":
        text = pts_ci(x, ci)
    elif kind == "count":
        return "n/a" if x is None else (count(int(x), int(total)) if total is not None else str(int(x)))
    else:
        text = score_ci(x, ci)
    if mde is not None and x is not None and ci and ci[0] is not None and ci[0] <= null <= ci[1]:
        if kind == "difference" and mde <= 0:  # the control rate is 100%: its ceiling leaves no room for an excess
            text += " (no excess can show: the control is at 100%)"
        else:
            text += f" (under {100 * mde:.{DECIMALS}f} pts)" if kind == "difference" else \
                f" (under {null + mde:.{DECIMALS}f})"
    return text


def scale_ceiling(x: float) -> float:
    """The smallest of 1, 2, 5, 10, 20, 50, 100% at or above ``x`` (a fraction): heatmaps and panels whose values
    fall under the same ceiling share one colour scale across rounds."""
    for c in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
        if x <= c:
            return c
    return 1.0
