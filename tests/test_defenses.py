"""Defenses: DP-FedAvg through Flower's wrappers (what crosses the wire is clipped and noised, the budget is the
accountant's), deduplication of each client's training data, and the frontier sweep's table and plot."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from fedmem.cli import run_experiment
from fedmem.config.experiment import from_dict
from fedmem.data.dedup import deduplicate, exact_duplicates, near_duplicates
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.federation.privacy import DefenseConfig, check_defense, privacy_budget
from fedmem.reports.pages import _defense_lines
from fedmem.reports.sweep import defense_label, write_sweep_report
from tests.conftest import report_schema_errors
from tests.helpers import sweep_job

# ---------------------------------------------------------------- the privacy budget


def test_one_round_is_the_gaussian_mechanisms_exact_epsilon_below_the_rdp_accountants():
    """dp-accounting's RDP test: a Gaussian mechanism of noise multiplier 4.530877117 (std over sensitivity) is
    (1, 1e-6)-DP by RDP. fedmem's mechanism over all clients (no sampling) has sensitivity 2C under replace-one, so
    Flower's multiplier z = 2 * 4.530877117 is that mechanism; its exact ε (the privacy-loss distribution of the one
    Gaussian, dp-accounting's PLD) is smaller, and is what fedmem reports."""
    import dp_accounting

    dp = DefenseConfig(name="dp", noise_multiplier=2 * 4.530877117, delta=1e-6)
    pld = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, 1e-5)
    pld.compose(dp_accounting.GaussianDpEvent(4.530877117))
    eps = privacy_budget(dp, [5], sampled=5, population=5)["epsilon"]
    assert eps == pytest.approx(pld.get_epsilon(1e-6), rel=1e-3) and eps < 0.95


def test_epsilon_composes_over_rounds_exactly_and_sampling_never_costs_more():
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    dp = DefenseConfig(name="dp", noise_multiplier=1.3, delta=1e-5)
    # T rounds without sampling are exactly one Gaussian of multiplier (z/2)/sqrt(T): dp-accounting's PLD of it
    pld = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, 1e-5)
    pld.compose(dp_accounting.GaussianDpEvent(0.65 / math.sqrt(7)))
    exact = privacy_budget(dp, [4] * 7, 4, 4)
    assert exact["epsilon"] == pytest.approx(pld.get_epsilon(1e-5), rel=1e-3)
    assert exact["accountant"].startswith("exact")
    # ... which RDP overstates (its smallest order is 1.1)
    rdp = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    rdp.compose(dp_accounting.GaussianDpEvent(0.65 / math.sqrt(7)))
    assert exact["epsilon"] < rdp.get_epsilon(1e-5)
    eps = [privacy_budget(dp, [4] * t, 4, 4)["epsilon"] for t in range(0, 5)]
    assert eps[0] == 0 and all(a < b for a, b in zip(eps, eps[1:]))
    for noise in (0.05, 1.0, 4.0):  # sampling 10 of 100 clients: amplified where the bound allows, never worse
        d = DefenseConfig(name="dp", noise_multiplier=noise)
        sampled, full = privacy_budget(d, [10] * 10, 10, 100), privacy_budget(d, [100] * 10, 100, 100)
        assert sampled["epsilon"] <= full["epsilon"] and sampled["sampling_rate"] == 0.1
    assert privacy_budget(DefenseConfig(name="dp", noise_multiplier=4.0), [10] * 10, 10, 100)["epsilon"] < \
        0.5 * privacy_budget(DefenseConfig(name="dp", noise_multiplier=4.0), [100] * 10, 100, 100)["epsilon"]


@pytest.mark.parametrize("z, rounds, relation, copies, epsilon", [
    (0.1, 3, "add_remove", 1, 223), (0.1, 3, "replace_one", 1, 747), (1.0, 3, "add_remove", 1, 8.39),
    (1.0, 3, "replace_one", 1, 20.1), (1.0, 3, "replace_one", 2, 32.2),
])
def test_the_mechanisms_epsilon_gives_the_specs_worked_values(z, rounds, relation, copies, epsilon):
    """docs/spec.md §10's worked values (δ = 1e-5, every client in every round): the composed Gaussian's ε for one
    client added or removed (sensitivity C), replaced (2C), and replaced with a second noisy copy of every round's
    sum released beside the model (twice the rounds)."""
    from fedmem.common.accounting import mechanism_epsilon

    if relation == "add_remove":
        assert mechanism_epsilon([z] * rounds * copies, 1.0, 1e-5) == pytest.approx(epsilon, rel=2e-3)
    else:
        dp = DefenseConfig(name="dp", noise_multiplier=z)
        assert privacy_budget(dp, [3] * rounds * copies, 3, 3)["epsilon"] == pytest.approx(epsilon, rel=2e-3)


def test_the_mechanisms_epsilon_with_sampling_is_dp_accountings_pld_and_never_above_the_unsampled():
    import dp_accounting
    from fedmem.common.accounting import mechanism_epsilon

    pld = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    pld.compose(dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0)), 10)
    assert mechanism_epsilon([1.0] * 10, 0.1, 1e-5) == pytest.approx(pld.get_epsilon(1e-5))
    assert mechanism_epsilon([1.0] * 10, 0.1, 1e-5) < 0.2 * mechanism_epsilon([1.0] * 10, 1.0, 1e-5)
    assert mechanism_epsilon([0.01] * 3, 0.5, 1e-5) <= mechanism_epsilon([0.01] * 3, 1.0, 1e-5)


def test_flowers_own_accountant_prints_the_same_run_a_smaller_epsilon():
    """Side by side with Flower 1.42's ``RdpAccountant`` (fixed-size sampling without replacement, which it pairs
    with the replace-one relation): Flower composes ``GaussianDpEvent(z)``, as if replacing one client moved the sum
    of clipped updates by C; it moves it by up to 2C, so fedmem composes z/2 (docs/spec.md §9). Given z/2, Flower's
    accountant prints exactly fedmem's figure where fedmem's is the sampled RDP bound (and never less where the
    exact bound is tighter); given the run's own z it prints a smaller one."""
    from flwr.supercore.privacy_accounting import (
        GaussianPrivacyEvent,
        NeighboringRelation,
        PrivacyConfig,
        SamplingMethod,
    )
    from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

    def flower(z: float, rounds: int, sampled: int, population: int) -> float:
        accountant = RdpAccountant(PrivacyConfig(1e-5, population, NeighboringRelation.REPLACE_ONE,
                                                 SamplingMethod.WITHOUT_REPLACEMENT))
        accountant.compose(GaussianPrivacyEvent(z, sampled, population), rounds)
        return accountant.get_epsilon(1e-5)

    for z, rounds, sampled, population in ((4.0, 10, 10, 100), (8.0, 3, 3, 3), (2.0, 50, 20, 1000)):
        ours = privacy_budget(DefenseConfig(name="dp", noise_multiplier=z), [sampled] * rounds, sampled, population)
        if ours["accountant"].startswith("RDP"):
            assert ours["epsilon"] == pytest.approx(flower(z / 2, rounds, sampled, population), rel=1e-9)
        else:
            assert ours["epsilon"] <= flower(z / 2, rounds, sampled, population)
        assert flower(z, rounds, sampled, population) < 0.6 * ours["epsilon"]


def test_a_round_that_averages_fewer_replies_is_accounted_as_averaged():
    """Flower's noise is calibrated to the m sampled clients: a round that averages m' < m replies has z m'/m noise
    on its sum, and is composed so: exactly one Gaussian whose 1/multiplier² is the rounds' sum (here against
    dp-accounting's Gaussian mechanism directly)."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    dp = DefenseConfig(name="dp", noise_multiplier=2.0, delta=1e-5)
    full, short = privacy_budget(dp, [4, 4, 4], 4, 4), privacy_budget(dp, [4, 2, 4], 4, 4)
    rounds = [2.0 / 2, 2.0 / 2, 2.0 * 2 / 4 / 2]  # each round's multiplier over the replace-one sensitivity
    assert short["epsilon"] == pytest.approx(get_epsilon_gaussian(sum(z ** -2 for z in rounds) ** -0.5, 1e-5),
                                             rel=1e-9)
    assert short["epsilon"] > full["epsilon"]
    assert short["averaged"] == [4, 2, 4]
    adaptive = DefenseConfig(name="dp", clipping="adaptive", noise_multiplier=0.5, clipped_count_stddev=1.0)
    assert privacy_budget(adaptive, [4], 4, 4)["epsilon"] == pytest.approx(
        privacy_budget(DefenseConfig(name="dp", noise_multiplier=0.5), [4], 4, 4)["epsilon"])  # z in all, at m
    assert privacy_budget(adaptive, [3], 4, 4)["epsilon"] > privacy_budget(adaptive, [4], 4, 4)["epsilon"]


@pytest.mark.parametrize("strategy", ["fedavgm", "fedadam", "fedyogi"])
def test_dp_around_a_server_optimizer_is_refused(compose, strategy):
    with pytest.raises(ValueError, match=f"defense=dp with strategy={strategy}: its server optimizer builds its state "
                                         "from the clients' un-noised average"):
        from_dict(compose(f"strategy={strategy}", "defense=dp"))
    from_dict(compose("strategy=fedprox", "defense=dp"))  # FedAvg's aggregation: the wrapper's noise covers it


def test_a_budget_that_cannot_be_computed_is_refused_in_one_line(compose):
    with pytest.raises(ValueError, match="defense.noise_multiplier must be > 0"):
        DefenseConfig(name="dp", noise_multiplier=0.0)
    adaptive = DefenseConfig(name="dp", clipping="adaptive", noise_multiplier=0.5)
    with pytest.raises(ValueError, match="clipped_count_stddev above 0.25"):
        check_defense(adaptive, sampled=3, population=3, rounds=2)  # Flower's default stddev: 3/20
    with pytest.raises(ValueError, match="not below 1/3 clients"):
        check_defense(DefenseConfig(name="dp", delta=0.5), 3, 3, 2)
    with pytest.raises(ValueError, match="centralized"):
        from_dict(compose("strategy=centralized", "defense=dp"))
    with pytest.raises(ValueError, match="defense.side"):
        from_dict(compose("defense=dp", "defense.side=both"))
    check_defense(DefenseConfig(name="dp", clipping="adaptive", noise_multiplier=0.5, clipped_count_stddev=1.0), 3, 3, 2)


# ---------------------------------------------------------------- DP through the real Flower simulation


def _delta(run_dir) -> torch.Tensor:
    """The change of the global adapter in round 1: what the server released."""
    a = load_file(str(run_dir / "round_0" / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(run_dir / "round_1" / "adapter" / "adapter_model.safetensors"))
    return torch.cat([(b[k].double() - a[k].double()).flatten() for k in sorted(a)])


@pytest.fixture(scope="module")
def dp_runs(tmp_path_factory, cache_dir):
    """Two DP runs of 2 clients x 1 round through the Flower simulation: server-side fixed clipping with enough
    noise to measure it, and client-side adaptive clipping (Flower's mod on the clients) with almost none."""
    from fedmem.config.compose import compose_dict
    from tests.conftest import FAST

    runs = {"noise": ["defense=dp", "defense.noise_multiplier=1.0", "defense.clipping_norm=0.05"],
            "clip": ["defense=dp", "defense.noise_multiplier=0.0001", "defense.clipping_norm=0.05",
                     "defense.side=client", "defense.clipping=adaptive"]}
    return {name: run_experiment(compose_dict([*FAST, f"cache_dir={cache_dir}", *extra]),
                                 str(tmp_path_factory.mktemp(name))) for name, extra in runs.items()}


def test_the_server_adds_noise_of_the_configured_scale(dp_runs):
    """z = 1, C = 0.05, 2 clients: Flower adds N(0, (zC/2)^2) to every weight of the averaged adapter. The clipped
    average itself has norm <= C, under C / sqrt(d) per weight, so the released change's spread is the noise's."""
    delta = _delta(dp_runs["noise"])
    assert float(delta.std()) == pytest.approx(1.0 * 0.05 / 2, rel=0.02)
    report = json.loads((dp_runs["noise"] / "round_1" / "report.json").read_text())
    assert not report_schema_errors(report)
    dp = report["defense"]["dp"]
    assert dp["epsilon"] == pytest.approx(privacy_budget(DefenseConfig(name="dp", noise_multiplier=1.0), [2], 2, 2)
                                          ["epsilon"]) and dp["sampled"] == dp["population"] == 2
    assert [m["update_norm"] for m in report["train"]] == dp["update_norms"] and dp["clipped"] == 2
    assert all(m["clients"] == 1 for m in report["train"])  # equal weights, as the noise's calibration assumes


def test_client_side_clipping_bounds_what_the_clients_send(dp_runs):
    run = dp_runs["clip"]
    report = json.loads((run / "round_1" / "report.json").read_text())
    norms = report["defense"]["dp"]["update_norms"]
    assert min(norms) > 10 * 0.05  # the clients' own updates are far larger than the clipping norm ...
    # ... and the average of what they sent is within it (the noise adds about 1e-4 * 0.05 / 2 per weight)
    assert float(_delta(run).norm()) <= 0.05 * 1.01
    assert report["defense"]["dp"]["clipping"] == "adaptive" and report["defense"]["dp"]["side"] == "client"


def test_a_dp_round_that_lost_a_client_is_accounted_with_the_replies_it_averaged(compose):
    """Through the real Flower simulation: 2 clients sampled, client 1 fails in round 1, strategy.min_trained_clients=1
    lets the round count with client 0's update alone; the budget composes that round at z * 1/2."""
    from flwr.simulation import run_simulation

    from clients.client_app import make_client_app
    from fedmem.config.experiment import write_config
    from fedmem.experiment.training import client_round
    from server.server_app import make_server_app

    cfg = from_dict(compose("defense=dp", "defense.noise_multiplier=2.0", "strategy.min_trained_clients=1"))
    Path(cfg.run_dir).mkdir(parents=True)
    write_config(cfg, Path(cfg.run_dir) / "config.yaml")

    def failing_round(cfg, client, *args, **kwargs):
        if client == 1:
            raise RuntimeError("client 1 lost its connection")
        return client_round(cfg, client, *args, **kwargs)

    run_simulation(server_app=make_server_app(cfg),
                   client_app=make_client_app(str(Path(cfg.run_dir) / "config.yaml"), failing_round),
                   num_supernodes=2, backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0}})
    report = json.loads((Path(cfg.run_dir) / "round_1" / "report.json").read_text())
    dp = report["defense"]["dp"]
    assert report["participation"]["trained"] == [0] and dp["averaged"] == [1] and dp["sampled"] == 2
    assert dp["epsilon"] == pytest.approx(privacy_budget(cfg.defense, [1], 2, 2)["epsilon"])
    assert dp["epsilon"] > privacy_budget(cfg.defense, [2], 2, 2)["epsilon"]


def test_the_budget_is_on_the_console_line_the_page_and_the_summary(dp_runs):
    run = dp_runs["noise"]
    page = (run / "round_1" / "report.md").read_text()
    eps = json.loads((run / "round_1" / "report.json").read_text())["defense"]["dp"]["epsilon"]
    assert f"Privacy budget after 1 round(s): ε = {eps:.3g} at δ = 1e-05" in page
    summary = json.loads((run / "summary.json").read_text())
    assert summary["curves"]["defense/epsilon"] == [[0, 0.0], [1, pytest.approx(eps)]]


# ---------------------------------------------------------------- deduplication


def _record(i: int, text: str, tags=None) -> Record:
    return Record(id=f"r{i}", user=text, assistant="", mem_text=text, client=0, tags=tags or {})


BASE = ("the patient reports a dull pain in the lower back that started three weeks ago after lifting boxes at "
        "work and gets worse when sitting for long periods in the evening")


def test_exact_and_near_duplicates_on_a_toy_set():
    records = [_record(0, BASE), _record(1, BASE.upper().replace(" ", "  ")),  # the same text, case and spacing aside
               _record(2, BASE.replace("three", "four")),  # one word changed: a near duplicate
               _record(3, "an unrelated note about a skin rash on both arms after a new soap"),
               _record(4, BASE, {"canary": "k", "copies": 2})]
    assert exact_duplicates(records) == [1, 4]
    assert near_duplicates(records, threshold=0.7) == [1, 2, 4]
    assert near_duplicates(records, threshold=0.98) == [1, 4]  # a changed word drops five of its shingles
    fd = FederatedData([ClientSplit(train=records, test=[_record(9, BASE)])], [], {}, "toy")
    out = deduplicate(fd, "near", 0.7)
    assert [r.id for r in out.clients[0].train] == ["r0", "r3"] and len(out.clients[0].test) == 1
    assert out.ground_truth["dedup"] == {"mode": "near", "threshold": 0.7, "clients": [
        {"client": 0, "before": 5, "removed": 3, "canary_copies_removed": 1}]}
    assert deduplicate(fd, "off", 0.7) is fd
    with pytest.raises(ValueError, match="data.dedup_threshold must be in"):
        from_dict({"data": {"dedup": "near", "dedup_threshold": 0.99}})


def test_near_dedup_decides_by_the_estimate_at_and_just_below_its_threshold():
    """A pair is a near duplicate exactly when its MinHash estimate reaches the threshold: locality-sensitive hashing
    only proposes candidates, so pairs whose estimate lies at or just above the threshold are all caught (banding
    tuned to the threshold itself catches a pair at Jaccard 0.8 about 40% of the time) and pairs just below are all
    kept."""
    from fedmem.data.dedup import sketch

    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    caught = kept = 0
    for _ in range(150):
        words = list(rng.choice(vocab, size=120))
        changed = list(words)
        for i in rng.choice(120, size=int(rng.integers(1, 5)), replace=False):  # a few words changed: J near 0.8
            changed[i] = "x" + changed[i]
        a, b = " ".join(words), " ".join(changed)
        estimate = sketch(a).jaccard(sketch(b))
        found = near_duplicates([_record(0, a), _record(1, b)], threshold=0.8) == [1]
        assert found == (estimate >= 0.8), estimate
        caught += found and estimate < 0.85
        kept += not found and estimate > 0.72
    assert caught >= 10 and kept >= 10  # both sides of the threshold were tried, close to it


def test_exact_dedup_leaves_one_copy_of_every_planted_canary(compose):
    from fedmem.data import load_federated

    cfg = from_dict(compose("data.dedup=exact", "data.canary_copies=[1,4]", "data.shared_canary_copies=[4]"))
    fd = load_federated(cfg.task, cfg.data, cfg.seed)
    plain = load_federated(cfg.task, from_dict(compose("data.canary_copies=[1,4]",
                                                       "data.shared_canary_copies=[4]")).data, cfg.seed)
    for c, (split, before) in enumerate(zip(fd.clients, plain.clients)):
        copies = {}
        for r in before.train:
            if "canary" in r.tags:
                copies[r.tags["canary"]] = copies.get(r.tags["canary"], 0) + 1
        kept = [r.tags["canary"] for r in split.train if "canary" in r.tags]
        assert sorted(kept) == sorted(copies)  # one copy each, ordinary records untouched
        removed = sum(n - 1 for n in copies.values())
        assert len(split.train) == len(before.train) - removed and split.test == before.test
        assert fd.ground_truth["dedup"]["clients"][c]["canary_copies_removed"] == removed
    lines = "\n".join(_defense_lines({"dp": None, "dedup": fd.ground_truth["dedup"]}, {0: "cardiology"}))
    assert "**Deduplication** (exact)" in lines and "| cardiology | 24 |" in lines


# ---------------------------------------------------------------- the frontier sweep


def test_the_sweep_tables_each_defense_and_plots_the_frontier(compose, tmp_path):
    settings = {"none": [], "dp": ["defense=dp", "defense.noise_multiplier=0.01", "defense.clipping_norm=30"],
                "dedup": ["defense=dedup"]}
    n = 0
    for seed in (0, 1):
        for k, (name, overrides) in enumerate(settings.items()):
            config = from_dict(compose(*overrides)).to_dict()
            figures = {"utility__rouge_l": 0.2 - 0.05 * k + 0.01 * seed, "mr__excess_intra": 0.03 - 0.01 * k,
                       "mia__loss_auc": 0.6 - 0.05 * k, "exposure__exposure": 3.0 - k}
            if name == "dp":
                figures["defense__epsilon"] = 66111.8
            sweep_job(tmp_path, n, config, seed, **figures)
            n += 1
    assert defense_label({"defense.name": "dp", "defense.noise_multiplier": 0.01, "defense.clipping_norm": 30.0,
                          "defense.clipping": "adaptive", "data.dedup": "near", "data.dedup_threshold": 0.8}) == \
        "DP z=0.01 C=30 adaptive + dedup near ≥0.8"
    write_sweep_report(tmp_path)
    tables = json.loads((tmp_path / "sweep_tables.json").read_text())
    assert tables["factors"] == ["defense"]  # noise, clipping norm and dedup read as one factor, not three
    table = tables["tables"]["defense"]
    assert [r["key"]["defense"] for r in table["rows"]] == ["none", "DP z=0.01 C=30", "dedup exact"]
    assert {"defense/epsilon", "mr/excess_intra", "mia/loss_auc", "exposure/exposure", "performance"} <= \
        set(table["columns"])
    dp_row = table["rows"][1]
    assert dp_row["n"] == 2 and dp_row["figures"]["defense/epsilon"]["mean"] == pytest.approx(66111.8)
    assert dp_row["figures"]["defense/epsilon"]["lo"] is None  # a budget is computed, the same for every seed
    assert dp_row["figures"]["performance"]["mean"] == pytest.approx(0.155)
    md = (tmp_path / "sweep_report.md").read_text()
    assert "## Defense" in md and "![defense frontier](defense_frontier.png)" in md and "| 6.61e+04 |" in md
    assert (tmp_path / "defense_frontier.png").stat().st_size > 10_000


def test_the_defenses_preset_sweeps_six_settings_over_three_seeds():
    from pathlib import Path

    from fedmem.config.compose import compose_dict, conf_dir

    preset = yaml.safe_load((Path(conf_dir()) / "experiment" / "defenses.yaml").read_text())
    params = preset["hydra"]["sweeper"]["params"]
    assert params["seed"] == "0,1,2"
    for defense in params["defense"].split(","):
        cfg = from_dict(compose_dict(["experiment=defenses", f"defense={defense}"]))
        assert "exposure" in cfg.audit.methods and cfg.experiment == "defenses"
        assert (cfg.defense.name, cfg.data.dedup) in {("none", "off"), ("dp", "off"), ("none", "exact")}
    noise = sorted(from_dict(compose_dict(["experiment=defenses", f"defense=dp_{x}_noise"])).defense.noise_multiplier
                   for x in ("low", "mid", "high", "full"))
    assert len(set(noise)) == 4 and np.all(np.diff(np.log10(noise)) > 0.5) and noise[-1] == 1.0


def test_each_defense_preset_opens_with_its_command_and_lists_only_its_changes():
    from pathlib import Path

    from fedmem.config.compose import schemas

    schema = schemas()["defense"]
    for preset in sorted((Path(__file__).resolve().parents[1] / "conf" / "defense").glob("*.yaml")):
        lines = [x for x in preset.read_text().splitlines() if not x.startswith("# @package")]
        assert lines[0].startswith(f"# fedmem run defense={preset.stem}"), preset
        d = yaml.safe_load(preset.read_text())
        own = d.get("defense", d)  # a global preset (dedup) sets defense.* beside data.*
        assert [k for k, v in own.items() if k not in ("name", "defaults") and schema.get(k) == v] == [], preset
