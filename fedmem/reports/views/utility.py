"""How utility reads: each client's score on its held-out test samples, and the change since round 0."""

from __future__ import annotations

from fedmem.audit.utility import NAMES
from fedmem.common.fmt import pct, pct_ci, pts_ci
from fedmem.reports.views.base import Panel, View, register_view


@register_view("utility")
class UtilityView(View):
    panels = (Panel("Utility on held-out test samples", "score %", {"rouge_l": "ROUGE-L", "bleu": "BLEU",
                                                                   "accuracy": "accuracy"}),)

    def markdown(self, section: dict) -> str:
        keys = list(section.get("weighted", {}))
        names = self.pool.client_names
        rows = ["| client | " + " | ".join(f"{NAMES[k]} %" for k in keys) + " | test samples |",
                "|---" * (len(keys) + 2) + "|"]
        for v in section.get("per_client", []):
            rows.append(f"| {names.get(v['client'], v['client'])} | " + " | ".join(pct(v[k], "") for k in keys)
                        + f" | {v['n']} |")
        h = section["headline"]
        rows.append("| **all** | " + " | ".join(f"**{pct_ci(h[k], h.get(k + '_ci95'), '')}**" for k in keys) + " | |")
        return "\n".join(rows)

    def summary(self, first: dict, last: dict) -> str:
        k = next(iter(last["weighted"]))
        h, f = last["headline"], first["headline"]
        return (f"**Utility.** {NAMES[k]} on held-out test samples {pct_ci(h[k], h.get(k + '_ci95'))} "
                f"({pts_ci(h[k] - f[k], None)} since the first audited round, {pct(f[k])}).")
