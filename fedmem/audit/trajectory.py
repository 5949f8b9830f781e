"""Membership from the loss trajectory of the global models: a per-record statistic over every round's model, for the
attacker Nasr et al. call the passive global attacker ("Comprehensive Privacy Analysis of Deep Learning", S&P 2019;
SPEC §11). It is not their white-box attack (gradients and activations fed to an attack model trained on known
members): what it shows is what this one statistic gains from the rounds, not what seeing every round can give.

The attacker sees the global model of every round, as every client that receives it does (and anyone the server
broadcasts it to), and asks whether a record was in some client's training data. Where the membership attacks
(``fedmem.audit.mia``) read one round's model, this one reads the trajectory of the models' losses up to it.

**Scores.** Every member and non-member of the membership attacks' draw (``fedmem.audit.membership.attack_draw``: the
same samples as ``audit.mia`` under the same settings), L_t(x) the mean token negative log-likelihood of its suffix
under round t's global model, for every round t = 0..r up to the audited round r. The rounds already audited give
their scores from the method's memory; a round it has not seen (a resumed run, a re-audit of some rounds) is scored
from the adapter the run saved for it, the same way (``AuditedModel.global_logprobs``), so a run, its resumption and
its re-audit report the same figures.

**Statistic** (member when high): the mean drop since round 0, T_r(x) = (1/r) Σ_{t=1..r} (L_0(x) − L_t(x)).

- Calibrated per record, as the reference attack is (Carlini et al. 2022; Watson et al., "On the Importance of
  Difficulty Calibration in Membership Inference Attacks", ICLR 2022): the record's own loss before fine-tuning
  takes out how easy its text is, which decides most of the LOSS attack's errors. In a run fedmem trains, round 0's
  global model is the base (LoRA's B starts at zero), so T_1 is exactly the reference attack's statistic with the
  base as reference, and whatever T_r gains over that attack at a later round is what seeing the trajectory adds.
- It accumulates the evidence of every round instead of reading one checkpoint. Nasr et al.'s passive global
  attacker gains over a single epoch by feeding several epochs' outputs to an attack model, and Liu et al.
  ("Membership Inference Attacks by Exploiting Loss Trajectory", CCS 2022) separate members better with the loss
  trajectory than with the final loss; both fit their combination on records of known membership (shadow models,
  known members), which this attacker does not have. The mean weighs every round alike: a record memorized in an
  intermediate round and partly forgotten since still counts, where the last round's reference attack loses it.
- The slope of L_t over the rounds, the other per-record calibrated summary, weighs the rounds by their distance
  from the middle one, so a drop in the first rounds counts against a record; and it is undefined before round 2.

**Figures**, per round r >= 1, on the same bootstrap resamples of members and non-members as ``audit.mia`` (the
same seed and stream): ROC AUC with its 95% interval and TPR at 1% and 5% FPR of the trajectory, of the single-round
LOSS attack (L_r) and of the reference attack against round 0 (L_r − L_0); and the trajectory's gain in AUC over
each, with a paired bootstrap interval (the AUCs of one resample differenced), from round 2 on: at round 1 the
statistic is the reference attack's, and the gain over it 0 by construction. At round 0 there is no trajectory
yet. Verdicts (the agreement matrix, the ground truth): the trajectory's decision at its 5%-FPR threshold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, RoundNotKept, register
from fedmem.audit.calibration import auc_from_ranks
from fedmem.audit.intervals import detectable_auc
from fedmem.audit.membership import (
    BOOTSTRAP_STREAM,
    DECISION_FPR,
    FPRS,
    OnTheAttacksDraw,
    attack_draw,
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

ATTACKS = ("trajectory", "loss", "ref")
LABELS = {"trajectory": "loss trajectory (mean drop since round 0)", "loss": "LOSS (this round)",
          "ref": "reference (this round against round 0)"}


@dataclass
class TrajectoryConfig:
    """audit.trajectory: membership from the global models of every round (the passive global attacker)."""

    n: int = option(32, "train samples (members) and test samples (non-members) per client, as audit.mia draws them "
                        "(at least audit.common_draw); the same samples as audit.mia under the same settings")
    suffix_len: int = option(64, "suffix tokens scored after each prefix")
    resamples: int = option(1000, "bootstrap resamples of the AUCs' and the gains' 95% intervals")
    seed: int | None = option(None, "seed of the bootstrap; null: the run's seed (audit.mia's resamples then)")
    context: ScoringContext = context_option("what each suffix is scored after")

    def __post_init__(self):
        check_fields(self, "audit.trajectory")
        positive(self, "audit.trajectory", "n", "suffix_len", "resamples")


def statistics(losses: dict[int, np.ndarray], r: int) -> dict[str, np.ndarray | None]:
    """Each attack's membership score (higher = member) of every sample at round ``r`` from its losses at rounds
    0..r: the trajectory's mean drop since round 0 (None at round 0), LOSS and the reference against round 0."""
    drops = [losses[0] - losses[t] for t in range(1, r + 1)]
    return {"trajectory": np.mean(drops, axis=0) if drops else None, "loss": -losses[r], "ref": losses[0] - losses[r]}


def paired_gain_ci95(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                     resampled: tuple[np.ndarray, np.ndarray]) -> list[float]:
    """Percentile 95% interval of AUC(a) − AUC(b), both on every resample (``(members, non-members)`` scores)."""
    idx_m, idx_n = resampled
    gains = auc_from_ranks(a[0][idx_m], a[1][idx_n]) - auc_from_ranks(b[0][idx_m], b[1][idx_n])
    return np.percentile(gains, [2.5, 97.5]).tolist()


@register
class TrajectoryMembership(OnTheAttacksDraw, AuditMethod):
    name = "trajectory"
    Config = TrajectoryConfig
    title = "Membership from the loss trajectory of the global models (after Nasr et al. 2019's passive attacker)"
    compares_members = True
    size_keys = ("n",)
    figures = (
        Figure("trajectory_auc", "loss-trajectory AUC", kind="score", console=True, mde=True, null=0.5),
        Figure("gain_over_ref", "loss trajectory − reference AUC", kind="score", memorization=None, sweep=None),
        Figure("gain_over_loss", "loss trajectory − LOSS AUC", kind="score", memorization=None, sweep=None),
        Figure("loss_auc", "LOSS AUC (same samples)", kind="score", sweep=None, mde=True, null=0.5),
        Figure("ref_auc", "reference AUC (same samples)", kind="score", sweep=None, mde=True, null=0.5),
        *(Figure(f"trajectory_tpr_at_{key}_fpr", f"trajectory TPR at {fpr_label(key)} FPR", sweep=None) for key in FPRS),
    )

    @classmethod
    def round_cost(cls, cfg: TrajectoryConfig, clients: int) -> str:
        return (f"one teacher-forced pass of the round's global model over up to {2 * cfg.n * clients} suffixes of "
                f"{cfg.suffix_len} tokens (earlier rounds' scores are kept)")

    def __init__(self, cfg: TrajectoryConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.draw = attack_draw(pool, cfg.n, cfg.suffix_len, cfg.context, "audit.trajectory.context")
        self.tags = {s.id: s.tags for s in self.draw.samples}
        self.seed = pool.seed if cfg.seed is None else cfg.seed
        self.losses: dict[int, np.ndarray] = {}  # round -> every sample's L_t, for the whole run

    def _losses(self, audited: AuditedModel, t: int) -> np.ndarray:
        if t not in self.losses:
            self.losses[t] = np.array([mean_nll(lp) for lp in audited.global_logprobs(t, self.draw.pairs)])
        return self.losses[t]

    def audit(self, audited: AuditedModel) -> dict:
        clock, r, d = Stopwatch(), audited.round, self.draw
        try:
            losses = {t: self._losses(audited, t) for t in range(r + 1)} if d.pairs else {}
            missing = None
        except RoundNotKept as e:  # a model audited alone, as round r of no run: no trajectory to read
            losses, missing = {}, str(e)
        clock.lap("scoring", 4)
        scores = statistics(losses, r) if losses else dict.fromkeys(ATTACKS)
        m, n = d.drawn & d.is_member, d.drawn & ~d.is_member
        resampled = None
        if m.any() and n.any():
            rng = np.random.default_rng([self.seed, BOOTSTRAP_STREAM])  # audit.mia's pooled resamples
            resampled = bootstrap_indices(int(m.sum()), int(n.sum()), rng, self.cfg.resamples)
        attacks = {a: undefined_evaluation() if s is None else evaluate(s[m], s[n], resampled)
                   for a, s in scores.items()}
        headline = {"members": int(m.sum()), "nonmembers": int(n.sum())}
        detectable = detectable_auc(int(m.sum()), int(n.sum()))
        for a in ATTACKS:
            headline |= headline_figures(a, attacks[a], detectable)
        for other in ("ref", "loss"):
            gain = gain_ci = None
            # at round 1 the mean drop since round 0 is the reference attack's statistic itself: a gain over it is 0
            # by construction, not a finding, so it is reported from round 2 on
            if r >= 2 and attacks["trajectory"]["auc"] is not None and attacks[other]["auc"] is not None:
                gain = attacks["trajectory"]["auc"] - attacks[other]["auc"]
                if resampled is not None:
                    t, o = scores["trajectory"], scores[other]
                    gain_ci = paired_gain_ci95((t[m], t[n]), (o[m], o[n]), resampled)
            headline |= {f"gain_over_{other}": gain, f"gain_over_{other}_ci95": gain_ci}
        clock.lap("attacks", 4)
        section = {
            "config": {**asdict(self.cfg), "seed": self.seed}, "context": self.cfg.context,
            "rounds": list(range(r + 1)), "headline": headline,
            "attacks": {a: {"label": LABELS[a], **attacks[a]} for a in ATTACKS},
            "skipped_short_suffix": dict(d.short),
            "samples": [{"id": s.id, "client": s.client, "split": s.split, "drawn": bool(d.drawn[i]),
                         **{a: None if scores[a] is None else float(scores[a][i]) for a in ATTACKS}}
                        for i, s in enumerate(d.samples)],
            "seconds": clock.laps,  # moved by the auditor to the report's timings
        }
        if missing:
            section["note"] = f"No trajectory: {missing} (a model audited outside its run)."
        elif r == 0:
            section["note"] = "Round 0: the model before fine-tuning; the trajectory starts at round 1."
        elif r == 1:
            section["note"] = ("Round 1: the mean drop since round 0 is the reference attack's own statistic, so the "
                               "gains over the single-round attacks are reported from round 2 on.")
        if losses and (unreachable := unreachable_note(headline["nonmembers"])) is not None:
            section["note"] = " ".join(filter(None, (section.get("note"), unreachable)))
        return section

    def truth_rows(self, section: dict) -> list[dict]:
        """Every scored sample flagged by the trajectory at its 5%-FPR threshold (score: its mean drop); empty
        before round 1 or without non-members."""
        threshold = section["attacks"]["trajectory"][f"threshold_at_{DECISION_FPR}_fpr"]
        if threshold is None:
            return []
        return [{"id": s["id"], "tags": self.tags.get(s["id"], {}), "split": s["split"], "score": s["trajectory"],
                 "decision": bool(s["trajectory"] > threshold)} for s in section["samples"]]
