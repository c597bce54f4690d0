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
  settled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Cells
from dataclasses import dataclass

from pipeline.engine.rules import Cell
from pipeline.sweep import anytime

DECIDED = "decided"
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class StopRule:
    win_rate: float | None = None  # half-width of every cell's win rate
    comparisons: float | str | None = None  # half-width of every comparison, or DECIDED
    min_deals: int = 0
    confidence: float = DEFAULT_CONFIDENCE

    def to_json(self) -> dict:
        out = {"win_rate": self.win_rate, "comparisons": self.comparisons}
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
        floor = f", after at least {self.min_deals:,} deals" if self.min_deals else ""
        return " and ".join(parts) + f" ({self.confidence:.0%} confidence sequences{floor})"


def points(fraction: float) -> str:
    """A half-width in percentage points."""
    return f"{100 * fraction:.3g} pts"


def strategy_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """(a, b), a < b, of cells that differ in their strategy only: the paired comparisons."""

    def rest(cell: Cell) -> tuple:
        return (cell.variant, cell.finale, cell.order, cell.depth)

    return [
        (a, b)
        for a in range(len(cells))
        for b in range(a + 1, len(cells))
        if cells[a].strategy is not None
        and cells[a].strategy != cells[b].strategy
        and rest(cells[a]) == rest(cells[b])
    ]


@dataclass
class Target:
    """One interval the rule watches, as the report and run.json show it."""

    kind: str  # "cell" or "comparison"
    cells: tuple[str, ...]  # the cell's label, or those of a and b (a's rate minus b's)
    interval: tuple[float, float]
    half_width: float
    estimate: float
    met: bool

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "cells": list(self.cells),
            "estimate": self.estimate,
            "interval": list(self.interval),
            "half_width": self.half_width,
            "met": self.met,
        }


class Stopping:
    """The rule's state on the committed prefix: fed shard by shard in deal order (`add`)."""

    def __init__(self, rule: StopRule, cells: Cells[Cell], max_deals: int):
        self.rule, self.cells, self.max_deals = rule, list(cells), max_deals
        self.pairs = strategy_pairs(self.cells)
        alpha = 1 - rule.confidence
        self.rates = [anytime.proportion(alpha) for _ in self.cells]
        self.differences = [anytime.difference(alpha) for _ in self.pairs]
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
        for sequence, (a_only, b_only) in zip(self.differences, pairs):
            aim = self._aim(sequence, self.rule.comparisons)
            anytime.add_pairs(sequence, deals, a_only, b_only, aim)
        self.deals += deals
        self.shards += 1
        return self.met()

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
        for sequence, aim in checks:
            needed = max(
                needed, math.ceil(self.deals * (sequence.half_width() / aim) ** 2) - self.deals
            )
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
