"""Confidence sequences: intervals for a mean that hold at every look at once, so that a run
may look at its results after every shard and stop when they are precise enough.

A fixed-n interval (Wilson's, say) covers the truth with its nominal chance at one sample
size chosen in advance. Looked at after every shard, and stopped at the first look where it
is narrow enough or excludes a value, it errs far more often (tests/inference/test_anytime.py
shows it). A confidence sequence (C_t) covers the mean at every t simultaneously:
P(exists t: mean not in C_t) <= alpha, so any stopping rule keeps its level.

The one here is the predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting", J. R.
Stat. Soc. B 86(1), 2024, section 3.2. For observations x_i in [0, 1] with mean m, bets
lambda_i in [0, 1) and estimates mu_i, each chosen before x_i is seen:

    C_t = sum(lambda_i x_i) / sum(lambda_i)  +-  (log(2 / alpha) + sum(v_i psi(lambda_i))) / sum(lambda_i)
    v_i = 4 (x_i - mu_(i-1))^2,   psi(lambda) = (-log(1 - lambda) - lambda) / 4

is a (1 - alpha) confidence sequence for m, whatever the (predictable) choice of bets and
estimates. Two choices make it fit a sweep:

- **Bets fixed per shard.** A shard's observations all get the bet and the estimate made
  from the shards before it: still predictable, and then every sum above is a sum of shard
  totals (n, sum x, sum x^2), so a shard of a million deals costs what one deal does.
- **Bets tuned to the precision asked for.** The paper's default bet, sqrt(2 log(2/alpha) /
  (sigma^2 t log(1 + t))), spreads the interval's strength over all t, and at 10^8 deals is
  some six times wider than a fixed-n interval. A run that wants a half-width h is better
  served by the bet that makes the interval narrowest where it reaches h: with
  sum(v psi) ~ n sigma^2 lambda^2 / 2, the half-width at n is about
  log(2/alpha) / (n lambda) + sigma^2 lambda / 2, and the lambda that reaches h soonest is
  h / sigma^2, reaching it at n ~ 2 log(2/alpha) sigma^2 / h^2 (about 1.9 times the deals a
  fixed-n 95% interval needs: the price of looking at every shard). The caller says, shard
  by shard, which half-width it is aiming at (`Sequence.add`'s ``aim``).

A paired difference d in [-1, 1] (one cell won, the other lost) is the mean of (d + 1) / 2,
scaled back: `Sequence` takes any bounds [low, high] and maps them to [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_BET = 0.5  # the paper's truncation of lambda (its c = 1/2)
# The narrowest half-width a bet aims at. A half-width h takes some 2 log(2/alpha) sigma^2 /
# h^2 deals: at this one, more than 2**64 (every deal there is) unless the win rate is
# within about 3e-6 of 0 or 1. A stop rule may ask for no narrower (`config`).
MIN_AIM = 1e-12


def psi(bet: float) -> float:
    """psi_E of the paper: (-log(1 - lambda) - lambda) / 4."""
    return (-math.log1p(-bet) - bet) / 4


@dataclass
class Sequence:
    """A confidence sequence for the mean of observations in [low, high], fed shard by shard
    (`add`), read at any time (`interval`). Its state is a handful of sums: two sequences fed
    the same shards in the same order are equal, whoever computed them."""

    alpha: float
    low: float = 0.0
    high: float = 1.0
    n: int = 0
    total: float = 0.0  # sum of the observations mapped to [0, 1]
    squares: float = 0.0  # and of their squares
    weighted: float = 0.0  # sum of lambda_i x_i
    bets: float = 0.0  # sum of lambda_i
    spent: float = 0.0  # sum of v_i psi(lambda_i)

    @property
    def span(self) -> float:
        return self.high - self.low

    def estimate(self) -> float:
        """mu: the regularised mean (a prior observation at 1/2), in [0, 1]."""
        return (0.5 + self.total) / (self.n + 1)

    def variance(self) -> float:
        """sigma^2: the regularised variance (a prior observation of variance 1/4)."""
        spread = self.squares - self.total**2 / self.n if self.n else 0.0
        return (0.25 + max(spread, 0.0)) / (self.n + 1)

    def bet(self, aim: float) -> float:
        """The bet for the next shard, made for the half-width ``aim`` (in the data's units)."""
        aim = aim / self.span
        return min(MAX_BET, max(aim, MIN_AIM) / self.variance())

    def add(self, n: int, total: float, squares: float, aim: float) -> None:
        """One shard: ``n`` observations with ``total`` = sum x and ``squares`` = sum x^2 (in
        the data's units), its bet made for the half-width ``aim`` from the shards before."""
        if n <= 0:
            return
        # To [0, 1]: y = (x - low) / span.
        total01 = (total - n * self.low) / self.span
        squares01 = (squares - 2 * self.low * total + n * self.low**2) / self.span**2
        bet, mu = self.bet(aim), self.estimate()
        deviations = squares01 - 2 * mu * total01 + n * mu * mu  # sum (y - mu)^2
        self.weighted += bet * total01
        self.bets += bet * n
        self.spent += 4 * max(deviations, 0.0) * psi(bet)
        self.n += n
        self.total += total01
        self.squares += squares01

    def half_width(self) -> float:
        """The interval's half-width before it is cut to the bounds (infinite before data)."""
        if not self.bets:
            return math.inf
        return self.span * (math.log(2 / self.alpha) + self.spent) / self.bets

    def interval(self) -> tuple[float, float]:
        if not self.bets:
            return self.low, self.high
        centre = self.low + self.span * self.weighted / self.bets
        half = self.half_width()
        return max(self.low, centre - half), min(self.high, centre + half)


def proportion(alpha: float) -> Sequence:
    """For a win rate: observations 0 or 1."""
    return Sequence(alpha)


def difference(alpha: float) -> Sequence:
    """For a paired difference of two cells' wins: observations -1, 0 or 1."""
    return Sequence(alpha, low=-1.0, high=1.0)


def add_wins(sequence: Sequence, n: int, wins: int, aim: float) -> None:
    sequence.add(n, wins, wins, aim)


def add_pairs(sequence: Sequence, n: int, a_only: int, b_only: int, aim: float) -> None:
    """Deals where only a won count +1, only b -1, the rest 0."""
    sequence.add(n, a_only - b_only, a_only + b_only, aim)
