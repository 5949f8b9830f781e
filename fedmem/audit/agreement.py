"""How far the audit methods agree, sample by sample, on the common draw of one round.

Every method that decides per sample gives its verdicts (``AuditMethod.verdicts``: rows of ``id``, ``split``,
``tags``, ``decision`` and a continuous ``score``, higher meaning more memorized); a method may give several
verdict sets (one per attack). The sets are compared on the common draw only (``audit.common_draw``,
``fedmem.audit.pool.place_common_draw``): per client the same seeded draw of ordinary (non-canary) training
samples, which every method audits. Each method's own selection differs (MR puts the planted canaries first, PEARL
leaves them out), so comparing two methods on whatever they happen to share would compare unlike samples. For every
pair of verdict sets, over the common samples both decided:

- Cohen's kappa of the two decisions, agreement beyond what their flag rates give by chance (None when it is
  undefined: both constant and equal), with a 95% percentile-bootstrap interval (:func:`kappa_ci95`);
- Jaccard overlap of the flagged samples, |A ∩ B| / |A ∪ B| (None when neither flags any);
- Spearman's rank correlation of the two scores (None with a constant score).

A pair with fewer than ``MIN_COMMON`` common samples gets no figure at all: None, and under ``reason`` how many it
had. The planted canaries get a table of their own: per copy-count group, how many each verdict set audited and
flagged.

On data with planted ground truth, each verdict set is also set against the truth (``fedmem.audit.truth``):
Cohen's kappa with it over the samples whose truth is known.
"""

from __future__ import annotations

import math

import numpy as np

from fedmem.audit.calibration import BOOTSTRAP_RESAMPLES
from fedmem.audit.truth import canary_group, canary_group_order, truth_label

# Fewer common samples than this and a pair's kappa, Jaccard and Spearman say more about the draw than about the
# methods: a single sample moves kappa by several hundredths, and its interval spans most of [-1, 1].
MIN_COMMON = 30
# As every other bootstrap interval of the reports: 1,000 resamples put the percentile endpoints' Monte-Carlo error
# well inside the interval's width at the common draw's sizes.
RESAMPLES = BOOTSTRAP_RESAMPLES
BOOTSTRAP_STREAM = 4  # a generator stream of the run seed, apart from the methods' own draws


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters on the same items: (p_o − p_e) / (1 − p_e)."""
    if not a:
        return None
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    p_o = float((x == y).mean())
    p_e = float(x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean()))
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def kappa_ci95(a: list[bool], b: list[bool], rng: np.random.Generator, resamples: int = RESAMPLES
               ) -> list[float] | None:
    """Percentile 95% interval of Cohen's kappa over paired resamples of the items (an item's two decisions are
    drawn together). A resample in which both raters are constant and equal has no kappa and is left out; None when
    no resample has one. The interval is widened to hold the point estimate: kappa takes few values on a few dozen
    items, and a percentile of that lumpy distribution can fall just short of it."""
    if not a:
        return None
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    idx = rng.integers(x.size, size=(resamples, x.size))
    xs, ys = x[idx], y[idx]
    p_o = (xs == ys).mean(axis=1)
    px, py = xs.mean(axis=1), ys.mean(axis=1)
    p_e = px * py + (1 - px) * (1 - py)  # exactly 1 only when both are constant and equal: rates of k / n
    defined = p_e < 1
    if not defined.any():
        return None
    kappas = (p_o[defined] - p_e[defined]) / (1 - p_e[defined])
    lo, hi = np.percentile(kappas, [2.5, 97.5])
    point = cohen_kappa(a, b)
    if point is not None:
        lo, hi = min(lo, point), max(hi, point)
    return [float(lo), float(hi)]


def jaccard(a: list[bool], b: list[bool]) -> float | None:
    union = sum(x or y for x, y in zip(a, b))
    return sum(x and y for x, y in zip(a, b)) / union if union else None


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    from scipy.stats import spearmanr

    rho = spearmanr(a, b).statistic
    return None if not math.isfinite(rho) else float(rho)


def too_few(n: int) -> str:
    """The reason a pair has no figures."""
    return f"too few ({n})"


def pair_figures(a: dict[str, dict], b: dict[str, dict], seed: int) -> dict:
    """n, jaccard, kappa, kappa_ci95, spearman and reason of two verdict sets' rows (by id) on their common ids."""
    common = sorted(set(a) & set(b))
    if len(common) < MIN_COMMON:
        return {"n": len(common), "jaccard": None, "kappa": None, "kappa_ci95": None, "spearman": None,
                "reason": too_few(len(common))}
    da = [bool(a[s]["decision"]) for s in common]
    db = [bool(b[s]["decision"]) for s in common]
    scored = [s for s in common if a[s]["score"] is not None and b[s]["score"] is not None]
    rng = np.random.default_rng([seed, BOOTSTRAP_STREAM])  # fresh per pair: its interval, wherever it stands
    return {"n": len(common), "jaccard": jaccard(da, db), "kappa": cohen_kappa(da, db),
            "kappa_ci95": kappa_ci95(da, db, rng),
            "spearman": spearman([a[s]["score"] for s in scored], [b[s]["score"] for s in scored]), "reason": None}


def canary_table(verdicts: dict[str, list[dict]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{copy-count group: {label: {"audited", "flagged"}}}`` over the planted canaries among the train rows, groups
    in ``canary_group_order``; every label under every group (audited 0 where it audited none of them)."""
    rows = {lab: [r for r in vs if r.get("split", "train") == "train" and "canary" in (r.get("tags") or {})]
            for lab, vs in verdicts.items()}
    groups = sorted({canary_group(r["tags"]) for rs in rows.values() for r in rs}, key=canary_group_order)
    out = {}
    for g in groups:
        out[g] = {}
        for lab, rs in rows.items():
            mine = [r for r in rs if canary_group(r["tags"]) == g]
            out[g][lab] = {"audited": len(mine), "flagged": sum(bool(r["decision"]) for r in mine)}
    return out


def agreement(verdicts: dict[str, list[dict]], common: set[str], seed: int) -> dict:
    """The pairwise matrices over the common draw (``common``: its sample ids), the canary table and the agreement
    with the planted truth (see the module docstring). ``n`` is the number of common samples each pair decided,
    ``audited`` and ``flagged`` each set's count of common samples decided and flagged; ``seed`` seeds the kappa
    intervals."""
    labels = list(verdicts)
    rows = {lab: {r["id"]: r for r in vs if r.get("split", "train") == "train" and r.get("id") in common}
            for lab, vs in verdicts.items()}
    size = len(labels)
    keys = ("n", "jaccard", "kappa", "kappa_ci95", "spearman", "reason")
    out = {"methods": labels, "common": len(common), "min_common": MIN_COMMON, "resamples": RESAMPLES,
           **{k: [[None] * size for _ in labels] for k in keys},
           "flagged": [sum(bool(r["decision"]) for r in rows[lab].values()) for lab in labels],
           "audited": [len(rows[lab]) for lab in labels]}
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            figures = pair_figures(rows[a], rows[b], seed)
            for k in keys:
                out[k][i][j] = figures[k]
    canaries = canary_table(verdicts)
    if canaries:
        out["canaries"] = canaries
    truth = {}
    for lab in labels:
        known = [(truth_label(r.get("tags") or {}, r.get("split", "train")), bool(r["decision"]))
                 for r in verdicts[lab] if truth_label(r.get("tags") or {}, r.get("split", "train")) is not None]
        if len({t for t, _ in known}) == 2:  # one side alone (held-out samples, no planted canary) decides nothing
            truth[lab] = {"n": len(known), "kappa": cohen_kappa([t for t, _ in known], [d for _, d in known])}
    if truth:
        out["truth"] = truth
    return out
