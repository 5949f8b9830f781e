"""MR's control on real parts (SPEC §3b): held-out prefixes through the same protocol on exchangeable arms (hits on
the prefix's own record and on other records), the excess, the data's floor and the shared-text label, with the tiny
model, the embedded index and the PAN2014 detector.

The records are made of pseudo-words drawn at random, so no two records share a passage by chance; half of them end
in one closing sentence that both clients hold (boilerplate). What a model memorized is set by training it: on the
audited records themselves (planted), or on other records of the same kind (a model that writes like the data and
has memorized no audited record).
"""

import numpy as np
import pytest
from helpers import memorize, tiny_model, tiny_tokenizer

from fedmem.audit.base import AuditedModel, AuditPool
from fedmem.audit.mr import MemorizationRatio, MRConfig
from fedmem.audit.mr.suffix_match import SuffixMatcher, data_floor
from fedmem.audit.pool import header_ids, text_sample
from fedmem.engine.config import Decoding

BOILERPLATE = "Please remember that this message is not medical advice and you should see your own doctor soon."


def pseudo_words(rng, n: int) -> list[str]:
    syllables = ["ba", "ko", "ri", "tu", "me", "sa", "lo", "ni", "ve", "da", "pu", "gi", "ro", "fe", "zu", "ha"]
    return ["".join(rng.choice(syllables, size=rng.integers(2, 4))) for _ in range(n)]


def record(rng, boilerplate: bool) -> str:
    """A sentence of 8 pseudo-words (the prefix and a little more), then one of 16 more or the boilerplate."""
    words = pseudo_words(rng, 24)
    return " ".join(words[:8]) + ". " + (BOILERPLATE if boilerplate else " ".join(words[8:]) + ".")


def samples(tok, texts: list[str], client: int, split: str) -> list:
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    return [text_sample(tok, x, header_ids(tok), 8, client, split, i) for i, x in enumerate(ids)]


@pytest.fixture(scope="module")
def data(detector):
    """Two clients, 16 training and 16 held-out records each, every second one ending in the shared boilerplate;
    plus 32 other records of the same kind (what a model that writes like the data was trained on)."""
    tok = tiny_tokenizer()
    rng = np.random.default_rng(7)
    split = {(c, s): [record(rng, i % 2 == 0) for i in range(16)] for c in (0, 1) for s in ("train", "test")}
    other = [record(rng, i % 2 == 0) for i in range(32)]
    run = AuditPool(train={c: samples(tok, split[c, "train"], c, "train") for c in (0, 1)},
                   test={c: samples(tok, split[c, "test"], c, "test") for c in (0, 1)},
                   train_sizes={0: 16, 1: 16}, tokenizer=tok, decoding=Decoding(strategy="greedy"), prefix_len=8,
                   prompt_header=header_ids(tok), seed=0)
    return tok, run, samples(tok, other, 0, "train"), detector


def audit(run, detector, model):
    method = MemorizationRatio(MRConfig(n=16, max_new_tokens=96), run, detector=detector)
    try:
        return method.audit(AuditedModel(pool=run, round=1, model=model))
    finally:
        method.close()


def test_planted_records_give_an_excess_above_zero(data):
    tok, run, _, detector = data
    model = tiny_model(tok, hidden=96, layers=2)
    memorize(model, [s for c in run.clients for s in run.train[c]], steps=250, lr=5e-3)
    h = audit(run, detector, model)["headline"]
    assert h["excess_intra_ci95"][0] > 0 and h["excess_total_ci95"][0] > 0  # training prefixes recall their records
    assert h["excess_own_intra_ci95"][0] > 0  # ... their own records, typed alike on both arms
    assert h["intra"] > 0.5 and h["heldout_intra"] < h["intra"]


def test_a_model_that_memorized_no_audited_record_has_no_excess(data):
    """Trained on other records of the same kind: it writes the boilerplate after any prefix, training or held-out,
    so whatever the paper's MR counts, the excess is 0 within its interval and the hits are shared text."""
    tok, run, other, detector = data
    model = tiny_model(tok, hidden=96, layers=2)
    memorize(model, other, steps=250, lr=5e-3)
    sec = audit(run, detector, model)
    h = sec["headline"]
    for figure in ("excess_intra", "excess_inter", "excess_total", "excess_own_intra", "excess_other_intra",
                   "excess_other_inter", "excess_other_total", "distinctive_excess_total"):
        lo, hi = h[f"{figure}_ci95"]
        assert lo <= 0 <= hi, figure
    control = sec["control"]
    assert control["combined"]["distinctive"]["train"]["any"]["total"] <= h["total"]
    # it writes the boilerplate after held-out prefixes too: the held-out arm scores what the training arm does
    assert control["combined"]["all"]["heldout"]["any"]["total"] > 0


def test_shared_suffix_text_is_labelled_shared_and_distinctive_text_not(data):
    tok, run, _, detector = data
    matcher = SuffixMatcher({c: [s.suffix_text for s in run.train[c]] for c in run.clients}, detector)
    training = {c: [s.prefix_text + s.suffix_text for s in run.train[c]] for c in run.clients}
    try:
        matcher.mark_shared(training)
        held = matcher.shared_suffixes()
        boiler = [i for i, s in enumerate(run.train[0]) if BOILERPLATE[:40] in s.suffix_text]
        assert held == {0: len(boiler), 1: len(boiler)} and boiler  # every boilerplate record, in both clients
        assert any(BOILERPLATE[:60] in p["text"] and p["clients"] == [0, 1] and not p["public"]
                   for p in matcher.shared_passages())
        distinct = next(s.suffix_text for s in run.train[1] if BOILERPLATE[:40] not in s.suffix_text)
        m = matcher.match(["Then it said: " + BOILERPLATE, "As written before: " + distinct])
        assert m.hits["verbatim"][0] == {0, 1} and m.distinctive["any"][0] == set()  # shared: both, not distinctive
        assert m.hits["verbatim"][1] == {1} and m.distinctive["verbatim"][1] == {1}
        # a passage only one client holds is shared when the public share holds it too
        matcher.mark_shared(training, public=("A public page quotes it: " + distinct,))
        assert any(p["clients"] == [1] and p["public"] and p["text"] in " ".join(distinct.split())
                   for p in matcher.shared_passages())
        assert matcher.match(["As written before: " + distinct]).distinctive["any"][0] == set()
    finally:
        matcher.close()


def test_a_shared_passage_that_retrieval_would_not_rank_is_found(data):
    """Shared text is found by exact search over every client's whole training split: a passage that client 0's
    indexed suffix shares with a client-1 record outside the audited sample (in no index, so no ranking could ever
    surface it) is shared."""
    tok, run, _, detector = data
    distinct = next(s.suffix_text for s in run.train[0] if BOILERPLATE[:40] not in s.suffix_text)
    doc = [s.suffix_text for s in run.train[0]].index(distinct)
    middle = " ".join(distinct.split()[2:14])  # whole words, well over 50 characters
    unsampled = "Some words first. " + middle + " and more words after it."
    matcher = SuffixMatcher({c: [s.suffix_text for s in run.train[c]] for c in run.clients}, detector, top_k=1)
    try:
        matcher.mark_shared({0: [distinct], 1: [unsampled]})
        (passage,) = matcher.shared[(0, doc)]
        assert passage.clients == (0, 1) and not passage.public
        assert len(middle) >= 50 and distinct[passage.start:passage.end].split() == middle.split()
    finally:
        matcher.close()


def test_floor_counts_a_known_shared_sentence_and_nothing_else(data):
    """The held-out texts' true continuations: the half that ends in the boilerplate matches every client (it is in
    their training suffixes), the pseudo-word half matches nobody; on distinctive text the floor is 0."""
    _, run, _, detector = data
    matcher = SuffixMatcher({c: [s.suffix_text for s in run.train[c]] for c in run.clients}, detector)
    try:
        matcher.mark_shared({c: [s.suffix_text for s in run.train[c]] for c in run.clients})
        held = [s for c in run.clients for s in run.test[c]]
        floor = data_floor(matcher, [s.client for s in held], [s.suffix_text for s in held], run.train_sizes)
    finally:
        matcher.close()
    ends_in_boilerplate = sum(BOILERPLATE[:40] in s.suffix_text for s in held) / len(held)
    assert ends_in_boilerplate == 0.5
    f = floor["all"]["any"]
    assert f["total"] == f["intra"] == f["inter"] == 0.5
    assert floor["distinctive"]["any"]["total"] == 0.0
