"""Membership-inference baselines: LOSS, zlib, Min-K%, Min-K%++, a reference model and ReCaLL, as one audit method.

Members are each client's audited train samples, non-members the same clients' test samples (never trained on).
Every sample is scored on its suffix s, cut to ``suffix_len`` tokens (fixed, as Prior-Aware's: every attack then
compares suffixes of one length; a sample with a shorter suffix is skipped), given the context p the model was
trained in (``context: train``, the default; SPEC §6): the record's training sequence, task template and instruction
included, up to the end of the prefix, s being the tokens that followed there, so the text is scored as trained, as
the attacks' references score it (``fedmem.audit.training_context``; a non-member is rendered as training would
render it). ``context: prompt`` scores after MR's prompt instead, the prefix alone in the open user turn, which the
model never saw in training. The samples are selected on the memorization text's own tokens in either context; the
section records the context (``context``). With L(s) = -(1/T) sum_t log p(s_t | p, s_<t), the mean token negative
log-likelihood over the T suffix tokens, each attack as its paper defines it:

- ``loss`` (Yeom et al. 2018, "Privacy Risk in Machine Learning: Analyzing the Connection to Overfitting"): L(s);
  member when low.
- ``zlib`` (Carlini et al. 2021, "Extracting Training Data from Large Language Models"): the paper's ratio of the
  log-perplexity to the zlib entropy, L(s) / z(s), z(s) the length in bytes of the suffix text's UTF-8 encoding
  compressed by zlib at its default level (the paper's code and mimir's); member when low: the model predicts the
  text better than its compressibility explains.
- ``min_k`` (Shi et al. 2024, "Detecting Pretraining Data from Large Language Models"): the mean of the k% lowest
  token log-probabilities log p(s_t); member when high (a member has few very surprising tokens).
- ``min_k_pp`` (Zhang et al. 2024, "Min-K%++: Improved Baseline for Detecting Pre-Training Data from Large Language
  Models"): per token (log p(s_t) - mu_t) / sigma_t, mu_t and sigma_t the mean and standard deviation of log p(z) for
  z drawn from the model's own next-token distribution p(. | p, s_<t) over the whole vocabulary; then the mean of
  the k% lowest; member when high. A token whose distribution is a point mass (sigma_t = 0) scores 0.
- ``ref`` (the reference-model attack: Carlini et al. 2021's comparison with a second model, Carlini et al. 2022,
  "Membership Inference Attacks From First Principles", and mimir's ``ref``): L_target(s) - L_ref(s), the log of the
  ratio of the two perplexities; member when low: the audited model finds the text easier than the reference does.
  In federated fine-tuning the natural reference is the base every client starts from (``reference: base``): the
  audited LoRA model with its adapters disabled (peft's ``disable_adapter``), no second model in memory; where the
  audited model has no adapters (an external model audited without ``model.adapter``) that pass would be the
  target itself, and the attack is reported as undefined (None). ``reference: <dir>`` loads a local Hugging Face
  model sharing the audited model's tokenizer. The reference never changes during a run, so its pass runs once per
  run and is kept on the method.
- ``recall`` (Xie et al. 2024, "ReCaLL: Membership Inference via Relative Conditional Log-likelihoods"): the ratio
  LL(s | P, p) / LL(s | p) of the suffix's mean token log-likelihood with a non-member prefix P put before its context
  to the same without it; member when high: a member's likelihood drops more when something the model never trained
  on comes first. P is ``recall_shots`` texts of the data source's public corpus (text no client trains on), drawn
  once per run from the seed and joined, cut to ``recall_prefix_tokens`` tokens. One more teacher-forced pass per
  round over the same pairs with P in front; without a public corpus the attack is reported as undefined (None).

"The k% lowest" are the floor(k/100 T) lowest tokens, at least one (the papers' code).

All attacks but ReCaLL share ONE teacher-forced pass of the audited model per round (``AuditedModel.token_stats``:
the token log-probabilities and Min-K%++'s mu_t and sigma_t from the same logits). The per-sample scores are the
statistics above; each attack's membership score is the statistic, negated where members score low, so that a
higher membership score means "member" everywhere below.

Per attack, pooled over clients and per client, as ``fedmem.audit.membership`` reads every membership attack: ROC
AUC with a 95% percentile-bootstrap interval (members and non-members resampled separately, seeded; the same
resamples for every attack, so their intervals are comparable), and the TPR at 0.1%, 1% and 5% FPR with theirs: the
threshold is the smallest membership score flagging at most that share of the non-members (set on them: the ROC
curve's point, as the papers report it). With n non-members the FPR moves in steps of 1/n, so a target below 1/n
has no TPR (unreachable, said in the section's note).

Beside the attacks, the blind baseline (Das, Zhang and Tramèr 2024): a classifier of the same members and
non-members that sees only their texts (``membership.blind_scores``). Its AUC above 0.5 means the split itself tells
the two sides apart, so the attacks' AUC is read against it (the section's ``alert``); it is fitted once per run.

The rates are over a draw of each client's pool, canaries aside (planted, repeated secrets would make the members
look more memorized than a random training sample); on the synthetic source the planted canaries are scored in the
same pass beside it, for the ground truth only.
"""

from __future__ import annotations

import typing
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from fedmem.audit.base import (
    AuditedModel,
    AuditMethod,
    AuditPool,
    Figure,
    register,
)
from fedmem.audit.intervals import detectable_auc
from fedmem.audit.membership import (
    BOOTSTRAP_STREAM,
    DECISION_FPR,
    FPRS,
    OnTheAttacksDraw,
    attack_draw,
    blind_scores,
    bootstrap_indices,
    evaluate,
    fpr_label,
    headline_figures,
    mean_nll,
    undefined_evaluation,
    unreachable_note,
)
from fedmem.audit.training_context import ScoringContext, context_option
from fedmem.common.fields import check_fields, option, positive
from fedmem.common.stopwatch import Stopwatch

if TYPE_CHECKING:
    from fedmem.engine.scoring import TokenStats

Attack = Literal["loss", "zlib", "min_k", "min_k_pp", "ref", "recall"]
ATTACKS: tuple[str, ...] = typing.get_args(Attack)
LABELS = {"loss": "LOSS", "zlib": "zlib", "min_k": "Min-K%", "min_k_pp": "Min-K%++", "ref": "reference",
          "recall": "ReCaLL"}
# +1: members score high on the statistic; -1: low (the membership score is the statistic times this)
ORIENTATION = {"loss": -1, "zlib": -1, "min_k": 1, "min_k_pp": 1, "ref": -1, "recall": 1}
RECALL_STREAM = 4  # a generator stream of the seed for ReCaLL's choice of public texts


@dataclass
class MiaConfig:
    """audit.mia: membership-inference baselines (LOSS, zlib, Min-K%, Min-K%++, reference model)."""

    n: int = option(32, "train samples (members) and test samples (non-members) per client (at least "
                        "audit.common_draw: the draw holds the common draw); a sample whose suffix is shorter than "
                        "suffix_len is skipped, and canaries are scored beside the draw")
    suffix_len: int = option(64, "suffix tokens scored after each prefix: fixed, so every attack compares suffixes "
                                 "of one length")
    k: float = option(20.0, "Min-K% and Min-K%++: the percentage of a suffix's lowest-scoring tokens averaged")
    reference: str = option(
        "base", "the ref attack's reference model: base (the audited LoRA model with its adapters disabled, the "
                "weights every client starts from) or a local Hugging Face model directory with the same tokenizer")
    decide_with: Attack = option("loss", "the attack whose 5%-FPR threshold makes the per-sample decisions scored "
                                         "against the ground truth")
    recall_shots: int = option(3, "ReCaLL: public-corpus texts joined into the non-member prefix put before each "
                                  "scored context")
    recall_prefix_tokens: int = option(64, "ReCaLL: the non-member prefix cut to this many tokens")
    resamples: int = option(1000, "bootstrap resamples of the ROC AUC's 95% interval")
    seed: int | None = option(None, "seed of the bootstrap and the blind baseline's folds; null: the run's seed")
    blind: bool = option(True, "also fit the blind baseline: a text-only classifier of members against non-members "
                               "(word n-grams, logistic regression, cross-validated) whose AUC says whether the split "
                               "itself tells them apart, without the model")
    context: ScoringContext = context_option(
        "what each suffix is scored after")

    def __post_init__(self):
        check_fields(self, "audit.mia")
        positive(self, "audit.mia", "n", "suffix_len", "resamples", "recall_shots", "recall_prefix_tokens")
        if not 0 < self.k <= 100:
            raise ValueError(f"audit.mia.k is a percentage and must be in (0, 100], got {self.k}")
        if not self.reference.strip():
            raise ValueError("audit.mia.reference must be base or a model directory, got an empty string")


# ---------------------------------------------------------------- the attacks (pure functions of one suffix)


def zlib_bytes(text: str) -> int:
    """z(s): the length in bytes of the text's UTF-8 encoding compressed by zlib (default level)."""
    return len(zlib.compress(text.encode("utf-8")))


def zlib_ratio(logp: np.ndarray, compressed: int) -> float:
    """The log-perplexity over the zlib entropy: L(s) / z(s)."""
    return mean_nll(logp) / compressed


def lowest_mean(values: np.ndarray, k: float) -> float:
    """The mean of the floor(k/100 T) lowest of T values, at least one."""
    count = max(1, int(len(values) * k / 100))
    return float(np.sort(values)[:count].mean())


def min_k_pp_tokens(logp: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """(log p(s_t) - mu_t) / sigma_t per token; 0 where the next-token distribution is a point mass (sigma_t = 0)."""
    safe = np.where(sigma > 0, sigma, 1.0)
    return np.where(sigma > 0, (logp - mu) / safe, 0.0)


def reference_difference(logp: np.ndarray, logp_ref: np.ndarray) -> float:
    """L_target(s) - L_ref(s): the log of the ratio of the target's perplexity to the reference's."""
    return mean_nll(logp) - mean_nll(logp_ref)


def recall_ratio(logp: np.ndarray, logp_prefixed: np.ndarray) -> float:
    """LL(s | P, p) / LL(s | p): the mean token log-likelihood with the non-member prefix P in front over the same
    without it (both negative, so the ratio is above 1 where P lowers the likelihood)."""
    return float(np.mean(logp_prefixed) / np.mean(logp))


def statistics(stats: TokenStats, compressed: int, k: float, logp_ref: np.ndarray | None,
               logp_prefixed: np.ndarray | None = None) -> dict[str, float | None]:
    """Every attack's statistic for one suffix; ``ref`` is None without a reference pass, ``recall`` without the
    prefixed pass."""
    return {
        "loss": mean_nll(stats.logp),
        "zlib": zlib_ratio(stats.logp, compressed),
        "min_k": lowest_mean(stats.logp, k),
        "min_k_pp": lowest_mean(min_k_pp_tokens(stats.logp, stats.mu, stats.sigma), k),
        "ref": None if logp_ref is None else reference_difference(stats.logp, logp_ref),
        "recall": None if logp_prefixed is None else recall_ratio(stats.logp, logp_prefixed),
    }


# ---------------------------------------------------------------- the audit method


@register
class MembershipInference(OnTheAttacksDraw, AuditMethod):
    name = "mia"
    compares_members = True  # members against non-members of the same clients
    Config = MiaConfig
    title = "Membership inference (LOSS, zlib, Min-K%, Min-K%++, reference, ReCaLL)"
    size_keys = ("n",)
    # the LOSS attack is the baseline every other attack is read against: on the console and in the sweep tables
    figures = tuple(Figure(f"{a}_auc", f"{LABELS[a]} AUC", kind="score", console=a == "loss",
                           sweep="extra" if a == "loss" else None, mde=True, null=0.5) for a in ATTACKS) + tuple(
        Figure(f"{a}_tpr_at_{key}_fpr", f"{LABELS[a]} TPR at {fpr_label(key)} FPR", sweep=None)
        for a in ATTACKS for key in FPRS) + (
        Figure("blind_auc", "blind baseline AUC (texts only, no model)", kind="score", memorization=None, sweep=None,
               mde=True, null=0.5),)

    @classmethod
    def round_cost(cls, cfg: MiaConfig, clients: int) -> str:
        return (f"one teacher-forced pass over up to {2 * cfg.n * clients} suffixes of {cfg.suffix_len} tokens, and "
                f"one more with ReCaLL's {cfg.recall_prefix_tokens}-token prefix in front; the reference model's pass "
                "once per run")

    @classmethod
    def preflight(cls, cfg: MiaConfig) -> None:
        if cfg.reference != "base" and not (Path(cfg.reference).expanduser() / "config.json").is_file():
            raise ValueError(f"audit.mia.reference={cfg.reference}: not a Hugging Face model directory "
                             "(no config.json); use base or a local model directory")

    @classmethod
    def check_pool(cls, cfg: MiaConfig, pool: AuditPool) -> None:
        if pool.public_texts and cfg.recall_shots > len(pool.public_texts):
            raise ValueError(f"audit.mia.recall_shots={cfg.recall_shots}: the public corpus holds "
                             f"{len(pool.public_texts)} texts: set audit.mia.recall_shots={len(pool.public_texts)}")

    def __init__(self, cfg: MiaConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.check_pool(cfg, pool)
        draw = attack_draw(pool, cfg.n, cfg.suffix_len, cfg.context, "audit.mia.context")
        self.samples, self.drawn, self.short, self.pairs = draw.samples, draw.drawn, draw.short, draw.pairs
        self.is_member, self.clients = draw.is_member, draw.clients
        # fixed per run: the compressed length of each suffix's text
        self.compressed = [zlib_bytes(pool.tokenizer.decode(list(sfx))) for _, sfx in self.pairs]
        self.tags = {s.id: s.tags for s in self.samples}
        self.seed = pool.seed if cfg.seed is None else cfg.seed
        if cfg.reference != "base":
            self._check_reference_tokenizer()
        # the blind baseline's out-of-fold scores of the draw (the canaries beside it are NaN): the texts do not change
        # from round to round, so neither do they
        self.blind = None
        drawn = np.flatnonzero(self.drawn)
        if cfg.blind and drawn.size:
            scores = blind_scores([self.samples[i].prefix_text + self.samples[i].suffix_text for i in drawn],
                                  self.is_member[drawn], self.seed)
            if scores is not None:
                self.blind = np.full(len(self.samples), np.nan)
                self.blind[drawn] = scores
        self.prefixed_pairs, self._recall_note = self._recall_pairs(pool)
        self._reference: list[np.ndarray] | None = None  # the reference's token log-probabilities, once per run
        self._reference_note: str | None = None
        self._reference_done = False

    def _recall_pairs(self, pool: AuditPool) -> tuple[list | None, str | None]:
        """ReCaLL's pairs, the non-member prefix P before each context (drawn once per run), or (None, why not)."""
        if not pool.public_texts:
            return None, ("ReCaLL is undefined: the data source has no public corpus to draw its non-member prefix "
                          "from.")
        rng = np.random.default_rng([self.seed, RECALL_STREAM])
        chosen = rng.choice(len(pool.public_texts), size=self.cfg.recall_shots, replace=False)
        text = "\n\n".join(pool.public_texts[i] for i in sorted(chosen))
        prefix = tuple(pool.tokenizer(text, add_special_tokens=False)["input_ids"][: self.cfg.recall_prefix_tokens])
        return [(prefix + ctx, sfx) for ctx, sfx in self.pairs], None

    def _check_reference_tokenizer(self) -> None:
        """A reference model scores the same token ids only with the same vocabulary: checked now, before
        training."""
        from transformers import AutoTokenizer

        ref = AutoTokenizer.from_pretrained(str(Path(self.cfg.reference).expanduser()))
        if ref.get_vocab() != self.pool.tokenizer.get_vocab():
            raise ValueError(f"audit.mia.reference={self.cfg.reference}: its tokenizer differs from the audited "
                             "model's, so it cannot score the same token ids")

    # -- the reference pass, once per run
    def _reference_pass(self, audited: AuditedModel) -> tuple[list[np.ndarray] | None, int]:
        """(the reference's token log-probabilities of every pair or None, the passes this call made): once per run,
        through the audited model's door (its base, or the reference directory's model)."""
        if self._reference_done:
            return self._reference, 0
        self._reference_done = True
        if self.cfg.reference == "base":
            self._reference = audited.base_logprobs(self.pairs)
            if self._reference is None:
                self._reference_note = ("The audited model has no LoRA adapters, so its base is the model itself: "
                                        "the reference attack is undefined (set audit.mia.reference to a model "
                                        "directory).")
                return None, 0
        else:
            self._reference = audited.other_model_logprobs(str(Path(self.cfg.reference).expanduser()), self.pairs)
        return self._reference, 1

    # -- per round
    def audit(self, audited: AuditedModel) -> dict:
        before, clock = audited.passes.get("token_stats", 0), Stopwatch()
        stats = audited.token_stats(self.pairs) if self.pairs else []
        clock.lap("target_pass", 4)
        reference, reference_passes = self._reference_pass(audited) if self.pairs else (None, 0)
        clock.lap("reference_pass", 4)
        target_passes = audited.passes.get("token_stats", 0) - before
        prefixed = [st.logp for st in audited.token_stats(self.prefixed_pairs)] if self.prefixed_pairs else None
        clock.lap("recall_pass", 4)
        rows = [statistics(st, z, self.cfg.k, None if reference is None else reference[i],
                           None if prefixed is None else prefixed[i])
                for i, (st, z) in enumerate(zip(stats, self.compressed))]
        undefined = {a for a, missing in (("ref", reference is None), ("recall", prefixed is None)) if missing}
        section = self._report(rows, undefined)
        clock.lap("attacks", 4)
        section["seconds"] = {**clock.laps,  # moved by the auditor to the report's timings
                              "target_passes": target_passes, "reference_passes": reference_passes,
                              "recall_passes": audited.passes.get("token_stats", 0) - before - target_passes}
        return section

    def _membership(self, rows: list[dict], attack: str) -> np.ndarray:
        """The attack's membership scores (higher = member) of every sample."""
        return ORIENTATION[attack] * np.array([r[attack] for r in rows], dtype=np.float64)

    def _evaluate(self, rows: list[dict], undefined: set[str]) -> tuple[dict, list[dict]]:
        """(pooled figures per attack, per-client figures): over the draw, members against non-members, every
        attack on the same bootstrap resamples of a group."""
        groups = [("all", self.drawn)] + [(c, self.drawn & (self.clients == c)) for c in self.pool.clients]
        out = {}
        for key, mask in groups:
            m, n = mask & self.is_member, mask & ~self.is_member
            resampled = None
            if m.any() and n.any():
                rng = np.random.default_rng([self.seed, BOOTSTRAP_STREAM, *([] if key == "all" else [1, key])])
                resampled = bootstrap_indices(int(m.sum()), int(n.sum()), rng, self.cfg.resamples)
            figures = {}
            for a in ATTACKS:
                if a in undefined:
                    figures[a] = undefined_evaluation()
                    continue
                score = self._membership(rows, a) if rows else np.zeros(0)
                figures[a] = evaluate(score[m], score[n], resampled)
            out[key] = {"members": int(m.sum()), "nonmembers": int(n.sum()), "attacks": figures}
            if key == "all":
                out[key]["blind"] = None if self.blind is None else evaluate(self.blind[m], self.blind[n], resampled)
        pooled = out.pop("all")
        return pooled, [{"client": c, **v} for c, v in out.items()]

    def _report(self, rows: list[dict], undefined: set[str]) -> dict:
        cfg = self.cfg
        pooled, per_client = self._evaluate(rows, undefined)
        headline: dict = {"members": pooled["members"], "nonmembers": pooled["nonmembers"]}
        detectable = detectable_auc(pooled["members"], pooled["nonmembers"])  # the same for every attack
        for a in ATTACKS:
            headline |= headline_figures(a, pooled["attacks"][a], detectable)
        blind = pooled.pop("blind")
        headline |= {"blind_auc": None if blind is None else blind["auc"],
                     "blind_auc_ci95": None if blind is None else blind["auc_ci95"],
                     "blind_auc_mde": None if detectable is None or blind is None else detectable - 0.5}
        section = {
            "config": {**asdict(cfg), "seed": self.seed},
            "context": cfg.context,
            "headline": headline,
            "blind": blind,
            "attacks": {a: {"label": LABELS[a], "member_when": "high" if ORIENTATION[a] > 0 else "low",
                            "defined": a not in undefined, **pooled["attacks"][a]} for a in ATTACKS},
            "per_client": per_client,
            "skipped_short_suffix": dict(self.short),
            "samples": [
                {"id": s.id, "client": s.client, "split": s.split, "drawn": bool(self.drawn[i]),
                 **r}  # unrounded: the truth rows compare them with thresholds that are such scores
                for i, (s, r) in enumerate(zip(self.samples, rows))
            ],
        }
        notes = [note for a, note in (("ref", self._reference_note), ("recall", self._recall_note))
                 if a in undefined and note]
        if (unreachable := unreachable_note(pooled["nonmembers"])) is not None:
            notes.append(unreachable)
        if notes:
            section["note"] = " ".join(notes)
        if blind is not None and blind["auc_ci95"] is not None and blind["auc_ci95"][0] > 0.5:
            lo, hi = blind["auc_ci95"]
            section["alert"] = (f"members and non-members differ without the model: a text-only classifier tells them "
                                f"apart with AUC {blind['auc']:.3f} [{lo:.3f}, {hi:.3f}], so an attack's AUC is read "
                                "against that, not against 0.5")
        return section

    # -- the ground truth and the reports
    def _decisions(self, section: dict, attack: str) -> list[dict]:
        """Every scored sample flagged by ``attack`` at its 5%-FPR threshold (score: the membership score); empty
        when the attack has no threshold (undefined, or no non-members)."""
        threshold = (section.get("attacks", {}).get(attack) or {}).get(f"threshold_at_{DECISION_FPR}_fpr")
        if threshold is None:
            return []
        rows = []
        for s in section.get("samples", []):
            score = ORIENTATION[attack] * s[attack]
            rows.append({"id": s["id"], "tags": self.tags.get(s["id"], {}), "split": s["split"], "score": score,
                         "decision": bool(score > threshold)})
        return rows

    def truth_rows(self, section: dict) -> list[dict]:
        return self._decisions(section, self.cfg.decide_with)

    def verdicts(self, section: dict) -> dict[str, list[dict]]:
        """One verdict set per attack, each at its own 5%-FPR threshold."""
        sets = {f"{self.name}_{a}": self._decisions(section, a) for a in ATTACKS}
        return {label: rows for label, rows in sets.items() if rows}

