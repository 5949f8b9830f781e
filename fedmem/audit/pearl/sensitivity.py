"""PEARL's per-sample sensitivity scores from a performance table (SPEC §5).

``table[k][i]`` is the performance of the i-th output sampled for the input perturbed at the k-th intensity; row 0
is the unperturbed input. m_k is the row mean: the performance of the k-th input, averaged over its outputs.

- falloff = max_j (m_j − m_{j+1}) over consecutive intensities (earlier PEARL, Eq. 3);
- gfd = fraction of perturbed inputs (rows k >= 1) with m_0 − m_k > tau_drop (later PEARL, Eq. 3: one indicator
  per neighbour x_i of x, and a neighbour's performance is that of its outputs taken together, the row mean);
- gfd_per_output = the same indicator per individual perturbed output, m_0 − perf > tau_drop. Reported beside gfd,
  never the default decision: a single sampled output falls below m_0 − tau_drop on sampling noise alone, so it
  fires on samples whose mean performance does not drop at all;
- expected_drop = mean over perturbed outputs of max(0, m_0 − perf) (later PEARL, App. A.1, S_M(x, b)).
"""

from __future__ import annotations

import numpy as np

SCORES = ("gfd", "falloff", "expected_drop", "gfd_per_output")


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
    """Share of perturbed inputs whose mean performance m_k lies more than ``tau_drop`` below m_0."""
    m = intensity_means(table)
    return float(np.mean((m[0] - m[1:]) > tau_drop))


def gfd_per_output(table, tau_drop: float) -> float:
    """Share of individual perturbed outputs whose performance lies more than ``tau_drop`` below m_0."""
    t = _table(table)
    return float(np.mean((t[0].mean() - t[1:]) > tau_drop))


def expected_drop(table) -> float:
    t = _table(table)
    return float(np.mean(np.maximum(0.0, t[0].mean() - t[1:])))


def sensitivity_scores(table, tau_drop: float) -> dict[str, float]:
    """Every score of one sample, keyed as in ``SCORES``."""
    return {"gfd": gfd(table, tau_drop), "falloff": falloff(table), "expected_drop": expected_drop(table),
            "gfd_per_output": gfd_per_output(table, tau_drop)}
