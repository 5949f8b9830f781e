"""fedmem from Python (a notebook, a script): run an experiment and audit a run with the overrides the command line
takes, composed by the same Hydra config tree, and read a run or a sweep as pandas DataFrames.

    import fedmem.api as fm
    run = fm.run("strategy.num_rounds=2", "seed=1")            # the directory of a finished run
    again = fm.audit(f"run={run}", "audit.prefix_len=10")      # a re-audit of its saved rounds
    figures = fm.figures(run)                                  # rounds x figures, with each interval's bounds
    matrix = fm.mr_matrix(run, round_=2)                       # MR(j -> k), clients by name
    tables = fm.sweep_tables("runs/sweep-...")                 # {factor: its table as a DataFrame}

A failure raises what ``fedmem run`` would report in its one line (a ValueError for a bad setting, the run's error
otherwise); the run's ``status.json`` says the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fedmem.config import compose_dict, register_schemas
from fedmem.config.compose import override_problems


def run(*overrides: str, run_dir: str | Path | None = None) -> Path:
    """Train and audit one experiment (``fedmem run`` with ``overrides``) into ``run_dir`` (default: a new
    directory under runs/, named as ``fedmem run`` names it); returns the run directory."""
    from fedmem.cli import new_run_dir
    from fedmem.common.lock import exclusive
    from fedmem.experiment import lifecycle
    from server.simulation import simulate

    if problems := override_problems(list(overrides)):
        raise ValueError("; ".join(problems))
    register_schemas(list(overrides))
    d = compose_dict(list(overrides))
    run_dir = str(run_dir or new_run_dir(d))
    with exclusive(run_dir):
        cfg, _ = lifecycle.start(d, run_dir)
        return Path(lifecycle.execute(cfg, simulate))


def audit(*args: str) -> Path:
    """``fedmem audit`` with ``args`` (``run=DIR`` and audit overrides, or an external ``model.path=`` with data);
    returns the audit's directory."""
    from fedmem.experiment.reaudit import prepare_audit

    return Path(prepare_audit(list(args))())


def figures(run_dir: str | Path) -> pd.DataFrame:
    """Every headline figure of a run by round (index ``round``): a column per figure (``<method>/<key>``, as
    ``summary.json`` names it), and ``<figure>_lo``, ``<figure>_hi`` for its 95% interval where it has one."""
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    frame = pd.DataFrame({key: dict(map(tuple, points)) for key, points in summary["curves"].items()})
    for key, bands in (summary.get("ci95") or {}).items():
        frame[f"{key}_lo"] = pd.Series({r: lo for r, lo, _ in bands})
        frame[f"{key}_hi"] = pd.Series({r: hi for r, _, hi in bands})
    return frame.rename_axis("round").sort_index()


def mr_matrix(run_dir: str | Path, round_: int, category: str = "any") -> pd.DataFrame:
    """MR(j -> k) of one audited round, rows the prefixes' client j and columns the suffixes' client k, by name;
    ``category``: any, verbatim, paraphrase_high, paraphrase_low or idea."""
    report = json.loads((Path(run_dir) / f"round_{round_}" / "report.json").read_text())
    names = {c["id"]: c["name"] for c in report["clients"]}
    mr = report["audit"]["mr"]
    labels = [names[c] for c in mr["clients"]]
    return pd.DataFrame(mr["matrix"][category], index=pd.Index(labels, name="prefixes of"),
                        columns=pd.Index(labels, name="suffixes of"))


def sweep_tables(sweep_dir: str | Path) -> dict[str, pd.DataFrame]:
    """A finished sweep's tables (those of ``sweep_report.md``), by factor: a row per setting (its factors as
    columns, ``n`` the runs), and per figure its mean over the runs with ``_lo`` and ``_hi``, the interval's bounds."""
    from fedmem.reports.sweep import load_sweep
    from fedmem.reports.sweep import sweep_tables as tables

    out = {}
    for factor, table in tables(load_sweep(Path(sweep_dir))).items():
        rows = []
        for r in table["rows"]:
            row = {**r["key"], "n": r["n"]}
            for key, cell in r["figures"].items():
                row |= {key: cell["mean"], f"{key}_lo": cell["lo"], f"{key}_hi": cell["hi"]}
            rows.append(row)
        out[factor] = pd.DataFrame(rows)
    return out
