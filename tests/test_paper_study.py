"""The paper study's report: a study directory laid out as ``make study-paper`` writes it (the runs' configs from the
real preset, their summaries with known figures), read into the paper's tables and one verdict per trend, each
verdict following its interval."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from fedmem.audit.intervals import newcombe
from fedmem.config.compose import compose_dict
from fedmem.reports.paper_study import (
    MDE_FACTOR,
    Side,
    combined,
    compare,
    first_round_above_control,
    write_study_report,
)


def test_a_trend_combines_its_comparisons_on_the_papers_mr():
    row = lambda verdict, figure="mr/intra": {"verdict": verdict, "figure": figure}  # noqa: E731
    assert combined([row("reproduced"), row("not resolvable"), row("contradicted", "mr/excess_intra")]) == "reproduced"
    assert combined([row("reproduced"), row("contradicted", "mr/inter")]) == "mixed"
    assert combined([row("not resolvable"), row("contradicted")]) == "contradicted"
    assert combined([row("consistent"), row("consistent")]) == "consistent"
    assert combined([row("not resolvable"), row("reproduced", "mr/excess_intra")]) == "not resolvable"
    assert combined([row("missing")]) == combined([]) == "missing"


def test_a_comparison_follows_its_interval():
    wide, narrow = [0.00, 0.06], [0.095, 0.105]
    above = compare(Side("a", 0.10, narrow), Side("b", 0.02, [0.015, 0.025]), "above")
    assert above["verdict"] == "reproduced" and above["ci95"] == pytest.approx(
        newcombe(0.10, narrow, 0.02, [0.015, 0.025]))
    assert compare(Side("a", 0.02, [0.015, 0.025]), Side("b", 0.10, narrow), "above")["verdict"] == "contradicted"
    unresolved = compare(Side("a", 0.03, wide), Side("b", 0.02, wide), "above")
    lo, hi = unresolved["ci95"]
    assert unresolved["verdict"] == "not resolvable" and lo < 0 < hi
    assert unresolved["detectable"] == pytest.approx(MDE_FACTOR * max(0.01 - lo, hi - 0.01))
    assert compare(Side("a", 0.03, wide), Side("b", 0.02, wide), "none")["verdict"] == "consistent"
    assert compare(Side("a", 0.10, narrow), Side("b", 0.02, [0.015, 0.025]), "none")["verdict"] == "contradicted"
    assert compare(Side("a", None, None), Side("b", 0.02, wide), "above")["verdict"] == "missing"


def _run(root, name: str, config: dict, rounds: dict[int, dict[str, tuple[float, float, float]]]) -> None:
    """A finished run as fedmem leaves it: its config and a summary with ``{round: {figure: (value, lo, hi)}}``."""
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(config))
    curves, bands = {}, {}
    for r, figures in rounds.items():
        for k, (v, lo, hi) in figures.items():
            curves.setdefault(k, []).append([r, v])
            bands.setdefault(k, []).append([r, lo, hi])
    (d / "summary.json").write_text(json.dumps({"rounds": sorted(rounds), "curves": curves, "ci95": bands}))


def _figures(intra: float, inter: float, excess: float, half: float = 0.01) -> dict:
    return {"mr/intra": (intra, max(0.0, intra - half), intra + half),
            "mr/inter": (inter, max(0.0, inter - half), inter + half),
            "mr/intra_minus_inter": (intra - inter, intra - inter - half, intra - inter + half),
            "mr/total": ((intra + inter) / 2, max(0.0, (intra + inter) / 2 - half), (intra + inter) / 2 + half),
            "mr/excess_intra": (excess, excess - 2 * half, excess + 2 * half),
            "mr/excess_inter": (0.0, -2 * half, 2 * half),
            "mr/excess_total": (excess / 2, excess / 2 - 2 * half, excess / 2 + 2 * half),
            "utility/rouge_l": (0.18, 0.16, 0.20)}


@pytest.fixture
def study(tmp_path):
    """FedAvg with an excess that appears at round 3 of 5, FedProx at two μ above FedAvg (one clearly, one within
    its interval), the centralized baseline like FedAvg, and the audit sweeps over prefix length and decoding."""
    base = compose_dict(["experiment=smollm2_paper", "data.path=corpus.jsonl"])
    runs = {"fedavg": ({"strategy": {**base["strategy"], "name": "fedavg"}}, 0.05),
            "fedprox-0.01": ({"strategy": {**base["strategy"], "name": "fedprox", "proximal_mu": 0.01}}, 0.06),
            "fedprox-0.1": ({"strategy": {**base["strategy"], "name": "fedprox", "proximal_mu": 0.1}}, 0.20),
            "centralized": ({"strategy": {**base["strategy"], "name": "centralized"}}, 0.05)}
    for name, (changes, intra) in runs.items():
        rounds = {r: _figures(intra * r / 5, 0.01, 0.08 if r >= 3 else 0.0) for r in range(6)}
        _run(tmp_path / "study", name, {**base, **changes}, rounds)
    for n, length in enumerate((10, 30, 50)):
        cfg = {**base, "audit": {**base["audit"], "prefix_len": length}}
        _run(tmp_path / "study" / "fedavg" / "audits" / "prefix_len", str(n), cfg,
             {5: _figures(0.12 - 0.002 * length, 0.01, 0.0)})
    for n, (method, intra) in enumerate((("temperature", 0.05), ("top_k", 0.05), ("top_p", 0.04), ("greedy", 0.0))):
        cfg = {**base, "audit": {**base["audit"], "decoding": {**base["audit"]["decoding"], "strategy": method}}}
        _run(tmp_path / "study" / "fedavg" / "audits" / "decoding", str(n), cfg, {5: _figures(intra, 0.01, 0.0)})
    return tmp_path / "study"


def test_the_study_report_gives_each_trend_its_verdict_and_the_papers_tables(study):
    md = write_study_report(study).read_text()
    trends = {t["trend"]: t for t in json.loads((study / "study.json").read_text())["trends"]}
    assert trends["MR_Intra above MR_Inter"]["verdict"] == "reproduced"  # 5% against 1%, intervals of ±1 point
    assert trends["no clear change from CL to FL"]["verdict"] == "consistent"  # the same figures
    assert trends["top-k and top-p decoding above temperature"]["verdict"] == "not resolvable"  # top_k = temperature
    assert trends["shorter prefixes memorize more"]["verdict"] == "reproduced"  # 10.0% at 10 against 2.0% at 50
    assert trends["FedProx above FedAvg"]["verdict"] == "reproduced"  # at μ = 0.1; μ = 0.01 within its interval
    fedprox = trends["FedProx above FedAvg"]["comparisons"]
    assert [(c["what"], c["figure"], c["verdict"]) for c in fedprox if c["figure"] == "mr/intra"] == [
        ("FedProx (μ = 0.01) − FedAvg", "mr/intra", "not resolvable"),
        ("FedProx (μ = 0.1) − FedAvg", "mr/intra", "reproduced")]
    assert trends["rounds without a clear effect"]["verdict"] == "contradicted"  # 1% at round 1, 5% at round 5
    assert trends["model size without a clear effect"]["verdict"].startswith("not measured")
    assert first_round_above_control(json.loads((study / "fedavg" / "summary.json").read_text())) == 3
    assert "FedAvg's excess MR_Intra first lies above 0 at round 3." in md
    assert "- **MR_Intra above MR_Inter** (Table 1): **reproduced**. FedAvg, last round (mr/intra_minus_inter) +4.00" \
        in md
    assert "under " in md  # an unresolved comparison says how small an effect it could have missed
    assert "The paper's Table 3 (Qwen2.5-3B; MR_Intra % / MR_Inter %): summarization: temperature 0.475 / 0.067" in md
    assert "The paper's Table 2 (Qwen2.5-3B; MR_Total % / performance): summarization: CL 0.558 / 28.46" in md
    for header in ("## Decoding (paper Table 3)", "## Prefix length (paper Table 4)", "## FedAvg round by round"):
        assert header in md
    assert "| 5 | 5.00% [4.00, 6.00] | 1.00% [0.00, 2.00] | +8.00 pts [+6.00, +10.00] | 18.00% [16.00, 20.00] |" in md


def test_make_study_paper_runs_the_preset_then_the_audit_sweeps_then_the_report(tmp_path):
    out = subprocess.run(["make", "-n", "study-paper", "STUDY=" + str(tmp_path / "s")], capture_output=True,
                         text=True, check=True).stdout
    commands = [line for line in out.splitlines() if "fedmem " in line]
    assert [c.split("fedmem ")[1].split()[0] for c in commands] == ["run"] * 4 + ["audit"] * 2 + ["study-report"]
    runs = [c for c in commands if " run " in c]
    assert all("experiment=smollm2_paper" in c for c in runs)
    assert [c.split("hydra.run.dir=")[1] for c in runs] == [str(tmp_path / "s" / n) for n in
                                                            ("fedavg", "fedprox-0.01", "fedprox-0.1", "centralized")]
    assert "audit.prefix_len=10,30,50" in commands[4] and "audit/decoding=temperature,top_k,top_p,greedy" in commands[5]
    assert all("rounds=last" in c for c in commands[4:6])
