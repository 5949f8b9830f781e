"""Sweep tables: one table per varied factor, in the shape of the paper's Tables 3, 4, 5, 13 and 14.

A sweep directory holds one run per job (``<sweep>/<n>/config.yaml`` + ``summary.json``). For every factor that
varies across the jobs (decoding, prefix length, FL algorithm, model, rounds, task), the final round's
headline figures are grouped by that factor's value and reported as mean ± std over the other jobs (seeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from fedmem.io import atomic_write_json, atomic_write_text

FACTORS = {
    "decoding": ("audit", "decoding", "strategy"),  # Table 3
    "prefix_len": ("audit", "prefix_len"),  # Table 4
    "algorithm": ("strategy", "name"),  # Table 5
    "model": ("model", "name"),  # Table 13
    "rounds": ("strategy", "num_rounds"),  # Table 14
    "task": ("task", "name"),
}


def _get(d: dict, path: tuple[str, ...]):
    for k in path:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return d if not isinstance(d, dict) else None


def load_sweep(sweep_dir: Path) -> list[dict]:
    jobs = []
    for cfg_path in sorted(Path(sweep_dir).glob("*/config.yaml")):
        summary = cfg_path.parent / "summary.json"
        if not summary.exists():
            continue
        cfg = yaml.safe_load(cfg_path.read_text())
        curves = json.loads(summary.read_text())["curves"]
        final = {k: v[-1][1] for k, v in curves.items() if v}
        jobs.append({"dir": cfg_path.parent.name, "config": cfg, "final": final})
    return jobs


def sweep_tables(jobs: list[dict]) -> dict[str, dict]:
    """{factor: {value: {figure: (mean, std, n)}}} for every factor that takes more than one value."""
    tables = {}
    for factor, path in FACTORS.items():
        values = sorted({str(_get(j["config"], path)) for j in jobs})
        if len(values) < 2:
            continue
        table = {}
        for v in values:
            group = [j["final"] for j in jobs if str(_get(j["config"], path)) == v]
            figures = sorted({k for g in group for k in g})
            table[v] = {k: (float(np.mean(x)), float(np.std(x)), len(x))
                        for k in figures if (x := [g[k] for g in group if k in g])}
        tables[factor] = table
    return tables


def write_sweep_report(sweep_dir: Path) -> Path:
    jobs = load_sweep(sweep_dir)
    tables = sweep_tables(jobs)
    lines = [f"# Sweep {Path(sweep_dir).name}: {len(jobs)} runs", ""]
    marker = Path(sweep_dir) / "sweep.json"
    if marker.is_file() and json.loads(marker.read_text()).get("audit_only"):
        lines += [f"Audit only: every job re-audits the saved adapters of run `{json.loads(marker.read_text())['run']}`;"
                  " nothing was retrained.", ""]
    for factor, table in tables.items():
        figures = sorted({k for row in table.values() for k in row})
        lines += [f"## {factor}", "", f"| {factor} | " + " | ".join(figures) + " |", "|---" * (len(figures) + 1) + "|"]
        for value, row in table.items():
            cells = [f"{row[k][0]:.4g} ± {row[k][1]:.2g} (n={row[k][2]})" if k in row else "" for k in figures]
            lines.append(f"| {value} | " + " | ".join(cells) + " |")
        lines.append("")
    if not tables:
        lines.append("No factor varies across the finished runs of this sweep.")
    out = Path(sweep_dir) / "sweep_report.md"
    atomic_write_text(out, "\n".join(lines))
    atomic_write_json(Path(sweep_dir) / "sweep_tables.json", tables)
    return out
