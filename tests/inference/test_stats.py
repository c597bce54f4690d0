"""Tests of the report's statistics (pipeline/report/stats.py) on cases with known answers.

- Intervals against scipy's own (`binomtest(...).proportion_ci`), and their coverage: the
  coverage seen over many binomial samples at a fixed seed must match the interval's exact
  coverage (summed over the binomial law) within four standard errors of a coverage
  estimate, sqrt(c (1 - c) / samples); and the exact coverage must be near the nominal 95%
  (Wilson: within 2.5 points, Brown, Cai & DasGupta 2001; Clopper-Pearson: at least 95%).
- McNemar's exact test on a hand-built table, against the binomial sum written out with
  math.comb, and against scipy's binomtest.
- The paired difference: its interval's coverage on simulated paired samples.
- Chi-square goodness of fit: pooling keeps every expected count >= 5; on the kernel's
  standard play against the Score Four law (SPEC section 6) the fit holds, and against a
  law shifted by one card it fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pipeline.engine import kernel, odds
from pipeline.engine.rules import Cell
from pipeline.inference import stats

SAMPLES = 2000
CASES = [(40, 1 / 13), (300, 0.35), (2000, 0.5), (150, 0.9)]


def exact_coverage(interval, n: int, p: float, confidence: float = 0.95) -> float:
    """P(the interval of k ~ Binomial(n, p) contains p), summed over every k."""
    ks = np.arange(n + 1)
    pmf = sps.binom.pmf(ks, n, p)
    covered = [low <= p <= high for low, high in (interval(int(k), n, confidence) for k in ks)]
    return float(pmf[np.array(covered)].sum())


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (10, 10), (77, 1000), (3, 7), (0, 1)])
def test_intervals_match_scipy(k, n):
    low, high = stats.wilson(k, n)
    ci = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    assert low == pytest.approx(ci.low, abs=1e-12) and high == pytest.approx(ci.high, abs=1e-12)
    low, high = stats.clopper_pearson(k, n, 0.999)
    ci = sps.binomtest(k, n).proportion_ci(0.999, method="exact")
    assert low == pytest.approx(ci.low, abs=1e-9) and high == pytest.approx(ci.high, abs=1e-9)


def test_wilson_arrays_match_one_at_a_time():
    ks, ns = np.array([0, 3, 50, 7]), np.array([5, 9, 50, 0])
    lows, highs = stats.wilson_arrays(ks, ns)
    for k, n, low, high in zip(ks, ns, lows, highs):
        assert (low, high) == pytest.approx(stats.wilson(int(k), int(n)))
    assert (lows[-1], highs[-1]) == (0.0, 1.0)  # no trials: no information


@pytest.mark.parametrize("n,p", CASES)
def test_wilson_coverage_over_many_seeds(n, p):
    rng = np.random.default_rng(20240601 + n)
    ks = rng.binomial(n, p, size=SAMPLES)
    lows, highs = stats.wilson_arrays(ks, np.full(SAMPLES, n))
    seen = float(np.mean((lows <= p) & (p <= highs)))
    exact = exact_coverage(stats.wilson, n, p)
    tolerance = 4 * math.sqrt(exact * (1 - exact) / SAMPLES)
    assert abs(seen - exact) <= tolerance, (seen, exact, tolerance)
    assert abs(exact - 0.95) <= 0.025, exact


@pytest.mark.parametrize("n,p", CASES)
def test_clopper_pearson_is_conservative(n, p):
    assert exact_coverage(stats.clopper_pearson, n, p) >= 0.95 - 1e-12


def test_z_against_exact_value():
    assert stats.z_against(100, 1300, 1 / 13) == pytest.approx(0.0, abs=1e-12)
    # 130 of 1300 against 1/13: (0.1 - 1/13) / sqrt((1/13)(12/13)/1300)
    expected = (0.1 - 1 / 13) / math.sqrt((1 / 13) * (12 / 13) / 1300)
    assert stats.z_against(130, 1300, 1 / 13) == pytest.approx(expected)
    assert stats.z_against(0, 0, 0.5) == 0.0


def test_mcnemar_on_a_hand_built_table():
    # Pairs: 20 both won, 9 only a, 2 only b, 30 neither. Under "no difference" the 11
    # discordant pairs split as Binomial(11, 1/2): two-sided p = 2 P(X <= 2).
    both, a_only, b_only, neither = 20, 9, 2, 30
    by_hand = 2 * sum(math.comb(11, k) for k in range(3)) / 2**11
    assert by_hand == 134 / 2048
    assert stats.mcnemar_exact(a_only, b_only) == pytest.approx(by_hand, rel=1e-12)
    assert stats.mcnemar_exact(a_only, b_only) == pytest.approx(
        sps.binomtest(9, 11).pvalue, rel=1e-12
    )
    paired = stats.paired_difference(both, a_only, b_only, neither)
    assert paired.n == 61
    assert paired.difference == pytest.approx(7 / 61)
    assert paired.a_rate == pytest.approx(29 / 61) and paired.b_rate == pytest.approx(22 / 61)
    assert paired.low < 7 / 61 < paired.high
    assert paired.p_value == pytest.approx(by_hand)


def test_mcnemar_edge_cases():
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(5, 5) == 1.0
    assert stats.mcnemar_exact(0, 10) == pytest.approx(2 / 2**10)


def test_paired_difference_coverage():
    # Deals where a wins with 0.37 and b with 0.31, strongly paired: P(both, a only, b only, neither).
    chances = np.array([0.28, 0.09, 0.03, 0.60])
    truth = chances[1] - chances[2]
    rng = np.random.default_rng(7)
    tables = rng.multinomial(400, chances, size=SAMPLES)
    covered = 0
    for both, a_only, b_only, neither in tables:
        paired = stats.paired_difference(both, a_only, b_only, neither)
        covered += paired.low <= truth <= paired.high
    seen = covered / SAMPLES
    tolerance = 4 * math.sqrt(0.95 * 0.05 / SAMPLES)
    # Newcombe's interval keeps close to its nominal level (Fagerland, Lydersen & Laake 2013).
    assert 0.95 - tolerance - 0.01 <= seen <= 0.95 + tolerance + 0.02, seen


def test_paired_difference_is_antisymmetric():
    ab = stats.paired_difference(10, 7, 3, 80)
    ba = stats.paired_difference(10, 3, 7, 80)
    assert ab.difference == pytest.approx(-ba.difference)
    assert ab.low == pytest.approx(-ba.high) and ab.high == pytest.approx(-ba.low)


def test_independent_difference_is_newcombes_worked_example():
    # Newcombe (1998), independent proportions, example (a): 56/70 - 48/80, method 10.
    difference, low, high = stats.independent_difference(56, 70, 48, 80)
    assert difference == pytest.approx(56 / 70 - 48 / 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    # On the same counts with no correlation, the paired interval is the independent one.
    paired = stats.paired_difference(20, 20, 20, 20)
    assert (paired.low, paired.high) == pytest.approx(
        stats.independent_difference(40, 80, 40, 80)[1:]
    )


def test_pooling_keeps_expected_counts_and_totals():
    observed = [0, 1, 0, 3, 10, 40, 30, 2, 1]
    expected = [0.2, 0.8, 1.5, 3.0, 12.0, 38.0, 31.0, 0.9, 0.6]
    bins, obs, exp = stats.pool_bins(observed, expected)
    assert all(e >= stats.MIN_EXPECTED for e in exp)
    assert sum(obs) == sum(observed) and sum(exp) == pytest.approx(sum(expected))
    assert bins[0][0] == 0 and bins[-1][1] == len(observed) - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(bins, bins[1:]))


def cards_turned_counts(count: int) -> dict[int, int]:
    results = kernel.play(424242, 0, count, [Cell()])
    values, counts = np.unique(results["cards_turned"][0], return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts)}


def test_chisquare_against_the_exact_law_on_kernel_data():
    observed = cards_turned_counts(40_000)
    law = {t: float(p) for t, p in odds.cards_turned_law().items()}
    fit = stats.chisquare_gof(observed, law)
    assert fit.dof >= 20 and all(e >= stats.MIN_EXPECTED for e in fit.expected)
    assert fit.p_value > 1e-3, fit
    # The same data against the law moved one card later must fail.
    shifted = {t + 1: p for t, p in law.items() if t + 1 <= 52}
    shifted[4] = law[52]
    assert stats.chisquare_gof(observed, shifted).p_value < 1e-9


def test_chisquare_matches_scipy_stats():
    observed = {1: 30, 2: 52, 3: 18, 4: 40}
    chances = {1: 0.25, 2: 0.45, 3: 0.1, 4: 0.2}
    fit = stats.chisquare_gof(observed, chances)
    reference = sps.chisquare([30, 52, 18, 40], [35.0, 63.0, 14.0, 28.0])
    assert fit.statistic == pytest.approx(reference.statistic) and fit.p_value == pytest.approx(
        reference.pvalue
    )
    assert fit.dof == 3


def test_chisquare_rejects_impossible_values():
    fit = stats.chisquare_gof({3: 1, 10: 100}, {10: 1.0})
    assert fit.p_value == 0.0


def test_calibration_test():
    # Wins exactly at the predicted rate: statistic 0; certainties must hold exactly.
    statistic, dof, p = stats.calibration_test(
        [(0.5, 100, 50), (0.25, 40, 10), (1.0, 7, 7), (0.0, 3, 0)]
    )
    assert statistic == 0.0 and dof == 2 and p == 1.0
    assert stats.calibration_test([(1.0, 7, 6)])[2] == 0.0
    statistic, dof, p = stats.calibration_test([(0.5, 100, 70)])
    assert statistic == pytest.approx(16.0) and p == pytest.approx(sps.chi2.sf(16.0, 1))
    # Sparse groups pool: 0.1 x 20 and 0.2 x 20 expect 2 and 4 wins, together 6 (variance 5).
    statistic, dof, p = stats.calibration_test([(0.1, 20, 3), (0.2, 20, 6)])
    assert dof == 1 and statistic == pytest.approx((9 - 6) ** 2 / (20 * 0.09 + 20 * 0.16))


def test_calibration_holds_on_simulated_true_chances():
    rng = np.random.default_rng(11)
    chances = rng.choice([1 / 48, 1 / 7, 2 / 9, 1 / 3, 3 / 5], size=50_000)
    wins = rng.random(50_000) < chances
    groups = [
        (float(p), int((chances == p).sum()), int(wins[chances == p].sum()))
        for p in np.unique(chances)
    ]
    assert stats.calibration_test(groups)[2] > 1e-3
    skewed = [(p, n, min(n, int(w * 1.1))) for p, n, w in groups]
    assert stats.calibration_test(skewed)[2] < 1e-6
