"""How the one-run record-level audit reads: its guesses and how many were right, the ε lower bound they give, and the
members' and non-members' scores with the guessing cuts."""

from __future__ import annotations

import os

import numpy as np

from fedmem.common.fmt import count, score_ci
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view

SCORES = {"reference": "mean token log-likelihood minus the base model's", "loss": "mean token log-likelihood"}


@register_view("one_run")
class OneRunView(View):
    panels = (Panel("Record-level ε lower bound (one run, audit canaries)", "ε", {"epsilon": "lower bound"},
                    percent=False),)

    def markdown(self, section: dict) -> str:
        h, rows = section["headline"], section["canaries"]
        if not rows:
            return section.get("note", "")
        right = {g: sum(r["guess"] == g and r["member"] == (g == 1) for r in rows) for g in (1, -1)}
        made = {g: sum(r["guess"] == g for r in rows) for g in (1, -1)}
        lines = [
            f"{h['canaries']} audit canaries, {h['members']} of them trained on (each with probability 1/2). Score: "
            f"{SCORES[section['score']]}. The {section['config']['k_plus']} highest are guessed trained on, the "
            f"{section['config']['k_minus']} lowest held out, the rest abstained on (as are canaries tied across a "
            f"cut).",
            "",
            "| guesses | made | right |", "|---|---|---|",
            f"| trained on | {made[1]} | {right[1]} |", f"| held out | {made[-1]} | {right[-1]} |",
            f"| all | {h['guesses']} | {h['correct']} |",
            "",
            f"**ε ≥ {score_ci(h['epsilon'], None)}** at {section['confidence']:.0%} confidence, δ = "
            f"{section['delta']:g} (Steinke, Nasr and Jagielski's bound from {count(h['correct'], h['guesses'])} "
            f"right): no training that is (ε', δ)-DP with a smaller ε' makes that many right guesses but with "
            f"probability {1 - section['confidence']:.0%}. Under DP, compare it with the accountant's ε (Defense, on "
            f"this page). ROC AUC of the score, trained on against held out: {score_ci(h['auc'], None)}.",
        ]
        return "\n".join(lines)

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        rows = section["canaries"]
        if not rows:
            return []
        plt = pyplot()
        scores = np.array([r["score"] for r in rows])
        member = np.array([r["member"] for r in rows])
        fig, ax = plt.subplots(figsize=(6, 3.5))
        edges = np.histogram_bin_edges(scores, bins=30) if np.ptp(scores) > 0 else np.array([-0.5, 0.5]) + scores[0]
        ax.hist(scores[~member], bins=edges, alpha=0.6, color="#1f77b4", label="held out")
        ax.hist(scores[member], bins=edges, alpha=0.6, color="#d62728", label="trained on")
        for guess, style in ((1, "--"), (-1, ":")):
            chosen = scores[[r["guess"] == guess for r in rows]]
            if chosen.size:
                cut = chosen.min() if guess == 1 else chosen.max()
                ax.axvline(cut, color="k", linestyle=style,
                           label=f"guessed {'trained on' if guess == 1 else 'held out'} beyond")
        h = section["headline"]
        ax.set_xlabel(SCORES[section["score"]])
        ax.set_ylabel("audit canaries")
        ax.set_title(f"{h['correct']} of {h['guesses']} guesses right: ε ≥ {score_ci(h['epsilon'], None)}")
        ax.legend(fontsize=8)
        name = save_figure(fig, os.path.join(out_dir, "one_run_scores.png"), dpi=110)
        return [("One-run audit: canary scores and the guesses", name)]
