"""How the membership-inference attacks read: each attack's ROC AUC and TPR at low FPR, pooled and per client."""

from __future__ import annotations

import os

import numpy as np

from fedmem.audit.membership import FPRS
from fedmem.audit.mia import ATTACKS, LABELS, ORIENTATION
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view, tpr_cells, tpr_header, tpr_phrase


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
            f"lowest tokens; reference: {cfg['reference']}; ReCaLL: {cfg['recall_shots']} public-corpus texts, cut to "
            f"{cfg['recall_prefix_tokens']} tokens, before each context. AUC intervals: percentile bootstrap "
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

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        """The round's ROC curves on log-log axes, one per defined attack (Carlini et al. 2022: an attack is read at
        low FPR, where a log scale shows it), over the draw's members and non-members; the FPR axis starts at the
        smallest FPR the non-members resolve (1/n)."""
        from sklearn.metrics import roc_curve

        drawn = [s for s in section.get("samples", []) if s["drawn"]]
        member = np.array([s["split"] == "train" for s in drawn], dtype=bool)
        if not member.any() or member.all():
            return []
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(4.2, 4.0), layout="constrained")
        floor = 1 / int((~member).sum())
        for a in ATTACKS:
            values = [s[a] for s in drawn]
            if not section["attacks"][a]["defined"] or any(v is None for v in values):
                continue
            fpr, tpr, _ = roc_curve(member, ORIENTATION[a] * np.array(values, dtype=np.float64))
            keep = fpr > 0  # FPR 0 has no place on a log axis
            ax.step(fpr[keep], tpr[keep], where="post", label=LABELS[a], linewidth=1.2)
        grid = np.geomspace(floor, 1, 50)
        ax.plot(grid, grid, color="grey", linestyle=":", linewidth=1, label="chance")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(floor, 1)
        ax.set_ylim(floor, 1.05)
        ax.set_xlabel("false-positive rate (non-members flagged)")
        ax.set_ylabel("true-positive rate (members flagged)")
        ax.legend(fontsize=7, loc="lower right")
        return [("Membership attacks: ROC on log-log axes",
                 save_figure(fig, os.path.join(out_dir, "mia_roc.png"), dpi=90))]

    def summary(self, first: dict, last: dict) -> str:
        h, f = last["headline"], first["headline"]
        defined = [a for a in ATTACKS if h.get(f"{a}_auc") is not None]
        if not defined:
            return "**Membership inference.** No AUC: too few members or non-members."
        best = max(defined, key=lambda a: h[f"{a}_auc"])
        aucs = ", ".join(f"{LABELS[a]} {h[f'{a}_auc']:.2f}" for a in defined)
        was = f.get(f"{best}_auc")
        then = "" if was is None else f" (first audited round: AUC {was:.2f})"
        # an AUC whose whole interval lies below 0.5 ranks non-members above members: worse than chance, said
        inverted = [LABELS[a] for a in defined if (ci := h.get(f"{a}_auc_ci95")) and ci[1] < 0.5]
        worse = (f" {', '.join(inverted)} {'does' if len(inverted) == 1 else 'do'} worse than chance (the AUC's "
                 "interval lies below 0.5): on this data the score ranks non-members above members.") if inverted \
            else ""
        return (f"**Membership inference.** ROC AUC of members against non-members: {aucs}{then}. The strongest, "
                f"{LABELS[best]}, has TPR {tpr_phrase(h, best, h.get('nonmembers'))}.{worse}")
