"""Membership from the trajectory of global models, on real tiny models: a LoRA model that memorizes the members a
little more every round, and one whose rounds treat members and non-members alike; every round's adapter saved in a
run directory as a training run saves it."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import make_run, make_sample, memorize, texts, tiny_model, tiny_tokenizer

from fedmem.audit.base import AuditedModel, build_method_config
from fedmem.audit.mia import MembershipInference, MiaConfig
from fedmem.audit.trajectory import ATTACKS, TrajectoryConfig, TrajectoryMembership
from fedmem.common.io import to_jsonable
from fedmem.engine.config import ModelConfig
from fedmem.engine.model.load import adapter_state, load_adapter_state, save_adapter, wrap_lora
from fedmem.experiment.archive import RunArchive
from fedmem.reports.views import view_for

N_CLIENTS, N, SUFFIX, ROUNDS = 3, 16, 24, 3
LORA = ModelConfig(lora_r=16, lora_alpha=32, lora_dropout=0.0,
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                   "lm_head"])
CFG = TrajectoryConfig(n=N, suffix_len=SUFFIX)


def null_tolerance(n_m: int, n_n: int) -> float:
    """Four standard deviations of the ROC AUC of exchangeable members and non-members (the Mann-Whitney null)."""
    return 4 * math.sqrt((n_m + n_n + 1) / (12 * n_m * n_n))


def trained_rounds(pool, model, trained_on, run_dir: Path) -> list[dict]:
    """The global adapter of rounds 0..ROUNDS, each round training ``model`` a little more on ``trained_on``, every
    round's adapter saved as ``round_<r>/adapter``."""
    states = [adapter_state(model)]
    save_adapter(model, run_dir / "round_0" / "adapter")
    for r in range(1, ROUNDS + 1):
        memorize(model, trained_on, steps=15, lr=5e-3, seed=r)
        states.append(adapter_state(model))
        save_adapter(model, run_dir / f"round_{r}" / "adapter")
    return states


def audit_rounds(method, pool, model, states, archive, rounds) -> dict[int, dict]:
    out = {}
    for r in rounds:
        load_adapter_state(model, states[r])
        out[r] = method.audit(AuditedModel(pool=pool, round=r, model=model, batch_size=128, archive=archive))
    return out


@pytest.fixture(scope="module")
def runs(one_torch_thread, tmp_path_factory):
    """(pool, model, states, archive, the sections of rounds 0..3 audited in order) for a model that memorizes the
    members, and the sections of one whose rounds trained on members and non-members alike."""
    tok = tiny_tokenizer()
    pool = make_run(tok, n_clients=N_CLIENTS, n_train=N + 1, n_test=N, prefix_len=16, suffix_len=SUFFIX)
    base = tiny_model(tok)
    memorize(base, [make_sample(tok, t, 0, "train", i, 16, SUFFIX) for i, t in enumerate(texts(96, 900))],
             steps=30, lr=3e-3)
    out = {}
    for name, trained_on in (("members", lambda: [s for c in pool.clients for s in pool.train[c][1:]]),
                             ("alike", lambda: [s for c in pool.clients for s in pool.train[c][1:] + pool.test[c]])):
        torch.manual_seed(0)
        model = wrap_lora(copy.deepcopy(base), LORA).eval()  # peft wraps the module it is given: a copy each
        run_dir = tmp_path_factory.mktemp(name)
        states = trained_rounds(pool, model, trained_on(), run_dir)
        archive = RunArchive(run_dir)
        sections = audit_rounds(TrajectoryMembership(CFG, pool), pool, model, states, archive, range(ROUNDS + 1))
        out[name] = (pool, model, states, archive, sections)
    return out


def test_the_trajectory_separates_members_the_model_memorized(runs):
    h = runs["members"][4][ROUNDS]["headline"]
    assert (h["members"], h["nonmembers"]) == (N_CLIENTS * N, N_CLIENTS * N)
    assert h["trajectory_auc_ci95"][0] > 0.5, h
    lo, hi = h["trajectory_tpr_at_5pct_fpr_ci95"]
    assert lo <= h["trajectory_tpr_at_5pct_fpr"] <= hi and h["trajectory_tpr_at_1pct_fpr"] is None
    assert h["gain_over_ref"] == pytest.approx(h["trajectory_auc"] - h["ref_auc"])
    lo, hi = h["gain_over_ref_ci95"]
    assert lo <= h["gain_over_ref"] <= hi


def test_the_trajectory_sits_at_chance_when_members_and_nonmembers_were_treated_alike(runs):
    h = runs["alike"][4][ROUNDS]["headline"]
    assert abs(h["trajectory_auc"] - 0.5) < null_tolerance(h["members"], h["nonmembers"]), h


def test_round_0_has_no_trajectory_and_round_1_is_the_reference_attack(runs):
    sections = runs["members"][4]
    first = sections[0]
    assert first["headline"]["trajectory_auc"] is None and "Round 0" in first["note"]
    assert first["headline"]["ref_auc"] == 0.5  # every drop since round 0 is 0 at round 0
    assert TrajectoryMembership(CFG, runs["members"][0]).truth_rows(first) == []
    one = sections[1]
    assert [s["trajectory"] for s in one["samples"]] == [s["ref"] for s in one["samples"]]
    # there the gain over the reference attack is 0 by construction: not reported until round 2, where it can differ
    assert one["headline"]["gain_over_ref"] is None and "Round 1" in one["note"]
    assert sections[2]["headline"]["gain_over_ref"] is not None
    assert one["rounds"] == [0, 1] and sections[ROUNDS]["rounds"] == list(range(ROUNDS + 1))


def test_a_method_that_starts_late_reads_the_earlier_rounds_and_reports_the_same(runs):
    """A resumed run or a re-audit of the last round alone scores the earlier rounds from their saved adapters: the
    section is the one the method that audited every round wrote."""
    pool, model, states, archive, sections = runs["members"]
    late = audit_rounds(TrajectoryMembership(CFG, pool), pool, model, states, archive, [ROUNDS])[ROUNDS]
    strip = lambda s: json.dumps(to_jsonable({k: v for k, v in s.items() if k != "seconds"}))  # noqa: E731
    assert strip(late) == strip(sections[ROUNDS])


def test_the_single_round_attacks_are_the_membership_attacks_on_the_same_samples(runs):
    pool, model, states, _, sections = runs["members"]
    load_adapter_state(model, states[ROUNDS])
    mia = MembershipInference(MiaConfig(n=N, suffix_len=SUFFIX), pool).audit(
        AuditedModel(pool=pool, round=ROUNDS, model=model, batch_size=128))
    h = sections[ROUNDS]["headline"]
    for a in ("loss", "ref"):  # the reference: the base (adapters off), which round 0's global model is
        assert h[f"{a}_auc"] == pytest.approx(mia["headline"][f"{a}_auc"], abs=1e-3)
        np.testing.assert_allclose(h[f"{a}_auc_ci95"], mia["headline"][f"{a}_auc_ci95"], atol=1e-3)
    assert [s["id"] for s in sections[ROUNDS]["samples"]] == [s["id"] for s in mia["samples"]]


def test_a_model_audited_outside_its_run_has_no_trajectory(runs):
    pool, model, _, _, _ = runs["members"]
    method = TrajectoryMembership(CFG, pool)
    section = method.audit(AuditedModel(pool=pool, round=1, model=model))
    assert section["note"] == "No trajectory: round 0's global adapter is not at hand (a model audited outside its run)."
    assert all(v is None for k, v in section["headline"].items() if k not in ("members", "nonmembers"))
    assert method.verdicts(section) == {}


def test_verdicts_decide_at_the_trajectorys_5pct_threshold(runs):
    pool, _, _, _, sections = runs["members"]
    section = sections[ROUNDS]
    method = TrajectoryMembership(CFG, pool)
    [(label, rows)] = method.verdicts(section).items()
    t = section["attacks"]["trajectory"]["threshold_at_5pct_fpr"]
    assert label == "trajectory" and len(rows) == len(section["samples"])
    assert all(r["decision"] == (s["trajectory"] > t) for r, s in zip(rows, section["samples"]))
    assert sum(r["decision"] for r in rows if r["split"] == "test") <= 0.05 * N_CLIENTS * N


def test_section_follows_the_report_schema_and_reads_on_the_pages(runs):
    import jsonschema

    pool, _, _, _, sections = runs["members"]
    schema = json.loads((Path(__file__).resolve().parents[1] / "fedmem/reports/report.schema.json").read_text())
    for section in sections.values():
        clean = json.loads(json.dumps(to_jsonable({k: v for k, v in section.items() if k != "seconds"})))
        jsonschema.validate(clean, {"$defs": schema["$defs"], "$ref": "#/$defs/section"})
    view = view_for(TrajectoryMembership(CFG, pool))
    md = view.markdown(sections[ROUNDS])
    assert all(f"| {sections[ROUNDS]['attacks'][a]['label']} |" in md for a in ATTACKS)
    assert "Trajectory − reference AUC:" in md
    summary = view.summary(sections[0], sections[ROUNDS])
    assert summary.startswith("**Membership from the loss trajectory.** Its mean") and "n/a" not in summary
    assert "% at 5% FPR" in summary and ("non-members)" in summary or "% at 1% FPR" in summary), summary
    assert view.summary(sections[0], sections[0]).endswith("only round 0 was audited.")


@pytest.mark.parametrize("section, message", [
    ({"n": 0}, "audit.trajectory.n must be >= 1"),
    ({"resamples": 0}, "audit.trajectory.resamples must be >= 1"),
    ({"statistic": "slope"}, "unknown option(s) ['statistic']"),
])
def test_invalid_config_is_rejected(section, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_method_config("trajectory", section)
