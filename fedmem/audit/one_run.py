"""Record-level privacy audit in one run (Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training Run",
NeurIPS 2023): an empirical lower bound on the run's ε, from the audit canaries the data planted.

The data draws m audit canaries and trains on each with probability 1/2, independently (``fedmem.data.audit_canaries``,
its ground truth says which). After a round, every canary gets a membership score from the global model; the k+
highest are guessed "in", the k- lowest "out", the rest abstained on, and the v correct guesses among the r made give,
by the paper's theorem (its Theorem 5.2 in the three-way form of Corollary 5.4, the form its experiments use), the
largest ε at which an (ε, δ)-DP training would make v or more correct guesses with probability at most
1 - confidence:

    P[W >= v] <= P[Bin(r, q) >= v] + 2 m δ max_{i=1..v} P[v - i <= Bin(r, q) < v] / i,   q = e^ε / (1 + e^ε).

No ε below the bound is consistent with what the guesses got right; a bound above the accountant's ε means the
accounting or its implementation is wrong (docs/spec.md §10).

The score: the canary's mean log-likelihood per token under the audited model minus under its base (the adapter
switched off; ``score: reference``), teacher-forced in the sequence the canary is trained in, from its second token
on. The base's pass runs once per run. Subtracting it takes out how likely a string of these words is to any model of
the language, which varies far more between canaries than what one round of fine-tuning adds; what remains is what
training added, and at round 0, whose adapter is the identity, it is exactly 0 for every canary: no canary is
ranked, no guess is made, the bound is 0. ``score: loss`` ranks by the audited model's likelihood alone. Canaries
whose score ties across a guessing cut are abstained on (a tie orders nothing).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, register
from fedmem.audit.calibration import roc_auc
from fedmem.audit.training_context import (
    ScoringContext,
    TrainingFrame,
    context_option,
    has_offsets,
)
from fedmem.common.fields import check_fields, option
from fedmem.data.audit_canaries import canary_record

PREFIX_TOKENS = 1  # a canary is scored from its second token on: its first is the context's, after the template


@dataclass
class OneRunConfig:
    """audit.one_run: the one-run privacy audit's guesses (the canaries themselves are data.audit_canaries)."""

    k_plus: int = option(16, "audit canaries guessed trained on: the highest membership scores")
    k_minus: int = option(16, "audit canaries guessed held out: the lowest membership scores")
    confidence: float = option(0.95, "the confidence of the ε lower bound")
    delta: float | None = option(None, "δ of the bound; null = the run's defense.delta (filled in when the config is "
                                       "checked)")
    score: Literal["reference", "loss"] = option(
        "reference", "the membership score: reference (the mean token log-likelihood minus the base model's, the "
                     "adapter off) or loss (the audited model's mean token log-likelihood)")
    context: ScoringContext = context_option("what each audit canary is scored after")

    def __post_init__(self):
        check_fields(self, "audit.one_run")
        if self.k_plus < 0 or self.k_minus < 0 or self.k_plus + self.k_minus < 1:
            raise ValueError(f"audit.one_run.k_plus and k_minus must be >= 0 and make at least one guess, got "
                             f"{self.k_plus} and {self.k_minus}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"audit.one_run.confidence must be in (0, 1), got {self.confidence}")
        if self.delta is not None and not 0 <= self.delta < 1:
            raise ValueError(f"audit.one_run.delta must be in [0, 1), got {self.delta}")


# ---------------------------------------------------------------- the theorem


def p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The probability bound of v or more correct guesses among r, from m canaries, under (ε, δ)-DP (the module
    docstring's inequality)."""
    from scipy.stats import binom

    q = 1.0 / (1.0 + math.exp(-eps))
    tail = float(binom.sf(v - 1, r, q))
    if v == 0 or delta == 0:
        return min(1.0, tail)
    below = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1), r, q))  # P[v - i <= Bin < v], i = 1..v
    return min(1.0, tail + 2 * m * delta * float(np.max(below / np.arange(1, v + 1))))


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest ε whose ``p_value`` stays below 1 - ``confidence`` (0 when even ε = 0 explains v): at that
    confidence, the training was not (ε', δ)-DP for any ε' below it."""
    from scipy.optimize import brentq

    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= correct ({v}) <= guesses ({r}) <= canaries ({m})")
    level = 1.0 - confidence
    gap = lambda eps: p_value(m, r, v, eps, delta) - level  # noqa: E731  (increasing in ε)
    if gap(0.0) >= 0:
        return 0.0
    hi = 1.0
    while gap(hi) < 0:
        if hi > 1e3:  # every guess right, and many: beyond any ε a budget would state
            return math.inf
        hi *= 2
    return float(brentq(gap, hi / 2 if hi > 1 else 0.0, hi, xtol=1e-10))


def guesses(scores: np.ndarray, k_plus: int, k_minus: int) -> np.ndarray:
    """+1 ("in") for the ``k_plus`` highest scores, -1 ("out") for the ``k_minus`` lowest, 0 (abstain) for the rest;
    canaries tied across a cut abstain, so equal scores (round 0's) make no guess."""
    out = np.zeros(len(scores), dtype=int)
    ranked = np.sort(scores)
    if k_plus:
        cut = ranked[-k_plus]
        out[scores > cut if k_plus < len(scores) and ranked[-k_plus - 1] == cut else scores >= cut] = 1
    if k_minus:
        cut = ranked[k_minus - 1]
        out[scores < cut if k_minus < len(scores) and ranked[k_minus] == cut else scores <= cut] = -1
    return out


# ---------------------------------------------------------------- the method


@register
class OneRun(AuditMethod):
    name = "one_run"
    Config = OneRunConfig
    title = "Record-level privacy audit in one run (audit canaries)"
    size_keys = ("k_plus", "k_minus")
    figures = (
        Figure("epsilon", "record-level ε lower bound", kind="score", ci=None, console=True, epsilon=True),
        Figure("correct", "correct canary guesses", kind="count", of="guesses", sweep=None),
        Figure("auc", "audit canary AUC", kind="score", ci=None, sweep=None),
    )

    @classmethod
    def check(cls, cfg: OneRunConfig, experiment) -> None:
        m = experiment.data.audit_canaries
        if m and cfg.k_plus + cfg.k_minus > m:
            raise ValueError(f"audit.one_run guesses on k_plus + k_minus = {cfg.k_plus + cfg.k_minus} audit canaries, "
                             f"but data.audit_canaries={m}: raise data.audit_canaries or lower the k's")
        if cfg.delta is None:
            cfg.delta = experiment.defense.delta

    @classmethod
    def round_cost(cls, cfg: OneRunConfig, clients: int) -> str:
        return "one teacher-forced pass over the audit canaries; the base model's pass once per run"

    def __init__(self, cfg: OneRunConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.canaries = (pool.ground_truth.get("audit_canaries") or {}).get("canaries", [])
        self.member = np.array([k["member"] for k in self.canaries], dtype=bool)
        self.pairs = [self._pair(k) for k in self.canaries]
        self._base: list[np.ndarray] | None = None  # the base's token log-probabilities, once per run
        self._base_done = False

    def _pair(self, canary: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(context, scored tokens) of one canary, member or not alike: in the training context, its record's
        rendering up to its first token; in the prompt context, the audits' prompt header and its first token."""
        tokenizer, task = self.pool.tokenizer, self.pool.task_config
        if self.cfg.context == "train":
            record = canary_record(task, canary["id"], canary["text"], 0, canary["client"])
            frame = TrainingFrame.of(tokenizer, record, task.plain) if has_offsets(tokenizer) else None
            if frame is None:
                raise ValueError("audit.one_run.context=train scores each canary in the sequence it is trained in, "
                                 "which this tokenizer or chat template cannot locate: set "
                                 "audit.one_run.context=prompt")
            form = frame.form(tokenizer, canary["text"], PREFIX_TOKENS)
            return form.context_ids, form.suffix_ids
        ids = tokenizer(canary["text"], add_special_tokens=False)["input_ids"]
        return self.pool.prompt_context(ids[:PREFIX_TOKENS]), tuple(ids[PREFIX_TOKENS:])

    def _reference(self, audited: AuditedModel) -> list[np.ndarray] | None:
        if not self._base_done:
            self._base_done = True
            self._base = audited.base_logprobs(self.pairs) if self.cfg.score == "reference" else None
        return self._base

    def audit(self, audited: AuditedModel) -> dict:
        if not self.canaries:  # as exposure without secrets: nothing planted, nothing to measure
            return {"config": asdict(self.cfg), "headline": {"epsilon": None, "correct": None, "guesses": None},
                    "canaries": [], "note": "The data has no audit canaries (data.audit_canaries=0): no record-level "
                                            "bound."}
        stats = audited.token_stats(self.pairs)
        base = self._reference(audited)
        scores = np.array([float(np.mean(s.logp - b)) if base is not None else float(np.mean(s.logp))
                           for s, b in zip(stats, base or [None] * len(stats))])
        guess = guesses(scores, self.cfg.k_plus, self.cfg.k_minus)
        truth = np.where(self.member, 1, -1)
        r, v = int((guess != 0).sum()), int((guess == truth).sum())
        eps = epsilon_lower_bound(len(scores), r, v, self.cfg.delta, self.cfg.confidence)
        rows = [{"id": k["id"], "client": k["client"], "member": bool(k["member"]), "score": float(s),
                 "guess": int(g)} for k, s, g in zip(self.canaries, scores, guess)]
        headline = {"epsilon": eps, "correct": v, "guesses": r, "canaries": len(scores),
                    "members": int(self.member.sum()), "auc": roc_auc(scores[self.member], scores[~self.member])}
        section = {"config": asdict(self.cfg), "headline": headline,
                   "score": "reference" if base is not None else "loss", "delta": self.cfg.delta,
                   "confidence": self.cfg.confidence, "canaries": rows}
        if self.cfg.score == "reference" and base is None:
            section["note"] = ("The audited model has no LoRA adapter to switch off, so the canaries are ranked by "
                               "their likelihood alone (score: loss).")
        return section
