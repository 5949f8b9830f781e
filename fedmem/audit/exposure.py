"""Canary exposure (Carlini et al., "The Secret Sharer", 2019): how far a planted secret stands out, to the model,
from the values it could have had.

A source that plants canaries says, in its ground truth, which part of each canary was drawn at random and the
values it was drawn from, all equally likely (``secret_space``: ``{"part", "candidates"}``; the synthetic source's
record numbers). Every candidate is put in the secret's place in the canary's suffix and scored, log P(suffix |
context) in the context the model trained on (as Prior-Aware and the membership attacks score); the true value's
rank r among the N candidates (1 = the most likely) gives

    exposure = log2(N) - log2(r)   bits,

from 0 (the true value ranked last) to log2(N) (ranked first). The control is built in: a model that never saw a
canary ranks its value uniformly at random, so its expected exposure is log2(N) - mean(log2(r), r = 1..N), about
1.4 bits for large N (``chance``); the canaries planted once are the empirical control beside the repeated ones.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, AuditSample, Figure, register
from fedmem.audit.intervals import mean_t_interval
from fedmem.audit.training_context import ScoringContext, check_training_forms, context_option
from fedmem.audit.truth import canary_group, canary_group_order
from fedmem.common.fields import check_fields


@dataclass
class ExposureConfig:
    context: ScoringContext = context_option(
        "what the canary's suffix is scored after")

    def __post_init__(self):
        check_fields(self, "audit.exposure")


def chance_exposure(n: int) -> float:
    """The expected exposure of a value ranked uniformly at random among ``n``: what a model that never saw it gets."""
    return math.log2(n) - float(np.mean(np.log2(np.arange(1, n + 1))))


def exposure(true_logp: float, candidate_logps: np.ndarray) -> tuple[int, float]:
    """(rank of the true value among the candidates by log P, 1 = most likely; its exposure in bits). Candidates
    scoring the same as the true value share its rank, counted in its favour."""
    rank = 1 + int((candidate_logps > true_logp).sum())
    return rank, math.log2(len(candidate_logps)) - math.log2(rank)


@register
class Exposure(AuditMethod):
    name = "exposure"
    Config = ExposureConfig
    title = "Canary exposure"
    figures = (
        Figure("exposure", "canary exposure (bits)", kind="score", console=True),
        # its controls, shown wherever it is: an unseen value's expected exposure, and the canaries planted once
        Figure("chance", "exposure by chance (bits)", kind="score", ci=None, memorization=None, console=True),
        Figure("exposure_single", "exposure of canaries planted once (bits)", kind="score", memorization=None),
        Figure("ranked_first", "repeated canaries whose secret ranks first", kind="count", of="repeated", sweep=None),
    )

    def __init__(self, cfg: ExposureConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        entries = {k["id"]: k for k in pool.ground_truth.get("canaries", []) if k.get("secret_space")}
        # each canary once: a canary several clients hold sits in each one's pool, the same text scored the same
        # way, and counting it per holder would weigh it as several canaries; its secret must sit in the suffix.
        # Per canary: its sample, the true value's index among the candidates, and the (context, suffix) pairs to
        # score, built once here since they are the same every round
        self.canaries: list[tuple[AuditSample, int, list[tuple]]] = []
        self.secret_in_prefix = self.secret_untrained = 0
        seen = set()
        for s in (s for c in pool.clients for s in pool.train[c] if s.tags.get("canary") in entries):
            if s.tags["canary"] in seen:
                continue
            seen.add(s.tags["canary"])
            entry = entries[s.tags["canary"]]
            value, candidates = entry["secret_parts"][entry["secret_space"]["part"]], entry["secret_space"]["candidates"]
            trained = self._trained_suffix(s)
            if value in trained:
                self.canaries.append((s, candidates.index(value), self._pairs(s, trained, value, candidates)))
            elif value in s.suffix_text:  # training cut the record before its secret: nothing to rank
                self.secret_untrained += 1
            else:
                self.secret_in_prefix += 1
        if cfg.context == "train":
            check_training_forms([s for s, _, _ in self.canaries], "audit.exposure.context")

    @classmethod
    def round_cost(cls, cfg: ExposureConfig, clients: int) -> str:
        return "every planted canary's suffix scored with each value its secret could have had"

    def _trained_suffix(self, sample: AuditSample) -> str:
        """The suffix's text as far as training saw it (all of it unless training cut the record, SPEC §6)."""
        if not sample.train_cut:
            return sample.suffix_text
        return self.pool.tokenizer.decode(list(sample.suffix_ids[: sample.trained_suffix_len]))

    def _pairs(self, sample: AuditSample, suffix: str, value: str, candidates: list[str]) -> list[tuple]:
        """(context ids, suffix ids) of the canary's (trained) suffix with each candidate in its secret's place,
        tokenized alike (the true value is scored through the same path as the others)."""
        context, _ = sample.scored_in(self.cfg.context)
        tokenizer = self.pool.tokenizer
        return [(context, tuple(tokenizer.encode(suffix.replace(value, c), add_special_tokens=False)))
                for c in candidates]

    def audit(self, audited: AuditedModel) -> dict:
        rows = []
        for sample, true_index, pairs in self.canaries:
            logps = audited.logprobs(pairs)
            rank, bits = exposure(float(logps[true_index]), logps)
            rows.append({"id": sample.id, "client": sample.client, "canary": sample.tags["canary"],
                         "copies": int(sample.tags.get("copies", 1)), "group": canary_group(sample.tags),
                         "candidates": len(pairs), "rank": rank, "exposure": bits})
        repeated = [r["exposure"] for r in rows if r["copies"] >= 2]
        single = [r["exposure"] for r in rows if r["copies"] < 2]
        sizes = sorted({r["candidates"] for r in rows})
        top = math.log2(max(sizes, default=1))
        headline = {"exposure": float(np.mean(repeated)) if repeated else None,
                    "exposure_ci95": mean_t_interval(repeated, 0.0, top),
                    "exposure_single": float(np.mean(single)) if single else None,
                    "exposure_single_ci95": mean_t_interval(single, 0.0, top),
                    "chance": chance_exposure(sizes[0]) if len(sizes) == 1 else None,
                    "ranked_first": sum(r["rank"] == 1 and r["copies"] >= 2 for r in rows), "repeated": len(repeated)}
        groups = {}
        for g in sorted({r["group"] for r in rows}, key=canary_group_order):
            bits = [r["exposure"] for r in rows if r["group"] == g]
            groups[g] = {"n": len(bits), "exposure": float(np.mean(bits)), "ranked_first":
                         sum(r["rank"] == 1 for r in rows if r["group"] == g)}
        return {"config": asdict(self.cfg), "headline": headline, "context": self.cfg.context, "by_copies": groups,
                "canaries": rows, "secret_in_prefix": self.secret_in_prefix,
                "secret_past_trained_length": self.secret_untrained}
