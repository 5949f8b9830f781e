"""The membership-inference baselines: each attack on hand-made numbers, Min-K%++'s normalisers against the logits,
and the audit method on a real tiny model whose LoRA adapters memorized the members."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import make_run, make_sample, memorize, texts, tiny_model, tiny_tokenizer

from fedmem.audit.base import AUDIT_METHODS, AuditedModel, build_method_config
from fedmem.audit.calibration import calibrate_threshold, roc_auc
from fedmem.audit.membership import FPRS, blind_scores, bootstrap_auc_ci95, bootstrap_indices, evaluate, mean_nll
from fedmem.audit.mia import (
    ATTACKS,
    MembershipInference,
    MiaConfig,
    lowest_mean,
    min_k_pp_tokens,
    recall_ratio,
    reference_difference,
    statistics,
    zlib_bytes,
    zlib_ratio,
)
from fedmem.audit.pool import draw_and_planted
from fedmem.common.io import to_jsonable
from fedmem.engine.config import ModelConfig
from fedmem.engine.model.load import wrap_lora
from fedmem.engine.scoring import TokenStats, token_logprobs, token_stats
from fedmem.reports.console import alert_lines
from fedmem.reports.views import view_for

ROOT = Path(__file__).resolve().parents[1]
N_CLIENTS, N, SUFFIX = 3, 16, 24  # 48 members against 48 non-members
LORA = ModelConfig(lora_r=16, lora_alpha=32, lora_dropout=0.0,
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                   "lm_head"])


# ---------------------------------------------------------------- the attacks on hand-made numbers


def test_loss_is_the_mean_token_negative_log_likelihood():
    logp = np.log([0.5, 0.25])
    assert mean_nll(logp) == pytest.approx((math.log(2) + math.log(4)) / 2)


def test_zlib_ratio_divides_the_log_perplexity_by_the_compressed_bytes():
    # an empty zlib stream: a 2-byte header, the final empty fixed-Huffman block (2 bytes), the 4-byte Adler-32
    assert zlib_bytes("") == 8
    assert zlib_bytes("héllo") == len(zlib.compress("héllo".encode("utf-8")))  # UTF-8 bytes, not characters
    logp = np.log([0.5, 0.25, 0.125])
    assert zlib_ratio(logp, 8) == pytest.approx((math.log(2) + math.log(4) + math.log(8)) / 3 / 8)


def test_min_k_averages_the_lowest_20_percent_of_ten_tokens():
    logp = np.array([-0.1, -3.0, -0.2, -0.3, -5.0, -0.4, -0.5, -0.6, -0.7, -0.8])
    assert lowest_mean(logp, 20) == pytest.approx((-5.0 + -3.0) / 2)  # floor(0.2 * 10) = 2 tokens
    assert lowest_mean(logp, 5) == pytest.approx(-5.0)  # floor(0.5) = 0: at least one token
    assert lowest_mean(logp, 100) == pytest.approx(logp.mean())


def test_min_k_pp_normalises_each_token_by_mu_and_sigma_then_takes_the_lowest():
    logp = np.array([-1.0, -2.0, -3.0, -4.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0])
    mu = np.array([-1.0, -1.0, -1.0, -1.0, -2.0, -2.0, -2.0, -2.0, -2.0, -1.0])
    sigma = np.array([1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    z = min_k_pp_tokens(logp, mu, sigma)
    np.testing.assert_allclose(z, [0.0, -2.0, -1.0, -3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0])  # sigma = 0: scored 0
    assert lowest_mean(z, 20) == pytest.approx((-3.0 + -2.0) / 2)


def test_reference_attack_is_the_difference_of_mean_losses():
    target, ref = np.log([0.5, 0.5]), np.log([0.25, 0.125])
    assert reference_difference(target, ref) == pytest.approx(math.log(2) - (math.log(4) + math.log(8)) / 2)
    stats = TokenStats(target, np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    row = statistics(stats, 10, 50, ref)
    assert row["ref"] == pytest.approx(reference_difference(target, ref))
    assert statistics(stats, 10, 50, None)["ref"] is None


def test_recall_is_the_prefixed_log_likelihood_over_the_plain_one():
    """ReCaLL's LL(s | P, p) / LL(s | p), with LL the mean token log-likelihood: above 1 where the non-member prefix
    lowers the likelihood, as it does more for a member."""
    plain, prefixed = np.log([0.5, 0.25]), np.log([0.25, 0.125])
    assert recall_ratio(plain, prefixed) == pytest.approx((math.log(0.25) + math.log(0.125)) /
                                                          (math.log(0.5) + math.log(0.25)))
    assert recall_ratio(plain, prefixed) > 1 and recall_ratio(plain, plain) == pytest.approx(1.0)
    stats = TokenStats(plain, np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert statistics(stats, 10, 50, None, prefixed)["recall"] == pytest.approx(recall_ratio(plain, prefixed))
    assert statistics(stats, 10, 50, None)["recall"] is None


def test_bootstrap_auc_equals_roc_auc_on_the_identity_resample_ties_included():
    rng = np.random.default_rng(0)
    m, n = rng.integers(0, 5, 13).astype(float), rng.integers(0, 5, 9).astype(float)  # many ties
    identity = (np.arange(m.size)[None, :], np.arange(n.size)[None, :])
    lo, hi = bootstrap_auc_ci95(m, n, *identity)
    assert lo == pytest.approx(roc_auc(m, n)) and hi == pytest.approx(roc_auc(m, n))


def test_tpr_at_an_fpr_uses_the_threshold_set_on_the_nonmembers():
    nonmembers = np.arange(20.0)  # 5% of 20: one non-member may be flagged, so the threshold is 18
    members = np.array([18.5, 19.5, 17.0, 25.0])
    f = evaluate(members, nonmembers, None)
    assert f["threshold_at_5pct_fpr"] == 18.0 and f["fpr_at_5pct_threshold"] == pytest.approx(1 / 20)
    assert f["tpr_at_5pct_fpr"] == pytest.approx(3 / 4)
    # 1% and 0.1% of 20 non-members are below one: the FPR cannot resolve them, so no threshold and no TPR (a TPR at
    # FPR 0 reported as the TPR at 1% would claim a resolution 20 non-members do not have)
    assert f["fpr_resolution"] == pytest.approx(1 / 20) and f["unreachable_fprs"] == ["0p1pct", "1pct"]
    assert f["tpr_at_1pct_fpr"] is None and f["tpr_at_0p1pct_fpr"] is None
    # its threshold still decides (the truth rows): the highest non-member score, flagging none of them
    assert f["threshold_at_1pct_fpr"] == 19.0 and f["fpr_at_1pct_threshold"] == 0.0
    assert f["auc_ci95"] is None and evaluate(members, np.zeros(0), None)["auc"] is None


def test_tpr_at_a_tenth_of_a_percent_fpr_needs_a_thousand_nonmembers():
    nonmembers = np.arange(1000.0)  # 0.1% of 1000: one may be flagged, so the threshold is 998
    members = np.array([998.5, 999.5, 10.0])
    f = evaluate(members, nonmembers, None)
    assert f["unreachable_fprs"] == [] and f["threshold_at_0p1pct_fpr"] == 998.0
    assert f["fpr_at_0p1pct_threshold"] == pytest.approx(1 / 1000) and f["tpr_at_0p1pct_fpr"] == pytest.approx(2 / 3)
    assert evaluate(members, nonmembers[:999], None)["unreachable_fprs"] == ["0p1pct"]


def test_the_tpr_interval_sets_the_threshold_again_on_each_resample():
    """The vectorized interval equals a loop that calibrates each resample's threshold on its own non-members; on the
    identity resample it is the point estimate."""
    rng = np.random.default_rng(0)
    m, n = rng.normal(0.8, 1, 60), rng.normal(0, 1, 200)
    idx = bootstrap_indices(m.size, n.size, np.random.default_rng(1), 300)
    f = evaluate(m, n, idx)
    for key, target in FPRS.items():
        if target < 1 / n.size:
            assert f[f"tpr_at_{key}_fpr_ci95"] is None
            continue
        looped = [np.mean(m[i] > calibrate_threshold(n[j], target)) for i, j in zip(*idx)]
        assert f[f"tpr_at_{key}_fpr_ci95"] == pytest.approx(np.percentile(looped, [2.5, 97.5]).tolist())
        lo, hi = f[f"tpr_at_{key}_fpr_ci95"]
        assert lo < f[f"tpr_at_{key}_fpr"] < hi
    identity = (np.arange(m.size)[None, :], np.arange(n.size)[None, :])
    point = evaluate(m, n, identity)
    assert point["tpr_at_5pct_fpr_ci95"] == pytest.approx([point["tpr_at_5pct_fpr"]] * 2)


def test_short_suffixes_are_passed_over_and_canaries_kept_beside_the_draw():
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=1, n_train=6, n_test=1, prefix_len=16, suffix_len=24)
    pool = list(run.train[0])
    pool[2] = make_sample(tok, "The river noticed a quiet village near the old bridge.", 0, "train", 2, 4, 24)
    draw, canaries, short = draw_and_planted(pool, 3, SUFFIX)
    assert [s.id for s in canaries] == ["c0/train/0"]  # make_run tags sample 0 as a canary
    assert [s.id for s in draw] == ["c0/train/1", "c0/train/3", "c0/train/4"] and short == 1


# ---------------------------------------------------------------- the scoring pass


@pytest.mark.usefixtures("one_torch_thread")
def test_token_stats_equal_a_direct_computation_from_the_logits():
    tok = tiny_tokenizer()
    model = tiny_model(tok, seed=3)
    run = make_run(tok, n_clients=1, n_train=3, n_test=0, prefix_len=16, suffix_len=12)
    pairs = [(s.prompt_ids, s.suffix_ids[: 5 + 3 * i]) for i, s in enumerate(run.train[0])]  # unequal lengths
    stats = token_stats(model, pairs, batch_size=2)
    for (p, s), st, lp in zip(pairs, stats, token_logprobs(model, pairs, batch_size=2)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([list(p) + list(s)])).logits[0].double()
        logq = torch.log_softmax(logits[len(p) - 1 : len(p) - 1 + len(s)], dim=-1)
        q = logq.exp()
        mu = (q * logq).sum(-1)
        sigma = ((q * logq.square()).sum(-1) - mu.square()).sqrt()
        np.testing.assert_allclose(st.mu, mu.numpy(), atol=1e-4)
        np.testing.assert_allclose(st.sigma, sigma.numpy(), atol=1e-4)
        np.testing.assert_allclose(st.logp, logq.gather(-1, torch.tensor(s)[:, None]).squeeze(-1).numpy(), atol=1e-4)
        np.testing.assert_array_equal(st.logp, lp)  # the same numbers as the log-probability engine's


# ---------------------------------------------------------------- the method on a real tiny model


def null_tolerance(n_m: int, n_n: int) -> float:
    """Four standard deviations of the ROC AUC of exchangeable members and non-members (the Mann-Whitney null)."""
    return 4 * math.sqrt((n_m + n_n + 1) / (12 * n_m * n_n))


@pytest.fixture(scope="module")
def lora(one_torch_thread, tmp_path_factory):
    """(run, the base saved as a model directory, a LoRA model before and after memorizing the members): the base
    is first trained on other texts of the same generator (its prior), then its adapters memorize the members."""
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=N_CLIENTS, n_train=N + 1, n_test=N, prefix_len=16, suffix_len=SUFFIX)
    # the public corpus ReCaLL draws its non-member prefix from: the generator's texts under a seed of its own
    run = dataclasses.replace(run, public_texts=tuple(texts(20, seed=950)))
    # the prior: texts of the same generator under another seed than the audited ones (make_run's are 100+ and 200+)
    public = [make_sample(tok, t, 0, "train", i, 16, SUFFIX) for i, t in enumerate(texts(2 * N_CLIENTS * N, 900))]
    base = tiny_model(tok)
    memorize(base, public, steps=30, lr=3e-3)
    base_dir = tmp_path_factory.mktemp("base")
    base.save_pretrained(base_dir)
    tok.save_pretrained(base_dir)
    torch.manual_seed(0)
    model = wrap_lora(base, LORA).eval()
    cfg = build_method_config("mia", {"n": N, "suffix_len": SUFFIX})
    fresh = MembershipInference(cfg, run).audit(AuditedModel(pool=run, round=0, model=model, batch_size=128))
    members = [s for c in run.clients for s in run.train[c][1:]]  # sample 0 is a canary, outside the draw
    memorize(model, members, steps=60, lr=1e-2)
    method = MembershipInference(cfg, run)
    trained = method.audit(AuditedModel(pool=run, round=1, model=model, batch_size=128))
    return run, base_dir, model, method, fresh, trained


def test_every_attack_separates_members_after_memorization(lora):
    _, _, _, _, _, trained = lora
    h = trained["headline"]
    assert (h["members"], h["nonmembers"]) == (N_CLIENTS * N, N_CLIENTS * N)
    for a in ATTACKS:
        assert h[f"{a}_auc_ci95"][0] > 0.5, (a, h[f"{a}_auc"], h[f"{a}_auc_ci95"])
        lo, hi = h[f"{a}_tpr_at_5pct_fpr_ci95"]
        assert lo <= h[f"{a}_tpr_at_5pct_fpr"] <= hi
        assert h[f"{a}_tpr_at_1pct_fpr"] is None  # 48 non-members resolve the FPR in steps of 2.1%, not 1%
    assert "the 0.1% and 1% FPR targets are below one step" in trained["note"]
    page = view_for(lora[3])
    table = page.markdown(trained)
    assert "TPR @ 0.1% FPR [95% CI] | TPR @ 1% FPR [95% CI] | TPR @ 5% FPR [95% CI]" in table
    assert f"| n/a | n/a | {100 * h['loss_tpr_at_5pct_fpr']:.2f}% [" in table
    for v in trained["per_client"]:
        assert (v["members"], v["nonmembers"]) == (N, N) and all(v["attacks"][a]["auc"] > 0.5 for a in ATTACKS)


def test_a_model_that_saw_neither_side_is_at_chance(lora):
    _, _, _, _, fresh, _ = lora
    h = fresh["headline"]
    tol = null_tolerance(h["members"], h["nonmembers"])
    for a in ATTACKS:
        assert abs(h[f"{a}_auc"] - 0.5) < tol, (a, h[f"{a}_auc"], tol)
    # fresh adapters change nothing: the target is its own base, every difference 0, every pair a tie
    assert h["ref_auc"] == 0.5
    assert all(s["ref"] == 0.0 for s in fresh["samples"])


def test_section_is_serialisable_and_follows_the_report_schema(lora):
    import jsonschema

    _, _, _, method, _, trained = lora
    section = json.loads(json.dumps(to_jsonable({k: v for k, v in trained.items() if k != "seconds"})))
    schema = json.loads((ROOT / "fedmem" / "reports" / "report.schema.json").read_text())
    jsonschema.validate(section, {"$defs": schema["$defs"], "$ref": "#/$defs/section"})
    assert set(trained["attacks"]) == set(ATTACKS) and len(trained["samples"]) == len(method.samples)
    canaries = [s for s in trained["samples"] if not s["drawn"]]
    assert len(canaries) == N_CLIENTS and all(s["split"] == "train" for s in canaries)
    md = view_for(method).markdown(trained)
    assert "| Min-K%++ |" in md and "TPR @ 1% FPR" in md
    assert "steps of 2.08%" in trained["note"]  # the round page shows a section's note above its view
    summary = view_for(method).summary(lora[4], trained)
    assert summary.startswith("**Membership inference.**") and "n/a" not in summary
    # a TPR the non-members cannot resolve is absent with its reason, not n/a
    assert re.search(r"has TPR [\d.]+% at 5% FPR \(no TPR at 0.1% or 1% FPR, below the 1/48 step of 48 "
                     r"non-members\)\.$", summary), summary


def test_an_attack_whose_auc_interval_lies_below_one_half_reads_as_worse_than_chance(lora):
    _, _, _, method, fresh, trained = lora
    inverted = copy.deepcopy(trained)
    inverted["headline"] |= {"zlib_auc": 0.31, "zlib_auc_ci95": [0.22, 0.41]}
    summary = view_for(method).summary(fresh, inverted)
    assert summary.endswith(" zlib does worse than chance (the AUC's interval lies below 0.5): on this data the score "
                            "ranks non-members above members."), summary
    assert "worse than chance" not in view_for(method).summary(fresh, trained)  # every interval reaches 0.5 or more


def test_truth_rows_decide_at_the_5pct_threshold_of_the_chosen_attack(lora):
    run, _, _, method, _, trained = lora
    rows = method.truth_rows(trained)
    t = trained["attacks"]["loss"]["threshold_at_5pct_fpr"]
    assert len(rows) == len(trained["samples"])
    for r, s in zip(rows, trained["samples"]):
        assert r["id"] == s["id"] and r["score"] == -s["loss"] and r["decision"] == (-s["loss"] > t)
    assert sum(r["decision"] for r in rows if r["split"] == "test") <= 0.05 * N_CLIENTS * N
    canary = next(r for r in rows if r["tags"].get("canary"))
    assert canary["tags"]["copies"] == 4
    by_ref = MembershipInference(MiaConfig(n=N, suffix_len=SUFFIX, decide_with="ref"), run).truth_rows(trained)
    assert [r["score"] for r in by_ref] == [-s["ref"] for s in trained["samples"]]
    sets = method.verdicts(trained)  # beside the other methods: one verdict set per attack
    assert list(sets) == [f"mia_{a}" for a in ATTACKS] and sets["mia_loss"] == rows
    assert [r["score"] for r in sets["mia_min_k"]] == [s["min_k"] for s in trained["samples"]]  # members score high


def test_one_target_pass_per_round_and_the_reference_once_per_run(lora):
    run, _, model, _, _, _ = lora
    calls = []
    hook = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        method = MembershipInference(MiaConfig(n=N, suffix_len=SUFFIX), run)
        # every pair in one batch; on the model itself, whose forward calls the hook counts (not a merged copy)
        first = AuditedModel(pool=run, round=1, model=model, batch_size=256, merge_adapter=False)
        s1 = method.audit(first)
        assert len(calls) == 3  # the target's pass, ReCaLL's prefixed pass and the base's (adapters disabled)
        assert first.passes == {"token_stats": 2, "base_logprobs": 1}  # all through the audited model
        assert [s1["seconds"][k] for k in ("target_passes", "recall_passes", "reference_passes")] == [1, 1, 1]
        again = method.audit(first)  # the round context memoises the target's passes
        assert len(calls) == 3 and again["seconds"]["target_passes"] == again["seconds"]["recall_passes"] == 0
        second = AuditedModel(pool=run, round=2, model=model, batch_size=256, merge_adapter=False)
        s2 = method.audit(second)
        assert len(calls) == 5 and second.passes == {"token_stats": 2}  # the reference pass is reused
        assert [s2["seconds"][k] for k in ("target_passes", "recall_passes", "reference_passes")] == [1, 1, 0]
        assert [s["ref"] for s in s2["samples"]] == [s["ref"] for s in s1["samples"]]
    finally:
        hook.remove()


def test_reference_directory_scores_like_the_disabled_adapters(lora):
    run, base_dir, model, _, _, trained = lora
    cfg = MiaConfig(n=N, suffix_len=SUFFIX, reference=str(base_dir))
    MembershipInference.preflight(cfg)
    section = MembershipInference(cfg, run).audit(AuditedModel(pool=run, round=1, model=model, batch_size=128))
    np.testing.assert_allclose([s["ref"] for s in section["samples"]], [s["ref"] for s in trained["samples"]],
                               atol=1e-5)


def test_reference_directory_must_share_the_tokenizer(lora, tmp_path):
    run = lora[0]
    tiny_tokenizer(vocab_size=300).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="its tokenizer differs"):
        MembershipInference(MiaConfig(reference=str(tmp_path)), run)
    with pytest.raises(ValueError, match="no config.json"):
        MembershipInference.preflight(MiaConfig(reference=str(tmp_path / "nowhere")))


def test_more_recall_shots_than_the_public_corpus_holds_are_refused_naming_its_size(lora):
    run = lora[0]
    with pytest.raises(ValueError, match=r"^audit.mia.recall_shots=21: the public corpus holds 20 texts: set "
                                         r"audit.mia.recall_shots=20$"):
        MembershipInference(MiaConfig(n=N, suffix_len=SUFFIX, recall_shots=21), run)
    MembershipInference(MiaConfig(n=N, suffix_len=SUFFIX, recall_shots=20), run)  # the whole corpus is allowed


@pytest.mark.usefixtures("one_torch_thread")
def test_without_adapters_the_base_reference_is_undefined():
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=1, n_train=5, n_test=4, prefix_len=16, suffix_len=SUFFIX)
    method = MembershipInference(MiaConfig(n=4, suffix_len=SUFFIX, decide_with="ref"), run)
    section = method.audit(AuditedModel(pool=run, round=0, model=tiny_model(tok)))
    assert section["headline"]["ref_auc"] is None and section["headline"]["ref_auc_ci95"] is None
    assert not section["attacks"]["ref"]["defined"] and "undefined" in section["note"]
    assert "steps of 25.00%: the 0.1%, 1% and 5% FPR targets are below one step" in section["note"]
    assert all(s["ref"] is None for s in section["samples"]) and section["headline"]["loss_auc"] is not None
    assert section["seconds"]["reference_passes"] == 0
    assert method.truth_rows(section) == []  # decides nothing with an undefined attack
    assert "mia_ref" not in method.verdicts(section) and "mia_loss" in method.verdicts(section)


# ---------------------------------------------------------------- config


def test_the_composed_config_holds_the_dataclass_defaults():
    from fedmem.config.compose import compose_dict

    assert build_method_config("mia", compose_dict([])["audit"]["mia"]) == MiaConfig()
    assert AUDIT_METHODS["mia"] is MembershipInference
    assert MembershipInference.samples_needed(MiaConfig(n=5)) == {"train": 5, "test": 5}


@pytest.mark.parametrize("section, message", [
    ({"k": 0}, "audit.mia.k is a percentage"),
    ({"k": 101}, "audit.mia.k is a percentage"),
    ({"suffix_len": 0}, "audit.mia.suffix_len must be >= 1"),
    ({"decide_with": "gfd"}, "audit.mia.decide_with must be one of loss, zlib, min_k, min_k_pp, ref, recall"),
    ({"reference": " "}, "audit.mia.reference must be base or a model directory"),
    ({"refrence": "base"}, "unknown option(s) ['refrence']"),
])
def test_invalid_config_is_rejected(section, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_method_config("mia", section)


def test_method_composes_from_the_defaults_list(compose):
    from fedmem.config.experiment import from_dict

    cfg = from_dict(compose("audit.methods=[mia]", "audit.mia.n=3", "audit.mia.suffix_len=16"))
    assert cfg.audit.sections["mia"].n == 3 and cfg.audit.sections["mia"].reference == "base"


@pytest.mark.slow
def test_a_training_run_audits_with_mia_and_reports_it(compose, tmp_path):
    """The real pipeline (centralized baseline, one epoch, rounds 0 and 1): the auditor's LoRA model gives the base
    reference, the report follows the schema, the ground truth is scored and the run page carries the panel."""
    import contextlib
    import io

    from conftest import report_schema_errors

    from fedmem.cli import run_experiment

    d = compose("strategy=centralized", "audit.methods=[mia]", "audit.mia.n=3", "audit.mia.suffix_len=16")
    with contextlib.redirect_stderr(io.StringIO()):
        run_dir = run_experiment(d, str(tmp_path / "run"))
    reports = [json.loads((run_dir / f"round_{r}" / "report.json").read_text()) for r in (0, 1)]
    for report in reports:
        assert report_schema_errors(report) == []
        sec = report["audit"]["mia"]
        assert sec["attacks"]["ref"]["defined"] and sec["headline"]["members"] > 0
        assert report["timings"]["mia_stages"]["target_passes"] == 1
    assert reports[0]["timings"]["mia_stages"]["reference_passes"] == 1
    assert reports[1]["timings"]["mia_stages"]["reference_passes"] == 0
    assert reports[0]["audit"]["mia"]["headline"]["ref_auc"] == 0.5  # round 0: the adapters change nothing yet
    assert "mia" in reports[1]["ground_truth_scores"]
    page = next(run_dir.glob("*.md")).read_text()
    assert "**Membership inference.**" in page


def test_a_pair_is_scored_once_per_round_whichever_method_asks(lora):
    """Prior-Aware's log P(s|p) and the attacks' per-token pass share the round's scored pairs: a pair scored for
    one is not scored again for the other."""
    run, _, model, _, _, _ = lora
    members = [(s.prompt_ids, s.suffix_ids[:SUFFIX]) for c in run.clients for s in run.train[c][:3]]
    others = [(s.prompt_ids, s.suffix_ids[:SUFFIX]) for c in run.clients for s in run.test[c][:2]]
    rows = []
    hook = model.register_forward_hook(lambda module, args, out: rows.append(out.logits.shape[0]))
    try:
        audited = AuditedModel(pool=run, round=1, model=model, batch_size=256, merge_adapter=False)
        logp = audited.logprobs(members)
        stats = audited.token_stats(members + others)
    finally:
        hook.remove()
    assert rows == [len(members), len(others)] and audited.passes == {"token_stats": 2}
    assert np.array_equal(logp, [s.logp.sum() for s in stats[: len(members)]])


# another source: tickets from a help desk, a vocabulary the helpers' sentences never use
DESK = (["The router", "My invoice", "The login page", "Our printer"], ["fails", "keeps crashing", "shows an error",
        "stopped working"], ["since the update", "every morning", "on the second floor", "after the reset"])


def _tickets(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(" ".join(rng.choice(p) for p in DESK) + "." for _ in range(8)) for _ in range(n)]


def test_the_blind_baseline_tells_a_split_by_source_apart_and_a_random_split_not():
    """The text-only classifier, cross-validated, on members and non-members of one generator (a random split) and
    on non-members from another source (a split by source, as a later collection would make)."""
    members = texts(60, seed=300)
    same = evaluate(*_sides(blind_scores(members + texts(60, seed=301), np.r_[[True] * 60, [False] * 60], 0)))
    lo, hi = same["auc_ci95"]
    assert lo < 0.5 < hi, same["auc_ci95"]
    other = evaluate(*_sides(blind_scores(members + _tickets(60, seed=1), np.r_[[True] * 60, [False] * 60], 0)))
    assert other["auc"] > 0.99 and other["auc_ci95"][0] > 0.9
    assert blind_scores(members[:4] + texts(4, seed=301), np.r_[[True] * 4, [False] * 4], 0) is None  # < 5 folds


def _sides(scores: np.ndarray, n: int = 60):
    return scores[:n], scores[n:], bootstrap_indices(n, n, np.random.default_rng(0), 500)


def test_the_audit_alerts_when_the_texts_alone_separate_its_split(lora):
    """The method's blind baseline, read on the run's random split (no alert) and on the same run with each client's
    non-members replaced by another source's texts: the alert on the console's line, on the page, and the
    attacks read against it."""
    run, _, model, method, _, trained = lora
    h = trained["headline"]
    assert h["blind_auc_ci95"][0] <= 0.5 and "alert" not in trained
    tok = run.tokenizer
    shifted = make_run(tok, n_clients=N_CLIENTS, n_train=N + 1, n_test=N, prefix_len=16, suffix_len=SUFFIX)
    for c in shifted.clients:
        shifted.test[c] = [make_sample(tok, t, c, "test", i, 16, SUFFIX) for i, t in enumerate(_tickets(N, seed=c))]
    other = MembershipInference(method.cfg, shifted)
    section = other.audit(AuditedModel(pool=shifted, round=1, model=model, batch_size=128))
    assert section["headline"]["blind_auc_ci95"][0] > 0.5
    assert section["alert"].startswith("members and non-members differ without the model: a text-only classifier")
    assert alert_lines({"round": 1, "audit": {"mia": section}})[0].startswith("fedmem: round 1: ALERT mia: members")
    assert "**Members and non-members differ without the model**" in view_for(other).markdown(section)


def test_the_round_page_draws_the_attacks_roc_on_log_log_axes(lora, tmp_path):
    _, _, _, method, _, trained = lora
    [(title, name)] = view_for(method).render(trained, str(tmp_path))
    png = tmp_path / name
    assert title == "Membership attacks: ROC on log-log axes" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_members = {**trained, "samples": [s for s in trained["samples"] if s["split"] == "train"]}
    assert view_for(method).render(only_members, str(tmp_path / "none")) == []
