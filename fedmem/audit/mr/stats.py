"""Memorization-ratio figures from a hit table (SPEC §3). Pure numpy; no model, no index.

A hit table says, for every sampled prefix of client j, which clients k it "induces memorization on" (the
detector typed one of k's top-n' retrieved suffixes as memorized). From it:

- MR(j→k) = |P_{j,k}| / |P̃_j|
- MR_Intra = Σ_j w_j MR(j→j);  MR_Inter(j) = 1/(L−1) Σ_{k≠j} MR(j→k);  MR_Inter = Σ_j w_j MR_Inter(j)
- MR_Total = |∪_{j,k} P_{j,k}| / |∪_j P̃_j|  — a union: a prefix that hits several clients counts once.

with w_j = |D_j| / Σ_i |D_i|. With L = 1 there is no other client: MR_Inter is None.

Every figure also gets a standard error and a 95% interval, because with a few dozen prefixes per client MR_Intra
and MR_Inter often differ by less than their noise. The intervals cover the audit's sampling of prefixes (which
prefixes were drawn, and the generation drawn for each), not the variance of training itself, which only runs with
other seeds show. MR_Intra, MR_Inter and MR_Intra − MR_Inter are weighted means over clients of per-prefix values
(for prefix i of client j: [i hit j], |hits_i − {j}| / (L−1), and their difference), so each standard error is
sqrt(Σ_j w_j² var_j / n_j) (prefixes independent). MR_Intra and MR_Inter are rates: their interval is Wilson's
score interval at the weighted mean's effective sample size (the n at which a plain proportion would have that
variance; Kish's 1 / Σ_j w_j² / n_j where the variance is 0), so it stays in [0, 1] and does not collapse at 0 hits.
The difference is not a rate: a normal interval (± 1.96 se), kept inside [−1, 1]; where the prefixes show no spread at
all (no hit anywhere, say) Newcombe's interval from the two rates' Wilson intervals instead of a point. MR_Total and every matrix cell
are proportions of prefixes: binomial standard errors and Wilson 95% intervals.
"""

from __future__ import annotations

import numpy as np

from fedmem.audit.intervals import newcombe, wilson

INTERVALS = ("MR_Intra and MR_Inter: Wilson score interval at the weighted mean's effective sample size; MR_Intra − "
             "MR_Inter: normal interval (Newcombe's where the prefixes show no spread); MR_Total and MR(j→k): Wilson "
             "score interval. All over the audited prefixes.")


def mr_figures(prefix_clients: list[int], hits: list[set[int]], sizes: dict[int, int] | list[int]) -> dict:
    """``prefix_clients[i]``: client j of prefix i; ``hits[i]``: the clients k it hit; ``sizes``: |D_j|."""
    clients = sorted(sizes) if isinstance(sizes, dict) else list(range(len(sizes)))
    size = np.array([sizes[c] for c in clients], dtype=float)
    pos = {c: i for i, c in enumerate(clients)}
    L = len(clients)
    counts = np.zeros((L, L))
    n = np.zeros(L)
    for j, hit in zip(prefix_clients, hits):
        n[pos[j]] += 1
        for k in hit:
            counts[pos[j], pos[k]] += 1
    matrix = np.divide(counts, n[:, None], out=np.zeros_like(counts), where=n[:, None] > 0)
    w = size / size.sum()
    intra = float(w @ np.diag(matrix))
    if L > 1:
        inter_per = (matrix.sum(axis=1) - np.diag(matrix)) / (L - 1)
        inter = float(w @ inter_per)
        inter_list = inter_per.tolist()
    else:
        inter, inter_list = None, [None]
    total = sum(1 for h in hits if h) / len(hits) if hits else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix_se = np.where(n[:, None] > 0, np.sqrt(matrix * (1 - matrix) / n[:, None]), np.nan)
    uncertainty = {
        "method": INTERVALS,
        "intra": _weighted_rate([float(j in h) for j, h in zip(prefix_clients, hits)], prefix_clients, clients, w),
        "total": {**_interval(total, float(np.sqrt(total * (1 - total) / len(hits))) if hits else float("nan")),
                  "ci95": wilson(sum(1 for h in hits if h), len(hits))},
        "matrix_se": matrix_se.tolist(),
        "matrix_ci95": [[wilson(int(counts[a, b]), int(n[a])) for b in range(L)] for a in range(L)],
    }
    if L > 1:
        uncertainty["inter"] = _weighted_rate(
            [len(h - {j}) / (L - 1) for j, h in zip(prefix_clients, hits)], prefix_clients, clients, w)
    diff = None
    if L > 1:
        d = _weighted_estimate([float(j in h) - len(h - {j}) / (L - 1) for j, h in zip(prefix_clients, hits)],
                               prefix_clients, clients, w)
        ci = d["ci95"]
        if not d["se"] > 0:  # no spread among the prefixes (no hit at all, say): not a point, but Newcombe's
            ci = newcombe(intra, uncertainty["intra"]["ci95"], inter, uncertainty["inter"]["ci95"])
        diff = {"diff": d["value"], "se": d["se"], "ci95": [max(-1.0, ci[0]), min(1.0, ci[1])]}
    return {"clients": clients, "matrix": matrix.tolist(), "intra": intra, "inter": inter,
            "inter_per_client": inter_list, "total": total, "n": n.astype(int).tolist(), "weights": w.tolist(),
            "intra_minus_inter": diff, "uncertainty": uncertainty}


def _interval(value: float, se: float) -> dict:
    return {"value": float(value), "se": se, "ci95": [float(value - 1.96 * se), float(value + 1.96 * se)]}


def _weighted_moments(x: list[float], prefix_clients: list[int], clients: list[int], w: np.ndarray
                      ) -> tuple[float, float, float]:
    """(Σ_j w_j mean_j(x), its variance Σ_j w_j² var_j(x) / n_j, Σ_j w_j² / n_j) over per-prefix values ``x``
    (prefixes independent)."""
    by_client: dict[int, list[float]] = {c: [] for c in clients}
    for j, v in zip(prefix_clients, x):
        by_client[j].append(v)
    value = var = kish = 0.0
    for wj, c in zip(w, clients):
        xs = np.asarray(by_client[c])
        if xs.size:
            value += wj * xs.mean()
            var += wj**2 * (xs.var(ddof=1) if xs.size > 1 else 0.0) / xs.size
            kish += wj**2 / xs.size
    return float(value), float(var), float(kish)


def _weighted_estimate(x: list[float], prefix_clients: list[int], clients: list[int], w: np.ndarray) -> dict:
    """Σ_j w_j mean_j(x) with its standard error and a normal 95% interval (a difference of rates)."""
    value, var, _ = _weighted_moments(x, prefix_clients, clients, w)
    return _interval(value, float(np.sqrt(var)))


def _weighted_rate(x: list[float], prefix_clients: list[int], clients: list[int], w: np.ndarray) -> dict:
    """Σ_j w_j mean_j(x) of per-prefix values in [0, 1], with its standard error and Wilson's interval at the
    effective sample size: p(1 − p) / variance, or Kish's 1 / Σ_j w_j² / n_j where that is undefined (no spread)."""
    value, var, kish = _weighted_moments(x, prefix_clients, clients, w)
    if not kish:
        return {"value": value, "se": float("nan"), "ci95": None}
    n_eff = value * (1 - value) / var if var > 0 and 0 < value < 1 else 1.0 / kish
    return {"value": value, "se": float(np.sqrt(var)), "n_eff": n_eff, "ci95": wilson(value * n_eff, n_eff)}
