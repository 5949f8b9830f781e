"""The audit pool keeps its arms apart (SPEC §3b, §6): held-out texts are never training text, the planted canaries
sit beside the ordinary draw and never in it, and no sample is scored past the length training cut its record at."""

from __future__ import annotations

import pytest
from helpers import USER_TEMPLATE, texts, tiny_tokenizer

from fedmem.audit.config import AuditConfig
from fedmem.audit.mr import MemorizationRatio, MRConfig
from fedmem.audit.pool import build_audit_pool, draw, place_common_draw
from fedmem.data import ClientSplit, FederatedData, Record, TaskConfig
from fedmem.engine.train import tokenize_examples

PREFIX = 12


def record(i: str, text: str, tags: dict | None = None) -> Record:
    return Record(id=i, user=USER_TEMPLATE.format(text=text), assistant="An answer.", mem_text=text, client=0,
                  tags=tags or {})


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def one_client(train: list[Record], test: list[Record], public: list[str] = (), dedup: dict | None = None):
    return FederatedData(clients=[ClientSplit(train=train, test=test)], public_corpus=list(public),
                         ground_truth={"dedup": dedup} if dedup else {}, source="local")


def test_heldout_texts_that_are_training_text_are_dropped_and_counted(tok):
    body = texts(6, seed=5)
    train = [record(f"t{i}", t) for i, t in enumerate(body[:3])]
    near = body[1].replace(" the ", " one ", 1)  # one word changed: a near duplicate of a training text
    test = [record("same", "  " + body[0].upper() + " "),  # a training text, case and spacing aside
            record("near", near), record("public", body[3]), record("fresh1", body[4]), record("fresh2", body[5])]
    audit = AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client="all")
    task = TaskConfig(name="dialog")

    exact = build_audit_pool(audit, task, one_client(train, test, public=[body[3]], dedup={"mode": "exact"}), tok, 0)
    assert {s.tags["record_id"] for s in exact.test[0]} == {"near", "fresh1", "fresh2"}
    assert exact.heldout_trained == {0: 2}

    near_dedup = one_client(train, test, public=[body[3]], dedup={"mode": "near", "threshold": 0.7})
    run = build_audit_pool(audit, task, near_dedup, tok, 0)
    assert {s.tags["record_id"] for s in run.test[0]} == {"fresh1", "fresh2"} and run.heldout_trained == {0: 3}
    assert run.training_texts == {0: tuple(body[:3])}

    with pytest.raises(ValueError, match="test_per_client=3, but client 0's test split has only 2 .* not training"):
        build_audit_pool(AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client=3), task,
                        near_dedup, tok, 0)


def test_what_no_draw_can_take_is_counted_by_reason_over_the_whole_split(tok):
    """Every ordinary record of a split is either pooled (``all``) or counted once, by its one reason; with a draw of
    fixed size the counts are the same: they describe the split, not how far a draw read into it."""
    body = texts(9, seed=7)
    train = [record("a", body[0]), record("a2", body[0]), record("a3", body[0]),  # one text, three times
             record("b", body[1]), record("short", "Too short to audit."), record("pub", body[2]),
             record("c", body[3]), record("k", body[4], {"canary": "k", "copies": 2}),
             record("k2", body[4], {"canary": "k", "copies": 2})]  # the planted canary's copies: not ordinary
    test = [record("h", body[5]), record("h2", body[5]), record("trained", body[1]), record("tiny", "Also short."),
            record("h3", body[6])]
    data = one_client(train, test, public=[body[2]])
    task = TaskConfig(name="dialog")
    every = build_audit_pool(AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client="all"),
                             task, data, tok, 0)
    assert every.left_out == {0: {"train": {"duplicate": 2, "trained_elsewhere": 1, "too_short": 1},
                                  "test": {"duplicate": 1, "trained_elsewhere": 1, "too_short": 1}}}
    ordinary = [s for s in every.train[0] if "canary" not in s.tags]
    assert len(ordinary) + 4 == 7 and len(every.test[0]) + 3 == 5  # pooled + left out = the ordinary records
    fixed = build_audit_pool(AuditConfig(prefix_len=PREFIX, samples_per_client=1, test_per_client=1), task, data,
                             tok, 0)
    assert fixed.left_out == every.left_out


def test_mrs_two_arms_pass_one_selection_and_one_duplicate_rule(tok):
    """SPEC §3b: a training text another client also trains on is drawn in neither client's training arm (as a
    held-out text found in training is drawn in no held-out arm); after the common draw is placed, the first n of
    each split's order, the samples MR's training arm and its control take, hold the same suffix length."""
    long, short = texts(12, seed=8, n_sentences=8), texts(12, seed=9, n_sentences=3)
    shared = long[0]
    clients = [ClientSplit(train=[record(f"c{c}t{i}", t) for i, t in enumerate([shared, *long[1 + 3 * c:4 + 3 * c],
                                                                                  *short[4 * c:4 * c + 4]])],
                           test=[record(f"c{c}h{i}", t) for i, t in enumerate([*long[7 + 2 * c:9 + 2 * c],
                                                                                *short[8 + 2 * c:10 + 2 * c]])])
               for c in range(2)]
    data = FederatedData(clients=clients, public_corpus=[], ground_truth={}, source="local")
    pool = build_audit_pool(AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client="all"),
                            TaskConfig(name="dialog"), data, tok, 0)
    assert pool.train_elsewhere == {0: 1, 1: 1}
    assert not any(s.tags["record_id"] == f"c{c}t0" for c in (0, 1) for s in pool.train[c])  # the shared text
    lengths = sorted(s.trained_suffix_len for c in (0, 1) for s in pool.train[c] + pool.test[c])
    min_suffix = lengths[len(lengths) // 2]  # a length half the samples fall short of
    placed = place_common_draw(pool, 2, min_suffix)
    mr = MemorizationRatio(MRConfig(n=2, heldout=2), placed)
    try:
        for c in (0, 1):
            for arm in (mr.samples[c], mr.heldout[c]):
                assert len(arm) == 2 and all(s.trained_suffix_len >= min_suffix for s in arm), arm
            assert tuple(s.id for s in mr.samples[c]) == placed.common_draw[c]
    finally:
        mr.close()


def test_canaries_are_pooled_beside_the_ordinary_draw_and_audited_apart(tok):
    body = texts(8, seed=6)
    train = [record(f"k{i}", t, {"canary": f"k{i}", "copies": 4}) for i, t in enumerate(body[:2])]
    train += [record(f"o{i}", t) for i, t in enumerate(body[2:7])]
    run = build_audit_pool(AuditConfig(prefix_len=PREFIX, samples_per_client=3, test_per_client=1),
                          TaskConfig(name="dialog"), one_client(train, [record("h", body[7])]), tok, 0)
    pooled = run.train[0]
    assert [s.tags["record_id"] for s in pooled[:2]] == ["k0", "k1"] and len(pooled) == 5  # 2 canaries + 3 ordinary
    ordinary, _ = draw(pooled, 3)
    assert len(ordinary) == 3 and not any("canary" in s.tags for s in ordinary)
    mr = MemorizationRatio(MRConfig(n=3, heldout=1), run)
    try:
        assert mr.samples[0] == ordinary and [s.tags["canary"] for s in mr.canaries] == ["k0", "k1"]
        assert mr.matcher.suffixes[0] == [s.suffix_text for s in ordinary]  # no canary in any index
    finally:
        mr.close()


def test_no_sample_is_scored_past_the_trained_length(tok):
    """Training cuts each record at model.max_seq_len: the training-context slices stop there (a sample whose prefix
    itself was cut keeps no suffix, and a method's draw passes it over), the prompt context's suffix keeps as many
    tokens, and the pool counts the cut samples."""
    body = texts(4, seed=7, n_sentences=8)
    train = [record(f"t{i}", t) for i, t in enumerate(body[:3])]
    task = TaskConfig(name="dialog")
    trained_ids = tokenize_examples(train, tok, False)
    audit = AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client="all")
    uncut = build_audit_pool(audit, task, one_client(train, [record("h", body[3])]), tok, 0)
    context_len = len(uncut.train[0][0].train_context_ids)
    trained_len = context_len + 20  # 20 suffix tokens survive the cut
    assert all(len(ids) > trained_len for ids in trained_ids)

    run = build_audit_pool(audit, task, one_client(train, [record("h", body[3])]), tok, 0, trained_len=trained_len)
    for s, full in zip(run.train[0], uncut.train[0]):
        context, suffix = s.scored_in("train")
        assert len(context) + len(suffix) <= trained_len and suffix == full.train_suffix_ids[: len(suffix)]
        assert s.train_cut > 0 and s.trained_suffix_len < len(s.suffix_ids)
        assert s.scored_in("prompt")[1] == s.suffix_ids[: s.trained_suffix_len]
        assert s.suffix_ids == full.suffix_ids  # MR's own suffix (the paper's protocol) is not cut
    assert run.cut_at_trained_length == {0: {"train": 3, "test": 1}}
    assert len(draw(run.train[0], 3, min_suffix=25)[0]) == 0 and len(draw(run.train[0], 3, min_suffix=15)[0]) == 3

    prefix_cut = build_audit_pool(audit, task, one_client(train, [record("h", body[3])]), tok, 0,
                                 trained_len=context_len - 1)
    assert all(s.scored_in("train")[1] == () and s.trained_suffix_len == 0 for s in prefix_cut.train[0])
