"""Prior-Aware memorization: estimator, thresholds, calibration and the audit method on real tiny models."""

from __future__ import annotations

import itertools
import json
import math
import random

import numpy as np
import pytest
import torch

from fedmem.audit.base import (
    AUDIT_METHODS,
    AuditedModel,
    AuditPool,
    AuditSample,
    build_method_config,
)
from fedmem.audit.prior_aware import (
    GENERIC_LONG,
    GENERIC_SHORT,
    PriorAwareConfig,
    PriorAwareMemorization,
    default_generic,
    default_m,
    generic_pairs,
    log10_histogram,
    mean_ratio_log,
    pa_decisions,
    prior_estimate,
    public_generic_pairs,
    sample_prior_prefixes,
)
from fedmem.audit.training_context import TrainingFrame
from fedmem.common.io import to_jsonable
from fedmem.data.records import Record
from fedmem.engine.config import Decoding
from fedmem.engine.model.tiny import qwen2_model
from fedmem.engine.scoring import prior_logprobs, sequence_logprobs
from fedmem.reports.views import view_for

# ---------------------------------------------------------------- real tiny parts


pytestmark = pytest.mark.usefixtures("one_torch_thread")



def qwen2(vocab: int, seed: int, hidden: int = 32, sharpen: float = 1.0):
    model = qwen2_model(vocab, hidden, 2 * hidden, 2, 4, 2, seed=seed, max_position_embeddings=256, pad_token_id=0)
    if sharpen != 1.0:
        with torch.no_grad():
            model.lm_head.weight.mul_(sharpen)
    return model.eval()


WORDS = ("patient doctor fever cough pain week test result blood pressure heart sleep night morning "
         "please thank you time question answer help service offer message meeting project guide").split()


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE trained on a few hundred seeded sentences (it can encode any text, App. B included)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) + "." for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|endoftext|>")


def make_run(tokenizer, samples: dict[int, list[AuditSample]], seed: int = 0) -> AuditPool:
    """A run whose prompts are the bare prefixes (the test tokenizer has no chat template), its records plain text:
    a text trained on is the text and the EOS token, so the training context is the bare prefix too."""
    return AuditPool(
        train=samples, test={c: [] for c in samples}, train_sizes={c: len(v) for c, v in samples.items()},
        tokenizer=tokenizer, decoding=Decoding(), prefix_len=6, prompt_header=(), seed=seed,
        train_frame=TrainingFrame.of(tokenizer, Record(id="frame", user="text", assistant="", mem_text="text"),
                                     plain=True),
    )


def sample_from_ids(tokenizer, client: int, idx: int, prefix, suffix, tags=None) -> AuditSample:
    return AuditSample(
        id=f"c{client}/train/{idx}", client=client, split="train", prompt_ids=tuple(prefix),
        prefix_ids=tuple(prefix), suffix_ids=tuple(suffix), prefix_text=tokenizer.decode(list(prefix)),
        suffix_text=tokenizer.decode(list(suffix)), tags=dict(tags or {}),
        # a plain text's training form: the same ids (it is tokenized from its start), so both contexts agree
        train_context_ids=tuple(prefix), train_suffix_ids=tuple(suffix),
        train_prefix_text=tokenizer.decode(list(prefix)),
    )


def text_samples(tokenizer, n_per_client: int = 6, clients: int = 2, suffix: int = 8):
    rng = random.Random(1)
    out = {}
    for c in range(clients):
        rows = []
        for i in range(n_per_client):
            words = 16 if suffix <= 8 else 2 * suffix
            ids = tokenizer(" ".join(rng.choice(WORDS) for _ in range(words)), add_special_tokens=False)["input_ids"]
            tags = {"canary": f"k{c}", "copies": 4} if i == 0 else {"generic": True} if i == 1 else {}
            rows.append(sample_from_ids(tokenizer, c, i, ids[:6], ids[6 : 6 + suffix], tags))
        out[c] = rows
    return out


# ---------------------------------------------------------------- config and defaults


def test_config_rejects_bad_values_with_one_clear_message():
    assert (PriorAwareConfig().c, PriorAwareConfig().trials) == (32, 2)
    for kwargs, fragment in [
        ({"c": 0}, "audit.pa.c must be >= 1"),
        ({"c": "abc"}, "audit.pa.c must be an integer, got 'abc'"),
        ({"trials": 0}, "audit.pa.trials must be >= 1"),
        ({"m": 0.0}, "audit.pa.m"),
        ({"m": 2.0}, "audit.pa.m"),
        ({"n_ratio": -1.0}, "audit.pa.n_ratio"),
        ({"generic": []}, "audit.pa.generic"),
        ({"generic": ["ok", "  "]}, "audit.pa.generic"),
        ({"top": -1}, "audit.pa.top"),
        ({"generic_source": "web"}, "audit.pa.generic_source"),
        ({"generic_count": 0}, "audit.pa.generic_count"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            PriorAwareConfig(**kwargs)
    assert AUDIT_METHODS["pa"] is PriorAwareMemorization
    with pytest.raises(ValueError, match="unknown option"):
        build_method_config("pa", {"nn": 3})
    assert build_method_config("pa", {"c": 8, "generic": ("a b", "c d")}).generic == ["a b", "c d"]


def test_defaults_follow_the_paper():
    assert default_m(4) == 1e-2 and default_m(8) == 1e-2
    assert default_m(9) == 1e-4 and default_m(50) == 1e-4
    assert len(GENERIC_SHORT) == 7 and len(GENERIC_LONG) == 5
    assert default_generic(4) == list(GENERIC_SHORT) and default_generic(64) == list(GENERIC_LONG)
    assert GENERIC_SHORT[0] == "Please let me know if you have any questions"
    assert GENERIC_LONG[-1].endswith("explore more advanced aspects of the software at your own pace.")


def test_generic_pairs_are_cut_to_the_audited_shape(tokenizer):
    """A sentence long enough gives its first prefix_len tokens and the next suffix_len; a shorter one keeps a
    suffix of the audited length at its end (half the sentence if it is shorter than twice that)."""
    long_text = " ".join(WORDS * 3)
    ids = tuple(tokenizer(long_text, add_special_tokens=False)["input_ids"])
    [(p, s)] = generic_pairs(tokenizer, [long_text], prefix_len=6, suffix_len=8)
    assert (p, s) == (ids[:6], ids[6:14])
    # shorter than prefix + suffix: the suffix keeps the audited length at the end, the prefix what precedes it
    for words in (6, 2):
        text = " ".join(WORDS[:words])
        ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        [(p, s)] = generic_pairs(tokenizer, [text], prefix_len=30, suffix_len=4)
        assert p + s == ids
        assert len(s) == (4 if len(ids) >= 8 else len(ids) - len(ids) // 2), (len(ids), len(s))
    with pytest.raises(ValueError, match="fewer than 2 tokens"):
        generic_pairs(tokenizer, ["a"], 6, 8)


# ---------------------------------------------------------------- thresholds and estimator on hand-made numbers


def test_threshold_logic_on_hand_made_numbers():
    m, n = 1e-2, 10.0
    p = np.array([0.5, 0.5, 0.005, 0.02, m, 0.2, 1.0])
    phat = np.array([0.001, 0.4, 1e-9, 0.019, 1e-9, 0.02, 1e-300])
    # 0: extractable, ratio 500 -> PA.  1: extractable, ratio 1.25 -> not PA (popular suffix).
    # 2: huge ratio but P(s|p) < m -> neither.  3: extractable, ratio ~1.05 -> not PA.
    # 4: P(s|p) == m exactly -> not extractable (strict).  5: ratio == n exactly -> not PA (strict).
    # 6: ratio beyond the float range (log space) -> PA.
    ext, pa = pa_decisions(np.log(p), np.log(phat), math.log(m), math.log(n))
    assert ext.tolist() == [True, True, False, True, False, True, True]
    assert pa.tolist() == [True, False, False, False, False, False, True]
    ext2, pa2 = pa_decisions(np.log(p), np.log(phat), math.log(m), 2000 * math.log(10))  # n = 1e2000
    assert ext2.tolist() == ext.tolist() and pa2.tolist() == [False] * 7


def test_prior_estimate_mean_and_standard_error():
    est = prior_estimate(np.log([[0.1], [0.3]]))
    assert np.exp(est.log_phat[0]) == pytest.approx(0.2)
    assert np.exp(est.log_se[0]) == pytest.approx(np.std([0.1, 0.3], ddof=1) / math.sqrt(2))
    est = prior_estimate(np.log([[0.1], [0.3], [0.5], [0.7]]), trials=2)  # trial means 0.2 and 0.6
    assert np.exp(est.log_phat[0]) == pytest.approx(0.4)
    assert np.exp(est.log_se[0]) == pytest.approx(np.std([0.2, 0.6], ddof=1) / math.sqrt(2))
    assert est.rel_se[0] == pytest.approx(0.2 / 0.4)
    # far below float range: the mean is still exact in log space (no underflow to log 0)
    est = prior_estimate(np.array([[-1000.0], [-1001.0]]))
    assert est.log_phat[0] == pytest.approx(-1000 + math.log((1 + math.exp(-1)) / 2))
    assert np.isnan(prior_estimate(np.array([[-3.0]])).log_se[0])
    with pytest.raises(ValueError, match="equal trials"):
        prior_estimate(np.zeros((5, 1)), trials=2)


def test_prior_estimate_leaves_out_excluded_draws():
    logq = np.log([[0.1, 0.5], [0.3, 0.2], [0.9, 0.4]])
    est = prior_estimate(logq, exclude=np.array([[False, False], [False, True], [True, False]]))
    assert np.exp(est.log_phat) == pytest.approx([0.2, 0.45])  # (0.1 + 0.3) / 2 and (0.5 + 0.4) / 2
    assert np.exp(est.log_se[0]) == pytest.approx(np.std([0.1, 0.3], ddof=1) / np.sqrt(2))
    with pytest.raises(ValueError, match="own prefix"):
        prior_estimate(logq[:1], exclude=np.array([[True, False]]))


def test_own_prefix_is_left_out_of_its_prior(tokenizer):
    # 12 pool prefixes and c = 64 draws: every sample's own prefix is drawn several times
    run = make_run(tokenizer, text_samples(tokenizer))
    method = PriorAwareMemorization(PriorAwareConfig(n=6, c=64, trials=1, suffix_len=8, n_ratio=10.0), run)
    model = qwen2(len(tokenizer), seed=0)
    rows = method.audit(AuditedModel(pool=run, round=1, model=model))["samples"]
    logq = prior_logprobs(model, method.prior_prefixes, [s.suffix_ids for s in method.audited])
    for j, (smp, row) in enumerate(zip(method.audited, rows)):
        own = np.array([q == smp.prefix_ids for q in method.prior_prefixes])
        assert own.any() and (method.own_prefix[:, j] == own).all()
        others = logq[~own, j]
        expected = np.log(np.mean(np.exp(others - others.max()))) + others.max()
        assert row["log10_prior"] == pytest.approx(expected / math.log(10), abs=1e-6)


def test_calibration_mean_is_in_ratio_space():
    assert mean_ratio_log(np.log([1.0, 99.0])) == pytest.approx(math.log(50.0))  # not the geometric mean ~9.9
    assert mean_ratio_log(np.array([2000.0, 2000.0])) == pytest.approx(2000.0)  # no overflow


def test_log10_histogram_counts_every_finite_value():
    v = np.array([-3.2, -0.01, 0.0, 0.4, 2.9, 12.0, np.nan])
    ext = np.array([False, True, True, False, True, True, True])
    h = log10_histogram(v, ext)
    edges = np.array(h["edges"])
    assert sum(h["all"]) == 6 and sum(h["extractable"]) == 4  # the nan is left out
    assert len(h["all"]) <= 30 and np.allclose(np.diff(edges), 1.0) and edges[0] <= -3.2 and edges[-1] >= 12.0
    assert sum(log10_histogram(np.array([1.0, 1.0]), np.array([True, False]))["all"]) == 2


def test_prior_sampling_is_uniform_seeded_and_with_replacement():
    a = sample_prior_prefixes(10, 64, 3, seed=7)
    assert a.shape == (3, 64) and a.min() >= 0 and a.max() < 10
    assert (a == sample_prior_prefixes(10, 64, 3, seed=7)).all()
    assert not (a == sample_prior_prefixes(10, 64, 3, seed=8)).all()
    assert len(set(a[0].tolist())) < 64  # 64 draws from 10: with replacement
    counts = np.bincount(sample_prior_prefixes(10, 20000, 1, seed=0).ravel(), minlength=10)
    assert abs(counts - 2000).max() < 4 * math.sqrt(2000 * 0.9)


# ---------------------------------------------------------------- unbiasedness on an enumerable toy model


def test_prior_estimator_is_unbiased_and_converges_on_an_enumerable_toy():
    """Vocabulary 8, prefixes = all 64 token pairs, uniform: the exact prior v_s = mean_q P(s|q) is enumerable."""
    model = qwen2(8, seed=3, sharpen=30.0)
    pool = list(itertools.product(range(8), repeat=2))
    suffixes = [(1, 2, 3), (0, 0), (7, 5, 1, 6)]
    table = prior_logprobs(model, pool, suffixes, batch_size=64)  # [64, 3], checked against exact in test_scoring
    probs = np.exp(table)
    exact = probs.mean(axis=0)
    sd = probs.std(axis=0)  # population sd over the uniform prefix distribution
    assert (sd / exact > 0.5).all()  # P(s|q) varies a lot with q: the checks below have teeth
    geometric = np.exp(table.mean(axis=0))
    assert (np.abs(geometric - exact) / exact > 0.2).all()  # a log-space average would fail the checks below

    # the method's own path: sampled prefix ids -> engine -> estimator
    idx = sample_prior_prefixes(len(pool), 32, 1, seed=11)
    direct = prior_logprobs(model, [pool[i] for i in idx.ravel()], suffixes, batch_size=64)
    np.testing.assert_allclose(direct, table[idx.ravel()], atol=1e-5)

    # unbiased: the mean of many independent estimates with small c sits within a few standard errors of v_s
    c, seeds = 4, 500
    estimates = np.array([
        np.exp(prior_estimate(table[sample_prior_prefixes(len(pool), c, 1, seed=s).ravel()]).log_phat)
        for s in range(seeds)
    ])
    se_of_mean = sd / math.sqrt(c * seeds)
    assert (np.abs(estimates.mean(axis=0) - exact) < 4 * se_of_mean).all()

    # converges: the error shrinks like 1/sqrt(c), and the reported SE is the right size
    for c in (16, 256, 4096):
        est = prior_estimate(table[sample_prior_prefixes(len(pool), c, 1, seed=c).ravel()])
        err = np.abs(np.exp(est.log_phat) - exact)
        assert (err < 4 * sd / math.sqrt(c)).all()
    # heavy-tailed P(s|q): the sample SD is only reliable with many samples
    assert np.exp(est.log_se) == pytest.approx(sd / math.sqrt(4096), rel=0.2)
    est = prior_estimate(table[sample_prior_prefixes(len(pool), 256, 8, seed=1).ravel()], trials=8)
    assert (np.abs(np.exp(est.log_phat) - exact) < 4 * sd / math.sqrt(256 * 8)).all()


# ---------------------------------------------------------------- the audit method on real tiny models


def test_audit_section_is_consistent_redacted_and_rendered(tokenizer, tmp_path):
    samples = text_samples(tokenizer)
    run = make_run(tokenizer, samples)
    method = PriorAwareMemorization(PriorAwareConfig(n=5, c=16, suffix_len=8, trials=2, top=3), run)
    model = qwen2(len(tokenizer), seed=0)
    sec = method.audit(AuditedModel(pool=run, round=1, model=model, out_dir=str(tmp_path)))

    assert sec["config"]["m"] == 1e-2 and sec["config"]["n_source"] == "calibrated"
    # the rates are over the random draw (5 per client, canaries aside); each client's canary is audited beside it
    assert sec["overall"]["audited"] == 10 == sum(v["audited"] for v in sec["per_client"])
    assert sum(r["drawn"] for r in sec["samples"]) == 10 and len(sec["samples"]) == 12
    assert not any(r["drawn"] for r in sec["samples"] if "canary" in r["tags"])
    for key in ("extractable", "pa_memorized"):
        assert sec["overall"][key] == sum(v[key] for v in sec["per_client"])
    assert sum(sec["histogram_log10_ratio"]["all"]) == 12
    ratios = [e["log10_ratio"] for e in sec["top"]]
    assert ratios == sorted(ratios, reverse=True) and len(sec["top"]) == 3
    assert sec["lowest"][0]["log10_ratio"] == min(r["log10_ratio"] for r in sec["samples"])
    # canaries and generic boilerplate are broken down
    gt = sec["ground_truth"]
    assert gt["canary"]["4"]["audited"] == 2 and gt["generic"]["audited"] == 2 and gt["untagged"]["audited"] == 8
    assert {"extractable_rate", "pa_rate", "log10_n", "canary_pa_rate", "generic_pa_rate"} <= set(sec["headline"])

    # the per-sample figures agree with the engine computed independently
    # audited order per client: the draw (samples 1-5), then the canary (sample 0)
    pairs = [(s.prefix_ids, s.suffix_ids) for c in run.clients for s in samples[c][1:6] + samples[c][:1]]
    lp = sequence_logprobs(model, pairs)
    np.testing.assert_allclose([r["log10_p"] for r in sec["samples"]], lp / math.log(10), atol=1e-6)
    q = method.prior_prefixes
    assert len(q) == 32 and set(q) <= {s.prefix_ids for v in samples.values() for s in v}
    # P̂(s): the mean of the 2 trial means, each over the draws that are not s's own prefix
    probs = np.exp(prior_logprobs(model, q, [s for _, s in pairs]))
    own = np.array([[qi == p for p, _ in pairs] for qi in q])
    trial_means = [np.nanmean(np.where(own[t * 16:(t + 1) * 16], np.nan, probs[t * 16:(t + 1) * 16]), axis=0)
                   for t in range(2)]
    phat = np.log(np.mean(trial_means, axis=0))
    np.testing.assert_allclose([r["log10_prior"] for r in sec["samples"]], phat / math.log(10), atol=1e-6)
    # calibrated n = mean ratio over the App. B short set (suffix_len 8), recomputed independently
    gp = generic_pairs(tokenizer, list(GENERIC_SHORT), prefix_len=6, suffix_len=8)
    g_ratio = sequence_logprobs(model, gp) - np.log(np.exp(prior_logprobs(model, q, [s for _, s in gp])).mean(0))
    assert sec["config"]["log10_n"] == pytest.approx(np.log(np.exp(g_ratio).mean()) / math.log(10), abs=1e-6)
    assert len(sec["calibration"]["sequences"]) == 7

    # an untrained model is far from extractable, and the section says so with the numbers behind it
    d = sec["distance_to_extractable"]
    assert d["best_log10_p"] == pytest.approx(max(r["log10_p"] for r in sec["samples"]))
    assert d["log10_m"] == pytest.approx(-2) and d["orders_below"] == pytest.approx(-2 - d["best_log10_p"])
    assert d["far"] == (d["orders_below"] > 3) and ("Far from memorizing" in sec.get("note", "")) == d["far"]

    text = json.dumps(to_jsonable(sec))
    assert "<redacted sha256:" in text
    assert all(s.suffix_text not in text for v in samples.values() for s in v)
    md = view_for(method).markdown(sec)
    assert "| **all** | **10** |" in md and "canary, 4 copies" in md
    [(title, fname)] = view_for(method).render(sec, str(tmp_path))
    png = (tmp_path / fname).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert [p.name for p in tmp_path.iterdir()] == [fname]  # no temp file left behind


def test_distance_to_extractable_flags_rounds_far_from_the_threshold():
    from fedmem.audit.prior_aware import distance_to_extractable

    far = distance_to_extractable(np.log(np.array([1e-12, 1e-9])), 1e-4)
    assert far["best_log10_p"] == pytest.approx(-9) and far["orders_below"] == pytest.approx(5) and far["far"]
    near = distance_to_extractable(np.log(np.array([1e-12, 1e-6])), 1e-4)
    assert near["orders_below"] == pytest.approx(2) and not near["far"]


def test_calibration_gives_one_n_per_model(tokenizer):
    run = make_run(tokenizer, text_samples(tokenizer, suffix=32))  # long suffixes: App. B long set, m = 1e-4
    method = PriorAwareMemorization(PriorAwareConfig(n=3, c=8, suffix_len=32), run)
    a, b = qwen2(len(tokenizer), seed=0), qwen2(len(tokenizer), seed=1)
    n_a1 = method.audit(AuditedModel(pool=run, round=1, model=a))["config"]["log10_n"]
    n_a2 = method.audit(AuditedModel(pool=run, round=2, model=a))["config"]["log10_n"]
    sec_b = method.audit(AuditedModel(pool=run, round=1, model=b))
    assert n_a1 == n_a2
    assert abs(sec_b["config"]["log10_n"] - n_a1) > 1e-3
    assert sec_b["config"]["m"] == 1e-4 and len(sec_b["calibration"]["sequences"]) == len(GENERIC_LONG)
    # a configured n_ratio replaces the calibration; configured generic sentences replace App. B
    fixed = PriorAwareMemorization(PriorAwareConfig(n=3, c=8, suffix_len=32, n_ratio=100.0), run)
    assert fixed.audit(AuditedModel(pool=run, round=1, model=a))["config"]["log10_n"] == pytest.approx(2.0)
    own = PriorAwareMemorization(PriorAwareConfig(n=3, c=8, suffix_len=32, generic=["thank you for your time please"]),
                                 run)
    assert len(own.audit(AuditedModel(pool=run, round=1, model=a))["calibration"]["sequences"]) == 1


def test_public_calibration_set_has_the_audited_shape(tokenizer):
    rng = random.Random(2)
    public = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30))) for _ in range(40)]
    texts, pairs = public_generic_pairs(tokenizer, public, count=5, prefix_len=6, suffix_len=8, seed=3)
    assert len(pairs) == 5 and len(set(texts)) == 5
    for text, (p, s) in zip(texts, pairs):
        ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        assert len(p) == 6 and len(s) == 8 and p + s == ids[:14]  # paragraphs too short to cut are skipped
    assert public_generic_pairs(tokenizer, public, 5, 6, 8, seed=3) == (texts, pairs)  # seeded
    assert public_generic_pairs(tokenizer, public, 5, 6, 8, seed=4)[0] != texts
    with pytest.raises(ValueError, match="no paragraph of 400 tokens"):
        public_generic_pairs(tokenizer, public, 5, 200, 200, seed=3)
    # the method calibrates n on them; without a public corpus it says what is missing
    run = make_run(tokenizer, text_samples(tokenizer))
    with pytest.raises(ValueError, match="needs a public corpus"):
        PriorAwareMemorization(PriorAwareConfig(n=3, c=8, suffix_len=8, generic_source="public"), run)
    run.public_texts = tuple(public)
    method = PriorAwareMemorization(
        PriorAwareConfig(n=3, c=8, suffix_len=8, generic_source="public", generic_count=4), run)
    cal = method.audit(AuditedModel(pool=run, round=1, model=qwen2(len(tokenizer), seed=0)))["calibration"]
    assert cal["source"] == "public" and len(cal["sequences"]) == 4
    assert all(row["prefix_tokens"] == 6 and row["suffix_tokens"] == 8 for row in cal["sequences"])


def test_repeated_canary_is_pa_memorized_and_shared_boilerplate_is_not(tokenizer):
    """Train a tiny model on a canary (8 copies) and a boilerplate suffix that follows 24 different prefixes:
    both become extractable, only the canary is PA-memorized (its suffix is unlikely after other prefixes)."""
    rng = np.random.default_rng(0)
    vocab = len(tokenizer)

    def rand(k):
        return tuple(int(t) for t in rng.integers(1, vocab, k))

    canary, boiler = (rand(6), rand(8)), rand(8)
    boiler_rows = [(rand(6), boiler) for _ in range(24)]
    other_rows = [(rand(6), rand(8)) for _ in range(24)]
    train = [canary] * 8 + boiler_rows + other_rows
    model = qwen2(vocab, seed=0, hidden=64)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = torch.tensor([p + s for p, s in train])
    for _ in range(120):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()

    rows = [sample_from_ids(tokenizer, 0, 0, *canary, {"canary": "secret", "copies": 8})]
    rows += [sample_from_ids(tokenizer, 0, 1 + i, p, s, {"generic": True}) for i, (p, s) in enumerate(boiler_rows[:12])]
    rows += [sample_from_ids(tokenizer, 1, i, p, s, {"generic": True}) for i, (p, s) in enumerate(boiler_rows[12:])]
    rows += [sample_from_ids(tokenizer, 1, 12 + i, p, s) for i, (p, s) in enumerate(other_rows)]
    samples = {0: [r for r in rows if r.client == 0], 1: [r for r in rows if r.client == 1]}
    run = make_run(tokenizer, samples)
    method = PriorAwareMemorization(PriorAwareConfig(n=64, c=64, suffix_len=8, n_ratio=10.0), run)
    sec = method.audit(AuditedModel(pool=run, round=1, model=model))
    gt = sec["ground_truth"]
    assert (gt["canary"]["8"]["extractable"], gt["canary"]["8"]["pa_memorized"]) == (1, 1)
    assert gt["canary"]["8"]["pa_rate_ci95"] == pytest.approx([0.2065, 1.0], abs=1e-4)  # 1 of 1: Wilson, not 1 ± 0
    assert gt["generic"]["audited"] == 24 and gt["generic"]["extractable"] == 24
    assert gt["generic"]["pa_memorized"] == 0
    canary_row = next(r for r in sec["samples"] if "canary" in r["tags"])
    boiler_ratio = max(r["log10_ratio"] for r in sec["samples"] if r["tags"].get("generic"))
    assert canary_row["log10_ratio"] > 1.0 > boiler_ratio


def test_the_paper_preset_draws_5000_prior_prefixes_in_5_trials():
    from fedmem.config.compose import compose_dict

    pa = compose_dict(["experiment=paper"])["audit"]["pa"]
    assert (pa["c"], pa["trials"]) == (5000, 5)


def test_the_pa_rate_interval_adds_the_spread_between_prior_draws():
    from fedmem.audit.prior_aware import _counts, draw_spread

    # four extractable pairs; under trial 0's prior two are PA-memorized, under trial 1's one
    log_p = np.log([0.5, 0.5, 0.5, 0.5])
    per_trial = np.log([[1e-3, 1e-3, 0.4, 0.4], [1e-3, 0.1, 0.4, 0.4]])
    drawn, clients = np.ones(4, dtype=bool), np.array([0, 0, 1, 1])
    spread = draw_spread(log_p, per_trial, math.log(1e-2), math.log(10.0), drawn, clients)
    assert spread["all"] == pytest.approx(np.std([0.5, 0.25], ddof=1) / math.sqrt(2))  # per-trial rates 2/4, 1/4
    assert spread[1] == 0.0 and spread[0] == pytest.approx(np.std([1.0, 0.5], ddof=1) / math.sqrt(2))
    assert draw_spread(log_p, per_trial[:1], math.log(1e-2), math.log(10.0), drawn, clients) == {}
    ext, pa = np.ones(4, dtype=bool), np.array([True, False, False, False])
    plain, wide = _counts(ext, pa)["pa_rate_ci95"], _counts(ext, pa, spread["all"])["pa_rate_ci95"]
    assert 0.0 <= wide[0] < plain[0] < 0.25 < plain[1] < wide[1] <= 1.0
    for k in (0, 4):  # no pair and every pair: still inside [0, 1]
        lo, hi = _counts(ext, np.arange(4) < k, 0.3)["pa_rate_ci95"]
        assert 0.0 <= lo <= k / 4 <= hi <= 1.0
