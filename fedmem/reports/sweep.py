"""Sweep tables in the shape of the paper's Tables 1-5, 9, 13 and 14, with 95% intervals.

A sweep directory holds one run per job (``<sweep>/<n>/config.yaml`` + ``summary.json``). A *factor* is a setting
that varies across the jobs: one of the paper's (task, CL vs FL, decoding, prefix length, FL algorithm, model,
rounds), or any other config key that varies on its own (named by its key, e.g. ``strategy.proximal_mu``). Seeds
are replicates, never a factor. Every factor gets a table of each run's final-round figures: its rows are the
factor's values within every combination of the other varied factors (task and model outermost, as in the
paper), so a row never pools runs that differ in anything but the seed. A cell is

- with n >= 2 runs (seeds): their mean and a 95% t-interval over the seeds (``t95_seeds``); where every seed gave
  the same value, whose t-interval would have zero width, the widest of the runs' own intervals (``widest_run95``),
- with one run: its value and that run's own 95% sampling interval from ``summary.json``'s ``ci95``
  (``sampling95``; none where the run has none).

The columns are the figures the audit methods declare (``fedmem.audit.base.Figure``), never named here: each table
shows the roles it is about (the paper's MR comparison, its performance column, MR_Total's categories) and every
figure declared for all tables. Rate intervals are clipped to [0, 1]. ``sweep_tables.json`` keeps fractions;
``sweep_report.md`` shows each figure as it is declared (rates in percent, differences in percentage points,
scores as numbers, through fedmem.common.fmt).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from fedmem.audit.intervals import mean_t_interval
from fedmem.common.fields import config_leaves
from fedmem.common.fmt import figure_text
from fedmem.common.io import atomic_write_json, atomic_write_text, pyplot, save_figure, to_jsonable
from fedmem.federation.strategies import CENTRALIZED
from fedmem.reports.pages import report_figures

# A table's columns are the figures the methods declare for its roles (``Figure.sweep``), role by role.
ANSWER = ("answer", "extra")  # the paper's MR comparison, then fedmem's own figures
WITH_PERFORMANCE = ("answer", "performance", "extra")  # ... and the model's performance
FRAMEWORK = ("utility", "performance", "total", "extra")  # CL vs FL (the paper's Table 2): utility and MR_Total
PERFORMANCE = "performance"  # the paper's "Performance" column: the first figure declared for it that a run has
EPSILON = "defense/epsilon"  # DP's accountant: the budget the empirical ε figures are read against
EPSILON_MARKERS = "o^sDv<>"  # one marker per ε figure on the frontier's ε panel, the accountant's first


class Factor(NamedTuple):
    header: str
    path: tuple[str, ...] | None  # where config.yaml holds its value (None: derived, see _value)
    paper: str
    columns: tuple[str, ...]  # the roles (``Figure.sweep``) whose figures are its columns, in this order
    order: tuple = ()  # the paper's order of its values; others follow, numbers numerically


FACTORS = {  # in the paper's table order; rows nest task, then model, then the others in this order
    "task": Factor("Task", ("task", "name"), "Table 1", ANSWER, ("summarization", "dialog", "qa", "classification")),
    "framework": Factor("Framework", None, "Tables 2, 9 and 15", FRAMEWORK,
                        ("CL", "FL")),
    "decoding": Factor("Decoding", ("audit", "decoding", "strategy"), "Table 3", ANSWER,
                       ("temperature", "top_k", "top_p", "greedy")),
    "prefix_len": Factor("Prefix length", ("audit", "prefix_len"), "Table 4", ANSWER),
    "algorithm": Factor("Federated algorithm", ("strategy", "name"), "Tables 5 and 12", WITH_PERFORMANCE,
                        ("fedavg", "fedprox")),
    "model": Factor("Model", ("model", "name"), "Table 13", ANSWER,
                    ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "llama3.2-1b", "llama3.2-3b")),
    "rounds": Factor("Communication rounds", ("strategy", "num_rounds"), "Table 14", WITH_PERFORMANCE),
    "defense": Factor("Defense", None, "", ("performance", "extra"), ("none",)),
}
NESTING = ("task", "model", "framework", "algorithm", "rounds", "decoding", "prefix_len", "defense")
WIDE = {"model": "task"}  # Table 13 puts the tasks side by side
IGNORED = {"seed", "run_dir", "cache_dir"}  # never a factor
INTERVALS = {"t95_seeds": "mean over n >= 2 seeds with a 95% t-interval over the seeds",
             "widest_run95": "n >= 2 seeds that all gave the same value (a t-interval would have zero width): the widest "
                             "of the runs' own 95% sampling intervals",
             "sampling95": "one run: its own 95% sampling interval over the audited samples (summary.json ci95)"}

LEGEND = ("Each run's final round. Rates in percent, differences in percentage points, 95% intervals in brackets. "
          "n is the number of runs (seeds) in a row: with n ≥ 2 a cell is their mean with a t-interval over the "
          "seeds, or, where every seed gave the same value, the widest of the runs' own sampling intervals (a "
          "t-interval would have zero width); with n = 1 it is that run's value with its own sampling interval over "
          "the audited samples (none where the run reports none).")


def sweep_columns(roles: tuple[str, ...]) -> dict[str, str]:
    """``{figure: header}`` of the figures every registered method declares for these roles (``Figure.sweep``), by
    role in the order given; the performance role is one column, whichever of its figures a run has."""
    declared = report_figures()
    columns: dict[str, str] = {}
    for role in roles:
        chosen = {k: f.label for k, f in declared.items() if f.sweep == role}
        if role == PERFORMANCE and chosen:
            columns[PERFORMANCE] = f"Performance ({' or '.join(chosen.values())})"
        else:
            columns |= chosen
    # the empirical ε figures last, right after DP's own: the audits' measure beside the accountant's bound
    last = sorted((k for k in columns if k in declared and declared[k].epsilon), key=lambda k: k != EPSILON)
    return {k: columns[k] for k in [*(k for k in columns if k not in last), *last]}


def _kind(figure: str) -> str:
    """How a sweep figure reads: as its method declares it (the performance column is a rate)."""
    declared = report_figures().get(figure)
    return declared.kind if declared else "rate"


def defense_label(config: dict) -> str:
    """A run's defense in a few words, from its flattened config: ``none``, ``DP z=1 C=0.1`` (with adaptive and
    client-side clipping said), ``dedup exact``, or both."""
    parts = []
    if config.get("defense.name", "none") != "none":
        parts.append(f"DP z={config['defense.noise_multiplier']:g} C={config['defense.clipping_norm']:g}"
                     + (" adaptive" if config.get("defense.clipping") == "adaptive" else "")
                     + (" client-side" if config.get("defense.side") == "client" else ""))
    if config.get("data.dedup", "off") != "off":
        parts.append(f"dedup {config['data.dedup']}" + (f" ≥{config['data.dedup_threshold']:g}"
                                                          if config["data.dedup"] == "near" else ""))
    return " + ".join(parts) or "none"


def _value(job: dict, factor: str):
    if factor == "framework":
        return "CL" if job["config"].get("strategy.name") == CENTRALIZED else "FL"
    if factor == "defense":
        return defense_label(job["config"])
    return job["config"].get(".".join(FACTORS[factor].path) if factor in FACTORS else factor)


def _function_of(jobs: list[dict], factor: str, by: list[str]) -> bool:
    """Whether ``factor``'s value is fixed by the values of ``by`` in these jobs."""
    seen: dict = {}
    return all(seen.setdefault(tuple(_value(j, b) for b in by), _value(j, factor)) == _value(j, factor) for j in jobs)


def load_sweep(sweep_dir: Path) -> list[dict]:
    """Every finished job: its config (flattened), final-round figures, and their own intervals at that round."""
    jobs = []
    for cfg_path in sorted(Path(sweep_dir).glob("*/config.yaml"), key=lambda p: (len(p.parent.name), p.parent.name)):
        summary_path = cfg_path.parent / "summary.json"
        if not summary_path.exists():  # a job that failed or is still running: left out
            continue
        summary = json.loads(summary_path.read_text())
        final = {k: v[-1] for k, v in summary.get("curves", {}).items() if v}  # figure: [round, value]
        ci95 = {k: {r: [lo, hi] for r, lo, hi in v} for k, v in (summary.get("ci95") or {}).items()}
        performance = next((k for k, f in report_figures().items() if f.sweep == PERFORMANCE and k in final), None)
        if performance:  # the paper's "Performance": ROUGE-L, or accuracy for classification
            final[PERFORMANCE], ci95[PERFORMANCE] = final[performance], ci95.get(performance, {})
        config = config_leaves(yaml.safe_load(cfg_path.read_text()))
        jobs.append({"dir": cfg_path.parent.name, "config": config,
                     "final": {k: float(v) for k, (_, v) in final.items()},
                     "ci95": {k: ci95[k][r] for k, (r, _) in final.items() if r in ci95.get(k, {})}})
    return jobs


def varied_factors(jobs: list[dict]) -> list[str]:
    """The paper's factors that vary, in nesting order, then every other config key that varies between runs of
    the same seed and is not fixed by the factors before it (a setting swept on its own, e.g. train.lr)."""
    factors: list[str] = []
    for f in NESTING:  # a factor that only relabels one before it (algorithm = framework for CL vs FedAvg) is left out
        if len({_value(j, f) for j in jobs}) > 1 and not any(
                _function_of(jobs, f, [g]) and _function_of(jobs, g, [f]) for g in factors):
            factors.append(f)
    keys = sorted({k for j in jobs for k in j["config"]} - IGNORED)
    for key in keys:
        if not _function_of(jobs, key, [*factors, "seed"]):
            factors.append(key)
    return factors


def _cell(jobs: list[dict], figure: str) -> dict | None:
    """One figure over the runs of a row: mean, 95% interval (lo, hi), n and the interval's kind (see INTERVALS)."""
    runs = [j for j in jobs if figure in j["final"]]
    if not runs:
        return None
    values = np.array([j["final"][figure] for j in runs])
    n, mean = len(values), float(values.mean())
    declared = report_figures().get(figure)
    cell = _interval_cell(runs, figure, values, n, mean, declared)
    mdes = [j["final"][f"{figure}_mde"] for j in runs if j["final"].get(f"{figure}_mde") is not None]
    return cell | ({"mde": float(np.mean(mdes))} if mdes and declared is not None and declared.mde else {})


def _interval_cell(runs: list[dict], figure: str, values: np.ndarray, n: int, mean: float, declared) -> dict:
    """A figure's mean over the runs of a row with its 95% interval and the interval's kind."""
    if n >= 2 and declared is not None and declared.ci is None and np.ptp(values) == 0:
        return {"mean": mean, "lo": None, "hi": None, "n": n, "interval": None}  # computed, not estimated (a budget)
    if n >= 2 and np.ptp(values) == 0:  # a t-interval of zero width would read as certainty
        own = [j["ci95"][figure] for j in runs if j["ci95"].get(figure)]
        lo, hi = max(own, key=lambda ci: ci[1] - ci[0]) if own else (None, None)
        return {"mean": mean, "lo": lo, "hi": hi, "n": n, "interval": "widest_run95" if own else None}
    if n >= 2:
        (lo, hi), kind = mean_t_interval(values, *((0.0, 1.0) if _kind(figure) == "rate" else ())), "t95_seeds"
    else:
        lo, hi = runs[0]["ci95"].get(figure) or (None, None)
        kind = "sampling95" if lo is not None else None
    return {"mean": mean, "lo": lo, "hi": hi, "n": n, "interval": kind}


def _sort_key(factor: str, value) -> tuple:
    order = FACTORS[factor].order if factor in FACTORS else ()
    rank = order.index(value) if value in order else len(order)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return rank, not number, value if number else 0, str(value)


def sweep_tables(jobs: list[dict]) -> dict[str, dict]:
    """{factor: {"paper", "rows_by", "columns", "rows": [{"key", "n", "seeds", "runs", "figures"}]}} for every
    varied factor (a single task table over the seeds when nothing varies); rows in the paper's order."""
    if not jobs:
        return {}
    factors = varied_factors(jobs)
    shown = [f for f in FACTORS if f in factors and f != "task"] + [f for f in factors if f not in FACTORS]
    tables = {}
    for factor in shown or ["task"]:  # the task nests the other tables' rows; alone (or nothing varies): Table 1
        context = [g for g in factors if g != factor and not _function_of(jobs, g, [factor])]
        rows_by = [*context, factor]
        groups: dict[tuple, list[dict]] = {}
        for j in jobs:
            groups.setdefault(tuple(_value(j, g) for g in rows_by), []).append(j)
        spec = FACTORS.get(factor, Factor(factor, None, "", WITH_PERFORMANCE))
        present = {k for j in jobs for k in j["final"]}
        columns = {k: v for k, v in sweep_columns(spec.columns).items() if k in present}
        rows = []
        for key in sorted(groups, key=lambda key: [_sort_key(g, v) for g, v in zip(rows_by, key)]):
            group = groups[key]
            rows.append({"key": dict(zip(rows_by, key)), "n": len(group), "runs": [j["dir"] for j in group],
                         "seeds": [j["config"].get("seed") for j in group],
                         # runs whose last round's global model was degenerate (fedmem.engine.health): destroyed
                         "destroyed": sum(bool(j["final"].get("health/degenerate")) for j in group),
                         "figures": {k: c for k in columns if (c := _cell(group, k)) is not None}})
        tables[factor] = {"paper": spec.paper, "rows_by": rows_by, "columns": columns, "rows": rows}
    return tables


def _fmt(figure: str, cell: dict | None) -> str:
    if cell is None:
        return ""
    ci = [cell["lo"], cell["hi"]] if cell["lo"] is not None else None
    declared = report_figures().get(figure)
    return figure_text(_kind(figure), cell["mean"], ci, mde=cell.get("mde"),
                       null=declared.null if declared is not None else 0.0)


def _destroyed(row: dict) -> str:
    """`` (k destroyed)``: the row's runs whose last global model was degenerate, its figures absent or 0."""
    return f" ({row['destroyed']} destroyed)" if row.get("destroyed") else ""


def _header(factor: str) -> str:
    return FACTORS[factor].header if factor in FACTORS else f"`{factor}`"


def table_markdown(factor: str, table: dict) -> list[str]:
    """One table as Markdown lines: rows as in ``table``; Table 13 (model) puts the tasks side by side."""
    rows_by, columns, rows = table["rows_by"], table["columns"], table["rows"]
    wide = WIDE.get(factor) if WIDE.get(factor) in rows_by else None
    title = f"## {_header(factor)}" + (f" (paper {table['paper']})" if table["paper"] else "")
    if not wide:
        head = [*map(_header, rows_by), "n", *columns.values()]
        body = [[*map(str, r["key"].values()), str(r["n"]) + _destroyed(r), *(_fmt(k, r["figures"].get(k))
                                                                             for k in columns)] for r in rows]
    else:
        outer = [g for g in rows_by if g != wide]
        values = sorted({r["key"][wide] for r in rows}, key=lambda v: _sort_key(wide, v))
        head = [*map(_header, outer), "n", *(f"{v} {label}" for v in values for label in columns.values())]
        body, index = [], {}
        for r in rows:
            index.setdefault(tuple(r["key"][g] for g in outer), {})[r["key"][wide]] = r
        for key, by_value in index.items():
            ns = sorted({r["n"] for r in by_value.values()})
            cells = [_fmt(k, by_value[v]["figures"].get(k)) if v in by_value else "" for v in values for k in columns]
            body.append([*map(str, key), str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}", *cells])
    lines = [title, "", *([summary, ""] if (summary := table_summary(table)) else []),
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in body] + [""]


def table_summary(table: dict, figures: int = 3) -> str | None:
    """The table in one line: for its first ``figures`` columns, the rows with the lowest and the highest mean (the
    figure as the table writes it, without its interval); None for a table of one row."""
    rows = table["rows"]
    if len(rows) < 2:
        return None
    name = lambda r: " ".join(map(str, r["key"].values()))  # noqa: E731
    parts = []
    for key, header in list(table["columns"].items())[:figures]:
        cells = [(r["figures"][key]["mean"], name(r)) for r in rows if key in r["figures"]]
        if len(cells) < 2:
            continue
        (lo, lo_row), (hi, hi_row) = min(cells), max(cells)
        text = lambda v: figure_text(_kind(key), v)  # noqa: E731
        parts.append(f"{header} from {text(lo)} ({lo_row}) to {text(hi)} ({hi_row})" if lo != hi else
                     f"{header} {text(lo)} in every row")
    return "In one line: " + "; ".join(parts) + "." if parts else None


def frontier_panels(columns: dict) -> list[str]:
    """The memorization figures the frontier plots, one per method: the first a method declares as memorization
    (higher means more) among the table's columns."""
    figures, seen, out = report_figures(), set(), []
    for key in columns:
        method = key.partition("/")[0]
        if key in figures and figures[key].memorization and not figures[key].epsilon and method not in seen:
            seen.add(method)
            out.append(key)
    return out


def epsilon_panel(ax, table: dict) -> None:
    """Every ε figure of the table against utility, one marker per figure and one colour per setting (as in the other
    panels): the accountant's bound, and what the audits measured of the same runs."""
    keys = [k for k in table["columns"] if (f := report_figures().get(k)) is not None and f.epsilon]
    for i, row in enumerate(table["rows"]):
        x = row["figures"].get(PERFORMANCE)
        for key, marker in zip(keys, EPSILON_MARKERS):
            y = row["figures"].get(key)
            if x is not None and y is not None:
                ax.plot(x["mean"], y["mean"], marker=marker, linestyle="none", color=f"C{i}", markersize=7)
    for key, marker in zip(keys, EPSILON_MARKERS):  # the legend of the markers, in black
        ax.plot([], [], marker=marker, linestyle="none", color="k", label=table["columns"][key])
    ax.set_yscale("symlog", linthresh=1.0)  # 0 (no leakage found) beside budgets of millions
    ax.set_xlabel(table["columns"][PERFORMANCE])
    ax.set_ylabel("ε at the run's δ")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def frontier_plot(table: dict, sweep_dir: Path) -> str | None:
    """``defense_frontier.png``: each defense setting's memorization (one panel per method) against its utility,
    with the privacy budget spent written at each point, and a panel of the ε figures (the accountant's and the
    audits' empirical ones) when the runs have any but DP's; None when the runs have no utility figure."""
    rows, panels = table["rows"], frontier_panels(table["columns"])
    empirical = [k for k in table["columns"] if k != EPSILON and (f := report_figures().get(k)) and f.epsilon]
    if PERFORMANCE not in table["columns"] or not (panels or empirical):
        return None
    plt = pyplot()
    width = len(panels) + bool(empirical)
    fig, axes = plt.subplots(1, width, figsize=(4.2 * width, 4.4), squeeze=False, layout="constrained")
    if empirical:
        epsilon_panel(axes[0][-1], table)
    err = lambda c: [[c["mean"] - c["lo"]], [c["hi"] - c["mean"]]] if c["lo"] is not None else None  # noqa: E731
    labels = []  # one colour per setting, the same in every panel
    for row in rows:
        eps = row["figures"].get(EPSILON)
        budget = f"ε = {figure_text('score', eps['mean'])}" if eps else "no DP"
        destroyed = f", {row['destroyed']} of {row['n']} destroyed" if row.get("destroyed") else ""
        labels.append(f"{' '.join(map(str, row['key'].values()))} ({budget}{destroyed})")
    for ax, key in zip(axes[0], panels):
        for i, row in enumerate(rows):
            x, y = row["figures"].get(PERFORMANCE), row["figures"].get(key)
            if x is not None and y is not None:
                ax.errorbar(x["mean"], y["mean"], xerr=err(x), yerr=err(y), fmt="o", capsize=3, color=f"C{i}")
        ax.set_xlabel(table["columns"][PERFORMANCE])
        ax.set_ylabel(table["columns"][key])
        ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", linestyle="none", color=f"C{i}") for i in range(len(rows))]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize=8, frameon=False)
    fig.suptitle("Memorization against utility per defense (95% intervals)")
    return save_figure(fig, Path(sweep_dir) / "defense_frontier.png")


def write_sweep_report(sweep_dir: Path) -> Path:
    """``sweep_report.md`` (Markdown tables, percent) and ``sweep_tables.json`` (fractions) of a sweep directory."""
    sweep_dir = Path(sweep_dir)
    jobs = load_sweep(sweep_dir)
    tables, factors = sweep_tables(jobs), varied_factors(jobs) if jobs else []
    unfinished = len(list(sweep_dir.glob("*/config.yaml"))) - len(jobs)
    marker = sweep_dir / "sweep.json"
    audit_only = json.loads(marker.read_text()) if marker.is_file() else {}
    lines = [f"# Sweep {sweep_dir.name}: {len(jobs)} runs", ""]
    if audit_only.get("audit_only"):
        run = audit_only["run"]
        lines += [f"Audit only: every job re-audits the saved adapters of run `{run}`; nothing was retrained.", ""]
    if unfinished:
        lines += [f"{unfinished} job(s) have no summary.json (failed or unfinished) and are left out.", ""]
    if tables:
        lines += [LEGEND, ""]
    if jobs and not factors:
        lines += ["No factor varies across the finished runs: one row, over the seeds.", ""]
    for factor, table in tables.items():
        lines += table_markdown(factor, table)
        if factor == "defense" and (plot := frontier_plot(table, sweep_dir)):
            lines += ["Memorization against utility, one point per defense setting with the privacy budget it spent "
                      "(ε at the configured δ; no DP: unbounded):", "", f"![defense frontier]({plot})", ""]
    if not jobs:
        lines.append("No finished run in this sweep.")
    out = sweep_dir / "sweep_report.md"
    atomic_write_text(out, "\n".join(lines))
    atomic_write_json(sweep_dir / "sweep_tables.json", to_jsonable({
        "sweep": sweep_dir.name, "runs": len(jobs), "unfinished": unfinished,
        "audit_only": bool(audit_only.get("audit_only")), "factors": factors,
        "intervals": INTERVALS, "tables": tables}))
    return out
