"""The client-level estimate from canary clients (docs/spec.md §10): the ε of two Gaussians, one round of the
Gaussian mechanism against its analytic ε, the estimate read against the ε of the mechanism it estimates (a halved
noise flagged, a statistic the clients' updates dominate reported saturated), and canary clients in the real Flower
simulation: sampled, clipped and noised like the real clients into a release of their own, kept on disk only as its
projections unless asked, leaving the global model bit for bit, the real clients' figures and budget as they are
without canaries; both empirical figures 0 at round 0 and never above the accountant's ε."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from fedmem.audit.canary_clients import MAX_EPSILON, estimate, gaussian_pair_epsilon
from fedmem.cli import run_experiment
from fedmem.config.experiment import from_dict
from fedmem.engine.directions import unit_direction
from fedmem.common.accounting import mechanism_epsilon
from fedmem.federation.privacy import DefenseConfig, privacy_budget
from tests.conftest import report_schema_errors


def _analytic(sigma: float, delta: float = 1e-5) -> float:
    """dp-accounting's ε of the Gaussian mechanism with noise multiplier ``sigma``: an independent computation."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(sigma))
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0, 4.0])
def test_two_gaussians_of_one_variance_are_the_gaussian_mechanism(mu):
    assert gaussian_pair_epsilon((0.0, 1.0), (mu, 1.0), 1e-5) == pytest.approx(_analytic(1 / mu), rel=1e-6)
    assert gaussian_pair_epsilon((3.0, 2.0), (3.0 + 2 * mu, 2.0), 1e-5) == pytest.approx(_analytic(1 / mu), rel=1e-6)
    wider = gaussian_pair_epsilon((0.0, 1.0), (mu, 1.2), 1e-5)
    assert wider > _analytic(1 / mu)  # a variance that differs tells the two apart too
    assert gaussian_pair_epsilon((0.0, 1.0), (0.0, 1.0), 1e-5) == 0.0
    assert gaussian_pair_epsilon((0.0, 1.0), (1e4, 1.0), 1e-5) == MAX_EPSILON  # no noise: unbounded


def test_one_round_of_the_gaussian_mechanism_gives_about_its_epsilon():
    """The release of one round: k canaries of norm 1 along the run's directions plus N(0, I), in d = 100,000
    dimensions. A canary is then one client of the Gaussian mechanism with multiplier 1 (add or remove one update of
    norm 1), whose ε dp-accounting computes (4.38 at δ = 1e-5). From k = 1,000 inserted and 1,000 unseen directions
    either fit is within 15% of it: the shift between the two sets is estimated to ±4.5% (one sd), which moves ε by
    about ±5.5%; the separate fit's variance ratio adds its own error."""
    d, k = 100_000, 1000
    directions = np.stack([unit_direction(7, j, d) for j in range(2 * k)])
    release = directions[:k].sum(0) + np.random.default_rng(7).standard_normal(d)
    cosines = directions @ release / np.linalg.norm(release)
    for fit in ("pooled", "separate"):
        assert estimate(cosines[:k], cosines[k:], 1e-5, fit) == pytest.approx(_analytic(1.0), rel=0.15)
    assert estimate(cosines[k:], cosines[:k], 1e-5, "pooled") == 0.0  # a shift the wrong way shows nothing


def test_canary_clients_that_could_not_be_run_as_real_clients_are_refused(compose):
    canaries = ["data.audit_canary_clients=4", "audit.methods=[canary_clients]"]
    for extra, message in (
            (["defense=dp", "defense.clipping=adaptive", "defense.noise_multiplier=0.1",
              "defense.clipped_count_stddev=1.0"], "defense.clipping=adaptive"),
            (["strategy=fedadam"], "strategy=fedadam"),
            (["strategy=centralized"], "centralized"),
            (["data.num_clients=3", "strategy.fraction_train=0.7"], "k m / N must be whole")):
        with pytest.raises(ValueError, match=message):
            from_dict(compose(*canaries, *extra))
    with pytest.raises(ValueError, match="data.audit_canary_clients=0: set it to 2 or more"):
        from_dict(compose("audit.methods=[canary_clients]"))
    from_dict(compose(*canaries, "data.num_clients=3", "data.audit_canary_clients=6", "strategy.fraction_train=0.7",
                      "strategy.min_train_nodes=2"))  # 2 of 3 clients a round: 4 of the 6 canaries


# ---------------------------------------------------------------- read against the mechanism's ε


def _simulated_audit(tmp_path, z_drawn: float, z_said: float, updates: float, rounds: int = 1,
                     d: int = 20_000, k: int = 32, unseen: int = 64, kept: int = 96) -> dict:
    """The method's section after ``rounds`` rounds of a canary release simulated as the server makes it, kept as
    the server keeps it (``RunArchive.save_canary_release``): 2 real clients whose summed update projects onto a
    random direction with standard deviation ``updates`` times the noise's, k canaries of norm C along their
    directions, and Gaussian noise drawn at multiplier ``z_drawn`` while the kept scale says ``z_said`` (a release
    that carries less noise than configured, when they differ); the release kept along ``kept`` directions."""
    from fedmem.audit.base import AuditedModel, AuditPool
    from fedmem.audit.canary_clients import CanaryClients, CanaryClientsConfig
    from fedmem.engine.config import Decoding
    from fedmem.experiment.archive import RunArchive
    from fedmem.federation.canary_clients import release_scale

    C, real = 1.0, 2
    rng = np.random.default_rng(11)
    archive = RunArchive(tmp_path, seed=3, directions=kept)
    said = release_scale(DefenseConfig(name="dp", noise_multiplier=z_said), C, real, real, k)
    directions = np.stack([unit_direction(3, j, d) for j in range(k)])
    for r in range(1, rounds + 1):
        noise_sd = said["noise_sd"] * z_drawn / z_said
        change = rng.standard_normal(d) * noise_sd * (1 + updates ** 2) ** 0.5 if updates else \
            rng.standard_normal(d) * noise_sd  # the clients' summed update, as random as the noise, plus the noise
        change += directions.sum(0) * said["canary_norm"]
        archive.save_canary_release(r, {"w": torch.from_numpy(change)}, {"w": torch.zeros(d, dtype=torch.float64)},
                                    {**said, "sampling_rate": 1.0})
    pool = AuditPool(train={0: []}, test={0: []}, train_sizes={0: 1}, tokenizer=None, decoding=Decoding(),
                     prefix_len=1, prompt_header=(), seed=3, ground_truth={"canary_clients": {"count": k}})
    method = CanaryClients(CanaryClientsConfig(unseen=unseen, delta=1e-5), pool)
    return method.audit(AuditedModel(pool=pool, round=rounds, model=None, archive=archive, budget=None))


def test_a_release_with_half_the_configured_noise_is_flagged_and_the_configured_noise_is_not(tmp_path):
    """One round at multiplier 1 (the mechanism's ε 4.38 for one canary added or removed): the estimate from 32
    canaries and 64 unseen directions brackets it; the same release drawn with half the noise gives about the ε of
    multiplier 1/2 (10.4), whose interval lies wholly above 4.38: an alert."""
    right = _simulated_audit(tmp_path / "right", 1.0, 1.0, updates=0)
    assert right["headline"]["epsilon_mechanism"] == pytest.approx(mechanism_epsilon([1.0], 1.0, 1e-5))
    assert right["readings"] == {"final": "read", "every_round": "read"} and "alert" not in right
    lo, hi = right["headline"]["ratio_final_ci95"]
    assert lo < 1 < hi
    halved = _simulated_audit(tmp_path / "halved", 0.5, 1.0, updates=0)
    assert halved["readings"]["final"] == "above the mechanism"
    assert halved["headline"]["ratio_final_ci95"][0] > 1
    assert "less noise than configured" in halved["alert"]


def test_a_statistic_the_clients_updates_dominate_is_saturated_with_no_ratio(tmp_path):
    """The clients' update spreads the unseen directions twice as much as the noise does (the noise is a fifth of
    the null's variance): the estimate reads the updates, as it would without DP, and no ratio is given."""
    section = _simulated_audit(tmp_path, 1.0, 1.0, updates=2.0)
    assert section["headline"]["noise_share_final"] == pytest.approx(0.2, abs=0.08)
    assert section["readings"]["final"] == "saturated" and section["headline"]["ratio_final"] is None
    assert section["headline"]["ratio_final_ci95"] is None and "alert" not in section


def test_a_reaudit_asking_for_more_directions_than_the_run_kept_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"audit.canary_clients.unseen=100: the run kept its canary releases along "
                                         r"96 directions, 32 of them its canaries: set it to at most 64"):
        _simulated_audit(tmp_path, 1.0, 1.0, updates=0, unseen=100)


# ---------------------------------------------------------------- through the real Flower simulation

C = 0.05
RUNS = {  # name -> (overrides, rounds)
    "z0.5": (["defense=dp", "defense.noise_multiplier=0.5", "audit.canary_clients.keep_release=true"], 1),
    "z2": (["defense=dp", "defense.noise_multiplier=2.0"], 2),
    "z8": (["defense=dp", "defense.noise_multiplier=8.0"], 1),
    "none": ([], 1),
    "z0.5 alone": (["defense=dp", "defense.noise_multiplier=0.5", "data.audit_canary_clients=0",
                    "audit.methods=[utility,one_run]"], 1),
}
KEPT = {"z0.5"}  # the runs that write their canary release beside the model (audit.canary_clients.keep_release)


@pytest.fixture(scope="module")
def canary_runs(tmp_path_factory, cache_dir):
    """Each run built once, when a test first asks for it: 2 real clients and 32 canary clients (all sampled every
    round), 32 audit canaries, both privacy audits."""
    from fedmem.config.compose import compose_dict
    from tests.conftest import FAST

    built = {}

    def get(name: str) -> Path:
        if name not in built:
            extra, rounds = RUNS[name]
            d = compose_dict([*FAST, f"cache_dir={cache_dir}", "data.audit_canary_clients=32", "data.audit_canaries=32",
                              "audit.one_run.k_plus=4", "audit.one_run.k_minus=4", f"defense.clipping_norm={C}",
                              "audit.methods=[utility,one_run,canary_clients]", f"strategy.num_rounds={rounds}",
                              *extra])
            built[name] = Path(run_experiment(d, str(tmp_path_factory.mktemp(name.replace(" ", "-")))))
        return built[name]

    return get


def _report(run: Path, r: int) -> dict:
    return json.loads((run / f"round_{r}" / "report.json").read_text())


def _adapter(run: Path, r: int, folder: str = "adapter") -> dict:
    return load_file(str(run / f"round_{r}" / folder / "adapter_model.safetensors"))


def _change(run: Path, r: int, folder: str = "adapter") -> np.ndarray:
    """Round r's change from round r - 1's global adapter: of the global adapter, or of the round's canary release
    (``folder="canary_release"``)."""
    a, b = _adapter(run, r - 1), _adapter(run, r, folder)
    return torch.cat([(b[k].double() - a[k].double()).flatten() for k in sorted(a)]).numpy()


@pytest.mark.parametrize("name", ["z0.5", "z2", "z8"])
def test_empirical_epsilons_stay_under_the_mechanisms_and_are_0_before_training(canary_runs, name):
    """Each estimate beside the exact ε of the mechanism it estimates (2 real clients and the 32 canaries all sampled:
    multiplier z for one canary, every round) and the accountant's budget, which counts the canary release as a
    second release of every round where the run keeps it on disk; no alert."""
    run = canary_runs(name)
    z = float(RUNS[name][0][1].split("=")[1])
    assert _report(run, 0)["audit"]["one_run"]["headline"]["epsilon"] == 0.0
    assert _report(run, 0)["audit"]["canary_clients"]["headline"]["epsilon_final"] == 0.0
    for r in range(1, RUNS[name][1] + 1):
        report = _report(run, r)
        accountant = report["defense"]["dp"]["epsilon"]
        # the real clients' budget: 2 clients, both sampled, as without canaries; twice the releases where kept
        releases = 2 if name in KEPT else 1
        assert accountant == pytest.approx(privacy_budget(DefenseConfig(name="dp", noise_multiplier=z),
                                                          [2] * r * releases, 2, 2)["epsilon"])
        assert report["defense"]["dp"].get("releases_per_round", 1) == releases
        assert report["audit"]["one_run"]["headline"]["epsilon"] <= accountant
        section = report["audit"]["canary_clients"]
        h = section["headline"]
        assert h["epsilon_mechanism"] == pytest.approx(mechanism_epsilon([z] * r, 1.0, 1e-5), rel=1e-9)
        assert h["epsilon_accountant"] == accountant and "alert" not in section
        for threat in ("final", "every_round"):
            assert 0 <= h[f"epsilon_{threat}_ci95"][0] <= h["epsilon_mechanism"]
            assert section["readings"][threat] in ("read", "saturated")
            assert (h[f"ratio_{threat}"] is None) == (section["readings"][threat] == "saturated")
        assert report["participation"]["trained"] == [0, 1] and [t["client"] for t in report["train"]] == [0, 1]
        assert report_schema_errors(report) == []
        assert (run / f"round_{r}" / "canary_release").exists() == (name in KEPT)  # the second copy only if asked


def test_canaries_are_clipped_to_C_and_the_real_clients_keep_their_noise_and_share(canary_runs):
    """z = 0.5, C = 0.05, 2 real clients: the canary release gets N(0, (zC/2)²) per weight, as the global model does,
    and each of the 32 canaries, sent at 10 C, adds C/2 along its own direction after Flower's clipping. The global
    model, which no canary reaches, shows none of them."""
    run = canary_runs("z0.5")
    release, model = _change(run, 1, "canary_release"), _change(run, 1)
    assert float(release.std()) == pytest.approx(0.5 * C / 2, rel=0.03)
    assert float(model.std()) == pytest.approx(0.5 * C / 2, rel=0.03)
    along = np.array([unit_direction(0, j, len(release)) @ release for j in range(64)])
    assert along[:32].mean() == pytest.approx(C / 2, abs=0.008)  # noise along a direction: sd zC/2, over 32: 0.0022
    assert abs(along[32:].mean()) < 0.008  # never inserted
    in_model = np.array([unit_direction(0, j, len(model)) @ model for j in range(32)])
    assert abs(in_model.mean()) < 0.008
    # the two releases' noise are draws apart: the model's change is its noise n1 (the real updates are far smaller
    # per weight), the releases' difference n2 - n1 plus the canaries, so the two correlate at -1/sqrt(2); one draw
    # for both would leave the canaries alone in the difference, uncorrelated with the model
    assert float(np.corrcoef(release - model, model)[0, 1]) == pytest.approx(-2 ** -0.5, abs=0.05)


def test_the_global_model_is_the_run_without_canary_clients(canary_runs):
    """The canary clients change nothing the real clients' figures are read from: the same seeded DP run without
    them releases the same global adapter, bit for bit, and the same utility."""
    with_canaries, alone = canary_runs("z0.5"), canary_runs("z0.5 alone")
    for r in (0, 1):
        a, b = _adapter(with_canaries, r), _adapter(alone, r)
        assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
        assert _report(with_canaries, r)["audit"]["utility"]["headline"] == \
            _report(alone, r)["audit"]["utility"]["headline"]
    assert not (alone / "round_1" / "canary_release").exists()


def test_without_dp_a_canary_adds_the_median_real_update_over_the_real_clients(canary_runs):
    """Read from what the run kept of its canary release: the change along each direction (the release itself is
    not on disk)."""
    run = canary_runs("none")
    report = _report(run, 1)
    median = float(np.median([t["update_norm"] for t in report["train"]]))
    kept = json.loads((run / "round_1" / "canary_projections.json").read_text())
    assert kept["noise_sd"] == 0 and kept["multiplier"] is None and len(kept["dots"]) == 32 + 64
    assert np.array(kept["dots"][:32]) == pytest.approx(median / 2, rel=0.1)
    assert not (run / "round_1" / "canary_release").exists()
    model = _change(run, 1)
    assert np.abs([unit_direction(0, j, len(model)) @ model for j in range(32)]).max() < median / 20
    section = report["audit"]["canary_clients"]
    assert section["headline"]["epsilon_final"] > 100  # no noise hides a canary
    assert section["headline"]["epsilon_mechanism"] is None and set(section["readings"].values()) == {"no noise"}
    assert [t["client"] for t in report["train"]] == [0, 1]
    assert "canary_client_cosines.png" in (run / "round_1" / "report.md").read_text()


def test_a_reaudit_of_the_last_round_alone_reads_the_earlier_rounds_back(canary_runs):
    from fedmem.experiment.reaudit import prepare_reaudit, reaudit

    run = canary_runs("z2")
    trained = _report(run, 2)["audit"]["canary_clients"]
    assert trained["headline"]["epsilon_final"] != trained["headline"]["epsilon_every_round"]
    cfg, rounds, source = prepare_reaudit(str(run), ["audit.methods=[canary_clients]"], "2")
    again = _report(reaudit(cfg, rounds, source, []), 2)["audit"]["canary_clients"]
    assert again["headline"] == trained["headline"] and again["canaries"] == trained["canaries"]
