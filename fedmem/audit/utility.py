"""Utility of the audited model on each client's test split (SPEC §1): ROUGE-L and BLEU for generative tasks,
accuracy for classification; per client and weighted by test-sample count. It shares the round's generation
pass machinery (``AuditedModel.generate``), greedy so that utility does not depend on the sampling seed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, Figure, register
from fedmem.audit.performance import rouge_l
from fedmem.common.fields import check_fields, option, positive
from fedmem.engine.config import Decoding

NAMES = {"rouge_l": "ROUGE-L", "bleu": "BLEU", "accuracy": "accuracy"}


@dataclass
class UtilityConfig:
    n: int = option(16, "test samples per client (at most audit.test_per_client)")
    max_new_tokens: int = option(48, "generation budget for the assistant turn")

    def __post_init__(self):
        check_fields(self, "audit.utility")
        positive(self, "audit.utility", "n", "max_new_tokens")


def bleu(pred: str, ref: str) -> float:
    """Sentence BLEU-4 with method-1 smoothing (NLTK's implementation; it needs no downloaded data)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    p, r = pred.lower().split(), ref.lower().split()
    if not p or not r:
        return 0.0
    return float(sentence_bleu([r], p, smoothing_function=SmoothingFunction().method1))


def label_match(pred: str, label: str) -> bool:
    return pred.strip().upper().startswith(label.strip().upper())


@register
class Utility(AuditMethod):
    name = "utility"
    Config = UtilityConfig
    title = "Utility on held-out test samples"
    size_keys = ("n",)
    figures = (Figure("rouge_l", NAMES["rouge_l"], memorization=None, console=True, sweep="performance"),
               Figure("accuracy", NAMES["accuracy"], memorization=None, console=True, sweep="performance"),
               Figure("bleu", NAMES["bleu"], memorization=None, sweep="utility"))

    @classmethod
    def samples_needed(cls, cfg: UtilityConfig) -> dict[str, int]:
        return {"test": cfg.n}

    @classmethod
    def round_cost(cls, cfg: UtilityConfig, clients: int) -> str:
        return f"{cfg.n * clients} greedy generations"

    def on_degenerate(self, reason: str) -> dict:
        """Utility 0: a model without next-token distributions generates no answer."""
        classify = self.pool.task_config is not None and getattr(self.pool.task_config, "metric", "") == "accuracy"
        weighted = dict.fromkeys(["accuracy"] if classify else ["rouge_l", "bleu"], 0.0)
        return {"config": asdict(self.cfg), "headline": {**weighted, **{f"{k}_ci95": None for k in weighted}},
                "per_client": [], "weighted": weighted, "degenerate": reason,
                "note": f"Utility 0: the model generates no answer ({reason})."}

    def audit(self, audited: AuditedModel) -> dict:
        samples = [s for c in self.pool.clients for s in self.pool.test[c][: self.cfg.n]]
        outs = audited.generate([s.full_prompt_ids or s.prompt_ids for s in samples], self.cfg.max_new_tokens,
                            decoding=Decoding(strategy="greedy"), seed=0)
        classify = self.pool.task_config is not None and getattr(self.pool.task_config, "metric", "") == "accuracy"
        per_client: dict[int, dict[str, list[float]]] = {}
        for s, o in zip(samples, outs):
            pred = audited.decode(o[0])
            d = per_client.setdefault(s.client, {})
            if classify:
                d.setdefault("accuracy", []).append(float(label_match(pred, s.label or s.reference)))
            else:
                d.setdefault("rouge_l", []).append(rouge_l(pred, s.reference))
                d.setdefault("bleu", []).append(bleu(pred, s.reference))
        clients = [{"client": c, **{k: float(np.mean(v)) for k, v in d.items()}, "n": len(next(iter(d.values())))}
                   for c, d in sorted(per_client.items())]
        total = sum(v["n"] for v in clients) or 1
        keys = ["accuracy"] if classify else ["rouge_l", "bleu"]
        weighted = {k: sum(v[k] * v["n"] for v in clients) / total for k in keys}
        headline = dict(weighted)
        for k in keys:  # a normal 95% interval of the mean over the scored test samples
            x = np.array([v for d in per_client.values() for v in d[k]])
            half = 1.96 * float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0
            headline[f"{k}_ci95"] = [weighted[k] - half, weighted[k] + half]
        return {"config": asdict(self.cfg), "headline": headline, "per_client": clients, "weighted": weighted}

