"""How the membership-inference attacks read: each attack's ROC AUC and TPR at low FPR, pooled and per client."""

from __future__ import annotations

from fedmem.audit.membership import FPRS
from fedmem.audit.mia import ATTACKS, LABELS
from fedmem.common.fmt import pct
from fedmem.reports.views.base import Panel, View, register_view, tpr_cells, tpr_header


@register_view("mia")
class MembershipInferenceView(View):
    panels = (Panel("Membership inference: ROC AUC, members vs non-members", "ROC AUC",
                    {f"{a}_auc": LABELS[a] for a in ATTACKS}, percent=False),)

    def markdown(self, section: dict) -> str:
        h, cfg = section["headline"], section["config"]

        def auc(f: dict) -> str:
            if f["auc"] is None:
                return "n/a"
            ci = f["auc_ci95"]
            return f"{f['auc']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

        lines = [
            f"{h['members']} members (train) against {h['nonmembers']} non-members (test), each scored on its first "
            f"{cfg['suffix_len']} suffix tokens after the prefix; Min-K% and Min-K%++ average the {cfg['k']:g}% "
            f"lowest tokens; reference: {cfg['reference']}. AUC intervals: percentile bootstrap "
            f"({cfg['resamples']} resamples). TPR at an FPR: threshold set on the non-members (the ROC curve's point), "
            "its interval with the threshold set again on each resample.",
            "",
            f"| attack | member when | ROC AUC [95% CI] | {tpr_header()} |",
            "|---|---|---" + "|---" * len(FPRS) + "|",
        ]
        for a, f in section["attacks"].items():
            lines.append(f"| {f['label']} | {f['member_when']} | {auc(f)} | {tpr_cells(f)} |")
        blind = section.get("blind")
        if blind is not None:
            differs = blind["auc_ci95"] is not None and blind["auc_ci95"][0] > 0.5
            lines += ["", f"Blind baseline (the texts alone, no model: word 1- and 2-grams and a logistic regression, "
                          f"5-fold cross-validated on the same samples): ROC AUC {auc(blind)}. " + (
                          "**Members and non-members differ without the model**: read each attack's AUC against "
                          "this one, not against 0.5." if differs else
                          "The split does not tell the texts apart at this n, so 0.5 is the attacks' chance.")]
        names = self.pool.client_names
        lines += ["", "ROC AUC per client:", "",
                  "| client | members | non-members | " + " | ".join(LABELS[a] for a in ATTACKS) + " |",
                  "|---" * (len(ATTACKS) + 3) + "|"]
        for v in section["per_client"]:
            lines.append(f"| {names.get(v['client'], v['client'])} | {v['members']} | {v['nonmembers']} | "
                         + " | ".join(auc(v["attacks"][a]) for a in ATTACKS) + " |")
        skipped = section["skipped_short_suffix"]
        if skipped["train"] or skipped["test"]:
            lines += ["", f"Passed over for a suffix shorter than {cfg['suffix_len']} tokens: {skipped['train']} "
                          f"train and {skipped['test']} test samples."]
        return "\n".join(lines)

    def summary(self, first: dict, last: dict) -> str:
        h, f = last["headline"], first["headline"]
        defined = [a for a in ATTACKS if h.get(f"{a}_auc") is not None]
        if not defined:
            return "**Membership inference.** No AUC: too few members or non-members."
        best = max(defined, key=lambda a: h[f"{a}_auc"])
        aucs = ", ".join(f"{LABELS[a]} {h[f'{a}_auc']:.2f}" for a in defined)
        was = f.get(f"{best}_auc")
        return (f"**Membership inference.** ROC AUC of members against non-members: {aucs}. The strongest, "
                f"{LABELS[best]}, flags {pct(h[f'{best}_tpr_at_1pct_fpr'])} of the members at 1% FPR and "
                f"{pct(h[f'{best}_tpr_at_5pct_fpr'])} at 5% (first audited round: AUC "
                f"{'n/a' if was is None else f'{was:.2f}'}).")
