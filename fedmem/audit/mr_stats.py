"""Memorization-ratio figures from a hit table (SPEC §3). Pure numpy; no model, no index.

A hit table says, for every sampled prefix of client j, which clients k it "induces memorization on" (the
detector typed one of k's top-n' retrieved suffixes as memorized). From it:

- MR(j→k) = |P_{j,k}| / |P̃_j|
- MR_Intra = Σ_j w_j MR(j→j);  MR_Inter(j) = 1/(L−1) Σ_{k≠j} MR(j→k);  MR_Inter = Σ_j w_j MR_Inter(j)
- MR_Total = |∪_{j,k} P_{j,k}| / |∪_j P̃_j|  — a union: a prefix that hits several clients counts once.

with w_j = |D_j| / Σ_i |D_i|. With L = 1 there is no other client: MR_Inter is None.
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
            "inter_per_client": inter_list, "total": total, "n": n.astype(int).tolist(), "weights": w.tolist()}
