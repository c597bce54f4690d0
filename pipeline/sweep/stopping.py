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
- ``claims = "decided"``: every claim of a claims file (``claims_file``; by default the rule
  pages', shipped with the package) that the cells' tallies answer (`claim_checks`: a win
  rate, a paired difference or a spread of cells the tallies count, asserting a bound, a
  value or no difference) confirmed or refuted, each by the very definition the report
  evaluates (`inference.claims.Claim`: its cells, its measure, its rule), read on confidence
  sequences of the claims' confidence (`stats.CLAIM_CONFIDENCE`). The other claims read deal
  facts, runs of deals, turned cards or deaths, which no tally carries: the report decides
  them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence as Cells
from dataclasses import dataclass, field

from pipeline.engine import pairing
from pipeline.engine.deals import UINT64_LIMIT
from pipeline.engine.rules import Cell
from pipeline.inference import anytime, stats
from pipeline.inference.claims import INCONCLUSIVE, Claim, Every, Read

DECIDED = "decided"
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class StopRule:
    win_rate: float | None = None  # half-width of every cell's win rate
    comparisons: float | str | None = None  # half-width of every comparison, or DECIDED
    claims: str | None = None  # DECIDED: every claim the tallies answer
    min_deals: int = 0
    confidence: float = DEFAULT_CONFIDENCE
    claims_file: str | None = None  # where the claims are written (None: the rule pages')
    # The claims it reads, as `claim_file` read them (shown by their file, not one by one).
    claim_set: tuple[Claim, ...] = field(default=(), repr=False)

    def to_json(self) -> dict:
        out = {"win_rate": self.win_rate, "comparisons": self.comparisons, "claims": self.claims}
        out["claims_file"] = self.claims_file
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
            of = f" of {self.claims_file}" if self.claims_file else ""
            parts.append(f"every claim{of} the cells answer decided")
            levels.append(f"the claims' {stats.CLAIM_LEVEL}")
        floor = f"; after at least {self.min_deals:,} deals" if self.min_deals else ""
        return " and ".join(parts) + f" (confidence sequences: {', '.join(levels)}{floor})"


def points(fraction: float) -> str:
    """A half-width in percentage points."""
    return f"{100 * fraction:.3g} pts"


def strategy_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """The paired strategy comparisons: cells that differ in their strategy only."""
    return pairing.pairs(cells, "strategy")


def tally_pairs(cells: Cells[Cell]) -> list[tuple[int, int]]:
    """The pairs a shard's tally counts: the strategy comparisons, then the cells that differ
    in their deal order only (one claim compares them)."""
    return strategy_pairs(cells) + pairing.pairs(cells, "order")


@dataclass
class ClaimCheck:
    """A claim the rule decides from the tallies: the cells (indices) and tally pairs
    (indices, and whether a read runs against the pair's order) it may read."""

    claim: Claim
    rates: dict[Cell, int]
    pairs: dict[tuple[Cell, Cell], tuple[int, int]]  # (a, b) -> (tally pair, sign of a - b)
    candidates: list  # what it chooses among (`measure.candidates`), found once

    @property
    def id(self) -> str:
        return self.claim.id


def decidable(claim: Claim) -> bool:
    """Whether a claim is one a stop rule can decide on its confidence sequences: a measure
    of win counts (`tallied`), asserting of its interval (never and always count exceptions,
    which a sequence does not keep)."""
    return claim.measure.tallied and not isinstance(claim.asserts, Every)


def claim_checks(cells: Cells[Cell], claims: Cells[Claim]) -> list[ClaimCheck]:
    """The claims these cells answer from their tallies: those whose every read is a cell's
    wins or a pair the tallies count."""
    cells = list(cells)
    index = {cell: i for i, cell in enumerate(cells)}
    tallied = {}
    for k, (a, b) in enumerate(tally_pairs(cells)):
        tallied[(cells[a], cells[b])] = (k, 1)
        tallied[(cells[b], cells[a])] = (k, -1)
    checks = []
    for claim in filter(decidable, claims):
        candidates = claim.measure.candidates(cells)
        reads = claim.measure.reads(candidates)
        if reads and all(len(read) == 1 or read in tallied for read in reads):
            rates = {read[0]: index[read[0]] for read in reads if len(read) == 1}
            pairs = {read: tallied[read] for read in reads if len(read) == 2}
            checks.append(ClaimCheck(claim, rates, pairs, candidates))
    return checks


class Sequences:
    """The rule's evidence for a claim (`inference.claims.Evidence`): the claims' confidence
    sequences, and the cells' wins so far to rank them."""

    def __init__(self, stopping: Stopping):
        self.stopping = stopping

    def rate(self, cell: Cell) -> float:
        return self.stopping.won[self.stopping.index[cell]]

    def interval(self, read: Read) -> tuple[float, float] | None:
        sequence, sign = self.stopping.claim_sequence(read)
        if sequence is None or not self.stopping.deals:
            return None
        low, high = sequence.interval()
        return (low, high) if sign > 0 else (-high, -low)


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
        self.checks = claim_checks(self.cells, rule.claim_set) if rule.claims else []
        self._claim_sequences()
        self.index = {cell: i for i, cell in enumerate(self.cells)}
        self.won = [0] * len(self.cells)  # each cell's wins so far: they rank a claim's cells
        self.deals = 0
        self.shards = 0

    def _claim_sequences(self) -> None:
        """The claims' own sequences, of the claims' confidence, one per cell or tally pair
        that claims read, aimed by the rules of every claim that reads it (the narrowest
        they ask for); and for every read of a claim, its sequence and the sign that
        orients it."""
        claim_alpha = 1 - stats.CLAIM_CONFIDENCE
        self.claim_rates: dict[int, tuple[anytime.Sequence, list[Callable]]] = {}
        self.claim_pairs: dict[int, tuple[anytime.Sequence, list[Callable]]] = {}
        self.claim_reads: dict[Read, tuple[anytime.Sequence, int]] = {}
        for check in self.checks:
            aim = check.claim.asserts.aim
            for cell, i in check.rates.items():
                self.claim_rates.setdefault(i, (anytime.proportion(claim_alpha), []))[1].append(aim)
                self.claim_reads[(cell,)] = (self.claim_rates[i][0], 1)
            for pair, (k, sign) in check.pairs.items():
                self.claim_pairs.setdefault(k, (anytime.difference(claim_alpha), []))[1].append(aim)
                self.claim_reads[pair] = (self.claim_pairs[k][0], sign)

    def claim_sequence(self, read: Read) -> tuple[anytime.Sequence | None, int]:
        """The sequence of a claim's read (a cell's win rate, or a's minus b's), and +1 or -1
        as the read runs with or against the sequence's pair; None if no claim reads it."""
        return self.claim_reads.get(read, (None, 1))

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
        self.won = [total + won for total, won in zip(self.won, wins)]
        for sequence, won in zip(self.rates, wins):
            anytime.add_wins(sequence, deals, won, self._aim(sequence, self.rule.win_rate))
        for sequence, (a_only, b_only) in zip(self.differences, pairs):  # the strategy pairs
            aim = self._aim(sequence, self.rule.comparisons)
            anytime.add_pairs(sequence, deals, a_only, b_only, aim)
        for i, (sequence, aims) in self.claim_rates.items():
            anytime.add_wins(sequence, deals, wins[i], self._claim_aim(sequence, aims))
        for k, (sequence, aims) in self.claim_pairs.items():
            a_only, b_only = pairs[k]
            anytime.add_pairs(sequence, deals, a_only, b_only, self._claim_aim(sequence, aims))
        self.deals += deals
        self.shards += 1
        return self.met()

    def _claim_aim(self, sequence: anytime.Sequence, aims: list[Callable]) -> float:
        """The half-width a claims' sequence bets for: the narrowest its claims' rules ask
        for at the estimate so far, but not past what the budget of deals reaches. Before
        any deal the estimate is the prior's 1/2, which says nothing of where the figure
        lies: the first shard bets as little as the budget allows, as `"decided"` does (a
        bet for the prior's distance to a bound, on a whole shard, would widen the sequence
        for millions of deals)."""
        if not sequence.n:
            return self._reachable(sequence)
        estimate = sequence.low + sequence.span * sequence.estimate()
        return max(min(aim(estimate) for aim in aims), self._reachable(sequence))

    def claim_verdict(self, check: ClaimCheck) -> str:
        decision = check.claim.decide_among(check.candidates, Sequences(self))
        return INCONCLUSIVE if decision is None else decision.verdict

    def _claim_met(self, check: ClaimCheck) -> bool:
        return self.claim_verdict(check) != INCONCLUSIVE

    def _claim_read(self, check: ClaimCheck) -> tuple[tuple[str, ...], anytime.Sequence]:
        """The read a claim's verdict now turns on (its cells' labels, in the order of its
        sequence) and that sequence: what the claim's target shows."""
        read = check.claim.measure.pick_read(check.candidates, Sequences(self).rate)
        sequence, sign = self.claim_sequence(read)
        return tuple(cell.label for cell in read[::sign]), sequence

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
        for check in self.checks:
            labels, sequence = self._claim_read(check)  # the interval its verdict reads
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
                _, sequence = self._claim_read(check)
                checks.append((sequence, self._claim_aim(sequence, [check.claim.asserts.aim])))
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
