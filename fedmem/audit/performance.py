"""PEARL's task performance of one output y* against the reference y (SPEC §5).

Completion-style tasks: 1 − NCD(y*, y), with the normalized compression distance
NCD(a, b) = (C(ab) − min(C(a), C(b))) / max(C(a), C(b)) and C the zlib-compressed length in bytes.
Summary-style tasks: ROUGE-L F1 (the ``rouge-score`` package). Both are near 1 for a copy of the reference
and near 0 for unrelated text. 1 − NCD is left unclipped: zlib's overhead can push NCD a little outside [0, 1]
on very short texts, and clipping would hide that.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

METRICS = ("ncd", "rouge_l")


def compressed_len(data: bytes, level: int = 9) -> int:
    return len(zlib.compress(data, level))


def ncd(a: str, b: str, level: int = 9) -> float:
    """Normalized compression distance between two texts (UTF-8, zlib at ``level``)."""
    ab, bb = a.encode("utf-8"), b.encode("utf-8")
    ca, cb = compressed_len(ab, level), compressed_len(bb, level)
    return (compressed_len(ab + bb, level) - min(ca, cb)) / max(ca, cb)


@functools.lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(output: str, reference: str) -> float:
    """ROUGE-L F1 of ``output`` against ``reference``."""
    return float(_rouge_scorer().score(reference, output)["rougeL"].fmeasure)


def performance(outputs: list[str], reference: str, metric: str = "ncd", zlib_level: int = 9) -> np.ndarray:
    """Performance of every output against one reference: 1 − NCD or ROUGE-L F1."""
    if metric == "ncd":
        ref = reference.encode("utf-8")
        c_ref = compressed_len(ref, zlib_level)  # the reference is shared: compress it once
        out = []
        for y in outputs:
            yb = y.encode("utf-8")
            c_y = compressed_len(yb, zlib_level)
            out.append(1.0 - (compressed_len(yb + ref, zlib_level) - min(c_y, c_ref)) / max(c_y, c_ref))
        return np.array(out, dtype=np.float64)
    if metric == "rouge_l":
        return np.array([rouge_l(y, reference) for y in outputs], dtype=np.float64)
    raise ValueError(f"PEARL performance metric must be one of {METRICS}, got {metric!r}")
