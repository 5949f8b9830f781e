"""Agreement between the methods' per-sample verdicts on the common draw, and the common draw itself: hand-made
verdicts with values computed by hand, and a pool whose samples' suffix lengths differ."""

import numpy as np
import pytest
from helpers import make_run, make_sample, texts, tiny_tokenizer

from fedmem.audit.agreement import (
    MIN_COMMON,
    agreement,
    cohen_kappa,
    jaccard,
    kappa_ci95,
    spearman,
)
from fedmem.audit.mia import MembershipInference, MiaConfig
from fedmem.audit.mr import MemorizationRatio, MRConfig
from fedmem.audit.pearl import PearlConfig, PearlSensitivity
from fedmem.audit.pool import check_common_draw, place_common_draw
from fedmem.audit.prior_aware import PriorAwareConfig, PriorAwareMemorization
from fedmem.reports.pages import _agreement_table


def rows(decisions, scores, tags=None, split="train", prefix="s"):
    return [{"id": f"{prefix}{i}", "split": split, "tags": (tags or {}).get(i, {}), "decision": d, "score": s}
            for i, (d, s) in enumerate(zip(decisions, scores))]


def ids(n, prefix="s"):
    return {f"{prefix}{i}" for i in range(n)}


def test_kappa_jaccard_and_rank_correlation_by_hand():
    a, b = [True, True, False, False], [True, False, False, False]
    # p_o = 3/4; p_e = (1/2)(1/4) + (1/2)(3/4) = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    assert jaccard(a, b) == pytest.approx(1 / 2)  # one sample flagged by both of the two flagged by either
    assert cohen_kappa([True] * 3, [True] * 3) is None and jaccard([False] * 3, [False] * 3) is None
    assert spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 40.0, 30.0]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_matrix_over_the_common_draw_only():
    n = MIN_COMMON + 10
    # the same three-in-four pattern as above, repeated: kappa 1/2 and Jaccard 1/2 on the 40 common samples
    a = rows([i % 4 < 2 for i in range(n)], [float(i % 4 < 2) for i in range(n)])
    b = rows([i % 4 == 0 for i in range(n)], [float(i % 4 == 0) for i in range(n)])
    # outside the common draw: more train samples for a, which would change its figures, and test samples
    extra = rows([True] * 20, [1.0] * 20, prefix="x") + rows([True] * 5, [1.0] * 5, split="test", prefix="t")
    out = agreement({"a": a + extra, "b": b}, ids(n), seed=0)
    assert out["methods"] == ["a", "b"] and out["common"] == n and out["min_common"] == MIN_COMMON
    assert out["n"] == [[n, n], [n, n]]
    assert out["audited"] == [n, n] and out["flagged"] == [n // 2, n // 4]
    assert out["kappa"][0][1] == out["kappa"][1][0] == pytest.approx(0.5)
    assert out["jaccard"][0][1] == pytest.approx(0.5)
    assert out["spearman"][0][1] == pytest.approx(spearman([s["score"] for s in a], [s["score"] for s in b]))
    assert out["kappa"][0][0] == pytest.approx(1.0) and out["reason"] == [[None, None], [None, None]]


def test_a_pair_below_the_minimum_gets_no_figures_but_a_reason():
    n = MIN_COMMON + 5
    full = rows([i % 3 == 0 for i in range(n)], [float(i) for i in range(n)])
    few = full[: MIN_COMMON - 1]  # one short of the minimum in common with the others
    out = agreement({"full": full, "other": full, "few": few}, ids(n), seed=0)
    assert out["n"][0][2] == MIN_COMMON - 1
    for key in ("kappa", "kappa_ci95", "jaccard", "spearman"):
        assert out[key][0][2] is None and out[key][2][0] is None and out[key][2][2] is None
        assert out[key][0][1] is not None
    assert out["reason"][0][2] == out["reason"][2][2] == f"too few ({MIN_COMMON - 1})"
    md = "\n".join(_agreement_table(out))
    assert f"| few | too few ({MIN_COMMON - 1}) | too few ({MIN_COMMON - 1}) | too few ({MIN_COMMON - 1}) |" in md
    assert f"1.00 [1.00, 1.00] · 1.00 · {n}" in md  # full against other: identical verdicts


def test_kappa_interval_holds_the_estimate_and_is_reproducible_by_seed():
    rng = np.random.default_rng(5)
    a = rng.random(60) < 0.4
    b = np.where(rng.random(60) < 0.7, a, ~a)  # agrees on about 70% of the samples
    point = cohen_kappa(a.tolist(), b.tolist())
    first = kappa_ci95(a.tolist(), b.tolist(), np.random.default_rng(0))
    assert -1 <= first[0] <= point <= first[1] <= 1 and first[1] - first[0] > 0.1
    assert kappa_ci95(a.tolist(), b.tolist(), np.random.default_rng(0)) == first
    assert kappa_ci95(a.tolist(), b.tolist(), np.random.default_rng(1)) != first
    verdicts = {"a": rows(a.tolist(), a.astype(float).tolist()), "b": rows(b.tolist(), b.astype(float).tolist())}
    once, twice = agreement(verdicts, ids(60), seed=3), agreement(verdicts, ids(60), seed=3)
    assert once["kappa_ci95"] == twice["kappa_ci95"] and once["kappa_ci95"][0][1] == once["kappa_ci95"][1][0]
    assert agreement(verdicts, ids(60), seed=4)["kappa_ci95"][0][1] != once["kappa_ci95"][0][1]
    # both raters constant and equal: no kappa, and no resample has one
    assert kappa_ci95([False] * 40, [False] * 40, np.random.default_rng(0)) is None


def test_canaries_get_a_table_of_their_own_by_copies():
    n = MIN_COMMON
    four, one = {"canary": "k4", "copies": 4}, {"canary": "k1", "copies": 1}
    tags = {n: four, n + 1: four, n + 2: one}
    mr = rows([False] * n + [True, True, False], [0.0] * (n + 3), tags=tags)
    pa = rows([False] * n + [True, False, False], [0.0] * (n + 3), tags=tags)
    pearl = rows([False] * n, [0.0] * n)  # audits no canary
    out = agreement({"mr": mr, "pa": pa, "pearl": pearl}, ids(n), seed=0)
    assert out["n"][0][1] == n  # the canaries are no part of the matrix
    assert list(out["canaries"]) == ["1", "4"]
    assert out["canaries"]["4"] == {"mr": {"audited": 2, "flagged": 2}, "pa": {"audited": 2, "flagged": 1},
                                    "pearl": {"audited": 0, "flagged": 0}}
    assert out["canaries"]["1"]["mr"] == {"audited": 1, "flagged": 0}
    md = "\n".join(_agreement_table(out))
    assert "| 4 | 2 of 2 | 1 of 2 | – |" in md and "| 1 | 0 of 1 | 0 of 1 | – |" in md


def test_against_the_planted_truth():
    canary, generic = {"canary": "k", "copies": 4}, {"generic": True}
    v = rows([True, False, True, False], [1, 0, 1, 0], tags={0: canary, 1: canary, 2: generic, 3: {}})
    out = agreement({"a": v, "b": v}, ids(4), seed=0)
    # known truth: s0 (canary: positive), s1 (canary: positive), s2 (generic: negative); s3 unknown
    # decisions T, F, T against truth T, T, F: p_o = 1/3, p_e = (2/3)(2/3) + (1/3)(1/3) = 5/9, kappa = -1/2
    assert out["truth"]["a"] == {"n": 3, "kappa": pytest.approx(-0.5)}
    # truth on one side only (held-out samples, nothing planted): no kappa, no line on the page
    test_only = rows([True, False, True, False], [1, 0, 1, 0], tags={0: generic, 1: generic, 2: {}, 3: {}})
    out = agreement({"a": test_only, "b": test_only}, ids(4), seed=0)
    assert "truth" not in out and "planted truth" not in "\n".join(_agreement_table(out))


# ---------------------------------------------------------------- the common draw


LONG, SHORT, PREFIX = 24, 12, 16


@pytest.fixture(scope="module")
def mixed_run():
    """Two clients; train sample 0 a canary, then samples whose suffixes alternate between SHORT and LONG tokens
    (short first), so a draw that needs LONG tokens skips every other sample."""
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=2, n_train=1, n_test=3, prefix_len=PREFIX, suffix_len=LONG)
    for c in run.clients:
        run.train[c] += [make_sample(tok, t, c, "train", i, PREFIX, SHORT if i % 2 else LONG)
                         for i, t in enumerate(texts(12, seed=300 + c), start=1)]
    return run


def test_the_common_draw_is_the_first_long_enough_ordinary_samples_moved_after_the_canaries(mixed_run):
    placed = place_common_draw(mixed_run, 3, LONG)
    for c in mixed_run.clients:
        long_enough = [s.id for s in mixed_run.train[c] if "canary" not in s.tags and len(s.suffix_ids) >= LONG]
        assert placed.common_draw[c] == tuple(long_enough[:3])
        order = [s.id for s in placed.train[c]]
        assert order[0] == mixed_run.train[c][0].id and tuple(order[1:4]) == placed.common_draw[c]
        assert sorted(order) == sorted(s.id for s in mixed_run.train[c])  # the same pool, reordered
    with pytest.raises(ValueError, match=r"audit.common_draw=7, but client 0's pool holds only 6 ordinary train "
                                         r"samples with 24 suffix tokens \(audit.mia's suffix\)"):
        place_common_draw(mixed_run, 7, LONG, "audit.mia")


def test_every_method_audits_the_common_draw(mixed_run):
    """Each method's own selection, as its constructor makes it, holds the common draw, whatever suffix length it
    scores; and its ``audited_train`` names exactly what it selected."""
    run = place_common_draw(mixed_run, 3, LONG)
    common = {i for c in run.clients for i in run.common_draw[c]}
    pa = PriorAwareMemorization(PriorAwareConfig(n=3, suffix_len=LONG, c=2, trials=1, n_ratio=10.0), run)
    mia = MembershipInference(MiaConfig(n=3, suffix_len=SHORT), run)  # scores shorter suffixes than the draw needs
    pearl = PearlSensitivity(PearlConfig(n=3, nonmembers=2, samples_per_intensity=1, max_new_tokens=8), run)
    selected = {
        "pa": (pa, {s.id for s in pa.audited}),
        "mia": (mia, {s.id for s in mia.samples if s.split == "train"}),
        "pearl": (pearl, {s.id for s in pearl.members}),
    }
    for name, (method, chosen) in selected.items():
        assert common <= chosen, name
        assert type(method).audited_train(method.cfg, run) == chosen, name
    # MR audits the first n ordinary samples of the pool and the canaries beside them: n = 3 holds the draw
    assert common <= MemorizationRatio.audited_train(MRConfig(n=3), run)
    assert not common <= MemorizationRatio.audited_train(MRConfig(n=2), run)


def test_a_method_that_leaves_out_part_of_the_common_draw_is_refused(mixed_run):
    run = place_common_draw(mixed_run, 3, LONG)
    small = PriorAwareConfig(n=2, suffix_len=LONG, c=2, trials=1)
    audited = {"pa": PriorAwareMemorization.audited_train(small, run),
               "pearl": PearlSensitivity.audited_train(PearlConfig(n=3), run)}
    with pytest.raises(ValueError, match=r"^audit.common_draw=3: every method audits each client's common draw, but "
                                         r"audit.pa.n=2 leaves out 1 of client 0's: raise audit.pa.n or lower "
                                         r"audit.common_draw$"):
        check_common_draw(run, audited, {"pa": "audit.pa.n=2", "pearl": "audit.pearl.n=3"})
    audited["pa"] = PriorAwareMemorization.audited_train(PriorAwareConfig(n=3, suffix_len=LONG), run)
    check_common_draw(run, audited, {"pa": "audit.pa.n=3", "pearl": "audit.pearl.n=3"})  # no error
