"""Threshold calibration on known non-members, FPR curves, ROC AUC and histograms (higher score = member).

A sample is flagged when its score is strictly above the threshold t, so FPR(t) = share of non-members with
score > t. FPR only changes at non-member scores, so the smallest threshold meeting a target FPR is always one
of them: an order statistic (:func:`calibrate_threshold`).

A threshold calibrated on some non-members has, on those same non-members, an FPR at or under the target by
construction, so that FPR says nothing. :func:`cross_fitted` reports rates the calibration did not see: the
non-members are split in two halves, each half sets a threshold, and each threshold's FPR is read on the other
half; the TPR gets a bootstrap interval that recalibrates the thresholds in every resample.
"""

from __future__ import annotations

import numpy as np

from fedmem.audit.intervals import rate, wilson

BOOTSTRAP_RESAMPLES = 1000


def flagged_rate(scores, threshold: float) -> float | None:
    s = np.asarray(scores, dtype=np.float64)
    return float(np.mean(s > threshold)) if s.size else None


def allowed_false_positives(n: int, target_fpr: float) -> int:
    """The largest count k of n non-members that may be flagged at FPR k / n <= ``target_fpr``."""
    k = int(target_fpr * n)  # the product may round across an integer: settle on the exact comparison below
    if (k + 1) / n <= target_fpr:
        return k + 1
    return k - 1 if k / n > target_fpr else k


def order_threshold(sorted_scores: np.ndarray, target_fpr: float) -> np.ndarray:
    """The calibrated threshold of each row of ``sorted_scores`` (ascending along the last axis): the (K+1)-th
    largest score, K = allowed false positives. At most K scores lie strictly above it, and at least K + 1 above any
    smaller score, so no smaller threshold meets the target."""
    n = sorted_scores.shape[-1]
    return sorted_scores[..., n - 1 - allowed_false_positives(n, target_fpr)]


def _check_target(target_fpr: float) -> None:
    if not 0 <= target_fpr < 1:
        raise ValueError(f"target FPR must be in [0, 1), got {target_fpr}")


def calibrate_threshold(nonmember_scores, target_fpr: float) -> float | None:
    """The smallest threshold t with FPR(t) = mean(non-member score > t) <= ``target_fpr``; None without
    non-members."""
    _check_target(target_fpr)
    s = np.sort(np.asarray(nonmember_scores, dtype=np.float64))
    return float(order_threshold(s, target_fpr)) if s.size else None


def split_halves(groups, rng: np.random.Generator) -> np.ndarray:
    """A random split of items into half A (True) and half B (False), stratified by ``groups`` (one label per
    item): the groups in random order, each group's items shuffled, are dealt alternately to A and B, so every
    group, and the whole, differs between the halves by at most one item."""
    labels = list(groups)
    by_group: dict = {}
    for i, g in enumerate(labels):
        by_group.setdefault(g, []).append(i)
    items = list(by_group.values())
    dealt = [i for j in rng.permutation(len(items)) for i in rng.permutation(items[j])]
    half_a = np.zeros(len(labels), dtype=bool)
    half_a[np.asarray(dealt[0::2], dtype=int)] = True
    return half_a


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
    return float(auc_from_ranks(m, n))


def auc_from_ranks(members: np.ndarray, nonmembers: np.ndarray) -> np.ndarray:
    """The ROC AUC along the last axis (one per row: a bootstrap's resamples at once), as the Mann-Whitney statistic
    over the pooled midranks, O((m + n) log(m + n)): ties share their mean rank, which counts each tie as a half."""
    n_m, n_n = members.shape[-1], nonmembers.shape[-1]
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([members, nonmembers], axis=-1), axis=-1)
    return (ranks[..., :n_m].sum(axis=-1) - n_m * (n_m + 1) / 2) / (n_m * n_n)


def histogram(scores, edges) -> list[int]:
    return np.histogram(np.asarray(scores, dtype=np.float64), bins=np.asarray(edges, dtype=np.float64))[0].tolist()


def histogram_edges(*groups, bins: int = 20, lo: float = 0.0, hi: float = 1.0) -> list[float]:
    """``bins`` equal bins over [lo, hi], widened to cover every score of every group."""
    values = np.concatenate([np.asarray(g, dtype=np.float64).ravel() for g in groups] + [np.array([lo, hi])])
    return np.linspace(values.min(), values.max(), bins + 1).tolist()


def held_out_flags(nonmember_scores, half_a, alpha_a: float, alpha_b: float) -> np.ndarray:
    """Each non-member flagged against the threshold of the half it is not in, one it did not help set."""
    s = np.asarray(nonmember_scores, dtype=np.float64)
    return s > np.where(np.asarray(half_a, dtype=bool), alpha_b, alpha_a)


def _mean_tpr(member_rows: np.ndarray, alpha_a, alpha_b) -> np.ndarray:
    """Per row of members, the mean of the flagged rates at alpha_a and at alpha_b (one pair per row)."""
    a, b = np.asarray(alpha_a)[..., None], np.asarray(alpha_b)[..., None]
    return ((member_rows > a).mean(axis=-1) + (member_rows > b).mean(axis=-1)) / 2


def bootstrap_tpr_ci95(member_scores, half_a_scores, half_b_scores, target_fpr: float, rng: np.random.Generator,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> list[float]:
    """Percentile 95% interval of the cross-fitted TPR. Every resample draws the members, half A and half B with
    replacement (each half within itself, so the halves stay disjoint), recalibrates both thresholds and recomputes
    the TPR: the interval covers the thresholds' own uncertainty as well as the members' sampling."""
    m, a, b = (np.asarray(x, dtype=np.float64) for x in (member_scores, half_a_scores, half_b_scores))

    def draw(x: np.ndarray) -> np.ndarray:
        return x[rng.integers(x.size, size=(resamples, x.size))]

    alpha_a = order_threshold(np.sort(draw(a), axis=1), target_fpr)
    alpha_b = order_threshold(np.sort(draw(b), axis=1), target_fpr)
    tprs = _mean_tpr(draw(m), alpha_a, alpha_b)
    return np.clip(np.percentile(tprs, [2.5, 97.5]), 0.0, 1.0).tolist()  # clip: interpolation rounding only


def cross_fitted(member_scores, nonmember_scores, half_a, target_fpr: float, rng: np.random.Generator,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> dict:
    """Cross-fitted calibration at ``target_fpr``: alpha_a = :func:`calibrate_threshold` on half A of the
    non-members, alpha_b on half B. fpr = false positives of each half at the other half's threshold / all
    non-members, with its Wilson interval; tpr = mean of the members' flagged rates at alpha_a and alpha_b, with
    :func:`bootstrap_tpr_ci95`, never narrower than the members' own Wilson interval (a bootstrap of a few samples
    can collapse to a point). Every value is None when a half is empty (fewer than two non-members), the TPR's
    when there are no members."""
    _check_target(target_fpr)
    m, s = np.asarray(member_scores, dtype=np.float64), np.asarray(nonmember_scores, dtype=np.float64)
    a = np.asarray(half_a, dtype=bool)
    out = dict.fromkeys(("alpha_a", "alpha_b", "halves", "false_positives", "fpr", "fpr_ci95", "tpr", "tpr_ci95"))
    out["resamples"] = resamples
    if a.all() or not a.any():
        return out
    alpha_a, alpha_b = calibrate_threshold(s[a], target_fpr), calibrate_threshold(s[~a], target_fpr)
    fp = int(held_out_flags(s, a, alpha_a, alpha_b).sum())
    fpr = rate(fp, s.size)
    out.update(alpha_a=alpha_a, alpha_b=alpha_b, halves=[int(a.sum()), int((~a).sum())], false_positives=fp,
               fpr=fpr["rate"], fpr_ci95=fpr["ci95"])
    if m.size:
        out["tpr"] = float(_mean_tpr(m, alpha_a, alpha_b))
        boot, binomial = bootstrap_tpr_ci95(m, s[a], s[~a], target_fpr, rng, resamples), wilson(out["tpr"] * m.size,
                                                                                               m.size)
        out["tpr_ci95"] = [min(boot[0], binomial[0]), max(boot[1], binomial[1])]
    return out
