"""The smallest effect an audit can see (docs/spec.md §12), checked against a simulation of the audit's own test at
that size: Newcombe's interval of an excess from the two rates' Wilson intervals, and the bootstrap interval of a
ROC AUC; each detects an effect of the reported size about 80% of the time, and one of half that size far less."""

import numpy as np
import pytest

from fedmem.audit.calibration import auc_from_ranks
from fedmem.audit.intervals import detectable_auc, detectable_excess, excess_power, items_needed, newcombe, wilson
from fedmem.audit.membership import bootstrap_auc_ci95, bootstrap_indices


def _simulated_excess_power(p0: float, d: float, n1: int, n0: int, draws: int = 4000) -> float:
    rng = np.random.default_rng(5)
    k1, k0 = rng.binomial(n1, p0 + d, draws), rng.binomial(n0, p0, draws)
    return float(np.mean([newcombe(a / n1, wilson(a, n1), b / n0, wilson(b, n0))[0] > 0 for a, b in zip(k1, k0)]))


@pytest.mark.parametrize("p0, n1, n0", [(0.05, 200, 200), (0.0, 200, 200), (0.2, 150, 90)])
def test_an_excess_of_the_detectable_size_is_found_four_times_in_five(p0, n1, n0):
    d = detectable_excess(p0, n1, n0)
    assert excess_power(p0, d, n1, n0) == pytest.approx(0.8, abs=1e-6)
    assert _simulated_excess_power(p0, d, n1, n0) == pytest.approx(0.8, abs=0.025)
    assert _simulated_excess_power(p0, d / 2, n1, n0) < 0.45


def test_the_default_mr_audit_cannot_see_the_papers_effects_and_says_what_n_would():
    """At the default 200 prefixes per client and arm (600 over three clients) and a control rate of 2%, MR's excess
    is detectable from about 2.9 points; the cross-client paper's effects (0.3 to 1.5 points) need thousands to tens
    of thousands of prefixes per arm."""
    assert 0.02 < detectable_excess(0.02, 600, 600) < 0.04
    need = [items_needed(0.02, d) for d in (0.003, 0.015)]
    assert need[0] > 20_000 and 1_000 < need[1] < 3_000
    assert excess_power(0.02, 0.015, need[1], need[1]) >= 0.8


@pytest.mark.parametrize("n", [30, 100])
def test_an_auc_of_the_detectable_size_has_an_interval_above_one_half_four_times_in_five(n):
    """Members' scores shifted so that the true AUC is the detectable one, the interval the attacks report (a
    percentile bootstrap of 200 resamples, members and non-members apart)."""
    from scipy.stats import norm

    auc = detectable_auc(n, n)
    shift = np.sqrt(2) * norm.ppf(auc)  # two unit Gaussians a shift apart have this AUC
    rng = np.random.default_rng(9)
    found = []
    for _ in range(400):
        members, nonmembers = rng.standard_normal(n) + shift, rng.standard_normal(n)
        idx = bootstrap_indices(n, n, rng, 200)
        found.append(bootstrap_auc_ci95(members, nonmembers, *idx)[0] > 0.5)
    assert np.mean(found) == pytest.approx(0.8, abs=0.07)
    assert float(auc_from_ranks(rng.standard_normal(5000) + shift, rng.standard_normal(5000))) == \
        pytest.approx(auc, abs=0.01)
