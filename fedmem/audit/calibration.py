"""Threshold calibration on known non-members, FPR curves, ROC AUC and histograms (higher score = member).

A sample is flagged when its score is strictly above the threshold t, so FPR(t) = share of non-members with
score > t. FPR only changes at non-member scores, so the smallest threshold meeting a target FPR is always one
of them: :func:`calibrate_threshold` scans those.
"""

from __future__ import annotations

import numpy as np


def flagged_rate(scores, threshold: float) -> float | None:
    s = np.asarray(scores, dtype=np.float64)
    return float(np.mean(s > threshold)) if s.size else None


def calibrate_threshold(nonmember_scores, target_fpr: float) -> float | None:
    """The smallest threshold t with FPR(t) = mean(non-member score > t) <= ``target_fpr``; None without
    non-members."""
    if not 0 <= target_fpr < 1:
        raise ValueError(f"target FPR must be in [0, 1), got {target_fpr}")
    s = np.asarray(nonmember_scores, dtype=np.float64)
    if s.size == 0:
        return None
    for t in np.unique(s):  # ascending; the largest non-member score always reaches FPR 0
        if np.mean(s > t) <= target_fpr:
            return float(t)
    raise AssertionError("unreachable: FPR at the largest non-member score is 0")


def fpr_curve(member_scores, nonmember_scores, extra_thresholds=()) -> list[dict[str, float | None]]:
    """FPR (non-members) and TPR (members) at every distinct score and at ``extra_thresholds``, ascending."""
    m = np.asarray(member_scores, dtype=np.float64)
    n = np.asarray(nonmember_scores, dtype=np.float64)
    points = np.unique(np.concatenate([m, n, np.asarray(list(extra_thresholds), dtype=np.float64)]))
    return [{"threshold": float(t), "fpr": flagged_rate(n, t), "tpr": flagged_rate(m, t)} for t in points]


def roc_auc(member_scores, nonmember_scores) -> float | None:
    """P(member score > non-member score) + 0.5 P(tie) (the Mann-Whitney U statistic); None if a side is empty."""
    m = np.asarray(member_scores, dtype=np.float64)
    n = np.asarray(nonmember_scores, dtype=np.float64)
    if m.size == 0 or n.size == 0:
        return None
    greater = (m[:, None] > n[None, :]).sum()
    ties = (m[:, None] == n[None, :]).sum()
    return float((greater + 0.5 * ties) / (m.size * n.size))


def histogram(scores, edges) -> list[int]:
    return np.histogram(np.asarray(scores, dtype=np.float64), bins=np.asarray(edges, dtype=np.float64))[0].tolist()


def histogram_edges(*groups, bins: int = 20, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    """``bins`` equal bins over [lo, hi], widened to cover every score of every group."""
    values = np.concatenate([np.asarray(g, dtype=np.float64).ravel() for g in groups] + [np.array([lo, hi])])
    return np.linspace(values.min(), values.max(), bins + 1).tolist()
