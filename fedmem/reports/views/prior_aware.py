"""How Prior-Aware memorization reads: counts per client and against the ground truth, the highest and lowest
ratios, the histogram of log10 P(s|p)/P̂(s) with the calibrated n."""

from __future__ import annotations

import os

import numpy as np

from fedmem.common.fmt import count, pct_ci
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (revealed excerpts may hold pipes and newlines)."""
    return text.replace("|", "\\|").replace("\n", " ")




@register_view("pa")
class PriorAwareView(View):
    panels = (Panel("Prior-Aware: share of audited pairs", "pairs %",
                    {"extractable_rate": "extractable (P(s|p) > m)", "pa_rate": "PA-memorized"}),)

    def summary(self, first: dict, last: dict) -> str:
        h = last["headline"]
        return (f"**Prior-Aware.** {count(h['pa_memorized'], h['audited'])} audited training pairs are PA-memorized "
                f"({pct_ci(h['pa_rate'], h.get('pa_rate_ci95'))}; first audited round: "
                f"{count(first['headline'].get('pa_memorized'), first['headline'].get('audited'))}); "
                f"{count(h['extractable'], h['audited'])} are extractable (P(s|p) > m)."
                + (f" {last['note']}" if last.get("note") else ""))

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        hist = section.get("histogram_log10_ratio") or {}
        if not hist.get("edges"):
            return []
        plt = pyplot()

        edges = np.array(hist["edges"])
        allc, extc = np.array(hist["all"]), np.array(hist["extractable"])
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(edges[:-1], allc - extc, width=np.diff(edges), align="edge", color="#bbbbbb",
               edgecolor="white", label="not extractable")
        ax.bar(edges[:-1], extc, width=np.diff(edges), bottom=allc - extc, align="edge", color="#d62728",
               edgecolor="white", label="extractable")
        log10_n = section["config"].get("log10_n")
        if log10_n is not None:
            ax.axvline(log10_n, color="k", linestyle="--", label=f"n = 10^{log10_n:.2f} ({section['config']['n_source']})")
        ax.set_xlabel("log10 P(s|p) / P̂(s)")
        ax.set_ylabel("audited pairs")
        ax.set_title("Prior-Aware ratio")
        ax.legend(fontsize=8)
        name = save_figure(fig, os.path.join(out_dir, "pa_ratio_hist.png"), dpi=110)
        return [("Prior-Aware: log10 P(s|p)/P̂(s)", name)]

    def markdown(self, section: dict) -> str:
        def frac(x):
            return "–" if x is None else f"{x:.2f}"

        cfg = section["config"]
        lines = [
            f"m = {cfg['m']:g}, n = 10^{frac(cfg['log10_n'])} ({cfg['n_source']}), "
            f"c = {cfg['c']} x {cfg['trials']} trial(s) "
            f"from {cfg['prior_pool']} train prefixes; median relative SE of P̂(s): {frac(section['prior_rel_se_median'])}",
            "",
            "| client | audited | extractable | PA-memorized | PA / extractable |",
            "|---|---|---|---|---|",
        ]
        for v in section["per_client"]:
            lines.append(f"| {self.pool.client_names.get(v['client'], v['client'])} | {v['audited']} | {v['extractable']} | {v['pa_memorized']} | "
                         f"{frac(v['pa_over_extractable'])} |")
        o = section["overall"]
        lines.append(f"| **all** | **{o['audited']}** | **{o['extractable']}** | **{o['pa_memorized']}** | "
                     f"**{frac(o['pa_over_extractable'])}** |")
        if o.get("extractable_rate_ci95"):
            lines += ["", f"Rates over all audited pairs, with 95% Wilson intervals: extractable "
                      f"{pct_ci(o['extractable_rate'], o['extractable_rate_ci95'])}, PA-memorized "
                      f"{pct_ci(o['pa_rate'], o['pa_rate_ci95'])}"]
        gt = section.get("ground_truth") or {}
        if gt:
            lines += ["", "| ground truth | audited | extractable | PA-memorized |", "|---|---|---|---|"]
            for k, v in gt.get("canary", {}).items():
                lines.append(f"| canary, {k} cop{'y' if k == '1' else 'ies'} | {v['audited']} | {v['extractable']} | "
                             f"{v['pa_memorized']} |")
            for key in ("generic", "untagged"):
                if key in gt:
                    v = gt[key]
                    lines.append(f"| {key} | {v['audited']} | {v['extractable']} | {v['pa_memorized']} |")
        for title, key in (("Highest", "top"), ("Lowest", "lowest")):
            if section.get(key):
                lines += ["", f"{title} log10 P(s|p)/P̂(s):", "", "| id | log10 ratio | log10 P(s\\|p) | PA | suffix |",
                          "|---|---|---|---|---|"]
                for e in section[key]:
                    lines.append(f"| {e['id']} | {frac(e['log10_ratio'])} | {frac(e['log10_p'])} | "
                                 f"{'yes' if e['pa_memorized'] else 'no'} | {_cell(e['suffix'])} |")
        return "\n".join(lines)
