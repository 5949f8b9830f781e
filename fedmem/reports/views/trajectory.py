"""How membership from the trajectory reads: the trajectory's ROC AUC and TPR at low FPR beside the same samples'
single-round LOSS and reference attacks, and its gain over them."""

from __future__ import annotations

from fedmem.audit.membership import FPRS
from fedmem.audit.trajectory import ATTACKS
from fedmem.common.fmt import score_ci
from fedmem.reports.views.base import Panel, View, register_view, tpr_cells, tpr_header, tpr_phrase


def verdict(gain: float | None, ci: list | None) -> str:
    """Whether a gain in AUC is one, by its interval."""
    if gain is None:
        return "no gain to read before round 2: at round 1 the statistic is the reference attack's"
    if ci and ci[0] > 0:
        return "the trajectory helps"
    if ci and ci[1] < 0:
        return "the trajectory does worse"
    return "no gain beyond the interval"


@register_view("trajectory")
class TrajectoryView(View):
    panels = (Panel("Membership from the trajectory: ROC AUC against the single-round attacks", "ROC AUC",
                    {"trajectory_auc": "trajectory", "loss_auc": "LOSS", "ref_auc": "reference"}, percent=False),)

    def markdown(self, section: dict) -> str:
        h, cfg, rounds = section["headline"], section["config"], section["rounds"]
        lines = [
            f"{h['members']} members (train) against {h['nonmembers']} non-members (test), the membership attacks' "
            f"draw, each scored on {cfg['suffix_len']} suffix tokens under the global model of every round "
            f"{rounds[0]}..{rounds[-1]}. The trajectory's statistic is the mean drop of a sample's loss since round 0 "
            "over the rounds since; beside it the same samples' LOSS at this round and its drop since round 0 (the "
            f"reference attack). AUC intervals: percentile bootstrap ({cfg['resamples']} resamples, the same for "
            "every attack); the gains' intervals pair the attacks on each resample.", "",
            f"| attack | ROC AUC [95% CI] | {tpr_header()} |", "|---|---" + "|---" * len(FPRS) + "|",
        ]
        for a in ATTACKS:
            f = section["attacks"][a]
            lines.append(f"| {f['label']} | {score_ci(f['auc'], f['auc_ci95'])} | {tpr_cells(f)} |")
        for other, label in (("ref", "reference"), ("loss", "LOSS")):
            gain, ci = h[f"gain_over_{other}"], h[f"gain_over_{other}_ci95"]
            lines += ["", f"Trajectory − {label} AUC: {score_ci(gain, ci)} ({verdict(gain, ci)})."]
        return "\n".join(lines)

    def summary(self, first: dict, last: dict) -> str:
        h, rounds = last["headline"], last["rounds"]
        if h.get("trajectory_auc") is None:
            return "**Membership from the loss trajectory.** No trajectory: only round 0 was audited."
        gain, ci = h["gain_over_ref"], h["gain_over_ref_ci95"]
        return (f"**Membership from the loss trajectory.** Its mean loss drop over the global models of rounds "
                f"{rounds[0]}..{rounds[-1]} separates members from non-members with ROC AUC "
                f"{score_ci(h['trajectory_auc'], h['trajectory_auc_ci95'])} (TPR "
                f"{tpr_phrase(h, 'trajectory', h.get('nonmembers'))}), against "
                f"{score_ci(h['loss_auc'], h['loss_auc_ci95'])} for LOSS and "
                f"{score_ci(h['ref_auc'], h['ref_auc_ci95'])} for the reference attack on the last round alone: "
                f"gain over the reference {score_ci(gain, ci)}, {verdict(gain, ci)}.")
