"""How far the audit methods agree, sample by sample, on the audited training samples of one round.

Every method that decides per sample gives its verdicts (``AuditMethod.verdicts``: rows of ``id``, ``split``,
``tags``, ``decision`` and a continuous ``score``, higher meaning more memorized); a method may give several
verdict sets (one per attack). For every pair of verdict sets, over the training samples both audited:

- Jaccard overlap of the flagged samples, |A ∩ B| / |A ∪ B| (None when neither flags any);
- Cohen's kappa of the two decisions, agreement beyond what their flag rates give by chance (None when it is
  undefined: both constant and equal);
- Spearman's rank correlation of the two scores (None with fewer than 3 common samples or a constant score).

On data with planted ground truth, each verdict set is also set against the truth (``fedmem.audit.truth``):
Cohen's kappa with it over the samples whose truth is known.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from fedmem.audit.truth import truth_label


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters on the same items: (p_o − p_e) / (1 − p_e)."""
    if not a:
        return None
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    p_o = float((x == y).mean())
    p_e = float(x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean()))
    return None if p_e == 1 else (p_o - p_e) / (1 - p_e)


def jaccard(a: list[bool], b: list[bool]) -> float | None:
    union = sum(x or y for x, y in zip(a, b))
    return sum(x and y for x, y in zip(a, b)) / union if union else None


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    rho = stats.spearmanr(a, b).statistic
    return None if not math.isfinite(rho) else float(rho)


def agreement(verdicts: dict[str, list[dict]]) -> dict:
    """The pairwise matrices over every verdict set's training samples (see the module docstring); ``n`` is the
    number of samples each pair has in common, ``flagged`` each set's flagged count of its audited samples."""
    labels = list(verdicts)
    rows = {lab: {r["id"]: r for r in vs if r.get("split", "train") == "train" and r.get("id") is not None}
            for lab, vs in verdicts.items()}
    size = len(labels)
    out = {"methods": labels, "n": [[0] * size for _ in labels], "jaccard": [[None] * size for _ in labels],
           "kappa": [[None] * size for _ in labels], "spearman": [[None] * size for _ in labels],
           "flagged": [sum(bool(r["decision"]) for r in rows[lab].values()) for lab in labels],
           "audited": [len(rows[lab]) for lab in labels]}
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            common = sorted(set(rows[a]) & set(rows[b]))
            da = [bool(rows[a][s]["decision"]) for s in common]
            db = [bool(rows[b][s]["decision"]) for s in common]
            sa = [rows[a][s]["score"] for s in common]
            sb = [rows[b][s]["score"] for s in common]
            scored = [k for k, (x, y) in enumerate(zip(sa, sb)) if x is not None and y is not None]
            out["n"][i][j] = len(common)
            out["jaccard"][i][j] = jaccard(da, db)
            out["kappa"][i][j] = cohen_kappa(da, db)
            out["spearman"][i][j] = spearman([sa[k] for k in scored], [sb[k] for k in scored])
    truth = {}
    for lab in labels:
        known = [(truth_label(r.get("tags") or {}, r.get("split", "train")), bool(r["decision"]))
                 for r in verdicts[lab] if truth_label(r.get("tags") or {}, r.get("split", "train")) is not None]
        if known:
            truth[lab] = {"n": len(known), "kappa": cohen_kappa([t for t, _ in known], [d for _, d in known])}
    if truth:
        out["truth"] = truth
    return out
