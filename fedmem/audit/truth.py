"""Scoring every detector against the synthetic source's ground truth (SPEC §7).

Positives are *repeated* canaries (copies >= 2: planted secrets a model has seen several times); negatives
are samples whose truth is "not memorized" by construction: generic boilerplate (predictable from any prefix)
and held-out test samples (never trained on). Single-copy canaries and ordinary training samples are left
out: whether a model memorized them is exactly what is unknown. Each method contributes per-sample rows
``{"tags", "split", "score", "decision"}``; this module turns them into precision, recall and ROC AUC.
"""

from __future__ import annotations

from fedmem.audit.calibration import roc_auc


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


def score_against_truth(methods: dict, sections: dict) -> dict:
    """{method: {positives, negatives, precision, recall, roc_auc}} for every method with per-sample rows."""
    out = {}
    for name, method in methods.items():
        rows = method.truth_rows(sections.get(name) or {})
        if rows:
            out[name] = score_rows(rows)
    return out


def method_verdicts(methods: dict, sections: dict) -> dict[str, list[dict]]:
    """Every method's verdict sets on one round (``AuditMethod.verdicts``), in method order."""
    return {label: rows for name, method in methods.items() if name in sections
            for label, rows in method.verdicts(sections[name]).items()}
