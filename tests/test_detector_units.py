"""The parts of the discriminator F one by one: preprocessing, vectorized seeding against a direct
implementation of the reference formulas, clustering/validation/overlaps, word runs, the incoherence
filter, and the configuration."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import pytest

from fedmem.audit.mr.detector import (
    DetectorConfig,
    MissingAssetError,
    PlagiarismDetector,
    is_incoherent,
)
from fedmem.audit.mr.detector import align as align_mod
from fedmem.audit.mr.detector import seeding as seeding_mod
from fedmem.audit.mr.detector import verbatim as verbatim_mod
from fedmem.audit.mr.detector.align import AlignedCase, extend, resolve_overlaps
from fedmem.audit.mr.detector.preprocess import (
    Preprocessor,
    split_sentences,
    term_tokens,
    vectorize,
)
from fedmem.audit.mr.detector.verbatim import common_runs

REPO = Path(__file__).resolve().parent.parent


# -- preprocessing ---------------------------------------------------------------------------------------------
def sentences_of(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def test_sentence_splitter():
    text = (
        "Dr. Smith went to the U.S. in 2019. He paid $3.50 for it, i.e. almost nothing! Was it J. R. R. Tolkien? "
        '"Yes," she said. "It was."\n\nA new paragraph without a final stop\nstill one sentence'
    )
    assert sentences_of(text) == [
        "Dr. Smith went to the U.S. in 2019.",
        "He paid $3.50 for it, i.e. almost nothing!",
        "Was it J. R. R. Tolkien?",
        '"Yes," she said.',
        '"It was."',
        "A new paragraph without a final stop\nstill one sentence",
    ]
    assert split_sentences("") == [] and split_sentences(" \n\t ") == []
    # Lowercase starts (common in model generations) still split, as punkt does.
    assert sentences_of("i have a cough . i can feel the lump") == ["i have a cough .", "i can feel the lump"]


def test_term_tokens_follow_the_reference_filter():
    assert term_tokens("I couldn't believe it's the U.S. government's 45-year-old plan, costing 1,000 or 3.5 units!") == [
        "could", "n't", "believe", "the", "u.s", "government", "45-year-old", "plan", "costing", "1,000", "3.5",
        "units",
    ]  # fmt: skip
    assert term_tokens("a an of to in -- !!! 12") == []


def test_short_sentences_are_joined_with_their_true_span():
    pp = Preprocessor(min_sentlen=3)
    text = "Yes. Ok then. The committee approved the budget. It did."
    units = pp.units(text)
    # "Yes." and "Ok then." have fewer than 3 kept tokens ("yes" / "then") and join the next sentence;
    # the last sentence ("It did.", 1 token) stays on its own, as in the reference.
    assert [text[s:e] for s, e in units.spans] == ["Yes. Ok then. The committee approved the budget.", "It did."]
    assert units.stems[0] == ["yes", "then", "the", "committe", "approv", "the", "budget"]


def test_vectorize_numbers_terms_in_lexicographic_order():
    pp = Preprocessor()
    a, b = vectorize([pp.units("Zebras run fast. Apples fall down."), pp.units("Mangoes ripen slowly in summer.")])
    a2, = vectorize([pp.units("Zebras run fast. Apples fall down.")])
    # Same relative order of the terms whatever else is in the batch.
    assert np.array_equal(np.argsort(a.entry_term, kind="stable"), np.argsort(a2.entry_term, kind="stable"))
    assert a.n == 2 and b.n == 1
    assert a.sent_nterms.tolist() == [3, 3]
    assert (a.entry_df == 1).all()


# -- seeding: vectorized join vs the reference formulas -------------------------------------------------------
def reference_seeds(a_units, b_units, th1, th2):
    """Seeds computed as the reference does, with dictionaries (tf x ln(N/df), cosine, Dice on term sets)."""
    bows = []
    for units in (a_units, b_units):
        bows.append([{t: stems.count(t) for t in set(stems)} for stems in units.stems])
    n_total = len(bows[0]) + len(bows[1])
    df: dict[str, int] = {}
    for bow in bows[0] + bows[1]:
        for t in bow:
            df[t] = df.get(t, 0) + 1
    weighted = [[{t: tf * math.log(n_total / df[t]) for t, tf in bow.items()} for bow in side] for side in bows]
    out = {}
    for i, u in enumerate(weighted[0]):
        for j, v in enumerate(weighted[1]):
            den = math.sqrt(sum(x * x for x in u.values())) * math.sqrt(sum(x * x for x in v.values()))
            cos = sum(u[t] * v[t] for t in u if t in v) / den if den else 0.0
            dice = 2 * len(set(u) & set(v)) / (len(u) + len(v))
            if cos > th1 and dice > th2:
                out[(i, j)] = (cos, dice)
    return out


def random_text(rng: random.Random, vocab: list[str], n_sentences: int) -> str:
    return " ".join(
        " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 12))).capitalize() + "."
        for _ in range(n_sentences)
    )


@pytest.mark.parametrize("max_products", [seeding_mod.MAX_PRODUCTS, 40, 3])
def test_vectorized_seeds_match_reference_formulas(monkeypatch, max_products):
    # Small max_products forces the chunked and the huge-pair (split by sentence rows) paths.
    monkeypatch.setattr(seeding_mod, "MAX_PRODUCTS", max_products)
    rng = random.Random(7)
    vocab = [f"{w}{k}" for w in ("alpha", "beta", "gamma", "delta") for k in range(4)]
    texts = [random_text(rng, vocab, rng.randint(1, 7)) for _ in range(12)] + ["", "Tiny."]
    pairs = [(rng.choice(texts), rng.choice(texts)) for _ in range(40)] + [(texts[0], texts[0])]
    pp = Preprocessor()
    units = {t: pp.units(t) for p in pairs for t in p}
    prepared = dict(zip(units, vectorize(list(units.values()))))
    seeds = seeding_mod.batch_seeds([(prepared[g], prepared[s]) for g, s in pairs], 0.30, 0.33)
    n_seeds = 0
    for (g, s), got in zip(pairs, seeds):
        want = reference_seeds(units[g], units[s], 0.30, 0.33)
        assert {(int(i), int(j)) for i, j in zip(got.src, got.susp)} == set(want)
        for i, j, cos, dice in zip(got.src, got.susp, got.cosine, got.dice):
            assert cos == pytest.approx(want[(i, j)][0], abs=1e-12)
            assert dice == pytest.approx(want[(i, j)][1], abs=1e-12)
        n_seeds += len(got)
    assert n_seeds > 40  # the random corpus does exercise seeding


def test_seeds_are_bit_identical_in_any_batch():
    rng = random.Random(3)
    vocab = [f"w{k}" for k in range(30)]
    texts = [random_text(rng, vocab, 5) for _ in range(6)]
    pp = Preprocessor()

    def seeds_for(pairs):
        units = {t: pp.units(t) for p in pairs for t in p}
        prepared = dict(zip(units, vectorize(list(units.values()))))
        return seeding_mod.batch_seeds([(prepared[g], prepared[s]) for g, s in pairs], 0.3, 0.33)

    alone = seeds_for([(texts[0], texts[1])])[0]
    mixed = seeds_for([(texts[2], texts[3]), (texts[4], texts[5]), (texts[0], texts[1])])[2]
    assert len(alone) > 0
    assert np.array_equal(alone.cosine, mixed.cosine) and np.array_equal(alone.src, mixed.src)


# -- extension and filtering ----------------------------------------------------------------------------------
def test_clustering_alternates_sides():
    seeds = [(0, 0), (1, 1), (2, 9), (10, 2), (11, 3)]  # (src, susp)
    clusters = align_mod.cluster(seeds, src_gap=1, susp_gap=1)
    # Suspicious side first: {0,1,2,3} and {9}; then the source side splits {0,1,10,11} into {0,1} and {10,11}.
    assert sorted(sorted(c) for c in clusters) == [[(0, 0), (1, 1)], [(2, 9)], [(10, 2), (11, 3)]]
    assert align_mod.cluster([], 4, 4) == []


class ScriptedSpace:
    """A pair space whose fragment cosines are given: to test the validation logic in isolation."""

    def __init__(self, cosine_of):
        self.cosine_of = cosine_of

    def fragment_cosine(self, case):
        return self.cosine_of(case)


def test_failed_validation_drops_only_its_own_case():
    # Two clusters far apart: the first validates, the second never does (at any gap down to 0).
    # The reference could lose the accepted case when a re-clustering failed; here it must survive.
    seeds = [(0, 0), (1, 1), (20, 20), (23, 22)]
    space = ScriptedSpace(lambda c: 0.9 if c.src_lo < 10 else 0.1)
    cases = extend(space, seeds, 4, 4, th3=0.34)
    assert [(c.src_lo, c.src_hi, c.susp_lo, c.susp_hi) for c in cases] == [(0, 1, 0, 1)]


def test_validation_reclusters_with_smaller_gaps():
    # One cluster (gap 4) that only validates once split at gap 1: both halves survive.
    seeds = [(0, 0), (1, 1), (4, 4), (5, 5)]
    space = ScriptedSpace(lambda c: 0.9 if c.src_hi - c.src_lo <= 1 else 0.2)
    cases = extend(space, seeds, 4, 4, th3=0.34)
    assert sorted((c.src_lo, c.src_hi) for c in cases) == [(0, 1), (4, 5)]


class QualitySpace:
    def __init__(self, best):
        self.best = best  # susp sentence -> best-match cosine

    def best_match(self, case):
        return np.array([self.best[j] for j in range(case.susp_lo, case.susp_hi + 1)])


def test_overlap_resolution_keeps_the_better_case():
    a = AlignedCase(0, 2, 0, 2, [], 0.5)
    b = AlignedCase(5, 6, 2, 3, [], 0.5)
    c = AlignedCase(9, 9, 6, 6, [], 0.5)
    space = QualitySpace({0: 0.2, 1: 0.2, 2: 0.3, 3: 0.9, 6: 0.8})
    kept = resolve_overlaps(space, [c, b, a])
    assert kept == [b, c]
    # Both near-perfect: the case with more suspicious sentences wins.
    space = QualitySpace({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 6: 1.0})
    assert resolve_overlaps(space, [a, b]) == [a]


# -- verbatim word runs -------------------------------------------------------------------------------------
def brute_runs(x, y):
    out = set()
    for i in range(len(x)):
        for j in range(len(y)):
            if x[i] == y[j] and not (i > 0 and j > 0 and x[i - 1] == y[j - 1]):
                k = 0
                while i + k < len(x) and j + k < len(y) and x[i + k] == y[j + k]:
                    k += 1
                out.add((i, j, k))
    return out


def test_common_runs_match_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.integers(0, 4, rng.integers(0, 25))
        y = rng.integers(0, 4, rng.integers(0, 25))
        expected = brute_runs(x.tolist(), y.tolist())
        # common_runs (equality matrix) and the row-by-row programme used for very long fragments
        for runs in (common_runs, verbatim_mod._common_runs_rows):
            i, j, length = runs(x, y)
            assert set(zip(i.tolist(), j.tolist(), length.tolist())) == expected


# -- incoherence filter (SPEC §3) -------------------------------------------------------------------------------
def test_incoherence_filter():
    assert is_incoherent("the cat sat " * 10)
    assert not is_incoherent("the cat sat " * 9 + "the cat")
    assert is_incoherent("I am fine. " + "I am fine, " * 9 + "really.")  # punctuation and case do not matter
    assert is_incoherent("no no no no no no no no no no no no")  # 12 words: "no no no" occurs 10 times
    assert not is_incoherent("no no no no no no no no no no no")
    assert not is_incoherent("The patient reported chest pain after eating rice. " * 3)
    assert not is_incoherent("")
    assert is_incoherent("a b " * 5, n=2, min_repeats=5)
    with pytest.raises(ValueError, match="n >= 1"):
        is_incoherent("text", n=0)


# -- configuration ---------------------------------------------------------------------------------------------
def test_defaults_are_lee_et_al():
    cfg = DetectorConfig()
    assert (cfg.th1, cfg.th2, cfg.th3) == (0.30, 0.33, 0.34)
    assert (cfg.src_gap, cfg.susp_gap, cfg.src_gap_summary, cfg.susp_gap_summary) == (4, 4, 24, 24)
    assert (cfg.min_sentlen, cfg.min_plaglen, cfg.verbatim_minlen, cfg.summary_ratio) == (3, 50, 50, 3.0)
    assert cfg.rem_sw is False and cfg.scorer == "minilm"
    assert (cfg.paraphrase_high, cfg.identical) == (0.5, 0.99)
    for f in dataclasses.fields(DetectorConfig):
        assert f.metadata.get("help"), f.name


def test_the_composed_config_holds_the_dataclass_defaults():
    from fedmem.config import compose_dict

    assert DetectorConfig(**compose_dict([])["audit"]["mr"]["detector"]) == DetectorConfig()


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"th1": 1.5}, "th1"),
        ({"src_gap": -1}, "src_gap"),
        ({"min_plaglen": 2.5}, "min_plaglen"),
        ({"scorer": "bert"}, "scorer"),
        ({"scorer": "cross_encoder"}, "cross_encoder_path"),
        ({"paraphrase_high": 0.995}, "paraphrase_high"),
        ({"batch_size": 0}, "batch_size"),
        ({"encoder_dtype": "float16"}, "encoder_dtype"),
        ({"ner_workers": -1}, "ner_workers"),
        ({"summary_ratio": 0}, "summary_ratio"),
    ],
)
def test_bad_config_values_are_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        DetectorConfig(**bad)


def test_missing_assets_are_one_clear_error(tmp_path):
    with pytest.raises(MissingAssetError, match="no_such_pipeline"):
        PlagiarismDetector(DetectorConfig(ner_model="no_such_pipeline"))
    with pytest.raises(MissingAssetError, match="not a local Hugging Face checkpoint"):
        PlagiarismDetector(DetectorConfig(scorer="cross_encoder", cross_encoder_path=str(tmp_path / "absent")))
