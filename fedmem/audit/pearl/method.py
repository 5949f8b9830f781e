"""PEARL perturbation sensitivity as a per-round audit method, calibrated on held-out data (SPEC §5).

Per audited sample x = (prefix p, reference y): perturb p at every intensity k, sample
``samples_per_intensity`` outputs from the model on each perturbed prompt, score each output against y
(1 − NCD or ROUGE-L F1), and turn the intensities x outputs table into gfd / falloff / expected_drop.

The prompt is the context the model was trained in (``context: train``, the default; SPEC §6): the record's
training sequence, task template and instruction included, up to the end of p, with the perturbed p spliced in
place of p (``fedmem.audit.pearl.prompt_splice``), so the model continues the client's text where it learned to; y is
that text's true continuation as trained, the suffix cut to the ``max_new_tokens`` an output can have
(``fedmem.audit.training_context``). ``context: prompt`` uses MR's prompt instead (SPEC §3): p alone in the open
user turn, which the model never saw in training. The loss attack scores the suffix in the same context, and the
section records it (``context``).
Members are the audited train samples, non-members the same clients' test samples. The threshold alpha is
calibrated per round on the non-members at a target FPR, and its FPR and TPR are reported cross-fitted: the
non-members are split once per run into two halves (stratified by client), each half calibrates an alpha whose FPR
is read on the other half, so no reported FPR is measured on the samples that set its threshold; the TPR's
bootstrap interval recalibrates both alphas in every resample. The per-sample decisions use the alpha calibrated
on all non-members, the best single threshold. A loss-threshold membership-inference attack on the same samples
is reported beside it (PEARL Table 4 shape), calibrated the same way.

Cost: all (samples x intensities) prompts go through one batched ``audited.generate`` call with
``num_samples = samples_per_intensity``; ``n`` sets the members and ``nonmembers`` the non-members per client.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from fedmem.audit.base import (
    AuditedModel,
    AuditMethod,
    AuditPool,
    AuditSample,
    Figure,
    register,
)
from fedmem.audit.calibration import (
    calibrate_threshold,
    cross_fitted,
    fpr_curve,
    held_out_flags,
    histogram,
    histogram_edges,
    roc_auc,
    split_halves,
)
from fedmem.audit.intervals import detectable_auc, rate
from fedmem.audit.pearl.perturb import (
    bitflip,
    change_shares,
    default_replacer,
    flip_count,
    sample_rng,
)
from fedmem.audit.pearl.prompt_splice import splice_prompt
from fedmem.audit.pearl.sensitivity import SCORES, intensity_means, sensitivity_scores
from fedmem.audit.performance import performance
from fedmem.audit.pool import draw
from fedmem.audit.training_context import ScoringContext, check_training_forms, context_option
from fedmem.audit.truth import canary_group
from fedmem.common.fields import check_fields, option, option_factory, positive
from fedmem.common.stopwatch import Stopwatch

# Generator streams of the run seed, apart from each other and from the per-sample perturbation generators.
SPLIT_STREAM, BOOTSTRAP_STREAM = 1, 2
# What the per-intensity change figures count: bits or words changed by the perturbation, and the shares of the
# prefix's characters and whitespace-split words that differ afterwards.
CHANGES = ("changed", "char_change", "word_change")
# With fewer non-members the section says that its FPR is coarse: it moves in steps of 1 / their number, and each
# half's alpha is the largest or next-largest of a handful of scores.
FEW_NONMEMBERS = 30


@dataclass
class PearlConfig:
    """audit.pearl: PEARL perturbation sensitivity (SPEC §5)."""

    n: int = option(
        30,
        "members (train samples, canaries aside) audited per client: at least audit.common_draw, so the draw holds "
        "the common draw. Cost: (n + nonmembers) x clients x len(intensities) x samples_per_intensity generations "
        "of max_new_tokens; the defaults, 3 clients: 40 x 3 x 6 x 10 = 7,200 per audited round",
    )
    nonmembers: int = option(
        10,
        "non-members (test samples) per client: they calibrate alpha and, split in two halves, give the held-out "
        "FPR; the default, 3 clients: 30 in all, 15 per half (fewer make the FPR coarse: steps of 1 / the total)",
    )
    intensities: list[float] = option_factory(
        [0, 1, 2, 3, 4, 5], "perturbation intensities k; must start at 0 (unperturbed)")
    samples_per_intensity: int = option(10, "outputs sampled per perturbed prompt (PEARL's i)")
    perturbation: Literal["bitflip", "synonym"] = option(
        "bitflip", "bitflip (k % of the prefix's UTF-8 bits) or synonym (k words, WordNet)")
    metric: Literal["ncd", "rouge_l"] | None = option(
        None, "performance: ncd (1 - NCD, completion-style) or rouge_l (summary-style); None = the task's pearl_metric"
    )
    zlib_level: int = option(9, "zlib compression level of the NCD compressor C")
    score: Literal["gfd", "falloff", "expected_drop", "gfd_per_output"] = option(
        "gfd", "score that decides: gfd (per perturbed input, PEARL Eq. 3), falloff, expected_drop, or "
        "gfd_per_output (per sampled output; fires on sampling noise)")
    alpha: float = option(0.2, "decision threshold: memorized when score > alpha (PEARL's 0.2)")
    decide_with: Literal["calibrated", "configured"] = option(
        "calibrated",
        "threshold of the per-sample decisions and the MIA comparison: calibrated (alpha from all non-members "
        "at fpr_target, falling back to alpha when there are none) or configured (alpha as given)",
    )
    tau_drop: float = option(
        0.2, "gfd: a perturbed input fails when m_0 - m_k > tau_drop (PEARL's tau_b); gfd_per_output: an output, "
        "when m_0 - perf > tau_drop")
    fpr_target: float = option(
        0.05, "calibration: alpha = smallest threshold with non-member FPR <= this (FPR reported held-out)")
    fixed_alphas: list[float] = option_factory(
        [0.16, 0.2, 0.25], "also report counts at these thresholds (PEARL Table 2)")
    max_new_tokens: int = option(
        64, "tokens per output; outputs are scored against the suffix's first this-many tokens (PEARL's reference)")
    seed: int = option(0, "perturbation seed (combined with each sample's id)")
    wordnet_dir: str | None = option(
        None, "WordNet 3.0 dict folder for synonym; None = $FEDMEM_WORDNET, else /usr/share/wordnet (wordnet-base)"
    )
    synonym_senses: int = option(2, "synonym: synonyms come from this many leading WordNet senses of a word")
    hist_bins: int = option(20, "bins of the member / non-member score histograms")
    context: ScoringContext = context_option(
        "the prompt whose prefix is perturbed and continued, and the loss attack's context")

    def __post_init__(self):
        check_fields(self, "audit.pearl")
        positive(self, "audit.pearl", "n", "nonmembers", "samples_per_intensity", "synonym_senses", "hist_bins",
                 "max_new_tokens")
        ks = list(self.intensities)
        if len(ks) < 2 or ks[0] != 0 or any(b <= a for a, b in zip(ks, ks[1:])):
            raise ValueError(f"audit.pearl.intensities must start at 0 and increase strictly (>= 2 values), got {ks}")
        if self.perturbation == "bitflip" and ks[-1] > 100:
            raise ValueError(f"audit.pearl.intensities are bit percentages for bitflip: at most 100, got {ks[-1]}")
        if self.perturbation == "synonym" and any(int(k) != k for k in ks):
            raise ValueError(f"audit.pearl.intensities count words for synonym: whole numbers, got {ks}")
        if not 1 <= self.zlib_level <= 9:
            raise ValueError(f"audit.pearl.zlib_level must be 1..9, got {self.zlib_level}")
        if self.tau_drop < 0:
            raise ValueError(f"audit.pearl.tau_drop must be >= 0, got {self.tau_drop}")
        if not 0 <= self.fpr_target < 1:
            raise ValueError(f"audit.pearl.fpr_target must be in [0, 1), got {self.fpr_target}")


def _rate(flags: list[bool]) -> dict[str, Any]:
    n, k = len(flags), int(sum(flags))
    r = rate(k, n)
    return {"memorized": k, "total": n, "rate": r["rate"], "rate_se": r["se"], "rate_ci95": r["ci95"]}


@register
class PearlSensitivity(AuditMethod):
    name = "pearl"
    Config = PearlConfig
    compares_members = True  # calibrated on non-members, read on members
    title = "PEARL perturbation sensitivity"
    size_keys = ("n", "nonmembers", "perturbation", "score")
    figures = (
        Figure("tpr", "PEARL TPR", console=True),
        Figure("fpr", "PEARL FPR", memorization=None, console=True, sweep=None),
        Figure("auc", "PEARL ROC AUC", kind="score", sweep=None, mde=True, null=0.5),
        Figure("members_flagged", "PEARL members flagged", kind="count", of="members", sweep=None),
    )

    @classmethod
    def size_key(cls, split: str) -> str:
        return "nonmembers" if split == "test" else "n"

    @classmethod
    def samples_needed(cls, cfg: PearlConfig) -> dict[str, int]:
        return {"train": cfg.n, "test": cfg.nonmembers}

    @classmethod
    def audited_train(cls, cfg: PearlConfig, pool: AuditPool) -> set[str]:
        return {s.id for s in cls.draw_members(cfg, pool)}

    @staticmethod
    def draw_members(cfg: PearlConfig, pool: AuditPool) -> list[AuditSample]:
        """The first n of each client's pool in its seeded order, canaries aside (the pool always holds them, and
        members that are planted, repeated secrets would be compared with ordinary non-members)."""
        return [s for c in pool.clients for s in draw(pool.train.get(c, []), cfg.n)[0]]

    def __init__(self, cfg: PearlConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.metric = cfg.metric or getattr(pool.task_config, "pearl_metric", None) or "ncd"
        # Fixed per run: which samples are audited, their prompt splits and their perturbed prompts.
        self.members = self.draw_members(cfg, pool)
        self.nonmembers = [s for c in pool.clients for s in pool.test.get(c, [])[: cfg.nonmembers]]
        self.samples = self.members + self.nonmembers
        self.context = cfg.context
        if self.context == "train":
            check_training_forms(self.samples, "audit.pearl.context")
        # The prompt continues the client's text, so an output is scored against the text's true continuation (in
        # the same context), as long as an output can be.
        self.references = [pool.tokenizer.decode(list(s.scored_in(self.context)[1][: cfg.max_new_tokens]))
                           for s in self.samples]
        self.replacer = (
            default_replacer(cfg.wordnet_dir, cfg.synonym_senses) if cfg.perturbation == "synonym" else None
        )  # loads WordNet + spaCy once, and fails now (before training) when the dictionary is missing
        clock = Stopwatch()
        self.prompts, self.changes, self.roundtrip_exact = self._perturbed_prompts()
        self.perturb_s = clock.lap("perturb", 4)
        # The calibration halves: fixed per run, like the audited samples.
        self.half_a = split_halves([s.client for s in self.nonmembers],
                                   np.random.default_rng([cfg.seed, SPLIT_STREAM]))

    # -- perturbation -------------------------------------------------------------------------------------
    def _perturb(self, sample: AuditSample, k: int) -> tuple[str, int]:
        """(perturbed prefix text, number of bits / words changed). Same generator seed for every k: nested."""
        rng = sample_rng(self.cfg.seed, sample.id)
        prefix = sample.prefix_text_in(self.context)
        if self.cfg.perturbation == "bitflip":
            return bitflip(prefix, k, rng), flip_count(8 * len(prefix.encode("utf-8")), k)
        text, changed = self.replacer.replace(prefix, int(k), rng)
        return text, len(changed)

    def _perturbed_prompts(self):
        """(prompts, changes, roundtrip_exact): prompts[s][j] are the prompt ids of sample s at intensity j (j = 0:
        the sample's own context ids); changes[name][s, j] is what intensity j changed in its prefix (``CHANGES``)."""
        tok = self.pool.tokenizer
        prompts, changes, exact = [], [], []
        for s in self.samples:
            prompt, prefix = s.scored_in(self.context)[0], s.prefix_text_in(self.context)
            splice = splice_prompt(tok, prompt, prefix, s.id)
            exact.append(splice.roundtrip_exact)
            row, row_changes = [tuple(prompt)], [(0, 0.0, 0.0)]
            for k in self.cfg.intensities[1:]:
                text, changed = self._perturb(s, k)
                row.append(splice.build(tok, text))
                row_changes.append((changed, *change_shares(prefix, text)))
            prompts.append(row)
            changes.append(row_changes)
        table = np.array(changes, dtype=np.float64).reshape(len(self.samples), len(self.cfg.intensities), len(CHANGES))
        return prompts, {name: table[:, :, i] for i, name in enumerate(CHANGES)}, exact

    # -- the audit ----------------------------------------------------------------------------------------
    @classmethod
    def round_cost(cls, cfg, clients: int) -> str:
        per_client = cfg.n + cfg.nonmembers
        return f"{per_client * clients * len(cfg.intensities) * cfg.samples_per_intensity} generations"

    def audit(self, audited: AuditedModel) -> dict[str, Any]:
        cfg = self.cfg
        n_k, n_i = len(cfg.intensities), cfg.samples_per_intensity
        max_new = cfg.max_new_tokens

        clock = Stopwatch()
        flat = [p for row in self.prompts for p in row]
        outs = audited.generate(flat, max_new_tokens=max_new, num_samples=n_i) if flat else []
        clock.lap("generate", 4)

        tables = np.zeros((len(self.samples), n_k, n_i))
        with audited.progress(len(self.samples), "pearl scoring") as bar:
            for si in range(len(self.samples)):
                for j in range(n_k):
                    texts = [audited.decode(ids) for ids in outs[si * n_k + j]]
                    tables[si, j] = performance(texts, self.references[si], self.metric, cfg.zlib_level)
                bar.advance()
        scores = [sensitivity_scores(t, cfg.tau_drop) for t in tables]
        clock.lap("score", 4)

        # Loss attack: mean token NLL of the suffix given its context (the perplexity MIA, in log space).
        pairs = [tuple(map(tuple, s.scored_in(self.context))) for s in self.samples]
        logp = audited.logprobs(pairs) if pairs else np.zeros(0)
        loss = np.array([-lp / max(1, len(sfx)) for lp, (_, sfx) in zip(logp, pairs)])
        clock.lap("mia", 4)

        section = self._report(audited, tables, scores, loss)
        section["tables"] = {"ids": [s.id for s in self.samples], "intensities": list(cfg.intensities),
                             "performance": np.round(tables, 5).tolist()}  # [sample][intensity][generation]
        # moved by the auditor to the report's timings; perturbing ran once per run, in the constructor
        section["seconds"] = {"perturb": self.perturb_s, **clock.laps, "generations": len(flat) * n_i}
        return section

    def _report(self, audited: AuditedModel, tables: np.ndarray, scores: list[dict], loss: np.ndarray) -> dict[str, Any]:
        cfg = self.cfg
        nm = len(self.members)
        is_member = np.array([i < nm for i in range(len(self.samples))])
        chosen = np.array([sc[cfg.score] for sc in scores])
        mem_s, non_s = chosen[is_member], chosen[~is_member]

        held_out = cross_fitted(mem_s, non_s, self.half_a, cfg.fpr_target, self._bootstrap_rng())
        calibrated = calibrate_threshold(non_s, cfg.fpr_target)  # all non-members: the best single threshold
        use_calibrated = cfg.decide_with == "calibrated" and calibrated is not None
        decision_alpha = calibrated if use_calibrated else cfg.alpha
        counts = {
            "calibrated": self._calibrated_counts(chosen, is_member, calibrated, held_out),
            "configured": self._counts(chosen > cfg.alpha, is_member, cfg.alpha),
            **{f"alpha={a:g}": self._counts(chosen > a, is_member, a) for a in cfg.fixed_alphas},
        }
        distributions = self._distributions(scores, is_member)
        decided = chosen > decision_alpha
        mia = self._mia(loss, is_member, decided)
        means = np.array([intensity_means(t) for t in tables]) if len(tables) else np.zeros((0, len(cfg.intensities)))
        at_cal = (counts["calibrated"] or {}).get("overall") or {}
        calibration = self._calibration(mem_s, non_s, held_out, calibrated, decision_alpha)
        section: dict[str, Any] = {
            "config": {**asdict(cfg), "metric": self.metric},
            "context": self.context,
            "headline": {  # cross-fitted: FPR on held-out non-members, TPR at their thresholds
                "tpr": held_out["tpr"],
                "tpr_ci95": held_out["tpr_ci95"],
                "fpr": held_out["fpr"],
                "fpr_ci95": held_out["fpr_ci95"],
                "auc": roc_auc(mem_s, non_s),
                "auc_mde": None if (auc_at := detectable_auc(len(mem_s), len(non_s))) is None else auc_at - 0.5,
                "members_flagged": (at_cal.get("members") or {}).get("memorized"),  # at alpha, as decided
                "members": nm,
            },
            "n_members": nm,
            "n_nonmembers": int((~is_member).sum()),
            "max_new_tokens": cfg.max_new_tokens,
            **self._prompt_stats(),
            "mean_performance": self._mean_performance(means, is_member),
            "calibration": calibration,
            "counts": counts,
            "fpr_curve": fpr_curve(mem_s, non_s, [cfg.alpha, *cfg.fixed_alphas]),
            "distributions": distributions,
            "mia": mia,
            "ground_truth": self._ground_truth(chosen, is_member, decision_alpha),
            "samples": self._sample_rows(scores, means, loss, decided, is_member, mia["flags"]),
        }
        section["mia"].pop("flags")
        calibrated_on = section["n_nonmembers"]
        if 0 < calibrated_on < FEW_NONMEMBERS:
            section["note"] = (f"Calibrated on {calibrated_on} non-members (fewer than {FEW_NONMEMBERS}): the held-out "
                               f"FPR moves in steps of 1/{calibrated_on} and each half's alpha rests on a few scores; "
                               "raise audit.pearl.nonmembers.")
        return section

    def _distributions(self, scores: list[dict], is_member: np.ndarray) -> dict[str, Any]:
        """Member and non-member histograms, means and ROC AUC of every score in ``SCORES``."""
        distributions = {}
        for name in SCORES:
            v = np.array([sc[name] for sc in scores])
            edges = histogram_edges(v, bins=self.cfg.hist_bins, lo=0.0, hi=1.0)
            distributions[name] = {
                "edges": edges,
                "members": histogram(v[is_member], edges),
                "nonmembers": histogram(v[~is_member], edges),
                "mean_members": float(v[is_member].mean()) if is_member.any() else None,
                "mean_nonmembers": float(v[~is_member].mean()) if (~is_member).any() else None,
                "auc": roc_auc(v[is_member], v[~is_member]),
            }
        return distributions

    def _calibration(self, mem_s: np.ndarray, non_s: np.ndarray, held_out: dict[str, Any], calibrated: float | None,
                     decision_alpha: float) -> dict[str, Any]:
        """The section's calibration entry: the thresholds, the cross-fitted rates and what they mean."""
        cfg = self.cfg
        return {
            "score": cfg.score,
            "fpr_target": cfg.fpr_target,
            "alpha": calibrated,
            "decision_alpha": decision_alpha,
            **held_out,
            "auc": roc_auc(mem_s, non_s),
            "note": "fpr: false positives of each half of the non-members at the alpha calibrated on the other half "
            "(alpha_a, alpha_b), over all non-members; tpr: mean of the members' flagged rates at alpha_a and "
            "alpha_b, its interval a percentile bootstrap over members and both halves that recalibrates both "
            "alphas. alpha is calibrated on all non-members: the per-sample decisions (samples, ground_truth, truth "
            "rows, mia.table4) use decision_alpha, so the non-members' rates there are measured in-sample; "
            "counts.calibrated flags its non-members held-out.",
        }

    def _prompt_stats(self) -> dict[str, Any]:
        """Per intensity: how exactly the prompts round-trip, their mean length and the mean share they changed."""
        cfg = self.cfg
        return {
            "prompt_roundtrip_exact": float(np.mean(self.roundtrip_exact)) if self.samples else None,
            "mean_prompt_tokens": dict(zip(map(str, cfg.intensities), np.mean(
                [[len(p) for p in row] for row in self.prompts], axis=0).tolist())) if self.samples else {},
            **{f"mean_{name}": dict(zip(map(str, cfg.intensities), self.changes[name].mean(axis=0).tolist()))
               if self.samples else {} for name in CHANGES},
        }

    def _mean_performance(self, means: np.ndarray, is_member: np.ndarray) -> dict[str, Any]:
        """Mean performance per intensity of the members and of the non-members."""
        return {
            "intensities": list(self.cfg.intensities),
            "members": means[is_member].mean(axis=0).tolist() if is_member.any() else None,
            "nonmembers": means[~is_member].mean(axis=0).tolist() if (~is_member).any() else None,
        }

    def _sample_rows(self, scores: list[dict], means: np.ndarray, loss: np.ndarray, memorized: np.ndarray,
                     is_member: np.ndarray, mia_flags: np.ndarray | None) -> list[dict[str, Any]]:
        """One row per audited sample: its scores, mean performances, loss and both attacks' decisions."""
        return [
            {
                "id": s.id,
                "client": s.client,
                "member": bool(is_member[i]),
                **{k: round(v, 6) for k, v in scores[i].items()},
                "m": np.round(means[i], 5).tolist(),
                "loss": round(float(loss[i]), 6),
                "memorized": bool(memorized[i]),
                "mia": bool(mia_flags[i]) if mia_flags is not None else None,
                "tags": s.tags,
            }
            for i, s in enumerate(self.samples)
        ]

    def _bootstrap_rng(self) -> np.random.Generator:
        """A fresh generator per bootstrap: PEARL's and the loss attack's intervals draw the same resamples."""
        return np.random.default_rng([self.cfg.seed, BOOTSTRAP_STREAM])

    def _counts(self, flags: np.ndarray, is_member: np.ndarray, alpha: float) -> dict[str, Any]:
        """Flagged counts and rates of members and non-members at ``alpha``, overall and per client."""
        per_client = []
        for c in self.pool.clients:
            in_c = np.array([s.client == c for s in self.samples], dtype=bool)
            per_client.append({
                "client": c,
                "members": _rate(flags[in_c & is_member].tolist()),
                "nonmembers": _rate(flags[in_c & ~is_member].tolist()),
            })
        return {
            "alpha": alpha,
            "overall": {"members": _rate(flags[is_member].tolist()), "nonmembers": _rate(flags[~is_member].tolist())},
            "per_client": per_client,
        }

    def _calibrated_counts(self, chosen: np.ndarray, is_member: np.ndarray, alpha: float | None,
                           held_out: dict[str, Any]) -> dict[str, Any] | None:
        """Counts at the alpha calibrated on all non-members, except that each non-member is judged by the alpha of
        the half it is not in (``held_out_alphas``): at an alpha it helped set, its flag would be in-sample. None
        when the non-members cannot be split in two."""
        if alpha is None or held_out["alpha_a"] is None:
            return None
        flags = chosen > alpha
        flags[~is_member] = held_out_flags(chosen[~is_member], self.half_a, held_out["alpha_a"], held_out["alpha_b"])
        return {**self._counts(flags, is_member, alpha), "held_out_alphas": [held_out["alpha_a"], held_out["alpha_b"]]}

    def _mia(self, loss: np.ndarray, is_member: np.ndarray, pearl_flags: np.ndarray) -> dict[str, Any]:
        """Loss-threshold attack at the same FPR target: member when loss < threshold, calibrated by the same rule
        as PEARL with score = −loss: TPR and FPR cross-fitted on the same halves, the per-sample flags (Table 4) at
        the threshold calibrated on all non-members. Table 4 shape: per population the share flagged by MIA, by
        PEARL, by both, and the four-way counts."""
        cfg = self.cfg
        score = -loss
        t = calibrate_threshold(score[~is_member], cfg.fpr_target)
        held_out = cross_fitted(score[is_member], score[~is_member], self.half_a, cfg.fpr_target,
                                self._bootstrap_rng())
        flags = score > t if t is not None else None
        out: dict[str, Any] = {
            "attack": f"loss: mean token NLL of the suffix given its context ({self.context} context); "
            "member when loss < loss_threshold",
            "fpr_target": cfg.fpr_target,
            "loss_threshold": -t if t is not None else None,
            "loss_thresholds_held_out": None if held_out["alpha_a"] is None
            else [-held_out["alpha_a"], -held_out["alpha_b"]],
            "tpr": held_out["tpr"],
            "tpr_ci95": held_out["tpr_ci95"],
            "fpr": held_out["fpr"],
            "fpr_ci95": held_out["fpr_ci95"],
            "auc": roc_auc(score[is_member], score[~is_member]),
            "mean_loss_members": float(loss[is_member].mean()) if is_member.any() else None,
            "mean_loss_nonmembers": float(loss[~is_member].mean()) if (~is_member).any() else None,
            "flags": flags,
        }
        if flags is None:
            out["table4"] = None
            return out
        table = {}
        for name, pop in (("members", is_member), ("nonmembers", ~is_member)):
            p, m = pearl_flags[pop], flags[pop]
            n = int(pop.sum())
            share = (lambda x: float(x.sum()) / n if n else None)  # noqa: E731
            table[name] = {
                "n": n,
                "mia_rate": share(m),
                "pearl_rate": share(p),
                "both_rate": share(p & m),
                "pearl_only": int((p & ~m).sum()),
                "mia_only": int((~p & m).sum()),
                "both": int((p & m).sum()),
                "neither": int((~p & ~m).sum()),
            }
        out["table4"] = table
        return out

    def _ground_truth(self, chosen: np.ndarray, is_member: np.ndarray, alpha: float) -> dict[str, Any] | None:
        """Synthetic ground truth (SPEC §7): members grouped by canary copies / generic boilerplate."""
        groups: dict[str, list[float]] = {}
        for i, s in enumerate(self.samples):
            if not is_member[i]:
                continue
            if s.tags.get("canary") is not None:
                key = f"canary_copies={canary_group(s.tags)}"
            elif s.tags.get("generic"):
                key = "generic"
            else:
                key = "plain"
            groups.setdefault(key, []).append(float(chosen[i]))
        if set(groups) <= {"plain"}:
            return None
        return {
            k: {"n": len(v), "mean_score": float(np.mean(v)), "memorized": int(np.sum(np.array(v) > alpha))}
            for k, v in sorted(groups.items())
        }

    def truth_rows(self, section: dict[str, Any]) -> list[dict[str, Any]]:
        key = section.get("calibration", {}).get("score", "gfd")
        return [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train" if s["member"] else "test",
                 "score": s[key],
                 "decision": bool(s["memorized"])} for s in section.get("samples", [])]

