"""How the memorization ratio reads: the MR(j→k) matrix and category tables, examples, heatmaps per round and
over rounds, the run page's verdict on intra- against cross-client memorization."""

from __future__ import annotations

import os

from fedmem.audit.mr.detector import CATEGORIES
from fedmem.audit.truth import canary_group_order
from fedmem.common.fmt import pct_ci, pts_ci, scale_ceiling
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import Panel, View, register_view


def _cell_text(text: str, spans: list[list[int]] = ()) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, the aligned passages ``[start, end)`` in bold."""
    marks = sorted((a, b) for a, b in spans if b > a)
    parts, at = [], 0
    for a, b in marks:
        if a >= at:
            passage = text[a:b].strip()
            parts += [text[at:a], f" **{passage}** " if passage else ""]
            at = b
    parts.append(text[at:])
    return " ".join("".join(parts).split()).replace("|", "\\|")


KIND_LABELS = {"combined": "own or other record", "own": "own record", "other": "other records"}


@register_view("mr")
class MemorizationRatioView(View):
    panels = (
        Panel("MR_Intra and MR_Inter (any category)", "MR %", {"intra": "MR_Intra", "inter": "MR_Inter"}),
        Panel("MR_Total by category", "MR_Total %", {"total": "any", **{f"{c}_total": c for c in CATEGORIES}}),
    )

    def _heatmap(self, ax, m: list[list[float]], clients: list[int], vmax: float, title: str):
        """One MR(j→k) matrix in percent on a colour scale from 0 to ``vmax`` (shared by the heatmaps it is shown
        beside), client names on both axes, each cell's value in a colour readable on its shade."""
        names = [self.pool.client_names.get(c, str(c)) for c in clients]
        im = ax.imshow([[100 * v for v in row] for row in m], cmap="Reds", vmin=0, vmax=100 * vmax)
        for j, row in enumerate(m):
            for k, v in enumerate(row):
                ax.text(k, j, f"{100 * v:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if v > 0.6 * vmax else "black")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("suffix client k", fontsize=8)
        ax.set_ylabel("prefix client j", fontsize=8)
        ax.set_title(title, fontsize=9)
        return im

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        """The round's MR(j→k) heatmaps: any category, and each category with a hit (an all-zero one is stated in
        the text instead)."""
        plt = pyplot()
        cats = [c for c in ("any", *CATEGORIES) if any(v for row in section["matrix"][c] for v in row)]
        if not cats:
            return []
        fig, axes = plt.subplots(1, len(cats), figsize=(3.3 * len(cats), 3.4), squeeze=False, layout="constrained")
        for ax, cat in zip(axes[0], cats):  # categories differ by orders of magnitude: a scale for each
            m = section["matrix"][cat]
            im = self._heatmap(ax, m, section["clients"], scale_ceiling(max(map(max, m))), cat)
            fig.colorbar(im, ax=ax, fraction=0.046, label="MR(j→k) %")
        return [("MR(j→k) per category, %", save_figure(fig, os.path.join(out_dir, "mr_heatmaps.png"), dpi=90))]

    def render_run(self, rounds: list[int], sections: list[dict], out_dir: str) -> list[tuple[str, str]]:
        """Per category with a hit in any round: MR(j→k) at every round, on one colour scale."""
        plt = pyplot()
        out = []
        for cat in ("any", *CATEGORIES):
            peak = max(v for sec in sections for row in sec["matrix"][cat] for v in row)
            if not peak:
                continue
            vmax = scale_ceiling(peak)
            fig, axes = plt.subplots(1, len(rounds), figsize=(2.9 * len(rounds) + 0.8, 3.1), squeeze=False,
                                     layout="constrained")
            for ax, r, sec in zip(axes[0], rounds, sections):
                im = self._heatmap(ax, sec["matrix"][cat], sec["clients"], vmax, f"round {r}")
            fig.colorbar(im, ax=axes[0].tolist(), fraction=0.02, label="MR(j→k) %")
            fig.suptitle(f"MR(j→k), {cat}", fontsize=10)
            out.append((f"MR(j→k) over rounds, {cat}", save_figure(fig, os.path.join(out_dir, f"mr_rounds_{cat}.png"),
                                                                   dpi=80)))
        return out

    def _matrix_table(self, section: dict, cat: str = "any") -> list[str]:
        clients, names = section["clients"], self.pool.client_names
        ci = ((section.get("uncertainty") or {}).get(cat, {}).get("matrix_ci95")
              or [[None] * len(clients)] * len(clients))
        lines = ["| prefix client j \\ suffix client k | " + " | ".join(names.get(c, str(c)) for c in clients) + " |",
                 "|---" * (len(clients) + 1) + "|"]
        for j, row, row_ci in zip(clients, section["matrix"][cat], ci):
            lines.append(f"| {names.get(j, str(j))} | " + " | ".join(pct_ci(v, e) for v, e in zip(row, row_ci)) + " |")
        return lines

    def _control_table(self, section: dict) -> list[str]:
        """The control beside the paper's MR, on exchangeable arms: training prefixes, held-out prefixes, the excess,
        for hits on the prefix's own record, on other records and either; on all text and on distinctive text (any
        category), the data's floor beside the other-record rows (no held-out text's own continuation is indexed)."""
        control = section.get("control")
        if not control:
            return ["No held-out control ran (audit.mr.heldout=0): the figures below cannot tell memorized records "
                    "from fluent text in the clients' style.", ""]
        floor = control.get("floor") or {}
        rows = []
        for kind, text in (("combined", "all"), ("own", "all"), ("other", "all"), ("combined", "distinctive"),
                           ("other", "distinctive")):
            arm = control[kind][text]
            train, held, ex = arm["train"]["any"], arm["heldout"]["any"], arm["excess"]["any"]
            fl = (floor.get(text) or {}).get("any") if kind == "other" else None
            for f, label in (("intra", "MR_Intra"), ("inter", "MR_Inter"), ("total", "MR_Total")):
                if train[f] is None or (kind == "own" and f != "intra"):  # a prefix's own record is its client's
                    continue
                cells = [pct_ci(train[f], train[f"{f}_ci95"]), pct_ci(held[f], held[f"{f}_ci95"]),
                         pts_ci(ex[f]["diff"], ex[f]["ci95"]), pct_ci(fl[f], fl[f"{f}_ci95"]) if fl else ""]
                rows.append(f"| {label}, {KIND_LABELS[kind]}, {text} text | " + " | ".join(cells) + " |")
        trained = sum(control.get("heldout_trained") or [])
        return [f"MR's control: the same protocol from {sum(control['heldout_n'])} held-out prefixes (texts the model "
                "never trained on) against the same training-suffix indexes, on exchangeable arms: every hit is on the "
                "prefix's **own record** (its generation typed against its own true continuation, on both arms) or on "
                "**other records** (each index's top n' with the prefix's own suffix left out). The **excess** "
                "(training − held-out prefixes, Newcombe's 95% interval) is what memorization adds; the floor is the "
                "MR of the held-out texts' own true continuations against other records, which any writer of this "
                "data scores without memorizing a record. Distinctive text leaves out hits on passages that two or "
                "more clients or the public share hold. Ordinary records only: the planted canaries have a table of "
                f"their own. Held-out texts left out as training text: {trained}.", "",
                "| figure | training prefixes | held-out prefixes | excess | floor (data) |",
                "|---|---|---|---|---|", *rows, ""]

    def _shared_lines(self, section: dict) -> list[str]:
        shared = (section.get("control") or {}).get("shared")
        if not shared:
            return []
        names = self.pool.client_names
        held = ", ".join(f"{names.get(c, c)}: {n}" for c, n in zip(section["clients"], shared["suffixes_with_shared"]))
        lines = ["", f"Shared text ({shared['rule']}). Indexed suffixes holding a shared passage: {held}."]
        if shared["passages"]:
            lines += ["", "| shared passage | indexed suffixes holding it | their clients | in the public share |",
                      "|---|---|---|---|"]
            lines += [f"| {_cell_text(p['text'])} | {p['suffixes']} | "
                      f"{', '.join(names.get(c, str(c)) for c in p['clients'])} | {'yes' if p['public'] else 'no'} |"
                      for p in shared["passages"]]
        return lines

    def markdown(self, section: dict) -> str:
        total = "MR_TotalCL" if section.get("setting") == "cl" else "MR_TotalFL"
        unc = section.get("uncertainty") or {}

        def cell(cat: str, figure: str) -> str:
            return pct_ci(section[figure][cat], (unc.get(cat, {}).get(figure) or {}).get("ci95"))

        lines = [*self._control_table(section),
                 "The paper's MR(j→k), any category, as the paper computes it (each index holds the audited prefixes' "
                 "own continuations): the share of client j's sampled ordinary prefixes whose generation the detector "
                 "matched to one of client k's top-10 suffixes (95% Wilson intervals in brackets).", "",
                 *self._matrix_table(section), "",
                 f"| category | MR_Intra | MR_Inter | {total} |", "|---|---|---|---|",
                 *[f"| {cat} | {cell(cat, 'intra')} | {cell(cat, 'inter')} | {cell(cat, 'total')} |"
                   for cat in ("any", *CATEGORIES)]]
        d = (section.get("intra_minus_inter") or {}).get("any")
        if d:
            lines += ["", f"MR_Intra − MR_Inter (any): {pts_ci(d['diff'], d['ci95'])} (95% interval over prefixes)"]
        lines += self._shared_lines(section)
        gt = section.get("ground_truth", {}).get("canary_by_copies")
        if gt:
            lines += ["", "Planted canaries, by copies, apart from every rate above: canaries whose generation matched "
                      "their own record (typed against it directly; canaries are in no index), and generations that "
                      "leak a secret record or phone number.", "",
                      "| copies | canaries | own record verbatim | own record, any category | secret leaked | "
                      "incoherent |", "|---|---|---|---|---|---|"]
            lines += [f"| {c} | {v['n']} | {v['verbatim']} | {v['any']} | {v.get('secret_leaked', 0)} | "
                      f"{v.get('incoherent', 0)} |"
                      for c, v in sorted(gt.items(), key=lambda kv: canary_group_order(kv[0]))]
        if section.get("examples"):
            lines += ["", "Examples (a few per category and client pair):", "",
                      "| category | j → k | prefix | generation | matched suffix |", "|---|---|---|---|---|"]
            names = self.pool.client_names
            lines += [f"| {e['category']} | {names.get(e['prefix_client'])} → {names.get(e['suffix_client'])} | "
                      f"{_cell_text(e['prefix'])} | {_cell_text(e['generation'], [c[:2] for c in e['spans']])} | "
                      f"{_cell_text(e['suffix'], [c[2:] for c in e['spans']])} |" for e in section["examples"]]
        ref = section.get("reference") or {}
        if ref:
            lines += ["", "Components: " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in ref.items())]
        empty = [c for c in ("any", *CATEGORIES) if not any(v for row in section["matrix"][c] for v in row)]
        if empty:
            lines += ["", f"No hit in {', '.join(empty)}: no heatmap for {'it' if len(empty) == 1 else 'them'}."]
        g = section.get("generation") or {}
        if g:
            used = ", ".join(f"{k} {v}" for k, v in g["decoding"].items() if k != "strategy")
            lines.append(f"\nGenerations: {g['ended_turn']} ended the model's turn and {g['hit_cap']} reached the cap of "
                         f"{g['max_new_tokens']} tokens (median length {g['median_tokens']} tokens). Decoding "
                         f"({g['decoding']['strategy']}) as generate ran it: {used}.")
        dropped = section["incoherent_dropped"]
        per_client = ", ".join(f"{self.pool.client_names.get(c, c)}: {n}" for c, n in zip(section["clients"], dropped))
        lines.append(f"\nIncoherent generations dropped: {sum(dropped)} ({per_client}); "
                     f"pairs checked by the detector: {section['pairs_checked']}. Per-prefix records, with each "
                     f"match's aligned spans: [mr_records.jsonl.gz](mr_records.jsonl.gz).")
        return "\n".join(lines)

    @staticmethod
    def _excess_sentence(first: dict, last: dict) -> list[str]:
        """The run page's answer from MR's control: the excess at the last round (and at the first), on all text and
        on distinctive text, and the data's floor."""
        h, f = last["headline"], first["headline"]
        if "excess_total" not in h:
            return ["**Memorization ratio.** No held-out control ran: MR below cannot tell memorized records from "
                    "fluent text in the clients' style.", ""]

        def excesses(prefix: str) -> str:
            return ", ".join(f"{label} {pts_ci(h[prefix + key], h.get(prefix + key + '_ci95'))}"
                             for key, label in (("intra", "MR_Intra"), ("inter", "MR_Inter"), ("total", "MR_Total"))
                             if prefix + key in h)

        above, mde = (h.get("excess_total_ci95") or [0])[0] > 0, h.get("excess_total_mde")
        if above:
            verdict = ("generations from training prefixes match the training suffixes more often than generations "
                       "from held-out prefixes do (the interval lies above 0): memorization beyond the data's style")
        elif mde is not None and mde <= 0:  # a control at 100% leaves an excess no room at all
            verdict = ("the held-out control is at 100% (every held-out prefix's generation matches a training "
                       "suffix), so no excess can show")
        else:
            unseen = f" (an excess under {100 * mde:.2f} points would go unseen)" if mde else ""
            verdict = (f"no excess over held-out prefixes is detectable at this sample size{unseen}: what MR counts "
                       "here, fluent text in the clients' style produces as well")
        first_total = (f" (first audited round: MR_Total {pts_ci(f['excess_total'], f.get('excess_total_ci95'))})"
                       if "excess_total" in f else "")
        own = (f"own record: MR_Intra {pts_ci(h['excess_own_intra'], h.get('excess_own_intra_ci95'))}"
               if "excess_own_intra" in h else "")
        return [f"**Memorization ratio, excess over held-out prefixes** (ordinary records, hits on the prefix's own "
                f"record or other records, drawn and matched alike on both arms). {excesses('excess_')}{first_total}: "
                f"{verdict}. Split by record: {own}; other records (the cross-sample memorization the paper is "
                f"about): {excesses('excess_other_')}. On distinctive text: {excesses('distinctive_excess_')}. The "
                f"data's floor (held-out texts' true continuations): MR_Total "
                f"{pct_ci(h.get('floor_total'), h.get('floor_total_ci95'))}.", ""]

    def data_check_lines(self, report: dict) -> list[str]:
        """``fedmem data check``'s lines from ``MemorizationRatio.before_training``."""
        names, clients = self.pool.client_names, self.pool.clients
        lines = ["Held-out texts left out as training text (their normalized text, or under near dedup a near "
                 "duplicate, is in a training split or the public share): "
                 + ", ".join(f"{names[c]} {n}" for c, n in zip(clients, report["heldout_trained"])),
                 f"MR's floor: {report['heldout']} held-out texts per client, their true continuations matched as "
                 f"generations against {report['n']} training suffixes per client (top {report['top_k']}, the "
                 "detector)"]
        for text in ("all", "distinctive"):
            f = report["floor"][text]["any"]
            row = [f"MR_Intra {pct_ci(f['intra'], f['intra_ci95'])}"]
            if f["inter"] is not None:
                row.append(f"MR_Inter {pct_ci(f['inter'], f['inter_ci95'])}")
            row.append(f"MR_Total {pct_ci(f['total'], f['total_ci95'])}")
            lines.append(f"  {text} text: " + ", ".join(row))
        shared = report["shared"]
        lines.append("Indexed suffixes holding a passage that two or more clients or the public share hold: "
                     + ", ".join(f"{names[c]} {n}/{report['n']}" for c, n in zip(clients,
                                                                                  shared["suffixes_with_shared"])))
        for p in shared["passages"]:
            lines.append(f"  {p['suffixes']:>5} suffixes, clients {','.join(names[c] for c in p['clients'])}"
                         f"{' and the public share' if p['public'] else ''}: {p['text'][:100]}")
        return lines

    def summary(self, first: dict, last: dict) -> str:
        h = last["headline"]
        d = (last.get("intra_minus_inter") or {}).get("any")
        if d is None:
            verdict = "one client: no cross-client comparison"
        elif d["ci95"][0] > 0:
            verdict = "the model reproduces its own clients' data more often than other clients' (the interval of " \
                      "the difference lies above 0)"
        elif d["ci95"][1] < 0:
            verdict = "generations match other clients' data more often than their own client's (the interval of " \
                      "the difference lies below 0)"
        else:
            verdict = (f"no difference between intra- and cross-client memorization is detectable at this sample size "
                       f"(the difference's interval {pts_ci(d['diff'], d['ci95'])} contains 0)")
        total = "MR_TotalCL" if last.get("setting") == "cl" else "MR_TotalFL"
        lines = [*self._excess_sentence(first, last),
                 f"**The paper's memorization ratio.** MR_Intra {pct_ci(h['intra'], h.get('intra_ci95'))} vs MR_Inter "
                 f"{pct_ci(h.get('inter'), h.get('inter_ci95'))}: {verdict}. {total} "
                 f"{pct_ci(h['total'], h.get('total_ci95'))} (first audited round: "
                 f"{pct_ci(first['headline']['total'], first['headline'].get('total_ci95'))}).", "",
                 "Whose data the generations match at the last round (MR(j→k), any category):", "",
                 *self._matrix_table(last)]
        return "\n".join(lines)
