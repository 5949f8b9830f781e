"""The record-level privacy audit in one run (docs/spec.md §10): Steinke, Nasr and Jagielski's bound against the
paper's own worked values, the guesses, the audit canaries the data plants, and the audit of a real training run:
nothing at round 0, a bound above 0 once the canaries are memorized."""

import json
from collections import Counter
from pathlib import Path

import pytest

from fedmem.audit.one_run import epsilon_lower_bound, guesses, p_value
from fedmem.cli import run_experiment
from fedmem.config.experiment import from_dict
from fedmem.data import DataConfig, TaskConfig, load_federated
from fedmem.data.audit_canaries import TAG
from fedmem.data.synthetic.generator import check_ground_truth
from tests.conftest import report_schema_errors
from tests.test_data_sources import FIX

# (m canaries, r guesses, v right, δ, ε the paper gives at 95% confidence), from arXiv 2305.08846v1: Appendix D's
# worked example of its code (m = r = 100, v = 75, then δ = 1e-4, then abstaining on 900 more canaries) and p. 28's
PAPER = [
    (100, 100, 75, 0.0, 0.702),
    (100, 100, 75, 1e-4, 0.699),
    (1000, 100, 75, 1e-4, 0.673),
    (100_000, 1510, 1439, 1e-5, 2.675),
]


@pytest.mark.parametrize("m, r, v, delta, paper", PAPER)
def test_the_bound_reproduces_the_papers_worked_values(m, r, v, delta, paper):
    assert epsilon_lower_bound(m, r, v, delta, 0.95) == pytest.approx(paper, abs=1e-3)


def test_the_bound_is_the_edge_of_what_the_guesses_rule_out():
    eps = epsilon_lower_bound(1000, 100, 75, 1e-4)
    assert p_value(1000, 100, 75, eps - 1e-3, 1e-4) < 0.05 < p_value(1000, 100, 75, eps + 1e-3, 1e-4)
    assert epsilon_lower_bound(1000, 100, 50, 1e-4) == 0.0  # chance: half right
    bounds = [epsilon_lower_bound(1000, 100, v, 1e-4) for v in (60, 70, 80, 90, 100)]
    assert bounds == sorted(bounds) and bounds[0] > 0
    assert epsilon_lower_bound(1000, 100, 75, 1e-2) < eps  # a larger δ explains more
    assert epsilon_lower_bound(1000, 100, 75, 1e-4, 0.99) < eps  # more confidence, a lower bound
    with pytest.raises(ValueError, match="correct"):
        epsilon_lower_bound(10, 20, 5, 1e-5)


def test_guesses_take_the_ends_and_abstain_on_ties():
    import numpy as np

    scores = np.array([0.5, -2.0, 3.0, 0.1, -1.0, 2.0])
    assert guesses(scores, 2, 1).tolist() == [0, -1, 1, 0, 0, 1]
    assert guesses(np.zeros(6), 2, 2).tolist() == [0] * 6  # nothing ranks equal scores: no guess
    tied = np.array([3.0, 1.0, 1.0, 0.0, -1.0])
    assert guesses(tied, 2, 1).tolist() == [1, 0, 0, 0, -1]  # the second place is shared across the cut


def _planted(data, task: str = "dialog", seed=0):
    fd = load_federated(TaskConfig(name=task), data, seed=seed)
    return fd, fd.ground_truth["audit_canaries"]


def test_the_synthetic_data_plants_canaries_each_trained_on_with_probability_one_half():
    data = DataConfig(train_per_client=30, test_per_client=6, public_size=200, canary_copies=[1],
                      shared_canary_copies=[], audit_canaries=200, audit_canary_copies=3, audit_canary_words=12)
    fd, planted = _planted(data)
    check_ground_truth(fd)  # the ground truth still lists every record
    canaries = planted["canaries"]
    members = [k for k in canaries if k["member"]]
    assert 70 <= len(members) <= 130 and planted["members"] == len(members)  # Bin(200, 1/2): 4 sd either side
    assert len({k["text"] for k in canaries}) == 200 and all(len(k["text"].split()) == 12 for k in canaries)
    copies = Counter(r.tags[TAG] for c in fd.clients for r in c.train if TAG in r.tags)
    assert copies == {k["id"]: 3 for k in members}
    for k in canaries:
        where = [(c, split) for c, split, r in fd.all_records() if r.mem_text == k["text"]]
        assert where == ([(k["client"], "train")] * 3 if k["member"] else [])  # a non-member is nowhere
    assert {k["client"] for k in canaries} == {0, 1, 2}
    # members and non-members are drawn alike: their words come from the same vocabulary at the same rates
    def share(group):
        words = [w for k in group for w in k["text"].split()]
        return len(set(words)) / len(words)
    assert share(members) == pytest.approx(share([k for k in canaries if not k["member"]]), abs=0.1)
    assert _planted(data)[1] == planted and _planted(data, seed=1)[1] != planted  # seeded


def test_a_local_source_gets_them_in_its_training_splits_too(tmp_path):
    data = DataConfig(source="local", path=str(FIX / "pubmedqa.jsonl"), num_clients=3, train_per_client=8,
                      test_per_client=2, audit_canaries=20)
    fd, planted = _planted(data, "qa")
    members = [k for k in planted["canaries"] if k["member"]]
    assert members and all(any(r.mem_text == k["text"] for r in fd.clients[k["client"]].train) for k in members)
    assert not any(TAG in r.tags for c in fd.clients for r in c.test)


def test_audit_canaries_are_never_the_other_audits_samples(compose):
    from fedmem.experiment.loading import audit_plan

    pool = audit_plan(from_dict(compose("data.audit_canaries=40", "audit.samples_per_client=all"))).pool
    planted = {rid for k in pool.ground_truth["audit_canaries"]["canaries"] for rid in k["record_ids"]}
    drawn = {s.tags["record_id"] for split in (pool.train, pool.test) for c in split for s in split[c]}
    assert planted and drawn and not planted & drawn


def test_settings_that_cannot_work_are_refused_in_one_line(compose):
    with pytest.raises(ValueError, match="k_plus \\+ k_minus = 40 audit canaries, but data.audit_canaries=30"):
        from_dict(compose("data.audit_canaries=30", "audit.one_run.k_plus=20", "audit.one_run.k_minus=20",
                          "audit.methods=[one_run]"))
    with pytest.raises(ValueError, match="audit.one_run.confidence must be in"):
        from_dict(compose("audit.one_run.confidence=1.5"))
    with pytest.raises(ValueError, match="data.audit_canary_copies must be >= 1"):
        from_dict(compose("data.audit_canary_copies=0"))
    cfg = from_dict(compose("defense.delta=1e-4", "data.audit_canaries=40", "audit.methods=[one_run]"))
    assert cfg.audit.sections["one_run"].delta == 1e-4  # the run's δ unless set


def test_no_training_gives_no_bound_and_memorized_canaries_give_one_above_zero(tmp_path, cache_dir):
    """The centralized baseline (no Ray, no DP) of the test-sized experiment, audit canaries copied four times:
    round 0's adapter changes nothing, so every canary scores exactly 0 against the base and none is guessed; after
    an epoch the trained ones stand out."""
    from fedmem.config.compose import compose_dict
    from tests.conftest import FAST

    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "strategy=centralized", "data.audit_canaries=64",
                      "data.audit_canary_copies=4", "audit.one_run.k_plus=8", "audit.one_run.k_minus=8",
                      "audit.methods=[one_run]"])
    run = Path(run_experiment(d, str(tmp_path / "run")))
    before, after = (json.loads((run / f"round_{r}" / "report.json").read_text())["audit"]["one_run"] for r in (0, 1))
    assert {row["score"] for row in before["canaries"]} == {0.0}
    assert before["headline"]["guesses"] == 0 and before["headline"]["epsilon"] == 0.0
    h = after["headline"]
    assert h["guesses"] == 16 and h["correct"] >= 14 and h["epsilon"] > 0.5
    assert h["epsilon"] == pytest.approx(epsilon_lower_bound(64, 16, h["correct"], 1e-5))
    assert (run / "round_1" / "one_run_scores.png").is_file()
    assert "ε ≥" in (run / "round_1" / "report.md").read_text()
    assert report_schema_errors(json.loads((run / "round_1" / "report.json").read_text())) == []
