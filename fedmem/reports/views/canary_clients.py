"""How the canary clients' estimate reads: the inserted and unseen directions' statistics of the canary release's
change (the rounds' releases with the canaries averaged in; the global model never has them), the Gaussians fitted
to them and the ε between them, for the final model and for every round released, each beside the ε of the mechanism
it estimates and the accountant's budget. The figures are ``fedmem.audit.canary_clients``'."""

from __future__ import annotations

import os

import numpy as np

from fedmem.audit.canary_clients import MAX_EPSILON, READINGS, THREATS
from fedmem.common.fmt import score_ci
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view

WHAT = {"final": "projection of the canary releases' change since round 0",
        "every_round": "largest cosine with one round's canary release's change"}


def _epsilon(h: dict, threat: str) -> str:
    x = h.get(f"epsilon_{threat}")
    if x is not None and x >= MAX_EPSILON:
        return "unbounded (no noise)"
    return score_ci(x, h.get(f"epsilon_{threat}_ci95"))


@register_view("canary_clients")
class CanaryClientsView(View):
    panels = (Panel("Client-level ε estimate (canary clients)", "ε",
                    {f"epsilon_{t}": label for t, label in THREATS.items()}, percent=False),)

    def markdown(self, section: dict) -> str:
        h, fits, readings = section["headline"], section.get("fits") or {}, section.get("readings") or {}
        mechanism = h.get("epsilon_mechanism")
        lines = [f"{section['inserted']} canary clients inserted, {section['unseen']} directions never inserted; "
                 f"ε at δ = {section['delta']:g} between the Gaussians fitted to each, with a 95% bootstrap interval "
                 "over the canaries (an estimate, not a bound), read from each round's canary release: a second "
                 "draw of the round's mechanism with the canaries averaged in, which the global model never is.", ""]
        if mechanism is not None:
            lines += [f"The mechanism it estimates (the rounds' Gaussian sums, one client of norm C added or removed, "
                      f"computed exactly): ε = {score_ci(mechanism, None)}. The accountant's budget, for one client "
                      f"replaced (sensitivity 2C), is ε = {score_ci(h.get('epsilon_accountant'), None)}: looser "
                      "by the relation alone.", ""]
        if section.get("alert"):
            lines += [f"**Alert:** {section['alert']}.", ""]
        lines += ["| threat model | statistic | inserted: mean (sd) | unseen: mean (sd) | ε estimate [95% CI] | "
                  "÷ the mechanism's ε | ÷ the accountant's ε | how it reads |", "|---|---|---|---|---|---|---|---|"]
        for threat, label in THREATS.items():
            fit = fits.get(threat)
            cells = [f"{fit[s][0]:.3g} ({fit[s][1]:.3g})" for s in ("inserted", "unseen")] if fit else ["–"] * 2
            ratios = [score_ci(h.get(f"ratio_{a}{threat}"), h.get(f"ratio_{a}{threat}_ci95"))
                      if h.get(f"ratio_{a}{threat}") is not None else "–" for a in ("", "accountant_")]
            read = READINGS.get(readings.get(threat), "–")
            lines.append(f"| {label} | {WHAT[threat]} | {' | '.join(cells)} | {_epsilon(h, threat)} | "
                         f"{' | '.join(ratios)} | {read} |")
        if not section.get("canaries"):
            lines += ["", "Round 0: the model has not changed, so no canary can show; the estimate is 0."]
        return "\n".join(lines)

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        rows = section.get("canaries") or []
        threats = [t for t in THREATS if rows and t in rows[0]]
        if not threats:
            return []
        plt = pyplot()
        fig, axes = plt.subplots(1, len(threats), figsize=(5.5 * len(threats), 3.5), squeeze=False)
        for ax, threat in zip(axes[0], threats):
            values = np.array([r[threat] for r in rows], dtype=float)
            inserted = np.array([r["inserted"] for r in rows])
            values, inserted = values[np.isfinite(values)], inserted[np.isfinite(values)]  # a round with no change
            if not values.size:
                continue
            edges = np.histogram_bin_edges(values, bins=30)
            ax.hist(values[~inserted], bins=edges, alpha=0.6, color="#1f77b4", label="never inserted")
            ax.hist(values[inserted], bins=edges, alpha=0.6, color="#d62728", label="canary clients")
            ax.set_xlabel(WHAT[threat])
            ax.set_ylabel("directions")
            ax.set_title(f"{THREATS[threat]}: ε ≈ {_epsilon(section['headline'], threat)}", fontsize=10)
            ax.legend(fontsize=8)
        name = save_figure(fig, os.path.join(out_dir, "canary_client_cosines.png"), dpi=110)
        return [("Canary clients: cosines with the model's change", name)]
