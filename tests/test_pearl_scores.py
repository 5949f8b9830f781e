"""PEARL performance metrics, sensitivity scores and calibration against hand-computed values."""

import numpy as np
import pytest

from fedmem.audit.calibration import (
    calibrate_threshold,
    fpr_curve,
    histogram,
    histogram_edges,
    roc_auc,
)
from fedmem.audit.pearl.sensitivity import (
    SCORES,
    expected_drop,
    falloff,
    gfd,
    gfd_per_output,
    intensity_means,
    sensitivity_scores,
)
from fedmem.audit.performance import ncd, performance, rouge_l

A = (
    "The committee observed a rapid change in the northern region before the meeting ended, and the farmer "
    "described several old records of heavy rain near the old bridge during the night."
)
B = (
    "Quantum chromodynamics predicts asymptotic freedom; lattice simulations at 2+1 flavours confirm "
    "confinement with a string tension of about 440 MeV squared, Zyx-77 bqw."
)


def test_ncd_of_a_text_with_itself_is_near_zero_and_with_unrelated_text_near_one():
    noise = "".join(np.random.default_rng(0).choice(list("abcdefghijklmnopqrstuvwxyz "), len(A)))
    assert ncd(A, A) < 0.1
    assert ncd(A, noise) > 0.85  # nothing shared but the alphabet
    assert ncd(A, B) > 0.75  # unrelated English still shares "the", "of", ...: zlib finds those
    assert ncd(A, A) < ncd(A, A[:80] + B[80:]) < ncd(A, B)
    perf = performance([A, B, ""], A, "ncd")
    assert perf[0] == pytest.approx(1 - ncd(A, A)) and perf[1] == pytest.approx(1 - ncd(B, A))
    assert perf[0] > 0.9 and perf[1] < 0.25 and perf[2] < 0.1  # the empty output scores near 0
    assert ncd(A, B, level=1) != ncd(A, B, level=9)  # the level is really passed to zlib


def test_rouge_l_f1():
    assert rouge_l(A, A) == pytest.approx(1.0)
    assert rouge_l("alpha beta gamma", "delta epsilon") == 0.0
    # LCS("a b c d", "a c d e") = "a c d" (3): P = R = 3/4, F1 = 0.75
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert performance(["a b c d"], "a c d e", "rouge_l")[0] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="metric"):
        performance(["x"], "y", "bleu")


# Hand-made table: 3 intensities x 4 outputs. m = [0.7, 0.45, 0.15].
TOY = [[0.8, 0.6, 0.7, 0.7], [0.6, 0.3, 0.5, 0.4], [0.1, 0.2, 0.1, 0.2]]


def test_scores_on_a_hand_made_table():
    assert intensity_means(TOY) == pytest.approx([0.7, 0.45, 0.15])
    assert falloff(TOY) == pytest.approx(0.30)  # max(0.25, 0.30)
    # m_0 - perf over the 8 perturbed outputs: .1 .4 .2 .3 | .6 .5 .6 .5 -> > 0.25: .4 .3 .6 .5 .6 .5 = 6/8
    assert gfd_per_output(TOY, tau_drop=0.25) == pytest.approx(6 / 8)
    # > 0.45: .6 .5 .6 .5 = 4/8; > 0.65: none
    assert gfd_per_output(TOY, tau_drop=0.45) == pytest.approx(4 / 8)
    assert gfd_per_output(TOY, tau_drop=0.65) == 0.0
    # per perturbed input, m_0 - m_k: .25 .55 -> > 0.1: 2/2; > 0.3: 1/2; > 0.6: none
    assert gfd(TOY, tau_drop=0.1) == 1.0
    assert gfd(TOY, tau_drop=0.3) == 0.5
    assert gfd(TOY, tau_drop=0.6) == 0.0
    assert expected_drop(TOY) == pytest.approx((0.1 + 0.4 + 0.2 + 0.3 + 0.6 + 0.5 + 0.6 + 0.5) / 8)
    # Improvements under perturbation never count as drops.
    up = [[0.2, 0.2], [0.5, 0.9], [0.1, 0.3]]
    assert expected_drop(up) == pytest.approx((0.1 + 0.0 + 0.0 + 0.0) / 4)
    assert falloff(up) == pytest.approx(0.5)  # m = [0.2, 0.7, 0.2]: max(-0.5, 0.5)
    with pytest.raises(ValueError, match="table"):
        falloff([[0.1, 0.2]])


# PEARL (later version) Table 6 rows: delta(Y_k*), the mean performance at k = 0..5, and the paper's GFD.
# The table lists only the means, not the individual outputs; here each row is fed as a table whose 10 outputs
# all equal the mean (so gfd and gfd_per_output coincide), and the expected values are recomputed by hand below.
TABLE6 = {
    "#17": [0.42, 0.23, 0.51, 0.18, 0.21, 0.25],
    "#58": [0.32, 0.62, 0.37, 0.35, 0.34, 0.45],
    "#107": [0.66, 0.24, 0.21, 0.19, 0.14, 0.12],
    "#175": [0.29, 0.43, 0.13, 0.23, 0.14, 0.23],
    "#289": [0.63, 0.23, 0.09, 0.09, 0.08, 0.08],
}
# (falloff, gfd at tau_drop 0.2, expected_drop), by hand:
#  #17:  diffs .19 -.28 .33 -.03 -.04 -> .33; drops .19 -.09 .24 .21 .17 -> 2/5 over .2; (.19+.24+.21+.17)/5
#  #58:  diffs -.30 .25 .02 .01 -.11 -> .25; drops -.30 -.05 -.03 -.02 -.13 -> 0; 0
#  #107: diffs .42 .03 .02 .05 .02 -> .42; drops .42 .45 .47 .52 .54 -> 5/5; 2.40/5
#  #175: diffs -.14 .30 -.10 .09 -.09 -> .30; drops -.14 .16 .06 .15 .06 -> 0; (.16+.06+.15+.06)/5
#  #289: diffs .40 .14 0 .01 0 -> .40; drops .40 .54 .54 .55 .55 -> 5/5; 2.58/5
EXPECTED6 = {
    "#17": (0.33, 0.4, 0.81 / 5),
    "#58": (0.25, 0.0, 0.0),
    "#107": (0.42, 1.0, 2.40 / 5),
    "#175": (0.30, 0.0, 0.43 / 5),
    "#289": (0.40, 1.0, 2.58 / 5),
}


@pytest.mark.parametrize("row", sorted(TABLE6))
def test_scores_on_pearl_table6_rows(row):
    table = np.repeat(np.array(TABLE6[row])[:, None], 10, axis=1)
    s = sensitivity_scores(table, tau_drop=0.2)
    want_falloff, want_gfd, want_drop = EXPECTED6[row]
    assert s["falloff"] == pytest.approx(want_falloff)
    assert s["gfd"] == pytest.approx(want_gfd) and s["gfd_per_output"] == pytest.approx(want_gfd)
    assert s["expected_drop"] == pytest.approx(want_drop)
    assert tuple(s) == SCORES


# GFD (later PEARL, Eq. 3) has one indicator per perturbed input, judged by its mean performance m_k; the
# per-output form has one per sampled output. 10 outputs per input; m_0 = 0.6 and tau_drop = 0.2.
SPREAD = [0.33, 0.87] + [0.6] * 8  # mean 0.6, sd about 0.12: one output in ten lies 0.27 below m_0
DROPPED = [0.3] * 10  # mean 0.3: 0.3 below m_0, every output too


def test_gfd_counts_perturbed_inputs_not_outputs():
    # No true drop: every intensity has the unperturbed input's outputs. The paper's gfd is 0 (m_0 - m_k = 0 for
    # every k); per output, one output in ten falls below m_0 - tau_drop at every k: 5 of 50.
    flat = [SPREAD] * 6
    assert intensity_means(flat) == pytest.approx([0.6] * 6)
    assert gfd(flat, tau_drop=0.2) == 0.0
    assert gfd_per_output(flat, tau_drop=0.2) == pytest.approx(5 / 50)
    # A real drop at k = 2, 4, 5: the paper's gfd is 3/5; per output the noise adds one fail at k = 1 and 3:
    # 3 x 10 + 2 x 1 = 32 of 50.
    drop = [SPREAD, SPREAD, DROPPED, SPREAD, DROPPED, DROPPED]
    assert gfd(drop, tau_drop=0.2) == pytest.approx(3 / 5)
    assert gfd_per_output(drop, tau_drop=0.2) == pytest.approx(32 / 50)
    # Without output noise at the unchanged intensities both forms agree: 3 of 5 inputs, 30 of 50 outputs.
    clean = [SPREAD, [0.6] * 10, DROPPED, [0.6] * 10, DROPPED, DROPPED]
    assert gfd(clean, tau_drop=0.2) == gfd_per_output(clean, tau_drop=0.2) == pytest.approx(3 / 5)
    # A drop at every k: both forms are 1.
    everywhere = [SPREAD] + [DROPPED] * 5
    assert gfd(everywhere, tau_drop=0.2) == gfd_per_output(everywhere, tau_drop=0.2) == 1.0


def test_calibration_picks_the_smallest_threshold_meeting_the_fpr_target():
    non = np.arange(20) * 0.05  # 0.00, 0.05, ..., 0.95
    # score > t flags; at t = 0.90 only 0.95 is flagged (1/20 = 5%); at 0.85 two (10%).
    assert calibrate_threshold(non, 0.05) == pytest.approx(0.90)
    assert calibrate_threshold(non, 0.10) == pytest.approx(0.85)
    assert calibrate_threshold(non, 0.0) == pytest.approx(0.95)
    assert calibrate_threshold(non, 0.049) == pytest.approx(0.95)
    # Ties: three zeros and one 0.5. At t = 0 only 0.5 is flagged (25%).
    assert calibrate_threshold([0, 0, 0, 0.5], 0.25) == 0.0
    assert calibrate_threshold([0, 0, 0, 0.5], 0.2) == 0.5
    assert calibrate_threshold([], 0.05) is None
    with pytest.raises(ValueError, match="FPR"):
        calibrate_threshold(non, 1.0)


def test_fpr_curve_auc_and_histogram():
    members, non = [0.9, 0.6, 0.3, 0.3], [0.0, 0.3, 0.1, 0.0]
    curve = fpr_curve(members, non, extra_thresholds=[0.2])
    th = [p["threshold"] for p in curve]
    assert th == sorted(th) and th == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.6, 0.9])
    at = {round(p["threshold"], 6): p for p in curve}
    assert at[0.0]["fpr"] == 0.5 and at[0.0]["tpr"] == 1.0
    assert at[0.2]["fpr"] == 0.25 and at[0.2]["tpr"] == 1.0
    assert at[0.3]["fpr"] == 0.0 and at[0.3]["tpr"] == 0.5
    # Pairs (16): member 0.9, 0.6 beat all 4 (8); each 0.3 beats 3 and ties 1 (2 x 3.5 = 7) -> 15/16
    assert roc_auc(members, non) == pytest.approx(15 / 16)
    assert roc_auc(non, members) == pytest.approx(1 / 16)
    assert roc_auc([], non) is None
    edges = histogram_edges(members, non, bins=4)
    assert edges == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    assert histogram(members, edges) == [0, 2, 1, 1] and histogram(non, edges) == [3, 1, 0, 0]
    assert histogram_edges([1.5], bins=3) == pytest.approx([0.0, 0.5, 1.0, 1.5])
