"""The PEARL audit method end to end on a real tiny Qwen2 model that has memorized its members."""

import json

import numpy as np
import pytest
import torch
from helpers import make_run, memorize, tiny_model, tiny_tokenizer

from fedmem.audit.base import AUDIT_METHODS, AuditedModel, build_method_config
from fedmem.audit.calibration import calibrate_threshold
from fedmem.audit.pearl import PearlConfig, PearlSensitivity
from fedmem.common.io import to_jsonable
from fedmem.reports.views import view_for

N_CLIENTS, N = 2, 2
CFG = dict(n=N, nonmembers=N, samples_per_intensity=4, max_new_tokens=20)


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    # One torch thread while building: on a shared 2-core machine, two spinning threads per process make
    # this small model several times slower, not faster. Restored afterwards for the other tests.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _audited(tmp_path_factory)
    finally:
        torch.set_num_threads(threads)


def _audited(tmp_path_factory):
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=N_CLIENTS, n_train=N + 1, n_test=N + 1, prefix_len=24, suffix_len=20)
    model = tiny_model(tok)
    members = [s for c in run.clients for s in run.train[c][:N]]
    final_loss = memorize(model, members, steps=120, lr=1e-2)  # loss 0.04 with the tiny-preset tokenizer
    method = PearlSensitivity(build_method_config("pearl", CFG), run)
    out_dir = str(tmp_path_factory.mktemp("round_1"))
    audited = AuditedModel(pool=run, round=1, model=model, out_dir=out_dir)
    section = method.audit(audited)
    return method, audited, section, final_loss, out_dir


def test_registered_and_config_validated():
    assert AUDIT_METHODS["pearl"] is PearlSensitivity
    assert isinstance(build_method_config("pearl", {"n": 3}), PearlConfig)
    for bad, msg in [({"intensities": [1, 2]}, "start at 0"), ({"metric": "bleu"}, "metric"),
                     ({"score": "max"}, "score"), ({"perturbation": "swap"}, "perturbation"),
                     ({"fpr_target": 1.5}, "fpr_target"), ({"n": 0}, "n "), ({"nonmembers": 0}, "nonmembers"),
                     ({"max_new_tokens": 0}, "max_new_tokens"),
                     ({"decide_with": "x"}, "decide_with")]:
        with pytest.raises(ValueError, match=msg):
            build_method_config("pearl", bad)
    with pytest.raises(ValueError, match="unknown option"):
        build_method_config("pearl", {"tau": 0.1})


def test_outputs_are_scored_against_the_texts_continuation(audited):
    """The prompt continues the client's text, so PEARL's reference is the text's continuation: the suffix, cut to
    the tokens an output can have; the prompt is MR's (the open user turn)."""
    method = audited[0]
    tok, cap = method.pool.tokenizer, method.cfg.max_new_tokens
    assert method.references == [tok.decode(list(s.suffix_ids[:cap])) for s in method.samples]
    assert all(row[0] == s.prompt_ids for row, s in zip(method.prompts, method.samples))


def test_all_generations_go_through_one_batched_call(audited):
    method, audited, section, _, _ = audited
    n_samples = 2 * N_CLIENTS * N
    assert len(audited._gen_cache) == 1
    (prompts, max_new, num_samples, _, _), outs = next(iter(audited._gen_cache.items()))
    assert len(prompts) == n_samples * 6 and num_samples == 4 and max_new == 20
    assert all(len(o) == 4 for o in outs)
    # k = 0 is the identity: the unperturbed prompt is the sample's own prompt_ids.
    for si, s in enumerate(method.samples):
        assert prompts[si * 6] == tuple(s.prompt_ids)
        assert all(prompts[si * 6 + j] != tuple(s.prompt_ids) for j in range(1, 6))
    assert section["seconds"]["generations"] == n_samples * 6 * 4


def test_memorized_members_are_more_sensitive_than_non_members(audited):
    _, _, section, final_loss, _ = audited
    assert final_loss < 0.2  # the members were really memorized
    perf = section["mean_performance"]
    assert perf["members"][0] > perf["nonmembers"][0] + 0.2  # the model reproduces members' suffixes
    assert perf["members"][0] > max(perf["members"][1:])  # ... until the prefix is perturbed
    d = section["distributions"]["gfd"]
    assert d["mean_members"] > d["mean_nonmembers"] and d["auc"] > 0.9
    cal = section["calibration"]
    assert cal["alpha"] is not None and cal["tpr"] >= 0.75
    assert section["mia"]["mean_loss_members"] < section["mia"]["mean_loss_nonmembers"]


def test_section_structure_and_counts_are_consistent(audited):
    method, _, section, _, out_dir = audited
    section = json.loads(json.dumps(to_jsonable(section)))  # JSON-able as report.json needs
    assert section["n_members"] == section["n_nonmembers"] == N_CLIENTS * N
    assert section["prompt_roundtrip_exact"] == 1.0
    assert section["mean_prompt_tokens"]["0"] == np.mean([len(s.prompt_ids) for s in method.samples])
    assert section["calibration"]["decision_alpha"] == section["calibration"]["alpha"]  # decide_with=calibrated
    for key in ("mean_changed", "mean_char_change", "mean_word_change"):
        assert section[key]["0"] == 0 and section[key]["5"] > section[key]["1"] > 0
    for key in ("mean_char_change", "mean_word_change"):
        assert all(0 <= v <= 1 for v in section[key].values())
    assert set(section["counts"]) == {"calibrated", "configured", "alpha=0.16", "alpha=0.2", "alpha=0.25"}
    samples = section["samples"]
    for key, c in section["counts"].items():
        for side, is_member in (("members", True), ("nonmembers", False)):
            overall = c["overall"][side]
            assert overall["total"] == N_CLIENTS * N
            assert overall["memorized"] == sum(r[side]["memorized"] for r in c["per_client"])
            assert [r["client"] for r in c["per_client"]] == list(range(N_CLIENTS))
            if key == "calibrated" and not is_member:  # judged held-out: the false positives of the headline FPR
                assert overall["memorized"] == section["calibration"]["false_positives"]
                continue
            flagged = sum(1 for s in samples if s["member"] == is_member and s[method.cfg.score] > c["alpha"])
            assert overall["memorized"] == flagged
    for name in ("gfd", "falloff", "expected_drop"):
        d = section["distributions"][name]
        assert sum(d["members"]) == sum(d["nonmembers"]) == N_CLIENTS * N
        assert len(d["edges"]) == method.cfg.hist_bins + 1
    curve = section["fpr_curve"]
    assert all(a["fpr"] >= b["fpr"] and a["tpr"] >= b["tpr"] for a, b in zip(curve, curve[1:]))
    t4 = section["mia"]["table4"]
    for side in ("members", "nonmembers"):
        r = t4[side]
        assert r["pearl_only"] + r["mia_only"] + r["both"] + r["neither"] == r["n"] == N_CLIENTS * N
        assert r["both_rate"] == pytest.approx(r["both"] / r["n"])
    assert sum(s["memorized"] for s in samples if s["member"]) == t4["members"]["pearl_only"] + t4["members"]["both"]
    for s in samples:
        assert 0 <= s["gfd"] <= 1 and s["expected_drop"] >= 0 and len(s["m"]) == 6
    # the first train sample of each client carries a canary tag: the members are drawn without it, so only plain
    # samples are left and there is no ground-truth breakdown
    assert section["ground_truth"] is None
    assert not any("canary" in s.tags for s in method.members) and len(method.members) == N_CLIENTS * N
    h, cal = section["headline"], section["calibration"]
    for key in ("tpr", "tpr_ci95", "fpr", "fpr_ci95"):
        assert h[key] == cal[key]
    for rates in (h, section["mia"]):
        for key in ("tpr_ci95", "fpr_ci95"):
            assert 0 <= rates[key][0] <= rates[key][1] <= 1
    assert section["headline"]["members_flagged"] == section["counts"]["calibrated"]["overall"]["members"]["memorized"]
    # a calibration on a handful of non-members says so
    assert section["note"].startswith(f"Calibrated on {N_CLIENTS * N} non-members (fewer than 30)")
    assert np.array(section["tables"]["performance"]).shape == (2 * N_CLIENTS * N, 6, 4)


def test_reported_fpr_is_measured_on_held_out_non_members(audited):
    """Recount the headline FPR and TPR by hand from the samples, the halves and each half's alpha: every non-member
    is judged at the alpha of the half it is not in, and each alpha is the calibration rule on its own half."""
    method, _, section, _, _ = audited
    cal, score = section["calibration"], method.cfg.score
    non = np.array([s[score] for s in section["samples"] if not s["member"]])
    mem = np.array([s[score] for s in section["samples"] if s["member"]])
    half = method.half_a
    assert sorted(cal["halves"]) == [N_CLIENTS * N // 2] * 2 and cal["halves"][0] == half.sum()
    assert cal["alpha_a"] == calibrate_threshold(non[half], cal["fpr_target"])
    assert cal["alpha_b"] == calibrate_threshold(non[~half], cal["fpr_target"])
    fp = int((non[half] > cal["alpha_b"]).sum() + (non[~half] > cal["alpha_a"]).sum())
    assert cal["false_positives"] == fp and cal["fpr"] == fp / len(non)
    assert cal["tpr"] == pytest.approx(((mem > cal["alpha_a"]).mean() + (mem > cal["alpha_b"]).mean()) / 2)
    assert section["counts"]["calibrated"]["held_out_alphas"] == [cal["alpha_a"], cal["alpha_b"]]
    # the loss attack: the same halves, score = -loss
    mia, loss = section["mia"], np.array([s["loss"] for s in section["samples"] if not s["member"]])
    la, lb = mia["loss_thresholds_held_out"]
    assert mia["fpr"] == ((loss[half] < lb).sum() + (loss[~half] < la).sum()) / len(loss)
    # each client's non-members are split evenly between the halves
    clients = np.array([s["client"] for s in section["samples"] if not s["member"]])
    assert all(half[clients == c].sum() == N // 2 for c in range(N_CLIENTS))


def test_render_and_markdown(audited, tmp_path):
    method, _, section, _, _ = audited
    files = view_for(method).render(section, str(tmp_path))
    assert [f for _, f in files] == ["pearl_fpr.png", "pearl_hist.png"]
    for _, f in files:
        with open(tmp_path / f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    md = view_for(method).markdown(section)
    assert "held-out FPR" in md and "cross-fitted" in md and "Share of the prefix changed" in md
    assert "| members |" in md and "| nonmembers |" in md and "PEARL only" in md


def test_a_tpr_below_the_held_out_fpr_reads_as_worse_than_chance(audited):
    """The real section with its rates swapped where they are not already: the run page says the flags are worse
    than chance, and says nothing of it where the TPR is at or above the FPR."""
    method, _, section, _, _ = audited
    h = section["headline"]
    low, high = sorted([h["tpr"], h["fpr"]]) if h["tpr"] != h["fpr"] else (0.1, 0.3)
    worse = {**section, "headline": {**h, "tpr": low, "fpr": high}}
    better = {**section, "headline": {**h, "tpr": high, "fpr": low}}
    view = view_for(method)
    assert "worse than chance, the flags say nothing of memorization here" in view.summary(worse, worse)
    assert "worse than chance" not in view.summary(better, better)


def test_perturbations_are_fixed_per_run_and_scoring_is_deterministic(audited):
    method, audited, section, _, _ = audited
    again = PearlSensitivity(method.cfg, method.pool)
    assert again.prompts == method.prompts  # same seed, same sample ids -> same perturbed prompts
    s2 = again.audit(audited)  # the round context memoises the generations: same outputs, so same scores
    assert s2["samples"] == section["samples"]
    other = PearlSensitivity(PearlConfig(**{**CFG, "seed": 1}), method.pool)
    assert other.prompts != method.prompts


@pytest.mark.parametrize("preset", ["offline_demo", "paper"])
def test_default_sizes_calibrate_on_30_non_members_and_hold_the_common_draw(preset):
    """The default experiment's PEARL: at least 30 non-members in all (15 per cross-fitting half), and members
    enough to hold every client's common draw; what it costs is what ``work`` says."""
    from fedmem.config.compose import compose_dict

    d = compose_dict([f"experiment={preset}"])
    pearl, clients = build_method_config("pearl", d["audit"]["pearl"]), d["data"]["num_clients"]
    assert "pearl" in d["audit"]["methods"]
    assert pearl.nonmembers * clients >= 30
    assert pearl.n >= d["audit"]["common_draw"] >= 30
    assert PearlSensitivity.samples_needed(pearl) == {"train": pearl.n, "test": pearl.nonmembers}
    generations = (pearl.n + pearl.nonmembers) * clients * len(pearl.intensities) * pearl.samples_per_intensity
    assert PearlSensitivity.round_cost(pearl, clients) == f"{generations} generations"


def test_the_root_schema_holds_the_dataclass_defaults():
    from fedmem.config import schemas

    assert build_method_config("pearl", schemas()[""]["audit"]["pearl"]) == PearlConfig()


def test_synonym_perturbation_builds_prompts_with_k_words_changed(audited):
    method, _, _, _, _ = audited
    syn = PearlSensitivity(PearlConfig(**{**CFG, "perturbation": "synonym"}), method.pool)
    tok = method.pool.tokenizer
    for si, s in enumerate(syn.samples):
        eligible = len(syn.replacer.eligible(s.prefix_text))
        assert syn.changes["changed"][si].tolist() == [min(k, eligible) for k in syn.cfg.intensities]
        for key in ("char_change", "word_change"):
            assert syn.changes[key][si][0] == 0 and all(0 <= x <= 1 for x in syn.changes[key][si])
        # a replaced word always differs from the original, so the words differ exactly where words were replaced
        assert ((syn.changes["word_change"][si] > 0) == (syn.changes["changed"][si] > 0)).all()
        for j, k in enumerate(syn.cfg.intensities):
            text = tok.decode(list(syn.prompts[si][j]), skip_special_tokens=False)
            base = tok.decode(list(s.prompt_ids), skip_special_tokens=False)
            assert (text == base) == (min(k, eligible) == 0)
    assert syn.changes["changed"][:, -1].mean() >= 3  # the synthetic prefixes offer several replaceable words
