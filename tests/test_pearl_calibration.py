"""Cross-fitted calibration: no reported FPR is measured on the non-members that set its threshold, and every
reported rate interval lies in [0, 1]."""

import numpy as np
import pytest

from fedmem.audit.calibration import (
    allowed_false_positives,
    bootstrap_tpr_ci95,
    calibrate_threshold,
    cross_fitted,
    held_out_flags,
    split_halves,
)
from fedmem.audit.intervals import wilson


def rng(seed=0):
    return np.random.default_rng(seed)


# Hand-made: half A and half B of 8 non-members, 5 members, target FPR 5% (no false positive allowed in a half of 4,
# so each half's alpha is its own largest score).
HALF_A = [0.1, 0.2, 0.3, 0.4]
HALF_B = [0.15, 0.25, 0.5, 0.6]
NON = np.array(HALF_A + HALF_B)
SPLIT = np.array([True] * 4 + [False] * 4)
MEMBERS = [0.05, 0.45, 0.55, 0.7, 0.9]


def test_reported_fpr_is_measured_on_the_half_that_did_not_set_alpha():
    # Calibrated on all 8, alpha = 0.6 and the in-sample FPR is 0 by construction: nothing to report.
    assert calibrate_threshold(NON, 0.05) == 0.6 and np.mean(NON > 0.6) == 0
    out = cross_fitted(MEMBERS, NON, SPLIT, 0.05, rng())
    assert (out["alpha_a"], out["alpha_b"]) == (0.4, 0.6)
    # Half B at alpha_a = 0.4: 0.5 and 0.6 flagged; half A at alpha_b = 0.6: none. 2 of 8.
    assert held_out_flags(NON, SPLIT, 0.4, 0.6).tolist() == [False] * 6 + [True, True]
    assert out["false_positives"] == 2 and out["halves"] == [4, 4]
    assert out["fpr"] == 2 / 8 and out["fpr_ci95"] == wilson(2, 8)
    # Members above 0.4: 4 of 5; above 0.6: 2 of 5. TPR = (0.8 + 0.4) / 2.
    assert out["tpr"] == pytest.approx(0.6)
    assert out["resamples"] == 1000


def test_the_split_is_stratified_by_client_and_seeded():
    clients = [0] * 5 + [1] * 4 + [2] * 3 + [3]
    half = split_halves(clients, rng(3))
    for c in set(clients):
        in_c = np.array(clients) == c
        assert abs(int(half[in_c].sum()) - int((~half[in_c]).sum())) <= 1
    assert abs(int(half.sum()) - int((~half).sum())) <= 1
    assert (split_halves(clients, rng(3)) == half).all()
    assert any((split_halves(clients, rng(s)) != half).any() for s in range(4, 10))
    # One item per client: no stratum to keep, the split is still random.
    singles = {tuple(split_halves(range(6), rng(s))) for s in range(20)}
    assert len(singles) > 1 and all(sum(h) == 3 for h in singles)


def test_tpr_interval_covers_the_uncertainty_of_alpha():
    # Every member scores 0.5, so resampling the members alone never moves the TPR. alpha_b = 0.4 flags them all;
    # alpha_a = 0.6 flags none unless the resampled half A misses its 0.6 (probability (3/4)^4), so the bootstrap
    # TPR is 0.5 or 1 and the interval reaches 1, beyond the members' own Wilson interval (3 of 6: at most 0.81);
    # below, it is never narrower than that Wilson interval.
    from fedmem.audit.intervals import wilson

    members = [0.5] * 6
    out = cross_fitted(members, [0.1, 0.2, 0.3, 0.6, 0.1, 0.2, 0.3, 0.4], SPLIT, 0.05, rng())
    assert out["tpr"] == 0.5 and wilson(3, 6)[1] < 0.9
    assert out["tpr_ci95"] == pytest.approx([wilson(3, 6)[0], 1.0])


@pytest.mark.parametrize("members, tpr", [
    ([0.95, 0.97, 0.99], 1.0),  # all members flagged at both alphas
    ([0.0, 0.01, 0.02], 0.0),  # none
    ([0.0, 0.01, 0.95], 1 / 3),  # one
    ([0.9], 1.0),  # a single member
])
def test_every_interval_lies_in_0_1(members, tpr):
    out = cross_fitted(members, NON, SPLIT, 0.05, rng())
    assert out["tpr"] == pytest.approx(tpr)
    for key in ("tpr_ci95", "fpr_ci95"):
        lo, hi = out[key]
        assert 0 <= lo <= hi <= 1
    assert out["tpr_ci95"][0] <= out["tpr"] <= out["tpr_ci95"][1]
    # no false positive at all: the FPR interval starts at exactly 0
    clean = cross_fitted(members, [0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4], SPLIT, 0.05, rng())
    assert clean["fpr"] == 0 and clean["fpr_ci95"][0] == 0.0 and 0 < clean["fpr_ci95"][1] <= 1


def test_bootstrap_interval_on_random_scores_is_seeded_and_in_range():
    r = rng(1)
    members, non = r.normal(1, 1, 40), r.normal(0, 1, 40)
    half = split_halves(np.arange(40) % 4, r)
    a = bootstrap_tpr_ci95(members, non[half], non[~half], 0.1, rng(7), resamples=500)
    assert a == bootstrap_tpr_ci95(members, non[half], non[~half], 0.1, rng(7), resamples=500)
    assert 0 <= a[0] < a[1] <= 1
    out = cross_fitted(members, non, half, 0.1, rng(7))
    assert out["false_positives"] == int(held_out_flags(non, half, out["alpha_a"], out["alpha_b"]).sum())
    assert out["tpr"] == pytest.approx(((members > out["alpha_a"]).mean() + (members > out["alpha_b"]).mean()) / 2)


def test_too_few_samples_report_nothing_rather_than_an_in_sample_rate():
    one = cross_fitted(MEMBERS, [0.3], [True], 0.05, rng())
    assert all(one[k] is None for k in ("alpha_a", "alpha_b", "fpr", "fpr_ci95", "tpr", "tpr_ci95"))
    no_members = cross_fitted([], NON, SPLIT, 0.05, rng())
    assert no_members["tpr"] is None and no_members["tpr_ci95"] is None and no_members["fpr"] == 2 / 8


def test_allowed_false_positives_is_exact():
    for n in range(1, 120):
        for target in (0.0, 0.01, 0.05, 0.07, 0.1, 0.2, 1 / 3, 0.5, 0.99):
            k = allowed_false_positives(n, target)
            assert k / n <= target < (k + 1) / n
