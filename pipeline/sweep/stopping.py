"""A sweep's stop rule (its config's ``[stop]`` table): play until the answer is known, then stop.

The rule reads, for each shard, a tally the task counts beside its files (each cell's wins,
and for each paired strategy comparison the deals only one of the two cells won), and keeps
a confidence sequence (`anytime`) per cell and per comparison. It is checked at each shard
boundary of the contiguous prefix of committed shards, in deal order: the run stops at the
first boundary where every target holds and at least ``min_deals`` deals are played. That
point depends only on the shards' tallies in order, so no worker count, cluster or
interruption can move it.

Targets (all that are set must hold):
- ``win_rate = h``: every cell's win rate known to a half-width h;
- ``comparisons = h``: every paired strategy comparison known to a half-width h;
- ``comparisons = "decided"``: every one's interval excludes 0 (which strategy wins more is
  settled);
- ``claims = "decided"``: every claim of the rule pages that the cells' tallies answer
  (`claim_checks`: one_in_13, better_than_one_in_three, pick_makes_no_difference,
  deal_order_no_change) confirmed or refuted, by the report's own verdict rules
  (`report.claims`) read on confidence sequences of the claims' confidence (99.9%). The other
  claims read deal facts, runs of deals or turned cards, which no tally carries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence as Cells
from dataclasses import dataclass
from types import SimpleNamespace

from pipeline.engine import rules
from pipeline.engine.deals import UINT64_LIMIT
from pipeline.engine.rules import Cell
from pipeline.report import claims as claim_rules
from pipeline.report import stats
from pipeline.sweep import anytime

DECIDED = "decided"
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class StopRule:
    win_rate: float | None = None  # half-width of every cell's win rate
    comparisons: float | str | None = None  # half-width of every comparison, or DECIDED
    claims: str | None = None  # DECIDED: every claim the tallies answer
    min_deals: int = 0
    confidence: float = DEFAULT_CONFIDENCE

    def to_json(self) -> dict:
        out = {"win_rate": self.win_rate, "comparisons": self.comparisons, "claims": self.claims}
        out = {key: value for key, value in out.items() if value is not None}
        return {**out, "min_deals": self.min_deals, "confidence": self.confidence}

    def describe(self) -> str:
        parts = []
        if self.win_rate is not None:
            parts.append(f"every cell's win rate to +-{points(self.win_rate)}")
        if self.comparisons == DECIDED:
            parts.append("every paired strategy comparison decided")
        elif self.comparisons is not None:
            parts.append(f"every paired strategy comparison to +-{points(self.comparisons)}")
        levels = []
        if self.win_rate is not None or self.comparisons is not None:
            levels.append(f"{self.confidence:.0%}")
        if self.claims is not None:
            parts.append("every claim the cells answer decided")
            levels.append(f"the claims' {stats.CLAIM_CONFIDENCE:.1%}")
        floor = f"; after at least {self.min_deals:,} deals" if self.min_deals else ""
        return " and ".join(parts) + f" (confidence sequences: {', '.join(levels)}{floor})"


def points(fraction: float) -> str:
    """A half-width in percentage points."""
    return f"{100 * fraction:.3g} pts"


def pairs_differing_in(axis: str, cells: Cells[Cell]) -> list[tuple[int, int]]:
    """(a, b), a < b, of cells that differ on ``axis`` (a `rules.AXES` name) only."""

    def rest(cell: Cell) -> tuple:
        return tuple(getattr(cell, other) for other in rules.AXES if other != axis)

    return [
        (a, b)
        for a in range(len(cells))
        for b in range(a + 1, len(cells))
        if getattr(cells[a], axis) != getattr(cells[b], axis) and rest(cells[a]) == rest(cells[b])
    ]


def strategy_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """The paired strategy comparisons: cells that differ in their strategy only."""
    return pairs_differing_in("strategy", cells)


def order_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """Cells that differ in their deal order only (one claim compares them)."""
    return pairs_differing_in("order", cells)


def tally_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """The pairs a shard's tally counts: the strategy comparisons, then the deal-order pairs."""
    return strategy_pairs(cells) + order_pairs(cells)


@dataclass
class ClaimCheck:
    """A claim the rule decides from the tallies: the cells (indices) and tally pairs it reads,
    how it aims the bets of their sequences, and its verdict on their intervals."""

    id: str
    rates: list[int]
    pairs: list[int]
    verdict: Callable[[list, list], str]  # (rate intervals, pair intervals) -> verdict
    aim: Callable[[float], float]  # an estimate -> the half-width to aim the next bet at


def claim_checks(cells: Cells[Cell]) -> list[ClaimCheck]:
    """The claims these cells answer from their tallies, with the report's verdict rules and
    its choice of cells (`claims.primary`)."""
    cells = list(cells)
    present = SimpleNamespace(cells=set(cells))
    index = {cell: i for i, cell in enumerate(cells)}
    pair_index = {(cells[a], cells[b]): k for k, (a, b) in enumerate(tally_pairs(cells))}
    tolerance = claim_rules.TOLERANCE
    checks = []

    def near(value: float) -> Callable[[float], float]:
        return lambda estimate: max(abs(estimate - value), tolerance / 2)

    def no_difference(estimate: float) -> float:  # within the tolerance, or away from 0
        return tolerance - abs(estimate) if abs(estimate) < tolerance / 2 else abs(estimate)

    def all_pairs(verdicts: list[str]) -> str:
        if claim_rules.REFUTED in verdicts:
            return claim_rules.REFUTED
        if verdicts and all(v == claim_rules.CONFIRMED for v in verdicts):
            return claim_rules.CONFIRMED
        return claim_rules.INCONCLUSIVE

    standard = claim_rules.primary(present, "standard")
    if standard is not None:
        checks.append(
            ClaimCheck(
                "one_in_13",
                [index[standard]],
                [],
                lambda r, p: claim_rules.exact_value_verdict(1 / 13, r[0]),
                lambda estimate: tolerance,
            )
        )
    one_swap = [
        c for s in rules.COUNT_STRATEGIES if (c := claim_rules.primary(present, "one_swap", s))
    ]
    if one_swap:
        checks.append(
            ClaimCheck(
                "better_than_one_in_three",
                [index[c] for c in one_swap],
                [],
                # The best strategy beats 1/3 if one does; not if none comes near (and
                # none is missing).
                lambda r, p: claim_rules.over_some_strategies(
                    claim_rules.above_verdict(
                        (max(low for low, _ in r), max(high for _, high in r)), 1 / 3
                    ),
                    len(one_swap),
                    claim_rules.REFUTED,
                ),
                near(1 / 3),
            )
        )
    watch = [c for s in rules.COUNT_STRATEGIES if (c := claim_rules.primary(present, "watch", s))]
    watch_pairs = [pair_index[(a, b)] for a in watch for b in watch if (a, b) in pair_index]
    if watch_pairs:
        checks.append(
            ClaimCheck(
                "pick_makes_no_difference",
                [],
                watch_pairs,
                lambda r, p: claim_rules.over_some_strategies(
                    all_pairs([claim_rules.no_difference_verdict(i) for i in p]),
                    len(watch),
                    claim_rules.CONFIRMED,
                ),
                no_difference,
            )
        )
    orders = [
        pair_index[(a, b)]
        for (a, b) in pair_index
        if a.variant == "standard" and a.finale == b.finale == "down"
    ]
    if orders:
        checks.append(
            ClaimCheck(
                "deal_order_no_change",
                [],
                orders[:1],
                lambda r, p: claim_rules.no_difference_verdict(p[0]),
                no_difference,
            )
        )
    return checks


@dataclass
class Target:
    """One interval the rule watches, as the report and run.json show it."""

    kind: str  # "cell", "comparison" or "claim"
    cells: tuple[str, ...]  # the cell's label, or those of a and b (a's rate minus b's)
    interval: tuple[float, float]
    half_width: float
    estimate: float
    met: bool
    claim: str | None = None  # a claim's id and verdict
    verdict: str | None = None
    confidence: float | None = None

    def to_json(self) -> dict:
        out = {
            "kind": self.kind,
            "cells": list(self.cells),
            "estimate": self.estimate,
            "interval": list(self.interval),
            "half_width": self.half_width,
            "met": self.met,
        }
        if self.claim is not None:
            out.update(claim=self.claim, verdict=self.verdict, confidence=self.confidence)
        return out


class Stopping:
    """The rule's state on the committed prefix: fed shard by shard in deal order (`add`)."""

    def __init__(self, rule: StopRule, cells: Cells[Cell], max_deals: int):
        self.rule, self.cells, self.max_deals = rule, list(cells), max_deals
        self.pairs = strategy_pairs(self.cells)
        self.tally_pairs = tally_pairs(self.cells)  # what each shard's tally counts, in order
        alpha = 1 - rule.confidence
        self.rates = [anytime.proportion(alpha) for _ in self.cells]
        self.differences = [anytime.difference(alpha) for _ in self.pairs]
        # The claims' own sequences, of the claims' confidence, each aimed by its claim.
        self.checks = claim_checks(self.cells) if rule.claims else []
        claim_alpha = 1 - stats.CLAIM_CONFIDENCE
        self.claim_rates: dict[int, tuple[anytime.Sequence, Callable]] = {}
        self.claim_pairs: dict[int, tuple[anytime.Sequence, Callable]] = {}
        for check in self.checks:
            for i in check.rates:
                self.claim_rates.setdefault(i, (anytime.proportion(claim_alpha), check.aim))
            for k in check.pairs:
                self.claim_pairs.setdefault(k, (anytime.difference(claim_alpha), check.aim))
        self.deals = 0
        self.shards = 0

    def _reachable(self, sequence: anytime.Sequence) -> float:
        """About the narrowest half-width the budget of deals can reach."""
        alpha = sequence.alpha
        return sequence.span * math.sqrt(
            2 * math.log(2 / alpha) * sequence.variance() / self.max_deals
        )

    def _aim(self, sequence: anytime.Sequence, target) -> float:
        if target == DECIDED:  # narrow enough to exclude 0, but not past what the budget reaches
            low, high = sequence.interval()
            return max(abs(low + high) / 2, self._reachable(sequence))
        if target is None:
            return self._reachable(sequence)
        return target

    def add(self, deals: int, wins: list[int], pairs: list[list[int]]) -> bool:
        """One shard of the prefix (its deals and tally); whether the rule now holds."""
        for sequence, won in zip(self.rates, wins):
            anytime.add_wins(sequence, deals, won, self._aim(sequence, self.rule.win_rate))
        for sequence, (a_only, b_only) in zip(self.differences, pairs):  # the strategy pairs
            aim = self._aim(sequence, self.rule.comparisons)
            anytime.add_pairs(sequence, deals, a_only, b_only, aim)
        for i, (sequence, aim) in self.claim_rates.items():
            anytime.add_wins(sequence, deals, wins[i], self._claim_aim(sequence, aim))
        for k, (sequence, aim) in self.claim_pairs.items():
            a_only, b_only = pairs[k]
            anytime.add_pairs(sequence, deals, a_only, b_only, self._claim_aim(sequence, aim))
        self.deals += deals
        self.shards += 1
        return self.met()

    def _claim_aim(self, sequence: anytime.Sequence, aim: Callable) -> float:
        estimate = sequence.low + sequence.span * sequence.estimate()
        return max(aim(estimate), self._reachable(sequence))

    def claim_verdict(self, check: ClaimCheck) -> str:
        rates = [self.claim_rates[i][0].interval() for i in check.rates]
        pairs = [self.claim_pairs[k][0].interval() for k in check.pairs]
        return check.verdict(rates, pairs) if self.deals else claim_rules.INCONCLUSIVE

    def _claim_met(self, check: ClaimCheck) -> bool:
        return self.claim_verdict(check) != claim_rules.INCONCLUSIVE

    def _cell_met(self, sequence) -> bool:
        return self.rule.win_rate is None or sequence.half_width() <= self.rule.win_rate

    def _comparison_met(self, sequence) -> bool:
        target = self.rule.comparisons
        if target is None:
            return True
        if target == DECIDED:
            low, high = sequence.interval()
            return low > 0 or high < 0
        return sequence.half_width() <= target

    def met(self) -> bool:
        return (
            self.deals >= self.rule.min_deals
            and all(self._cell_met(s) for s in self.rates)
            and all(self._comparison_met(s) for s in self.differences)
            and all(self._claim_met(check) for check in self.checks)
        )

    def targets(self) -> list[Target]:
        out = []
        if self.rule.win_rate is not None:
            for cell, sequence in zip(self.cells, self.rates):
                met = self._cell_met(sequence)
                out.append(self._target("cell", (cell.label,), sequence, met))
        if self.rule.comparisons is not None:
            for (a, b), sequence in zip(self.pairs, self.differences):
                labels = (self.cells[a].label, self.cells[b].label)
                met = self._comparison_met(sequence)
                out.append(self._target("comparison", labels, sequence, met))
        pairs = self.tally_pairs
        for check in self.checks:
            # Shown by the interval its verdict turns on most: the one nearest undecided.
            read = [((self.cells[i].label,), self.claim_rates[i][0]) for i in check.rates]
            read += [
                (tuple(self.cells[c].label for c in pairs[k]), self.claim_pairs[k][0])
                for k in check.pairs
            ]
            labels, sequence = max(read, key=lambda item: item[1].half_width())
            target = self._target("claim", labels, sequence, self._claim_met(check))
            target.claim, target.verdict = check.id, self.claim_verdict(check)
            target.confidence = stats.CLAIM_CONFIDENCE
            out.append(target)
        return out

    @staticmethod
    def _target(kind, labels, sequence, met) -> Target:
        low, high = sequence.interval()
        estimate = (
            sequence.low + sequence.span * sequence.total / sequence.n if sequence.n else math.nan
        )
        return Target(kind, labels, (low, high), sequence.half_width(), estimate, met)

    def deals_still_needed(self) -> int | None:
        """About how many more deals the unmet targets need (half-widths shrink as 1/sqrt(n)),
        or None before any shard or when a comparison has no difference to settle yet."""
        if not self.deals:
            return None
        needed = self.rule.min_deals - self.deals
        checks = []
        if self.rule.win_rate is not None:
            checks += [(s, self.rule.win_rate) for s in self.rates if not self._cell_met(s)]
        for sequence in self.differences:
            if self._comparison_met(sequence):
                continue
            if self.rule.comparisons == DECIDED:
                low, high = sequence.interval()
                distance = abs(low + high) / 2
                if distance == 0:
                    return None
                checks.append((sequence, distance))
            else:
                checks.append((sequence, self.rule.comparisons))
        for check in self.checks:
            if not self._claim_met(check):
                for sequence, aim in [self.claim_rates[i] for i in check.rates] + [
                    self.claim_pairs[k] for k in check.pairs
                ]:
                    checks.append((sequence, self._claim_aim(sequence, aim)))
        for sequence, aim in checks:
            ratio = sequence.half_width() / aim if aim > 0 else math.inf
            more = self.deals * ratio * ratio  # inf, not OverflowError, past a float's range
            # No sweep plays more than every deal there is: a target that needs more (a
            # difference of nearly 0 to decide, say) needs them all.
            more = UINT64_LIMIT if not more < UINT64_LIMIT else math.ceil(more)
            needed = max(needed, more - self.deals)
        return max(needed, 0)

    def status(self) -> str:
        """Where the run stands against its target, for the progress line."""
        parts = []
        if self.rule.win_rate is not None:
            met = sum(self._cell_met(s) for s in self.rates)
            widest = max((s.half_width() for s in self.rates), default=0.0)
            parts.append(
                f"cells {met}/{len(self.rates)} within +-{points(self.rule.win_rate)}"
                + (f" (widest +-{points(widest)})" if math.isfinite(widest) else "")
            )
        if self.rule.comparisons is not None:
            met = sum(self._comparison_met(s) for s in self.differences)
            what = (
                "decided"
                if self.rule.comparisons == DECIDED
                else f"within +-{points(self.rule.comparisons)}"
            )
            parts.append(f"comparisons {met}/{len(self.differences)} {what}")
        if self.checks:
            met = sum(self._claim_met(check) for check in self.checks)
            parts.append(f"claims {met}/{len(self.checks)} decided")
        more = self.deals_still_needed()
        if more is not None:
            parts.append(f"about {more:,} more deals needed")
        return "target: " + ", ".join(parts)

    def record(self, stopped_at: int | None) -> dict:
        """What run.json keeps of how the run stopped."""
        return {
            "rule": self.rule.to_json(),
            "rule_text": self.rule.describe(),
            "met": self.met(),
            "stopped_at_shard": stopped_at,
            "shards": self.shards,
            "deals": self.deals,
            "deals_still_needed": None if self.met() else self.deals_still_needed(),
            "targets": [target.to_json() for target in self.targets()],
        }
