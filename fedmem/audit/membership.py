"""What every membership attack shares, whichever method runs it (the membership attacks, the loss trajectory, source
inference): the draw of members and non-members each scores, and how an attack's scores are read.

**The draw.** Per client, ``n`` members (train samples) and ``n`` non-members (test samples, never trained on),
canaries aside, each scored on its suffix cut to ``suffix_len`` tokens in the context chosen (SPEC §6); a sample
whose suffix is shorter is passed over, and the planted canaries are scored beside the draw for the ground truth.

**The reading.** Membership scores are oriented so that higher means "member". Per attack: the ROC AUC with a 95%
percentile-bootstrap interval, members and non-members resampled apart (the same resamples for every attack of a
method, so their intervals compare); and at each FPR target (0.1%, 1%, 5%), the threshold set on the non-members
(the smallest score flagging at most that share of them: the ROC curve's point, as Carlini et al. 2022 read an
attack), the FPR it reaches and the TPR with its bootstrap interval (the threshold set again on each resample's
non-members). With n non-members the FPR moves in steps of 1/n: a target below 1/n cannot be resolved, and its TPR
is reported as unreachable (None, listed in ``unreachable_fprs``), never as the TPR at FPR 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedmem.audit.base import AuditPool, AuditSample
from fedmem.audit.calibration import auc_from_ranks, calibrate_threshold, order_threshold, roc_auc
from fedmem.audit.pool import draw_and_planted
from fedmem.audit.training_context import check_training_forms
from fedmem.common.fmt import pct

FPRS = {"0p1pct": 0.001, "1pct": 0.01, "5pct": 0.05}  # the FPR targets of the TPR figures, by key suffix
DECISION_FPR = "5pct"  # the per-sample decisions (truth rows) use this threshold
BOOTSTRAP_STREAM = 3  # a generator stream of the seed, apart from other methods' draws


def fpr_label(key: str) -> str:
    """An FPR target as a reader writes it: 0.1%, 1%, 5%."""
    return f"{100 * FPRS[key]:g}%"


def unreachable_note(n_nonmembers: int) -> str | None:
    """Why some FPR targets have no TPR at this many non-members (None when every target resolves)."""
    unreachable = [fpr_label(k) for k, f in FPRS.items() if n_nonmembers and f < 1 / n_nonmembers]
    if not unreachable:
        return None
    several = len(unreachable) > 1
    targets = (", ".join(unreachable[:-1]) + " and " if several else "") + unreachable[-1]
    return (f"With {n_nonmembers} non-members the FPR moves in steps of {pct(1 / n_nonmembers)}: the {targets} FPR "
            f"target{'s are' if several else ' is'} below one step, so {'their TPRs are' if several else 'its TPR is'} "
            "not reported (n/a).")


def mean_nll(logp: np.ndarray) -> float:
    """L(s): the mean token negative log-likelihood (natural log), LOSS's statistic."""
    return float(-np.mean(logp))


def bootstrap_indices(n_members: int, n_nonmembers: int, rng: np.random.Generator, resamples: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Resampled positions [resamples, n] of the members and, separately, of the non-members (with replacement)."""
    return (rng.integers(n_members, size=(resamples, n_members)),
            rng.integers(n_nonmembers, size=(resamples, n_nonmembers)))


def bootstrap_auc_ci95(members: np.ndarray, nonmembers: np.ndarray, idx_m: np.ndarray, idx_n: np.ndarray
                       ) -> list[float]:
    """Percentile 95% interval of the ROC AUC over the resamples ``idx_m``, ``idx_n`` (each row's AUC as
    ``roc_auc`` computes it)."""
    return np.percentile(auc_from_ranks(members[idx_m], nonmembers[idx_n]), [2.5, 97.5]).tolist()


def resampled_tpr_ci95(members: np.ndarray, nonmembers: np.ndarray, idx_m: np.ndarray, idx_n: np.ndarray,
                       target: float) -> list[float]:
    """Percentile 95% interval of the TPR at FPR ``target`` over the resamples: each resample's threshold set on its
    own non-members, as the point estimate's is, so the interval carries the threshold's uncertainty too."""
    thresholds = order_threshold(np.sort(nonmembers[idx_n], axis=1), target)
    return np.percentile(np.mean(members[idx_m] > thresholds[:, None], axis=1), [2.5, 97.5]).tolist()


def evaluate(members: np.ndarray, nonmembers: np.ndarray, resampled: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """ROC AUC with its bootstrap interval, and per FPR target the threshold, the FPR it reaches on the non-members
    and the TPR with its bootstrap interval; a target below 1 / (non-members) is unreachable (``unreachable_fprs``):
    its threshold (the highest non-member score, FPR 0) still decides the truth rows, but it has no TPR. None where
    the side a figure needs is empty. Scores are membership scores (higher = member)."""
    out: dict = {"auc": roc_auc(members, nonmembers), "auc_ci95": None,
                 "fpr_resolution": 1 / nonmembers.size if nonmembers.size else None, "unreachable_fprs": []}
    if out["auc"] is not None and resampled is not None:
        out["auc_ci95"] = bootstrap_auc_ci95(members, nonmembers, *resampled)
    for key, target in FPRS.items():
        t = calibrate_threshold(nonmembers, target)  # below 1/n: the highest non-member, FPR 0 (still a decision)
        reachable = t is not None and target >= 1 / nonmembers.size
        if t is not None and not reachable:
            out["unreachable_fprs"].append(key)
        out[f"threshold_at_{key}_fpr"] = t
        out[f"fpr_at_{key}_threshold"] = None if t is None else float(np.mean(nonmembers > t))
        out[f"tpr_at_{key}_fpr"] = float(np.mean(members > t)) if reachable and members.size else None
        out[f"tpr_at_{key}_fpr_ci95"] = None if out[f"tpr_at_{key}_fpr"] is None or resampled is None else \
            resampled_tpr_ci95(members, nonmembers, *resampled, target)
    return out


def undefined_evaluation() -> dict:
    """The figures of an attack that cannot be computed (no reference pass, say), all None."""
    return {"auc": None, "auc_ci95": None, "fpr_resolution": None, "unreachable_fprs": [],
            **{name: None for key in FPRS for name in (f"threshold_at_{key}_fpr", f"fpr_at_{key}_threshold",
                                                        f"tpr_at_{key}_fpr", f"tpr_at_{key}_fpr_ci95")}}


def headline_figures(name: str, figures: dict, detectable: float | None) -> dict:
    """One attack's headline entries from its ``evaluate`` figures: the AUC with its interval and the smallest
    excess over 0.5 the draw could detect (``detectable``: the AUC it detects), and the TPR at each FPR target
    with its interval."""
    return {f"{name}_auc": figures["auc"], f"{name}_auc_ci95": figures["auc_ci95"],
            f"{name}_auc_mde": None if detectable is None or figures["auc"] is None else detectable - 0.5,
            **{f"{name}_tpr_at_{key}_fpr{ci}": figures[f"tpr_at_{key}_fpr{ci}"] for key in FPRS
               for ci in ("", "_ci95")}}


BLIND_FOLDS = 5


def blind_scores(texts: list[str], is_member: np.ndarray, seed: int) -> np.ndarray | None:
    """Out-of-fold membership scores of a classifier that never sees the model (the blind baseline of Das, Zhang and
    Tramèr 2024): TF-IDF of word 1- and 2-grams and a logistic regression, fitted by stratified 5-fold
    cross-validation on the same members and non-members, the vocabulary learnt inside each fold. Its AUC above 0.5
    says the two sides differ as texts (a split by date or source), which an attack's AUC would measure too. None
    when a side has fewer samples than folds."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline

    y = np.asarray(is_member, dtype=int)
    if min(int(y.sum()), int((1 - y).sum())) < BLIND_FOLDS:
        return None
    classifier = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                               LogisticRegression(max_iter=1000))
    folds = StratifiedKFold(BLIND_FOLDS, shuffle=True, random_state=seed)
    return cross_val_predict(classifier, list(texts), y, cv=folds, method="decision_function").astype(np.float64)


@dataclass(frozen=True)
class AttackDraw:
    """The attacks' samples, fixed per run: per client its draw of members (train) and then of non-members (test),
    each followed by the planted canaries it did not take (scored for the ground truth only), and each sample's
    scored pair (its context and its suffix cut to ``suffix_len``)."""

    samples: list[AuditSample]
    drawn: np.ndarray  # bool per sample: in the draw (False: a planted canary beside it)
    is_member: np.ndarray  # bool per sample: a train sample
    clients: np.ndarray  # each sample's client
    short: dict[str, int]  # per split: samples passed over for a suffix shorter than suffix_len
    pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]


def attack_draw(pool: AuditPool, n: int, suffix_len: int, context: str, key: str) -> AttackDraw:
    """The draw of ``n`` members and ``n`` non-members per client that the attacks score (``key``: the context
    setting, named when the samples lack their training form)."""
    samples, drawn, short = [], [], {"train": 0, "test": 0}
    for split, pools in (("train", pool.train), ("test", pool.test)):
        for c in pool.clients:
            draw, planted, skipped = draw_and_planted(pools.get(c, []), n, suffix_len)
            samples += draw + planted
            drawn += [True] * len(draw) + [False] * len(planted)
            short[split] += skipped
    if context == "train":
        check_training_forms(samples, key)
    pairs = [(tuple(p), tuple(sfx[:suffix_len])) for p, sfx in (s.scored_in(context) for s in samples)]
    return AttackDraw(samples, np.array(drawn, dtype=bool), np.array([s.split == "train" for s in samples], dtype=bool),
                      np.array([s.client for s in samples]), short, pairs)


class OnTheAttacksDraw:
    """The samples a method drawn like the membership attacks audits (``n`` members and ``n`` non-members per client,
    suffixes of ``suffix_len`` tokens): its share of the audit pool, declared once for every such method."""

    @classmethod
    def samples_needed(cls, cfg) -> dict[str, int]:
        return {"train": cfg.n, "test": cfg.n}

    @classmethod
    def audited_train(cls, cfg, pool: AuditPool) -> set[str]:
        return {s.id for c in pool.clients for part in draw_and_planted(pool.train[c], cfg.n, cfg.suffix_len)[:2]
                for s in part}

    @classmethod
    def min_suffix(cls, cfg) -> int:
        return cfg.suffix_len


