"""How PEARL reads: the cross-fitted calibration, flagged counts by threshold, the comparison with the loss
attack, the FPR curve and the score histograms."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fedmem.common.fmt import count, pct, pct_ci
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view


def _fmt(x, spec=".3f"):
    """``x`` formatted, or a dash when it is None."""
    return "–" if x is None else format(x, spec)


def worse_than_chance(h: dict) -> str | None:
    """A sentence where the detector flags members less often than held-out non-members: it reads no memorization,
    and flags what it flags by chance or against it."""
    tpr, fpr = h.get("tpr"), h.get("fpr")
    if tpr is None or fpr is None or tpr >= fpr:
        return None
    return (f" Its TPR is below its held-out FPR ({pct(tpr)} against {pct(fpr)}): worse than chance, the flags say "
            "nothing of memorization here.")


@register_view("pearl")
class PearlView(View):
    panels = (Panel("PEARL at the calibrated thresholds (cross-fitted)", "rate %", {
        "tpr": "TPR (members flagged)", "fpr": "FPR (held-out non-members flagged)"}),)

    # -- human report -------------------------------------------------------------------------------------
    def render(self, section: dict[str, Any], out_dir: str) -> list[tuple[str, str]]:
        plt = pyplot()
        score = section["calibration"]["score"]
        files = []
        curve = section["fpr_curve"]
        if curve:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            th = [p["threshold"] for p in curve]
            span = max(th[-1] - th[0], 0.1)
            # Below every score everything is flagged: start the steps there so the curve reads from rate 1.
            th = [th[0] - 0.05 * span, *th]
            fpr = [100.0, *[100 * p["fpr"] if p["fpr"] is not None else np.nan for p in curve]]
            tpr = [100.0, *[100 * p["tpr"] if p["tpr"] is not None else np.nan for p in curve]]
            ax.step(th, fpr, where="post", label="FPR (non-members)")
            ax.step(th, tpr, where="post", label="TPR (members)")
            ax.axhline(100 * section["calibration"]["fpr_target"], color="grey", ls=":", lw=1)
            if section["calibration"]["alpha"] is not None:
                ax.axvline(section["calibration"]["alpha"], color="k", ls="--", lw=1, label="calibrated alpha")
            ax.set_xlabel(f"threshold on {score}")
            ax.set_ylabel("flagged %")
            ax.set_title("PEARL: flagged rates by threshold")
            ax.legend(fontsize=8)
            files.append(("PEARL FPR curve", save_figure(fig, os.path.join(out_dir, "pearl_fpr.png"))))
        dist = section["distributions"][score]
        if section["n_members"] or section["n_nonmembers"]:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            edges = np.array(dist["edges"])
            width = np.diff(edges)
            ax.bar(edges[:-1], dist["members"], width=width, align="edge", alpha=0.6, label="members (train)")
            ax.bar(edges[:-1], dist["nonmembers"], width=width, align="edge", alpha=0.6, label="non-members (test)")
            ax.set_xlabel(score)
            ax.set_ylabel("samples")
            ax.set_title(f"PEARL {score}: members vs non-members")
            ax.legend(fontsize=8)
            files.append((f"PEARL {score} histogram", save_figure(fig, os.path.join(out_dir, "pearl_hist.png"))))
        return files

    def markdown(self, section: dict[str, Any]) -> str:
        return "\n".join([*self._intro(section), "", *self._counts_table(section["counts"], section["calibration"]),
                          *self._table4(section["mia"].get("table4"))])

    @staticmethod
    def _intro(section: dict[str, Any]) -> list[str]:
        """The paragraphs on the calibration, the loss attack, the per-sample decisions and the prefixes' changes."""
        cal, mia = section["calibration"], section["mia"]

        def shares(name: str) -> str:
            return ", ".join(f"k={k}: {pct(v)}" for k, v in section[name].items() if float(k) > 0)

        return [
            f"PEARL ({section['config']['perturbation']}, {section['config']['metric']}, score {cal['score']}): "
            f"α calibrated at FPR ≤ {pct(cal['fpr_target'])}, cross-fitted: each half of the non-members sets an α "
            f"({_fmt(cal['alpha_a'])}, {_fmt(cal['alpha_b'])}) whose FPR is measured on the other half. TPR "
            f"{pct_ci(cal['tpr'], cal['tpr_ci95'])} at held-out FPR {pct_ci(cal['fpr'], cal['fpr_ci95'])}, ROC AUC "
            f"{_fmt(cal['auc'])}. The TPR interval is a percentile bootstrap ({cal['resamples']} resamples of the "
            "members and of each half) that recalibrates both α in every resample, so it covers α's own uncertainty; "
            f"the FPR interval is Wilson's. Loss attack, calibrated the same way: TPR "
            f"{pct_ci(mia['tpr'], mia.get('tpr_ci95'))} at held-out FPR {pct_ci(mia['fpr'], mia.get('fpr_ci95'))}, "
            f"ROC AUC {_fmt(mia['auc'])}.",
            "",
            f"Per-sample decisions use the calibrated α = {_fmt(cal['alpha'])} from all non-members (the best single "
            "threshold), so the non-members' rates in the comparison with the loss attack are in-sample; the table "
            "judges each non-member at the α of the half it is not in.",
            "",
            f"Share of the prefix changed, by intensity: characters {shares('mean_char_change')}; words "
            f"{shares('mean_word_change')}.",
        ]

    @staticmethod
    def _counts_table(counts: dict[str, Any], cal: dict[str, Any]) -> list[str]:
        """The table of members and non-members flagged at the calibrated and the fixed thresholds."""

        def cell(key: str, side: str) -> str:
            c = counts.get(key)
            if not c:
                return "–"
            r = c["overall"][side]
            return f"{r['memorized']} of {r['total']}: {pct_ci(r['rate'], r.get('rate_ci95'))}"

        keys = ["calibrated", *[k for k in counts if k.startswith("alpha=")]]
        head = ["side"] + [
            f"α={_fmt(cal['alpha'])} (calibrated; non-members held-out)" if k == "calibrated"
            else k.replace("alpha=", "α=") for k in keys
        ]
        lines = [
            "Samples flagged as memorized (95% Wilson intervals in brackets; every sample's scores and performance "
            "table: `audit.pearl.samples` and `audit.pearl.tables` in report.json):",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for side in ("members", "nonmembers"):
            lines.append("| " + " | ".join([side, *[cell(k, side) for k in keys]]) + " |")
        return lines

    @staticmethod
    def _table4(t4: dict[str, Any] | None) -> list[str]:
        """PEARL's flags against the loss attack's per population (PEARL Table 4); none without the attack."""
        if not t4:
            return []
        lines = [
            "",
            "PEARL against the loss attack, at the same FPR target:",
            "",
            "| population | loss attack | PEARL | both | PEARL only | loss attack only | neither |",
            "|---|---|---|---|---|---|---|",
        ]
        for side, r in t4.items():
            lines.append(
                f"| {side} | {pct(r['mia_rate'])} | {pct(r['pearl_rate'])} | "
                f"{pct(r['both_rate'])} | {r['pearl_only']} | {r['mia_only']} | {r['neither']} |"
            )
        return lines

    def summary(self, first: dict[str, Any], last: dict[str, Any]) -> str:
        h, f = last["headline"], first["headline"]
        if h.get("tpr") is None:
            return ("**PEARL.** No cross-fitted rates: no members, or too few non-members (two at least) to "
                    "calibrate a threshold on each half.")
        target = pct(last["calibration"]["fpr_target"])
        return (f"**PEARL.** At thresholds calibrated to FPR ≤ {target} on one half of the non-members and "
                f"measured on the other (cross-fitted), TPR {pct_ci(h['tpr'], h.get('tpr_ci95'))} "
                f"at held-out FPR {pct_ci(h['fpr'], h.get('fpr_ci95'))}; the TPR interval (bootstrap) includes the "
                f"thresholds' own uncertainty (first audited round: TPR {pct(f.get('tpr'))}). At the threshold "
                f"calibrated on all non-members, {count(h['members_flagged'], h['members'])} members are flagged; "
                f"ROC AUC {h['auc']:.2f}." + (worse_than_chance(h) or ""))
