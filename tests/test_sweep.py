"""Sweep tables (fedmem run -m, fedmem audit -m) in the shape of the paper's tables, and the experiment presets that
run the paper's studies.

The 2 x 2 sweep is real: a tiny trained run re-audited over decoding x prefix length (``fedmem audit -m``). Its
figures are zero (a tiny model this fast memorizes nothing), so the means over seeds are checked on a second sweep
made of the same real job files with the seed and the figures replaced by known numbers.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from fedmem.cli import main, run_experiment
from fedmem.config.compose import compose_dict, conf_dir
from fedmem.config.experiment import from_dict
from fedmem.reports.sweep import load_sweep, sweep_tables, write_sweep_report
from tests.conftest import FAST
from tests.helpers import sweep_job

T_975_1 = 12.706204736174698  # Student's t, 97.5% quantile, 1 degree of freedom (two seeds)
PRESETS = sorted(p.stem for p in (Path(conf_dir()) / "experiment").glob("*.yaml"))
STUDIES = {  # preset: (its swept factor, the paper's values in the paper's order), the rest as the default setting
    "paper_default": ("task", ["summarization", "dialog", "qa", "classification"]),
    "paper_decoding": ("decoding", ["temperature", "top_k", "top_p"]),
    "paper_prefix_len": ("prefix_len", [10, 30, 50, 100]),
    "paper_algorithm": ("algorithm", ["fedavg", "fedprox"]),
    "paper_rounds": ("rounds", [1, 3, 5]),
    "paper_model_size": ("model", ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "llama3.2-1b", "llama3.2-3b"]),
    "paper_cl_vs_fl": ("algorithm", ["centralized", "fedavg"]),
}
DEFAULT = {"task": "qa", "decoding": "top_k", "prefix_len": 30, "algorithm": "fedavg", "rounds": 3,
           "model": "qwen2.5-3b"}


def _factors(d: dict) -> dict:
    return {"task": d["task"]["name"], "decoding": d["audit"]["decoding"]["strategy"],
            "prefix_len": d["audit"]["prefix_len"], "algorithm": d["strategy"]["name"],
            "rounds": d["strategy"]["num_rounds"], "model": d["model"]["name"]}


# ------------------------------------------------------------------ experiment presets


@pytest.mark.parametrize("name", PRESETS)
def test_every_experiment_preset_opens_with_its_command_and_composes(name):
    lines = (Path(conf_dir()) / "experiment" / f"{name}.yaml").read_text().splitlines()
    assert lines[0] == "# @package _global_"
    study = name in STUDIES
    assert lines[1].startswith("# fedmem run -m " if study else "# fedmem run ") and f"experiment={name}" in lines[1]
    cfg = from_dict({**compose_dict([f"experiment={name}"]), "run_dir": "unused"})  # validates every section
    assert cfg.experiment == name
    if study:  # the paper's default setting, the paper's audit rules, and n = 4K prefixes per client
        assert cfg.model.name == "qwen2.5-3b" and cfg.data.source == "hf" and cfg.data.train_per_client == 27000
        assert cfg.audit.sections["mr"].n == 4000 and cfg.audit.methods == ["utility", "mr"]
        assert cfg.audit.sections["pa"].generic_source == "appendix_b"  # experiment=paper's rules underneath


def test_the_unchanged_presets_keep_their_rules():
    demo, paper = (compose_dict([f"experiment={n}"]) for n in ("offline_demo", "paper"))
    assert demo["model"]["name"] == "tiny" and demo["audit"]["pa"]["generic_source"] == "public"
    assert demo["audit"]["pearl"]["score"] == "falloff" and paper["audit"]["pearl"]["score"] == "gfd"
    assert paper["model"]["name"] == "tiny" and paper["data"]["source"] == "synthetic"  # rules only, no model


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_a_study_preset_carries_the_papers_grid_and_runs_it_with_fedmem_run_m(name, tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        params = dict(compose("config", [f"experiment={name}"], return_hydra_config=True).hydra.sweeper.params)
    assert params["seed"] == "0,1,2"  # three trials, as in the paper
    tasks = "summarization,dialog,qa" + ("" if name in ("paper_decoding", "paper_prefix_len") else ",classification")
    assert params["task"] == tasks
    # `fedmem run -m experiment=<study>` through Hydra's sweeper, one task and seed pinned on the command line (which
    # wins over the preset's sweep); each job is validated instead of trained
    jobs = []

    def dry(d, run_dir):
        from_dict({**d, "run_dir": run_dir})
        jobs.append(_factors(d) | {"seed": d["seed"], "experiment": d["experiment"]})
        return run_dir

    monkeypatch.setattr("fedmem.cli.run_experiment", dry)
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    factor, values = STUDIES[name]
    pinned = ["seed=0"] + (["task=qa"] if factor != "task" else [])
    main(["run", "-m", f"experiment={name}", *pinned, f"hydra.sweep.dir={tmp_path}"])
    assert [j[factor] for j in jobs] == values
    for j in jobs:
        assert {k: v for k, v in j.items() if k != factor} == {k: v for k, v in DEFAULT.items() if k != factor} | {
            "seed": 0, "experiment": name}
    assert "No finished run" in (tmp_path / "sweep_report.md").read_text()  # the sweep still ends with its report
    assert json.loads((tmp_path / "sweep.json").read_text())["jobs"] == len(values)  # counted as Hydra's sweeper does


# ------------------------------------------------------------------ a real 2 x 2 sweep


@pytest.fixture(scope="module")
def audited(tmp_path_factory, cache_dir, one_torch_thread):
    """A tiny centrally trained run (one epoch) re-audited over decoding x prefix length, the values given out of
    order (numerically 9 < 12, as strings "12" < "9")."""
    run_dir = tmp_path_factory.mktemp("trained")
    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "strategy=centralized", "audit.methods=[utility,mr]",
                      "audit.mr.detector.ner_workers=0"])
    run = run_experiment(d, str(run_dir))
    main(["audit", "-m", f"run={run}", "rounds=1", "name=sweep", "audit/decoding=greedy,top_k",
          "audit.prefix_len=12,9"])
    return run / "audits" / "sweep"


def test_a_real_2x2_sweep_gives_one_row_per_point_in_the_papers_order(audited):
    tables = json.loads((audited / "sweep_tables.json").read_text())
    assert tables["runs"] == 4 and tables["audit_only"] and tables["factors"] == ["decoding", "prefix_len"]
    assert list(tables["tables"]) == ["decoding", "prefix_len"]  # Table 3, then Table 4
    decoding, prefix = tables["tables"]["decoding"], tables["tables"]["prefix_len"]
    assert decoding["paper"] == "Table 3" and decoding["rows_by"] == ["prefix_len", "decoding"]
    assert [tuple(r["key"].values()) for r in decoding["rows"]] == [(9, "top_k"), (9, "greedy"), (12, "top_k"),
                                                                    (12, "greedy")]  # numbers numerically
    assert [tuple(r["key"].values()) for r in prefix["rows"]] == [("top_k", 9), ("top_k", 12), ("greedy", 9),
                                                                  ("greedy", 12)]
    # the paper's columns, then fedmem's own: the control's excess
    assert list(decoding["columns"]) == ["mr/intra", "mr/inter", "mr/intra_minus_inter", "mr/excess_intra",
                                         "mr/excess_inter", "mr/excess_own_intra", "mr/excess_other_intra",
                                         "mr/excess_other_inter", "mr/distinctive_excess_intra",
                                         "mr/distinctive_excess_inter"]
    for row in decoding["rows"]:
        (job,) = row["runs"]
        config = yaml.safe_load((audited / job / "config.yaml").read_text())
        assert (config["audit"]["prefix_len"], config["audit"]["decoding"]["strategy"]) == tuple(row["key"].values())
        summary = json.loads((audited / job / "summary.json").read_text())
        assert row["n"] == 1 and row["seeds"] == [0]
        for figure, cell in row["figures"].items():
            final_round, value = summary["curves"][figure][-1]
            assert cell["mean"] == pytest.approx(value) and cell["n"] == 1
            own = {r: [lo, hi] for r, lo, hi in (summary.get("ci95") or {}).get(figure, [])}.get(final_round)
            # one run: its own sampling interval where summary.json has one, else none (never a made-up one)
            expected = ("sampling95", own) if own else (None, [None, None])
            assert (cell["interval"], [cell["lo"], cell["hi"]]) == expected
    import fedmem.api as fm  # the same tables as DataFrames, for a notebook

    frame = fm.sweep_tables(audited)["decoding"]
    assert list(frame["decoding"]) == ["top_k", "greedy", "top_k", "greedy"] and list(frame["n"]) == [1, 1, 1, 1]
    assert frame["mr/intra"].tolist() == pytest.approx([r["figures"]["mr/intra"]["mean"] for r in decoding["rows"]])
    md = (audited / "sweep_report.md").read_text()
    assert "## Decoding (paper Table 3)" in md and "## Prefix length (paper Table 4)" in md and "Audit only" in md
    assert "| Prefix length | Decoding | n | MR_Intra | MR_Inter | MR_Intra − MR_Inter |" in md
    rows = [line for line in md.splitlines() if re.match(r"\| (9|12) \| ", line)]
    assert [line.split(" | ")[:3] for line in rows] == [["| 9", "top_k", "1"], ["| 9", "greedy", "1"],
                                                        ["| 12", "top_k", "1"], ["| 12", "greedy", "1"]]
    cells = [c for line in rows for c in line.split(" | ")[3:5]]
    assert all(re.fullmatch(r"\d+\.\d\d%( \[\d+\.\d\d, \d+\.\d\d\])?", c) for c in cells)


def _reseed(src: Path, dst: Path, seed: int, values: dict[str, float], ci95: dict | None = None) -> None:
    """A copy of a real job with another seed and known final figures."""
    dst.mkdir(parents=True)
    config = yaml.safe_load((src / "config.yaml").read_text())
    (dst / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed}, sort_keys=False))
    summary = json.loads((src / "summary.json").read_text())
    for figure, value in values.items():
        summary["curves"][figure][-1][1] = value
    if ci95:
        summary["ci95"] = {k: [[summary["curves"][k][-1][0], *v]] for k, v in ci95.items()}
    (dst / "summary.json").write_text(json.dumps(summary))


def test_the_2x2_sweep_over_two_seeds_gives_means_with_t_intervals(audited, tmp_path):
    by_point = {}
    for job in ("0", "1", "2", "3"):
        config = yaml.safe_load((audited / job / "config.yaml").read_text())
        by_point[(config["audit"]["decoding"]["strategy"], config["audit"]["prefix_len"])] = audited / job
    intra = {("greedy", 12): (0.10, 0.20), ("greedy", 9): (0.30, 0.40), ("top_k", 12): (0.0, 0.02),
             ("top_k", 9): (0.05, 0.05)}
    n = 0
    for point, job in by_point.items():
        for seed, value in enumerate(intra[point]):
            diff = -0.02 if seed == 0 else 0.04
            if point == ("greedy", 9) and seed == 1:  # this job failed: a config, no summary
                (tmp_path / str(n)).mkdir()
                shutil.copy(job / "config.yaml", tmp_path / str(n) / "config.yaml")
            else:
                ci = {"mr/intra": [0.25, 0.36]} if point == ("greedy", 9) else None
                _reseed(job, tmp_path / str(n), seed, {"mr/intra": value, "mr/intra_minus_inter": diff}, ci)
            n += 1
    out = write_sweep_report(tmp_path)
    tables = json.loads((tmp_path / "sweep_tables.json").read_text())
    assert tables["runs"] == 7 and tables["unfinished"] == 1 and tables["factors"] == ["decoding", "prefix_len"]
    rows = tables["tables"]["decoding"]["rows"]
    assert [(tuple(r["key"].values()), r["n"], sorted(r["seeds"])) for r in rows] == [
        ((9, "top_k"), 2, [0, 1]), ((9, "greedy"), 1, [0]), ((12, "top_k"), 2, [0, 1]), ((12, "greedy"), 2, [0, 1])]
    cell = {tuple(r["key"].values()): r["figures"] for r in rows}
    assert cell[(12, "greedy")]["mr/intra"] == pytest.approx(  # mean 0.15, half-width t * sd / sqrt(2), clipped at 0
        {"mean": 0.15, "lo": 0.0, "hi": 0.15 + T_975_1 * 0.05, "n": 2, "interval": "t95_seeds"})
    equal = cell[(9, "top_k")]["mr/intra"]  # equal seeds: no spread, so the widest of the runs' own intervals
    assert equal["mean"] == pytest.approx(0.05) and equal["interval"] == "widest_run95" and equal["hi"] > equal["lo"]
    assert cell[(12, "top_k")]["mr/intra_minus_inter"] == pytest.approx(  # a difference: not clipped at 0
        {"mean": 0.01, "lo": 0.01 - T_975_1 * 0.03, "hi": 0.01 + T_975_1 * 0.03, "n": 2, "interval": "t95_seeds"})
    assert cell[(9, "greedy")]["mr/intra"] == pytest.approx(  # one seed left: that run's own interval
        {"mean": 0.30, "lo": 0.25, "hi": 0.36, "n": 1, "interval": "sampling95"})
    assert cell[(9, "greedy")]["mr/inter"]["interval"] is None  # the run reports none for MR_Inter
    md = out.read_text()
    assert "1 job(s) have no summary.json" in md
    assert "| 12 | greedy | 2 | 15.00% [0.00, 78.53] |" in md
    assert "| 9 | greedy | 1 | 30.00% [25.00, 36.00] | 0.00% |" in md
    (row,) = [line for line in md.splitlines() if line.startswith("| 12 | top_k | 2 | 1.00% [0.00, 13.71] |")]
    inter = row.split(" | ")[4]  # both seeds 0: the widest run interval, not a point
    assert inter.startswith("0.00% [0.00, ") and inter != "0.00% [0.00, 0.00]"
    assert "| +1.00 pts [-37.12, +39.12] |" in row
    assert sweep_tables(load_sweep(tmp_path)) == tables["tables"]


# ------------------------------------------------------------------ table shapes from composed configs


@pytest.fixture(scope="module")
def base_config():
    return compose_dict(["experiment=paper_default"])


def _with(config: dict, **changes) -> dict:
    out = json.loads(json.dumps(config))
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = out
        for p in parents:
            node = node[p]
        node[leaf] = value
    return out


def test_model_table_puts_tasks_side_by_side_like_table_13(base_config, tmp_path):
    n = 0
    for model in ("llama3.2-1b", "qwen2.5-0.5b"):
        for task in ("qa", "summarization"):
            for seed in (0, 1):
                cfg = _with(base_config, model__name=model, task__name=task)
                sweep_job(tmp_path, n, cfg, seed, mr__intra=0.01 * (n + 1), mr__inter=0.0, utility__rouge_l=0.3)
                n += 1
    md = write_sweep_report(tmp_path).read_text()
    assert "| Model | n | summarization MR_Intra | summarization MR_Inter | qa MR_Intra | qa MR_Inter |" in md
    rows = [line for line in md.splitlines() if line.startswith(("| qwen", "| llama"))]
    assert [r.split(" | ")[0] for r in rows] == ["| qwen2.5-0.5b", "| llama3.2-1b"]  # the paper's model order
    assert rows[0].startswith("| qwen2.5-0.5b | 2 | 7.50% [")  # jobs 6 and 7: (0.07 + 0.08) / 2
    assert "## Task" not in md  # the task nests the model table's columns
    # each table opens with its one-line reading: the lowest and the highest row of its leading figures
    assert ("In one line: MR_Intra from 1.50% (qa llama3.2-1b) to 7.50% (summarization qwen2.5-0.5b); "
            "MR_Inter 0.00% in every row.") in md


def test_cl_vs_fl_and_a_setting_swept_on_its_own(base_config, tmp_path):
    n = 0
    for strategy in ("fedavg", "centralized"):
        for lr in (1e-4, 2e-4):
            cfg = _with(base_config, strategy__name=strategy, train__lr=lr)
            sweep_job(tmp_path, n, cfg, 0, mr__total=0.02 * (n + 1), mr__verbatim_total=0.0, utility__rouge_l=0.25)
            n += 1
    tables = sweep_tables(load_sweep(tmp_path))
    assert list(tables) == ["framework", "train.lr"]  # algorithm would repeat the framework table's rows
    fw = tables["framework"]
    assert fw["rows_by"] == ["train.lr", "framework"] and fw["paper"] == "Tables 2, 9 and 15"
    assert [tuple(r["key"].values()) for r in fw["rows"]] == [(1e-4, "CL"), (1e-4, "FL"), (2e-4, "CL"), (2e-4, "FL")]
    assert list(fw["columns"]) == ["performance", "mr/total", "mr/verbatim_total"]
    assert fw["rows"][0]["figures"]["mr/total"]["mean"] == pytest.approx(0.06)
    assert fw["rows"][0]["figures"]["performance"]["mean"] == pytest.approx(0.25)  # ROUGE-L


def test_seeds_alone_give_one_row(base_config, tmp_path):
    assert sweep_tables([]) == {}
    for seed in (0, 1, 2):
        sweep_job(tmp_path, seed, base_config, seed, mr__intra=0.1 * seed)
    md = write_sweep_report(tmp_path).read_text()
    assert "No factor varies" in md and "| dialog | 3 | 10.00% [0.00, 34.84] |" in md


def test_seeds_that_all_give_the_same_value_show_the_widest_run_interval_not_a_point(base_config, tmp_path):
    """Three seeds at exactly 0 excess: a t-interval over them would be [0, 0], which a reader takes for certainty;
    the cell shows the widest of the runs' own intervals instead, and says so."""
    own = [[-0.004, 0.004], [-0.009, 0.007], [-0.005, 0.006]]
    for seed in (0, 1, 2):
        sweep_job(tmp_path, seed, base_config, seed, ci95={"mr/excess_intra": own[seed]}, mr__excess_intra=0.0,
                  mr__intra=0.1 * seed)
    (row,) = sweep_tables(load_sweep(tmp_path))["task"]["rows"]
    assert row["figures"]["mr/excess_intra"] == {"mean": 0.0, "lo": -0.009, "hi": 0.007, "n": 3,
                                                  "interval": "widest_run95"}
    assert row["figures"]["mr/intra"]["interval"] == "t95_seeds"  # seeds that differ: the t-interval
    assert "widest of the runs' own sampling intervals" in write_sweep_report(tmp_path).read_text()


def test_the_papers_sizes_calibrate_pearl_on_at_least_100_non_members():
    d = compose_dict(["experiment=paper_default"])
    assert d["audit"]["pearl"]["nonmembers"] * d["data"]["num_clients"] >= 100 <= d["audit"]["test_per_client"] * 3
