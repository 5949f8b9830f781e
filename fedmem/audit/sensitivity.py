"""PEARL's per-sample sensitivity scores from a performance table (SPEC §5).

``table[k][i]`` is the performance of the i-th output at the k-th intensity; row 0 is the unperturbed
prompt. m_k is the row mean.

- falloff = max_j (m_j − m_{j+1}) over consecutive intensities (earlier PEARL, Eq. 3);
- gfd = fraction of perturbed outputs (rows k >= 1, every i) with m_0 − perf > tau_drop (later PEARL, Eq. 3:
  the "neighbours" are all perturbed outputs, compared with the mean unperturbed performance);
- expected_drop = mean over perturbed outputs of max(0, m_0 − perf) (later PEARL, App. A.1, S_M(x, b)).
"""

from __future__ import annotations

import numpy as np

SCORES = ("gfd", "falloff", "expected_drop")


def _table(table) -> np.ndarray:
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 1:
        raise ValueError(f"a PEARL performance table is intensities x outputs, >= 2 intensities; got shape {t.shape}")
    return t


def intensity_means(table) -> np.ndarray:
    """m_k: mean performance at each intensity."""
    return _table(table).mean(axis=1)


def falloff(table) -> float:
    m = intensity_means(table)
    return float(np.max(m[:-1] - m[1:]))


def gfd(table, tau_drop: float) -> float:
    t = _table(table)
    m0 = t[0].mean()
    return float(np.mean((m0 - t[1:]) > tau_drop))


def expected_drop(table) -> float:
    t = _table(table)
    return float(np.mean(np.maximum(0.0, t[0].mean() - t[1:])))


def sensitivity_scores(table, tau_drop: float) -> dict[str, float]:
    """All three scores of one sample."""
    return {"gfd": gfd(table, tau_drop), "falloff": falloff(table), "expected_drop": expected_drop(table)}
