"""MR aggregates on hand-made hit tables, with exact expected numbers."""

import math

import pytest

from fedmem.audit.intervals import wilson
from fedmem.audit.mr.stats import mr_figures


def test_two_clients_weighted_intra_inter_and_union():
    # client 0: 4 prefixes; hits: {0}, {0,1}, {}, {1};  client 1: 2 prefixes; hits: {1}, {}
    clients = [0, 0, 0, 0, 1, 1]
    hits = [{0}, {0, 1}, set(), {1}, {1}, set()]
    f = mr_figures(clients, hits, {0: 300, 1: 100})
    assert f["matrix"] == [[0.5, 0.5], [0.0, 0.5]]
    assert f["intra"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.5)
    assert f["inter_per_client"] == [0.5, 0.0]
    assert f["inter"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.0)
    # 4 distinct hitting prefixes out of 6: the prefix hitting both clients counts once (a sum would give 5/6)
    assert f["total"] == pytest.approx(4 / 6)


def test_five_clients():
    L = 5
    clients, hits = [], []
    for j in range(L):
        for i in range(4):
            clients.append(j)
            hits.append({j} if i == 0 else ({(j + 1) % L, (j + 2) % L} if i == 1 else set()))
    sizes = [1, 2, 3, 4, 10]
    f = mr_figures(clients, hits, sizes)
    w = [s / 20 for s in sizes]
    assert all(f["matrix"][j][j] == 0.25 for j in range(L))
    assert f["intra"] == pytest.approx(0.25)
    # each client: two off-diagonal cells at 0.25 -> inter(j) = 0.5 / 4
    assert f["inter_per_client"] == pytest.approx([0.125] * L)
    assert f["inter"] == pytest.approx(sum(wj * 0.125 for wj in w))
    assert f["total"] == pytest.approx(10 / 20)


def test_single_client_has_no_inter():
    f = mr_figures([0, 0], [{0}, set()], {0: 5})
    assert f["intra"] == 0.5 and f["inter"] is None and f["total"] == 0.5


def test_unequal_weights_change_intra():
    a = mr_figures([0, 1], [{0}, set()], {0: 1, 1: 1})
    b = mr_figures([0, 1], [{0}, set()], {0: 3, 1: 1})
    assert a["intra"] == pytest.approx(0.5) and b["intra"] == pytest.approx(0.75)


def test_intra_minus_inter_has_a_standard_error_over_prefixes():
    # client 0: hits {0}, {0}, {1}, {}  -> d = 1, 1, -1, 0 (mean 0.25, sample variance 11/12)
    # client 1: hits {1}, {1}          -> d = 1, 1         (mean 1, variance 0); equal weights
    f = mr_figures([0, 0, 0, 0, 1, 1], [{0}, {0}, {1}, set(), {1}, {1}], {0: 1, 1: 1})
    d = f["intra_minus_inter"]
    assert d["diff"] == pytest.approx(f["intra"] - f["inter"]) and d["diff"] == pytest.approx(0.625)
    assert d["se"] == pytest.approx((0.5**2 * (11 / 12) / 4) ** 0.5)
    # a difference, not a rate: a normal interval, kept inside [-1, 1]
    assert d["ci95"] == pytest.approx([0.625 - 1.96 * d["se"], min(1.0, 0.625 + 1.96 * d["se"])])
    # with five clients a hit on another client counts 1/(L-1): {1, 2} from client 0 gives d = -0.5
    f5 = mr_figures([0, 0, 1, 2, 3, 4], [{1, 2}, {0}, set(), set(), set(), set()], [1] * 5)
    assert f5["intra_minus_inter"]["diff"] == pytest.approx(f5["intra"] - f5["inter"])
    assert f5["intra_minus_inter"]["diff"] == pytest.approx(0.2 * (-0.5 + 1) / 2)
    assert mr_figures([0, 0], [{0}, set()], {0: 5})["intra_minus_inter"] is None  # one client: no inter


def test_every_figure_carries_its_standard_error():
    prefix_clients = [0, 0, 0, 0, 1, 1, 1, 1]
    hits = [{0}, set(), {0, 1}, set(), {1}, {1}, set(), {0}]
    f = mr_figures(prefix_clients, hits, {0: 100, 1: 100})
    u = f["uncertainty"]
    # MR_Intra: per client the values 1, 0, 1, 0 and 1, 1, 0, 0 (sample variance 1/3), weights 1/2 each
    assert u["intra"]["value"] == pytest.approx(f["intra"]) == pytest.approx(0.5)
    assert u["intra"]["se"] == pytest.approx(math.sqrt(2 * 0.25 * (1 / 3) / 4))
    # MR_Inter: client 0 hit client 1 once of 4, client 1 hit client 0 once of 4
    assert u["inter"]["value"] == pytest.approx(f["inter"]) == pytest.approx(0.25)
    assert u["inter"]["se"] == pytest.approx(math.sqrt(2 * 0.25 * (0.25 * 0.75 * 4 / 3) / 4))
    # rates: Wilson's interval at the effective sample size p(1 - p) / se²
    for key, p in (("intra", 0.5), ("inter", 0.25)):
        n_eff = p * (1 - p) / u[key]["se"] ** 2
        assert u[key]["n_eff"] == pytest.approx(n_eff) and u[key]["ci95"] == pytest.approx(wilson(p * n_eff, n_eff))
    # MR_Total: 5 of 8 prefixes hit someone; a binomial standard error
    assert f["total"] == 0.625 and u["total"]["se"] == pytest.approx(math.sqrt(0.625 * 0.375 / 8))
    assert u["total"]["ci95"] == pytest.approx(wilson(5, 8))  # a proportion: Wilson's interval
    assert u["matrix_se"][0][0] == pytest.approx(math.sqrt(0.5 * 0.5 / 4)) and u["matrix_se"][1][0] == pytest.approx(
        math.sqrt(0.25 * 0.75 / 4))


def test_wilson_interval_matches_its_closed_form_and_never_collapses_at_zero():
    from fedmem.audit.intervals import rate

    # textbook values (z = 1.96): 0 of 10 -> [0, 0.2775]; 5 of 10 -> [0.2366, 0.7634]
    assert wilson(0, 10) == pytest.approx([0.0, 0.2775], abs=1e-4)
    assert wilson(5, 10) == pytest.approx([0.2366, 0.7634], abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 0) is None and rate(0, 0)["ci95"] is None
    r = rate(0, 40)  # a zero rate keeps an interval that says how far up it could be
    assert r["se"] == 0 and r["ci95"][1] > 0.08


def test_matrix_cells_and_total_carry_wilson_intervals():
    f = mr_figures([0, 0, 0, 1, 1], [{0}, set(), {1}, {1}, set()], {0: 10, 1: 10})
    assert f["uncertainty"]["matrix_ci95"][0][0] == pytest.approx(wilson(1, 3))
    assert f["uncertainty"]["matrix_ci95"][1][0] == pytest.approx(wilson(0, 2))
    assert f["uncertainty"]["total"]["ci95"] == pytest.approx(wilson(3, 5))


@pytest.mark.parametrize("hit_count", [0, 1, 30])
def test_rate_intervals_stay_in_range_at_no_one_and_every_hit(hit_count):
    """30 prefixes per client, 3 clients: no hit, one hit, every prefix hitting its own client. Every rate's interval
    lies in [0, 1], holds its figure, and keeps a width at 0 hits (it does not claim certainty)."""
    prefix_clients = [j for j in range(3) for _ in range(30)]
    hits = [{j} if i < hit_count and j == 0 or hit_count == 30 else set()
            for j in range(3) for i in range(30)]
    f = mr_figures(prefix_clients, hits, [1, 1, 1])
    u = f["uncertainty"]
    for key in ("intra", "inter", "total"):
        lo, hi = u[key]["ci95"]
        value = f[key]
        assert 0.0 <= lo <= value <= hi <= 1.0, (key, lo, value, hi)
    for row, ci_row in zip(f["matrix"], u["matrix_ci95"]):
        for v, (lo, hi) in zip(row, ci_row):
            assert 0.0 <= lo <= v <= hi <= 1.0
    if hit_count == 0:
        assert u["intra"]["ci95"][1] > 0 and u["inter"]["ci95"][1] > 0
    lo, hi = f["intra_minus_inter"]["ci95"]
    assert -1.0 <= lo <= f["intra_minus_inter"]["diff"] <= hi <= 1.0
    if hit_count == 0:  # no spread at all: Newcombe's interval from the two Wilson intervals, not a point
        assert lo == pytest.approx(-u["inter"]["ci95"][1]) and hi == pytest.approx(u["intra"]["ci95"][1])
