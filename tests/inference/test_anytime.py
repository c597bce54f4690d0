"""The confidence sequences of `inference.anytime`: their shard sums against the paper's formula
written out observation by observation, and their error rates by simulation over many seeded
replicate streams, against a fixed-n interval looked at after every shard.

Each simulated rate is tested with a tolerance of three binomial standard errors of the
number of streams, sqrt(alpha (1 - alpha) / streams), around the nominal level alpha.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pipeline.inference import anytime, stats

ALPHA = 0.05
STREAMS, SHARDS, SHARD = 2000, 40, 250
TOLERANCE = 3 * math.sqrt(ALPHA * (1 - ALPHA) / STREAMS)


def by_observation(x: np.ndarray, batches: list[int], aims: list[float], low: float, high: float):
    """The paper's sums, one observation at a time (bets and estimates fixed per batch)."""
    y = (x - low) / (high - low)
    weighted = bets = spent = 0.0
    seen: list[float] = []
    start = 0
    for size, aim in zip(batches, aims):
        n = len(seen)
        mu = (0.5 + sum(seen)) / (n + 1)
        mean = sum(seen) / n if n else 0.0
        variance = (0.25 + sum((v - mean) ** 2 for v in seen)) / (n + 1)
        bet = min(anytime.MAX_BET, aim / (high - low) / variance)
        for value in y[start : start + size]:
            weighted += bet * value
            bets += bet
            spent += 4 * (value - mu) ** 2 * (-math.log(1 - bet) - bet) / 4
        seen += list(y[start : start + size])
        start += size
    centre = weighted / bets
    half = (math.log(2 / ALPHA) + spent) / bets
    return low + (high - low) * (centre - half), low + (high - low) * (centre + half)


@pytest.mark.parametrize("low, high, values", [(0, 1, [0, 1]), (-1, 1, [-1, 0, 1])])
def test_shard_sums_are_the_observation_sums(low, high, values):
    rng = np.random.default_rng(11)
    x = rng.choice(values, size=600).astype(float)
    batches, aims = [1, 1, 50, 100, 7, 441], [0.2, 0.1, 0.05, 0.02, 0.03, 0.01]
    sequence = anytime.Sequence(ALPHA, low=low, high=high)
    start = 0
    for size, aim in zip(batches, aims):
        part = x[start : start + size]
        sequence.add(size, part.sum(), (part**2).sum(), aim)
        start += size
    expected_low, expected_high = by_observation(x, batches, aims, low, high)
    centre = sum(sequence.interval()) / 2
    assert sequence.half_width() == pytest.approx((expected_high - expected_low) / 2, rel=1e-9)
    assert centre == pytest.approx((expected_low + expected_high) / 2, rel=1e-9, abs=1e-12)


def wilson_excludes(wins: int, n: int, value: float) -> bool:
    low, high = stats.wilson(wins, n, 1 - ALPHA)
    return not low <= value <= high


def streams_of_wins(p: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).binomial(SHARD, p, size=(STREAMS, SHARDS))


def test_a_win_rate_sequence_errs_at_most_alpha_at_every_look_and_wilson_does_not():
    """Truth p = 1/13; the rule under test stops at the first shard whose interval excludes
    1/13 (a claim of "1 in 13" refuted). Any such stop is an error."""
    p = 1 / 13
    wins = streams_of_wins(p, seed=2026)
    sequence_errors = wilson_errors = 0
    for row in wins:
        sequence = anytime.proportion(ALPHA)
        total = 0
        sequence_erred = wilson_erred = False
        for k, won in enumerate(row):
            anytime.add_wins(sequence, SHARD, int(won), aim=0.01)
            total += int(won)
            low, high = sequence.interval()
            sequence_erred |= not low <= p <= high
            wilson_erred |= wilson_excludes(total, SHARD * (k + 1), p)
        sequence_errors += sequence_erred
        wilson_errors += wilson_erred
    assert sequence_errors / STREAMS <= ALPHA + TOLERANCE, sequence_errors
    assert wilson_errors / STREAMS > ALPHA + TOLERANCE, wilson_errors


def test_a_paired_sequence_errs_at_most_alpha_and_a_fixed_n_interval_does_not():
    """Two cells that differ on 6% of deals with no true difference (3% each way): the rule
    stops at the first shard whose interval for the difference excludes 0 ("decided"), which
    is always an error here. The fixed-n interval is the normal one for a paired mean."""
    rng = np.random.default_rng(7)
    counts = rng.multinomial(SHARD, [0.03, 0.03, 0.94], size=(STREAMS, SHARDS))
    z = scipy_stats.norm.ppf(1 - ALPHA / 2)
    sequence_errors = fixed_errors = 0
    for row in counts:
        sequence = anytime.difference(ALPHA)
        a_total = b_total = 0
        sequence_erred = fixed_erred = False
        for k, (a_only, b_only, _) in enumerate(row):
            estimate = sequence.interval()
            aim = max(abs(sum(estimate) / 2), 0.005)
            anytime.add_pairs(sequence, SHARD, int(a_only), int(b_only), aim)
            a_total, b_total = a_total + int(a_only), b_total + int(b_only)
            n = SHARD * (k + 1)
            low, high = sequence.interval()
            sequence_erred |= low > 0 or high < 0
            mean = (a_total - b_total) / n
            spread = math.sqrt(max((a_total + b_total) / n - mean**2, 0) / n)
            fixed_erred |= abs(mean) > z * spread
        sequence_errors += sequence_erred
        fixed_errors += fixed_erred
    assert sequence_errors / STREAMS <= ALPHA + TOLERANCE, sequence_errors
    assert fixed_errors / STREAMS > ALPHA + TOLERANCE, fixed_errors


def test_a_sequence_aimed_at_a_half_width_reaches_it_near_the_predicted_deals():
    """With bets aimed at h, the half-width reaches h near 2 log(2/alpha) sigma^2 / h^2 deals
    (the module's derivation), here for p = 1/13 and h = 0.01."""
    p, h = 1 / 13, 0.01
    predicted = 2 * math.log(2 / ALPHA) * p * (1 - p) / h**2
    rng = np.random.default_rng(3)
    sequence = anytime.proportion(ALPHA)
    while sequence.half_width() > h:
        anytime.add_wins(sequence, 100, int(rng.binomial(100, p)), aim=h)
    assert 0.8 * predicted <= sequence.n <= 1.3 * predicted, (sequence.n, predicted)
