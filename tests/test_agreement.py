"""Agreement between the methods' per-sample verdicts, on hand-made verdicts with values computed by hand."""

import pytest

from fedmem.audit.agreement import agreement, cohen_kappa, jaccard, spearman


def rows(decisions, scores, tags=None, split="train", prefix="s"):
    return [{"id": f"{prefix}{i}", "split": split, "tags": (tags or {}).get(i, {}), "decision": d, "score": s}
            for i, (d, s) in enumerate(zip(decisions, scores))]


def test_kappa_jaccard_and_rank_correlation_by_hand():
    a, b = [True, True, False, False], [True, False, False, False]
    # p_o = 3/4; p_e = (1/2)(1/4) + (1/2)(3/4) = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    assert jaccard(a, b) == pytest.approx(1 / 2)  # one sample flagged by both of the two flagged by either
    assert cohen_kappa([True] * 3, [True] * 3) is None and jaccard([False] * 3, [False] * 3) is None
    assert spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 40.0, 30.0]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_matrix_over_the_samples_each_pair_audited():
    mr = rows([True, True, False, False, True], [1, 1, 0, 0, 1])
    pa = rows([True, False, False], [3.0, 1.0, 2.0])  # audited only s0..s2
    pearl = rows([True, False], [0.9, 0.1], split="test", prefix="t") + rows([True], [0.5])  # one train sample: s0
    out = agreement({"mr": mr, "pa": pa, "pearl": pearl})
    assert out["methods"] == ["mr", "pa", "pearl"]
    assert out["n"] == [[5, 3, 1], [3, 3, 1], [1, 1, 1]]  # test samples never count
    assert out["flagged"] == [3, 1, 1] and out["audited"] == [5, 3, 1]
    # mr vs pa on s0..s2: (T,T), (T,F), (F,F): p_o = 2/3, p_e = (2/3)(1/3) + (1/3)(2/3) = 4/9, kappa = 2/5
    assert out["kappa"][0][1] == pytest.approx(0.4) and out["kappa"][1][0] == pytest.approx(0.4)
    assert out["jaccard"][0][1] == pytest.approx(0.5)
    assert out["spearman"][0][1] == pytest.approx(spearman([1, 1, 0], [3.0, 1.0, 2.0]))
    assert out["kappa"][0][0] == pytest.approx(1.0)
    assert out["spearman"][0][2] is None  # one sample in common


def test_against_the_planted_truth():
    canary, generic = {"canary": "k", "copies": 4}, {"generic": True}
    v = rows([True, False, True, False], [1, 0, 1, 0], tags={0: canary, 1: canary, 2: generic, 3: {}})
    out = agreement({"a": v, "b": v})
    # known truth: s0 (canary: positive), s1 (canary: positive), s2 (generic: negative); s3 unknown
    # decisions T, F, T against truth T, T, F: p_o = 1/3, p_e = (2/3)(2/3) + (1/3)(1/3) = 5/9, kappa = -1/2
    assert out["truth"]["a"] == {"n": 3, "kappa": pytest.approx(-0.5)}
