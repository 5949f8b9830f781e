"""Sweep tables (fedmem run -m): one table per varied factor, final-round figures as mean ± std over seeds."""

import json

import pytest
import yaml

from fedmem.sweep import sweep_tables, write_sweep_report


def _job(root, n, algorithm, seed, mr_intra, unfinished=False):
    d = root / str(n)
    d.mkdir()
    cfg = {"seed": seed, "strategy": {"name": algorithm, "num_rounds": 3}, "audit": {"prefix_len": 30},
           "model": {"name": "tiny"}, "task": {"name": "dialog"}}
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    if not unfinished:  # a job that crashed has a config but no summary: it is left out
        curves = {"mr_intra": [[0, 0.0], [3, mr_intra]], "utility": [[0, 0.1], [3, 0.2]]}
        (d / "summary.json").write_text(json.dumps({"curves": curves}))


def test_tables_group_final_round_by_the_varied_factor_only(tmp_path):
    _job(tmp_path, 0, "fedavg", 0, 0.10)
    _job(tmp_path, 1, "fedavg", 1, 0.20)
    _job(tmp_path, 2, "fedprox", 0, 0.30)
    _job(tmp_path, 3, "fedprox", 1, 0.50, unfinished=True)
    out = write_sweep_report(tmp_path)
    tables = json.loads((tmp_path / "sweep_tables.json").read_text())
    assert set(tables) == {"algorithm"}  # seeds are replicates, not a table; nothing else varies
    fedavg, fedprox = tables["algorithm"]["fedavg"], tables["algorithm"]["fedprox"]
    assert fedavg["mr_intra"] == pytest.approx([0.15, 0.05, 2])
    assert fedprox["mr_intra"] == pytest.approx([0.30, 0.0, 1])
    text = out.read_text()
    assert "# Sweep" in text and "3 runs" in text and "| fedavg | 0.15 ± 0.05 (n=2)" in text


def test_no_varied_factor_says_so(tmp_path):
    _job(tmp_path, 0, "fedavg", 0, 0.1)
    assert sweep_tables([]) == {}
    assert "No factor varies" in write_sweep_report(tmp_path).read_text()
