"""Memorization-ratio figures from a hit table (SPEC §3). Pure numpy; no model, no index.

A hit table says, for every sampled prefix of client j, which clients k it "induces memorization on" (the
detector typed one of k's top-n' retrieved suffixes as memorized). From it:

- MR(j→k) = |P_{j,k}| / |P̃_j|
- MR_Intra = Σ_j w_j MR(j→j);  MR_Inter(j) = 1/(L−1) Σ_{k≠j} MR(j→k);  MR_Inter = Σ_j w_j MR_Inter(j)
- MR_Total = |∪_{j,k} P_{j,k}| / |∪_j P̃_j|  — a union: a prefix that hits several clients counts once.

with w_j = |D_j| / Σ_i |D_i|. With L = 1 there is no other client: MR_Inter is None.

MR_Intra − MR_Inter also gets a standard error, because with a few dozen prefixes per client the two often differ
by less than their noise. Per prefix i of client j, d_i = [i hit j] − |hits_i − {j}| / (L−1); the difference is
Σ_j w_j mean_j(d), so its standard error is sqrt(Σ_j w_j² var_j(d) / n_j) (prefixes independent; normal 95%
interval ± 1.96 se).
"""

from __future__ import annotations

import numpy as np


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
    return {"clients": clients, "matrix": matrix.tolist(), "intra": intra, "inter": inter,
            "inter_per_client": inter_list, "total": total, "n": n.astype(int).tolist(), "weights": w.tolist(),
            "intra_minus_inter": _difference(prefix_clients, hits, clients, w) if L > 1 else None}


def _difference(prefix_clients: list[int], hits: list[set[int]], clients: list[int], w: np.ndarray) -> dict:
    """MR_Intra − MR_Inter with its standard error and normal 95% interval (see the module docstring)."""
    L = len(clients)
    d: dict[int, list[float]] = {c: [] for c in clients}
    for j, hit in zip(prefix_clients, hits):
        d[j].append(float(j in hit) - len(hit - {j}) / (L - 1))
    diff = var = 0.0
    for wj, c in zip(w, clients):
        x = np.asarray(d[c])
        if x.size:
            diff += wj * x.mean()
            var += wj**2 * (x.var(ddof=1) if x.size > 1 else 0.0) / x.size
    se = float(np.sqrt(var))
    return {"diff": float(diff), "se": se, "ci95": [float(diff - 1.96 * se), float(diff + 1.96 * se)]}
