"""The empirical ε figures in the sweep's defense frontier (docs/spec.md §10): tabled right beside the accountant's
ε, plotted with it against utility in a panel of their own, and never taken for a method's memorization panel."""

import json

import pytest

from fedmem.config.experiment import from_dict
from fedmem.reports.sweep import frontier_panels, write_sweep_report
from tests.helpers import sweep_job

EMPIRICAL = ["one_run/epsilon", "canary_clients/epsilon_final", "canary_clients/epsilon_every_round"]


def test_the_frontier_tables_and_plots_the_empirical_epsilons_beside_the_accountants(compose, tmp_path):
    settings = {"none": ([], None), "dp": (["defense=dp", "defense.noise_multiplier=0.1", "defense.clipping_norm=30"],
                                           771.8)}
    for n, (name, (overrides, eps)) in enumerate(settings.items()):
        config = from_dict(compose(*overrides)).to_dict()
        figures = {"utility__rouge_l": 0.2 - 0.1 * n, "mia__loss_auc": 0.6 - 0.05 * n, "one_run__epsilon": 1.5 - n,
                   "canary_clients__epsilon_final": 40.0 - 30 * n, "canary_clients__epsilon_every_round": 60.0 - 40 * n}
        if eps:
            figures["defense__epsilon"] = eps
        sweep_job(tmp_path, n, config, 0, **figures)
    write_sweep_report(tmp_path)
    table = json.loads((tmp_path / "sweep_tables.json").read_text())["tables"]["defense"]
    columns = list(table["columns"])
    assert columns[-4] == "defense/epsilon" and set(columns[-3:]) == set(EMPIRICAL)  # the accountant's, then the audits
    assert table["rows"][1]["figures"]["one_run/epsilon"]["mean"] == pytest.approx(0.5)
    assert frontier_panels(table["columns"]) == ["mia/loss_auc"]  # ε figures have their own panel
    md = (tmp_path / "sweep_report.md").read_text()
    assert "record-level ε lower bound" in md and "client-level ε estimate (final model)" in md
    assert (tmp_path / "defense_frontier.png").stat().st_size > 10_000
