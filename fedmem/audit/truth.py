"""Scoring every detector against the synthetic source's ground truth (SPEC §7).

Positives are *repeated* canaries (copies >= 2: planted secrets a model has seen several times); negatives
are samples whose truth is "not memorized" by construction: generic boilerplate (predictable from any prefix)
and held-out test samples (never trained on). Single-copy canaries and ordinary training samples are left
out: whether a model memorized them is exactly what is unknown. Each method contributes per-sample rows
``{"tags", "split", "score", "decision"}``; this module turns them into precision, recall and ROC AUC.
"""

from __future__ import annotations

import numpy as np


def truth_label(tags: dict, split: str) -> bool | None:
    if "canary" in tags:
        return True if tags.get("copies", 1) >= 2 else None
    if tags.get("generic") or split == "test":
        return False
    return None


def canary_group(tags: dict) -> str:
    """The report key of a canary: its copy count, marked when the copies are shared by several clients."""
    return f"{tags.get('copies', '?')}{' shared' if tags.get('shared') else ''}"


def canary_group_order(key: str) -> tuple:
    """Sort key for ``canary_group`` keys: a client's own canaries first, then shared ones; by copies."""
    copies, _, shared = key.partition(" ")
    return (bool(shared), int(copies) if copies.isdigit() else 0)


def roc_auc(pos: list[float], neg: list[float]) -> float | None:
    """Mann-Whitney AUC: P(score of a positive > score of a negative), ties counted half."""
    if not pos or not neg:
        return None
    p, n = np.asarray(pos, float)[:, None], np.asarray(neg, float)[None, :]
    return float((p > n).mean() + 0.5 * (p == n).mean())


def score_rows(rows: list[dict]) -> dict:
    labelled = [(truth_label(r.get("tags") or {}, r.get("split", "train")), r) for r in rows]
    labelled = [(y, r) for y, r in labelled if y is not None]
    tp = sum(1 for y, r in labelled if y and r["decision"])
    fp = sum(1 for y, r in labelled if not y and r["decision"])
    fn = sum(1 for y, r in labelled if y and not r["decision"])
    pos = [r["score"] for y, r in labelled if y and r["score"] is not None]
    neg = [r["score"] for y, r in labelled if not y and r["score"] is not None]
    return {"positives": sum(1 for y, _ in labelled if y), "negatives": sum(1 for y, _ in labelled if not y),
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
            "roc_auc": roc_auc(pos, neg)}


def method_rows(name: str, section: dict) -> list[dict]:
    """Per-sample (tags, split, score, decision) of the built-in methods' sections."""
    if name == "pa":
        return [{"tags": s.get("tags") or {}, "split": "train", "score": s["log10_ratio"],
                 "decision": bool(s["pa_memorized"])} for s in section.get("samples", [])]
    if name == "pearl":
        key = section.get("calibration", {}).get("score", "gfd")
        return [{"tags": s.get("tags") or {}, "split": "train" if s["member"] else "test", "score": s[key],
                 "decision": bool(s["memorized"])} for s in section.get("samples", [])]
    if name == "mr":
        return [{"tags": s.get("tags") or {}, "split": "train", "score": float(s["hit_own"]),
                 "decision": bool(s["hit_own"])} for s in section.get("samples", [])]
    return []


def score_against_truth(sections: dict) -> dict:
    """{method: {positives, negatives, precision, recall, roc_auc}} for every method with per-sample rows."""
    out = {}
    for name, section in sections.items():
        rows = method_rows(name, section)
        if rows:
            out[name] = score_rows(rows)
    return out
