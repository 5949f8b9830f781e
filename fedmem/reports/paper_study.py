"""The cross-client paper's questions answered by one study directory, in the paper's table shapes, beside the paper's
own figures, with one line per trend the paper states: reproduced, contradicted, or not resolvable at this n.

A study directory (``make study-paper``) holds one training run per setting (``<study>/<name>/``: FedAvg, FedProx at
each μ, the centralized baseline) and, under FedAvg's run, the audit-only sweeps over its last round
(``<study>/fedavg/audits/prefix_len/``, ``.../decoding/``). The tables are the sweep tables of fedmem.reports.sweep,
built from these runs; the trends compare two of their cells.

A trend compares two runs' figures (or two rounds of one run) as independent rates: the difference with Newcombe's
95% interval from each figure's own interval. A trend the paper states as "A above B" is reproduced where the
interval lies above 0 and contradicted where it lies below; a trend of no effect is contradicted where the interval
leaves 0 and consistent where it holds 0. Where it holds 0 the line gives the smallest difference the comparison
would detect (80% power, two-sided 5%), by the normal approximation (z_0.975 + z_0.8) / z_0.975 times the interval's
half-width, so "not resolvable" says how small an effect would have to be to go unseen. Each trend is read on the
paper's MR and, beside it, on MR's excess over its held-out control (what the comparison shows beyond what the same
settings give on text the model never trained on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from fedmem.audit.intervals import POWER, Z95, newcombe
from fedmem.common.fmt import figure_text
from fedmem.common.io import atomic_write_json, atomic_write_text, to_jsonable
from fedmem.reports.sweep import LEGEND, load_sweep, sweep_tables, table_markdown

# The paper's figures, Qwen2.5-3B (its Tables 1-5), in percent: {table: {task: {setting: (MR_Intra, MR_Inter)}}};
# Table 2 gives MR_Total (and performance) for CL and FL: (MR_Total, performance).
PAPER = {
    "Table 1": {"summarization": {"FL": (0.342, 0.046)}, "dialog": {"FL": (1.533, 1.446)},
                "QA": {"FL": (1.450, 0.813)}},
    "Table 2": {"summarization": {"CL": (0.558, 28.46), "FL": (0.433, 29.88)},
                "dialog": {"CL": (3.417, 19.40), "FL": (3.992, 18.11)},
                "QA": {"CL": (2.150, 26.66), "FL": (2.917, 28.60)}},
    "Table 3": {"summarization": {"temperature": (0.475, 0.067), "top_k": (0.342, 0.046), "top_p": (0.525, 0.050)},
                "dialog": {"temperature": (1.267, 1.442), "top_k": (1.533, 1.446), "top_p": (3.792, 2.996)},
                "QA": {"temperature": (1.283, 0.750), "top_k": (1.450, 0.813), "top_p": (2.567, 1.438)}},
    "Table 4": {"summarization": {10: (0.508, 0.188), 30: (0.342, 0.046), 50: (0.425, 0.038), 100: (0.208, 0.004)},
                "dialog": {10: (2.108, 1.992), 30: (1.533, 1.446), 50: (1.575, 1.242), 100: (1.408, 1.150)},
                "QA": {10: (1.525, 1.383), 30: (1.450, 0.813), 50: (1.242, 0.550), 100: (1.125, 0.429)}},
    "Table 5": {"summarization": {"fedavg": (0.342, 0.046), "fedprox": (0.942, 0.138)},
                "dialog": {"fedavg": (1.533, 1.446), "fedprox": (1.892, 1.879)},
                "QA": {"fedavg": (1.450, 0.813), "fedprox": (3.675, 2.146)}},
}
MDE_FACTOR = (Z95 + 0.8416212335729143) / Z95  # z_0.8 = 0.8416: POWER's quantile, as fedmem.audit.intervals uses
assert POWER == 0.8


class Side(NamedTuple):
    """One side of a comparison: a figure's value and its own 95% interval, and what it is."""
    label: str
    value: float | None
    ci: list[float] | None


def _side(job: dict | None, figure: str, label: str, round_: int | None = None, summary: dict | None = None) -> Side:
    """A job's final figure (or, with ``summary``, the figure at ``round_``) as a comparison's side."""
    if summary is not None:
        value = dict(map(tuple, summary["curves"].get(figure, []))).get(round_)
        ci = {r: [lo, hi] for r, lo, hi in (summary.get("ci95") or {}).get(figure, [])}.get(round_)
        return Side(label, value, ci)
    if job is None:
        return Side(label, None, None)
    return Side(label, job["final"].get(figure), job["ci95"].get(figure))


def compare(a: Side, b: Side, claim: str) -> dict:
    """``a`` − ``b`` with Newcombe's interval, read against ``claim``: "above" (the paper says a > b) or "none" (the
    paper says the setting changes nothing). The verdict: reproduced / contradicted / not resolvable (above), or
    consistent / contradicted (none); "missing" where a side has no figure or interval."""
    if a.value is None or b.value is None or not a.ci or not b.ci:
        return {"a": a._asdict(), "b": b._asdict(), "diff": None, "ci95": None, "detectable": None,
                "verdict": "missing"}
    lo, hi = newcombe(a.value, a.ci, b.value, b.ci)
    diff = a.value - b.value
    detectable = MDE_FACTOR * max(diff - lo, hi - diff)
    if claim == "above":
        verdict = "reproduced" if lo > 0 else "contradicted" if hi < 0 else "not resolvable"
    else:
        verdict = "contradicted" if lo > 0 or hi < 0 else "consistent"
    return {"a": a._asdict(), "b": b._asdict(), "diff": diff, "ci95": [lo, hi], "detectable": detectable,
            "verdict": verdict}


def combined(rows: list[dict]) -> str:
    """A trend's verdict from its comparisons on the paper's own MR (those on the excess read beside them): reproduced
    where some comparison reproduces it and none contradicts it, contradicted where the reverse, mixed where both,
    consistent for a trend of no effect that none contradicts; otherwise not resolvable (or missing)."""
    verdicts = {r["verdict"] for r in rows if "excess" not in r["figure"]} - {"missing"}
    if not verdicts:
        return "missing"
    if "reproduced" in verdicts:
        return "mixed" if "contradicted" in verdicts else "reproduced"
    if "contradicted" in verdicts:
        return "contradicted"
    return "consistent" if verdicts == {"consistent"} else "not resolvable"


def _by(jobs: list[dict], **where) -> dict | None:
    """The one job whose flattened config has every ``key=value`` of ``where`` (keys with __ for dots)."""
    found = [j for j in jobs if all(j["config"].get(k.replace("__", ".")) == v for k, v in where.items())]
    return found[0] if len(found) == 1 else None


class Study(NamedTuple):
    training: list[dict]  # the training runs (load_sweep of the study directory)
    prefix: list[dict]  # the audit-only jobs over prefix lengths
    decoding: list[dict]  # ... over decoding methods
    fedavg: dict | None  # FedAvg's summary.json, every round


def load_study(study: Path) -> Study:
    fedavg = study / "fedavg"
    summary = fedavg / "summary.json"
    return Study(load_sweep(study), load_sweep(fedavg / "audits" / "prefix_len"),
                 load_sweep(fedavg / "audits" / "decoding"),
                 json.loads(summary.read_text()) if summary.is_file() else None)


def trends(s: Study) -> list[dict]:
    """Every trend the paper states, as this study reads it: ``{"trend", "paper", "comparisons": [{"what",
    "figure", **compare(...)}], "verdict"}`` (the trend's verdict: :func:`combined`)."""
    fedavg = _by(s.training, **{"strategy__name": "fedavg"})
    cl = _by(s.training, **{"strategy__name": "centralized"})
    fedprox = sorted((j for j in s.training if j["config"].get("strategy.name") == "fedprox"),
                     key=lambda j: j["config"].get("strategy.proximal_mu", 0))
    out = []

    def trend(name: str, paper: str, pairs: list[tuple[str, str, Side, Side, str]]) -> None:
        rows = [{"what": what, "figure": figure, **compare(a, b, claim)} for what, figure, a, b, claim in pairs]
        out.append({"trend": name, "paper": paper, "comparisons": rows, "verdict": combined(rows)})

    # Table 1: within the FedAvg run, the paper's own difference of MR_Intra and MR_Inter (same prefixes)
    intra_minus_inter = _side(fedavg, "mr/intra_minus_inter", "FedAvg MR_Intra − MR_Inter")
    zero = Side("0", 0.0, [0.0, 0.0])
    trend("MR_Intra above MR_Inter", "Table 1", [
        ("FedAvg, last round", "mr/intra_minus_inter", intra_minus_inter, zero, "above"),
        ("FedAvg, last round, excess over the control", "mr/excess_intra − mr/excess_inter",
         _side(fedavg, "mr/excess_intra", "excess MR_Intra"), _side(fedavg, "mr/excess_inter", "excess MR_Inter"),
         "above")])
    trend("no clear change from CL to FL", "Table 2", [
        ("MR_TotalFL − MR_TotalCL", "mr/total", _side(fedavg, "mr/total", "FedAvg"), _side(cl, "mr/total", "CL"),
         "none"),
        ("the same, excess over the control", "mr/excess_total", _side(fedavg, "mr/excess_total", "FedAvg"),
         _side(cl, "mr/excess_total", "CL"), "none")])
    temperature = _by(s.decoding, **{"audit__decoding__strategy": "temperature"})
    pairs = []
    for better in ("top_k", "top_p"):
        job = _by(s.decoding, **{"audit__decoding__strategy": better})
        for figure in ("mr/intra", "mr/inter", "mr/excess_intra"):
            pairs.append((f"{better} − temperature", figure, _side(job, figure, better),
                          _side(temperature, figure, "temperature"), "above"))
    trend("top-k and top-p decoding above temperature", "Table 3", pairs)
    lengths = sorted({j["config"].get("audit.prefix_len") for j in s.prefix})
    pairs = []
    if len(lengths) >= 2:
        short, long = _by(s.prefix, **{"audit__prefix_len": lengths[0]}), _by(s.prefix, **{"audit__prefix_len":
                                                                                          lengths[-1]})
        for figure in ("mr/intra", "mr/inter", "mr/excess_intra"):
            pairs.append((f"prefix {lengths[0]} − prefix {lengths[-1]}", figure,
                          _side(short, figure, str(lengths[0])), _side(long, figure, str(lengths[-1])), "above"))
    trend("shorter prefixes memorize more", "Table 4", pairs)
    pairs = []
    for job in fedprox:
        mu = job["config"].get("strategy.proximal_mu")
        for figure in ("mr/intra", "mr/inter", "mr/excess_intra"):
            pairs.append((f"FedProx (μ = {mu:g}) − FedAvg", figure, _side(job, figure, f"FedProx μ={mu:g}"),
                          _side(fedavg, figure, "FedAvg"), "above"))
    trend("FedProx above FedAvg", "Table 5", pairs)
    pairs = []
    if s.fedavg:
        rounds = [r for r, _ in s.fedavg["curves"].get("mr/intra", [])]
        trained = [r for r in rounds if r > 0]
        if len(trained) >= 2:
            first, last = trained[0], trained[-1]
            for figure in ("mr/intra", "mr/excess_intra"):
                pairs.append((f"FedAvg round {last} − round {first}", figure,
                              _side(None, figure, f"round {last}", last, s.fedavg),
                              _side(None, figure, f"round {first}", first, s.fedavg), "none"))
    trend("rounds without a clear effect", "Table 14 (G.7)", pairs)
    out.append({"trend": "model size without a clear effect", "paper": "Table 13 (G.6)", "comparisons": [],
                "verdict": "not measured: one model size in this study"})
    return out


def first_round_above_control(summary: dict | None, figure: str = "mr/excess_intra") -> int | None:
    """The first trained round whose ``figure`` interval lies above 0 (None: no such round)."""
    if not summary:
        return None
    bands = {r: lo for r, lo, _ in (summary.get("ci95") or {}).get(figure, [])}
    return next((r for r, _ in summary["curves"].get(figure, []) if r > 0 and bands.get(r, 0) > 0), None)


def _pts(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.2f}"


def trend_line(t: dict) -> str:
    """A trend in one Markdown line: its verdict and the comparison that decides it, then the others."""
    def one(c: dict) -> str:
        if c["verdict"] == "missing":
            return f"{c['what']} ({c['figure']}): no figure"
        lo, hi = c["ci95"]
        under = f", under {100 * c['detectable']:.2f}" if lo <= 0 <= hi else ""
        return f"{c['what']} ({c['figure']}) {_pts(c['diff'])} points [{_pts(lo)}, {_pts(hi)}]{under}: {c['verdict']}"
    if not t["comparisons"]:
        return f"- **{t['trend']}** ({t['paper']}): {t['verdict']}."
    head, *rest = t["comparisons"]
    return (f"- **{t['trend']}** ({t['paper']}): **{t['verdict']}**. {one(head)}"
            + ("; " + "; ".join(one(c) for c in rest) if rest else "") + ".")


def paper_lines(table: str) -> list[str]:
    """The paper's own figures for one of its tables (Qwen2.5-3B), its tasks in one line."""
    total = table == "Table 2"
    head = "MR_Total % / performance" if total else "MR_Intra % / MR_Inter %"
    tasks = "; ".join(f"{task}: " + ", ".join(f"{k} {a:.3f} / {b:.{2 if total else 3}f}" for k, (a, b) in rows.items())
                      for task, rows in PAPER[table].items())
    return [f"The paper's {table} (Qwen2.5-3B; {head}): {tasks}.", ""]


def write_study_report(study: Path) -> Path:
    """``study_report.md`` and ``study.json`` of a study directory: the paper's tables from its runs, FedAvg round by
    round, and one line per trend."""
    study = Path(study)
    s = load_study(study)
    lines = [f"# The cross-client paper's questions: study {study.name}", "", LEGEND, ""]
    found = trends(s)
    lines += ["## The paper's trends, as this study reads them", "", *map(trend_line, found), ""]
    first = first_round_above_control(s.fedavg)
    if s.fedavg:
        last = s.fedavg["rounds"][-1] if s.fedavg.get("rounds") else None
        lines += ["**Does federated training memorize here?** " + (
            f"FedAvg's excess MR_Intra first lies above 0 at round {first}." if first is not None else
            f"FedAvg's excess MR_Intra lies above 0 in no round up to round {last}, the study's cap."), ""]
    sections = [("Training runs: CL against FL, FedAvg against FedProx", s.training, ("Table 2", "Table 5")),
                ("Decoding, on FedAvg's last round (audit only)", s.decoding, ("Table 3",)),
                ("Prefix length, on FedAvg's last round (audit only)", s.prefix, ("Table 4",))]
    tables = {}
    for title, jobs, papers in sections:
        if not jobs:
            continue
        lines += [f"## {title}", ""]
        for table in papers:
            lines += paper_lines(table)
        for factor, table in sweep_tables(jobs).items():
            tables[f"{title}: {factor}"] = table
            lines += table_markdown(factor, table)
    if s.fedavg:
        def cell(k: str, kind: str, r: int) -> str:
            side, mde = _side(None, k, "", r, s.fedavg), _side(None, f"{k}_mde", "", r, s.fedavg).value
            return "–" if side.value is None else figure_text(kind, side.value, side.ci, mde=mde)

        lines += ["## FedAvg round by round", "",
                  "| round | MR_Intra | MR_Inter | excess MR_Intra (points) | ROUGE-L |", "|---|---|---|---|---|"]
        lines += [f"| {r} | {cell('mr/intra', 'rate', r)} | {cell('mr/inter', 'rate', r)} | "
                  f"{cell('mr/excess_intra', 'difference', r)} | {cell('utility/rouge_l', 'rate', r)} |"
                  for r in s.fedavg.get("rounds", [])]
        lines.append("")
    out = study / "study_report.md"
    atomic_write_text(out, "\n".join(lines))
    atomic_write_json(study / "study.json", to_jsonable({"study": study.name, "trends": found,
                                                         "first_round_above_control": first, "tables": tables}))
    return out
