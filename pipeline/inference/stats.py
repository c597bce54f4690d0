"""Intervals and tests for the report, on scipy: nothing here evaluates a distribution itself.

The distributions come from scipy.special (the functions scipy.stats itself evaluates), which
imports in a third of the time; tests/inference/test_stats.py holds every result to scipy.stats.

- `wilson`: the Wilson score interval of a proportion, from scipy's normal quantile (the
  tests hold it to scipy's `binomtest(...).proportion_ci(method="wilson")`, which is
  a hundred times slower: the report computes thousands).
- `clopper_pearson`: the exact (conservative) interval from scipy's beta quantiles, for
  proportions at or near 0 or 1.
- `z_against`: the z-score of an observed proportion against an exact value p, with the
  standard error sqrt(p (1 - p) / n) of p itself.
- `paired_difference`: the difference of two proportions measured on the same deals, from
  the 2x2 table, with Newcombe's hybrid score interval (method 10 of Newcombe 1998,
  "Improved confidence intervals for the difference between binomial proportions based on
  paired data", Statistics in Medicine 17: 2635-2650), built from the two Wilson intervals
  and the phi correlation of the pairs.
- `independent_difference`: the same difference of two proportions measured on samples of
  their own (Newcombe's method 10 for independent proportions: no correlation).
- `mcnemar_exact`: McNemar's exact test: the discordant pairs split as Binomial(b + c, 1/2)
  under "no difference" (two-sided, from scipy's binomial cdf; equal to
  `scipy.stats.binomtest(b, b + c).pvalue`).
- `chisquare_gof`: Pearson's chi-square goodness of fit (as `scipy.stats.chisquare`) against
  given chances, neighbouring bins pooled until every expected count is at least 5.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np


def _special():
    """scipy.special, imported on first use. Its distribution functions are the ones
    scipy.stats evaluates (ndtri, betaincinv, bdtr, chdtrc) without scipy.stats' slow import;
    the tests hold every result here to scipy.stats itself."""
    from scipy import special

    return special


CONFIDENCE = 0.95  # the report's intervals
CLAIM_CONFIDENCE = 0.999  # the claims' verdicts: eleven claims, no refutation by chance
MIN_EXPECTED = 5.0


def percent(confidence: float) -> str:
    """A confidence level as people write it: 0.95 -> "95%", 0.999 -> "99.9%"."""
    return f"{100 * confidence:.10g}%"


LEVEL = percent(CONFIDENCE)
CLAIM_LEVEL = percent(CLAIM_CONFIDENCE)


@cache
def z_of(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    return float(_special().ndtri(0.5 + confidence / 2))


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of successes / n; (0, 1) when n = 0.

    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z the normal quantile
    (scipy); the tests hold it to scipy's `binomtest(...).proportion_ci(method="wilson")`.
    """
    low, high = wilson_arrays(np.array([successes]), np.array([n]), confidence)
    return float(low[0]), float(high[0])


def wilson_arrays(successes, n, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """`wilson` for arrays of counts at once."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    z = z_of(confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denominator = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denominator
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
        low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
        high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    # At 0 or n successes the bound at that end is exactly 0 or 1.
    low = np.where(k <= 0, 0.0, low)
    high = np.where(k >= n, 1.0, high)
    return low, high


def clopper_pearson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact Clopper-Pearson interval of successes / n (beta quantiles); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    alpha = 1 - confidence
    k, n = int(successes), int(n)
    low = 0.0 if k == 0 else float(_special().betaincinv(k, n - k + 1, alpha / 2))
    high = 1.0 if k == n else float(_special().betaincinv(k + 1, n - k, 1 - alpha / 2))
    return low, high


def z_against(successes: int, n: int, p: float) -> float:
    """(observed - p) / sqrt(p (1 - p) / n): how many standard errors from the exact value."""
    if n <= 0:
        return 0.0
    if p <= 0 or p >= 1:
        observed = successes / n
        return 0.0 if observed == p else math.copysign(math.inf, observed - p)
    return (successes / n - p) / math.sqrt(p * (1 - p) / n)


@dataclass(frozen=True)
class Paired:
    """Two proportions on the same deals: a's rate minus b's, with its interval and test."""

    n: int
    both: int
    a_only: int
    b_only: int
    neither: int
    difference: float
    low: float
    high: float
    p_value: float  # exact McNemar

    @property
    def a_rate(self) -> float:
        return (self.both + self.a_only) / self.n if self.n else math.nan

    @property
    def b_rate(self) -> float:
        return (self.both + self.b_only) / self.n if self.n else math.nan


def paired_difference(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = CONFIDENCE
) -> Paired:
    """a's success rate minus b's on the same n deals, Newcombe's hybrid score interval
    (`_newcombe`), with p1 = (both + a_only) / n, p2 = (both + b_only) / n and phi the
    correlation of the pairs (0 when a margin is empty)."""
    both, a_only, b_only, neither = (int(v) for v in (both, a_only, b_only, neither))
    n = both + a_only + b_only + neither
    p_value = mcnemar_exact(a_only, b_only)
    if n == 0:
        return Paired(0, 0, 0, 0, 0, math.nan, -1.0, 1.0, p_value)
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = (both * neither - a_only * b_only) / math.sqrt(margins) if margins else 0.0
    difference, low, high = _newcombe(both + a_only, n, both + b_only, n, phi, confidence)
    return Paired(n, both, a_only, b_only, neither, difference, low, high, p_value)


def independent_difference(
    a_wins: int, a_n: int, b_wins: int, b_n: int, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """a's success rate minus b's, measured on samples of their own: (difference, low,
    high), Newcombe's hybrid score interval for independent proportions (method 10 of
    Newcombe 1998, "Interval estimation for the difference between independent proportions",
    Statistics in Medicine 17: 873-890): `paired_difference`'s with no correlation."""
    if a_n <= 0 or b_n <= 0:
        return math.nan, -1.0, 1.0
    return _newcombe(a_wins, a_n, b_wins, b_n, 0.0, confidence)


def _newcombe(
    a_wins: int, a_n: int, b_wins: int, b_n: int, phi: float, confidence: float
) -> tuple[float, float, float]:
    """Newcombe's hybrid score interval of p1 - p2 from the two Wilson intervals, (l1, u1)
    and (l2, u2), and the correlation phi of the samples (0 for independent ones):
        low  = (p1 - p2) - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
        high = (p1 - p2) + sqrt((u1 - p1)^2 - 2 phi (u1 - p1)(p2 - l2) + (p2 - l2)^2)
    """
    p1, p2 = a_wins / a_n, b_wins / b_n
    l1, u1 = wilson(a_wins, a_n, confidence)
    l2, u2 = wilson(b_wins, b_n, confidence)
    difference = p1 - p2
    low_sq = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    high_sq = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    low = max(-1.0, difference - math.sqrt(max(low_sq, 0.0)))
    high = min(1.0, difference + math.sqrt(max(high_sq, 0.0)))
    return difference, low, high


def p_text(p_value: float, digits: int = 3) -> str:
    """A p-value for people: one that underflowed to 0 is written as a bound, not as 0."""
    if p_value < 1e-300:
        return "< 1e-300"
    return f"= {p_value:.{digits}g}"


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts; 1 with none.

    Under "no difference" a_only ~ Binomial(a_only + b_only, 1/2); the law is symmetric, so
    the two-sided p-value is 2 P(X <= min(a_only, b_only)), at most 1 (scipy's binomial cdf;
    the same value as `scipy.stats.binomtest(a_only, a_only + b_only).pvalue`).
    """
    discordant = int(a_only) + int(b_only)
    if discordant == 0:
        return 1.0
    return float(min(1.0, 2 * _special().bdtr(min(int(a_only), int(b_only)), discordant, 0.5)))


@dataclass(frozen=True)
class GoodnessOfFit:
    statistic: float
    dof: int
    p_value: float
    bins: list[tuple[int, int]]  # (first, last) value of each pooled bin
    observed: list[int]
    expected: list[float]


def pool_bins(
    observed: Sequence[float], expected: Sequence[float], min_expected: float = MIN_EXPECTED
) -> tuple[list[tuple[int, int]], list, list]:
    """Pool neighbouring bins (by position) until every expected count is >= min_expected.

    Bins are merged left to right; a short remainder at the end joins the last bin.
    Gives ((first index, last index) per bin, pooled observed, pooled expected).
    """
    bins, obs, exp = [], [], []
    start, o_sum, e_sum = 0, 0.0, 0.0
    for i, (o, e) in enumerate(zip(observed, expected)):
        o_sum += o
        e_sum += e
        if e_sum >= min_expected:
            bins.append((start, i))
            obs.append(o_sum)
            exp.append(e_sum)
            start, o_sum, e_sum = i + 1, 0.0, 0.0
    if start < len(expected):
        if bins:
            first, _ = bins[-1]
            bins[-1] = (first, len(expected) - 1)
            obs[-1] += o_sum
            exp[-1] += e_sum
        else:
            bins.append((start, len(expected) - 1))
            obs.append(o_sum)
            exp.append(e_sum)
    return bins, obs, exp


def chisquare_gof(
    observed: Mapping[int, int], chances: Mapping[int, float], min_expected: float = MIN_EXPECTED
) -> GoodnessOfFit:
    """Pearson's chi-square of observed counts by value against exact chances by value.

    Values are taken in increasing order over the union of both keys (an observed value the
    law gives no chance makes the fit fail outright: p = 0). Bins are pooled first.
    """
    values = sorted(set(observed) | set(chances))
    impossible = [v for v in values if observed.get(v, 0) and not chances.get(v, 0)]
    n = sum(observed.values())
    obs = [float(observed.get(v, 0)) for v in values]
    exp = [float(chances.get(v, 0)) * n for v in values]
    index_bins, pooled_obs, pooled_exp = pool_bins(obs, exp, min_expected)
    bins = [(values[a], values[b]) for a, b in index_bins]
    if impossible:
        return GoodnessOfFit(
            math.inf, len(bins) - 1, 0.0, bins, [int(o) for o in pooled_obs], pooled_exp
        )
    if len(pooled_obs) < 2:
        return GoodnessOfFit(0.0, 0, 1.0, bins, [int(o) for o in pooled_obs], pooled_exp)
    # chisquare wants equal totals; the law sums to 1, so the expectations already sum to n.
    scale = sum(pooled_obs) / sum(pooled_exp)
    expected = np.array(pooled_exp) * scale
    observed_array = np.array(pooled_obs)
    statistic = float(np.sum((observed_array - expected) ** 2 / expected))
    dof = len(pooled_obs) - 1
    # Pearson's statistic against the chi-square law on bins - 1 degrees of freedom: what
    # scipy.stats.chisquare gives (the tests hold the two equal).
    return GoodnessOfFit(
        statistic,
        dof,
        float(_special().chdtrc(dof, statistic)),
        bins,
        [int(o) for o in pooled_obs],
        [float(e) for e in expected],
    )


def calibration_test(
    groups: Sequence[tuple[float, int, int]], min_expected: float = MIN_EXPECTED
) -> tuple[float, int, float]:
    """Chi-square of observed wins against predicted chances, over groups (p, n, wins).

    Groups with a certain chance (0 or 1) must match it exactly, else the test fails (p = 0).
    The others, in order of p, are pooled with their neighbours until both the expected wins
    and the expected losses of a pool are at least ``min_expected``; each pool adds
    (wins - E)^2 / V with E = sum n p and V = sum n p (1 - p), the mean and variance of its
    wins. Gives (statistic, degrees of freedom = pools, p-value from scipy's chi-square law).
    """
    pools, wins, expected, variance, losses = [], 0, 0.0, 0.0, 0.0
    for p, n, won in sorted(groups):
        if n == 0:
            continue
        if p <= 0 or p >= 1:
            if won != round(p * n):
                return math.inf, 1, 0.0
            continue
        wins += won
        expected += n * p
        losses += n * (1 - p)
        variance += n * p * (1 - p)
        if expected >= min_expected and losses >= min_expected:
            pools.append((wins, expected, variance))
            wins, expected, variance, losses = 0, 0.0, 0.0, 0.0
    if variance > 0:
        if pools:  # a short remainder joins the last pool
            last = pools.pop()
            pools.append((last[0] + wins, last[1] + expected, last[2] + variance))
        else:
            pools.append((wins, expected, variance))
    if not pools:
        return 0.0, 0, 1.0
    statistic = sum((w - e) ** 2 / v for w, e, v in pools)
    return statistic, len(pools), float(_special().chdtrc(len(pools), statistic))
