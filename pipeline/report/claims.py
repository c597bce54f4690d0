"""Claims checked on a sweep (docs/claims.md): each claim's measure evaluated on the report's
figures, with its interval at the claims' confidence and the verdict its assertion gives.

The claims are data (`inference.claims.Claim`, read from a claims file by
`inference.claim_file`; by default the rule pages' own, shipped with the package). What a
measure reads, on which cells, and every verdict rule are stated there once; here each
measure is evaluated on the report's figures (`MEASURED`, one function per measure) and
what was measured is said: the figure, its interval, the exact value where the rules give
one, the cells read, and further figures. The measures that read win counts alone are
decided through `Claim.decide` on fixed-n intervals (`FixedN`), as a stop rule decides
them on confidence sequences. A claim the sweep's cells or records cannot answer is
``not measured`` and says what it needs.

Two facts of a deal (which hour piles the chain has taken from by the third king, and the
kings at the bottom of the hour piles) are counted by each shard on its standard cells, by
outcome, in its ``facts`` table (both record modes). A sweep without a standard cell gets a
replay of its first deals instead (`replay_standard`: the kernel's standard play on the
same seed, deal numbers and order), checked in per-deal mode against the sweep's own record
of each deal's outcome where it has one.

The claims read a sweep only through `ClaimFigures` (below): the report's `document.Figures`
provides it, and tests/report/test_claims.py tests every measure on made-up figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cache, lru_cache
from itertools import product
from math import comb
from typing import Protocol, runtime_checkable

import numpy as np

from pipeline.engine import odds, rules
from pipeline.engine.rules import Cell
from pipeline.inference import claim_file, stats
from pipeline.inference.claims import (  # the measures and their verdict rules, stated once
    FACTS,
    INCONCLUSIVE,
    NOT_MEASURED,
    Claim,
    Decision,
    Every,
    Interval,
    Pattern,
    Read,
    chosen,
    first_text,
    found,
    one_finale,
    pct,
    spec_text,
)

C = stats.CLAIM_CONFIDENCE


def rule_pages() -> tuple[Claim, ...]:
    """The rule pages' claims, as the shipped claims file gives them."""
    return _rule_pages()


@lru_cache(maxsize=1)
def _rule_pages() -> tuple[Claim, ...]:
    return claim_file.read(claim_file.RULE_PAGES)


# --- Texts ----------------------------------------------------------------------------------


def interval_text(interval: tuple[float, float] | None, digits: int = 2) -> str:
    if not interval:
        return ""
    return f"[{pct(interval[0], digits)}, {pct(interval[1], digits)}]"


def points(x: float, digits: int = 2) -> str:
    return f"{100 * x:+.{digits}f} points"


# --- The replay of the sweep's first deals ------------------------------------------------


@dataclass
class Replay:
    """Standard play replayed on deals first..first+count-1 of the sweep (one deal order)."""

    seed: int
    first: int
    order: str
    won: np.ndarray  # bool per deal
    unvisited_at_third_king: np.ndarray  # hour piles no card had been delivered to
    king_bottoms: np.ndarray  # hour piles with a king at the bottom
    checked: int = 0  # deals whose win or loss was compared with the sweep's records
    mismatches: int = 0

    @property
    def count(self) -> int:
        return len(self.won)

    def describe(self) -> str:
        text = (
            f"replay of deals {self.first}-{self.first + self.count - 1} (seed {self.seed}, "
            f"order {self.order}) in standard play, the sweep's records holding no deal facts"
        )
        if self.checked:
            text += (
                f"; its wins and losses agree with the sweep's records on "
                f"{self.checked - self.mismatches:,} of {self.checked:,} deals"
            )
        return text


def replay_standard(seed: int, first: int, count: int, order: str) -> Replay:
    """Standard play on deals first..first+count-1 by the kernel, with its deal facts."""
    from pipeline.engine import kernel

    results = kernel.play(seed, first, count, [Cell(order=order)])
    return Replay(
        seed,
        first,
        order,
        results["won"][0].astype(bool),
        results["unvisited_at_third_king"][0].copy(),
        results["kings_at_bottom"][0].copy(),
    )


def exact_unvisited_win(at_least: int = 2) -> tuple[Fraction, Fraction]:
    """(P(at least k hour ranks unseen when the third king turns up), P(win and that)).

    By the Score Four law (docs/rules.md, exact odds) the cards turned are a uniformly random
    permutation read to its fourth king. With the third king at position t, the t - 3
    non-kings before it are a uniform subset of the 48; the fourth king then lies uniformly
    in positions t+1..52, and the deal is won when it is at 52.
    """
    total = comb(rules.N_CARDS, 4)
    chance, chance_won = Fraction(0), Fraction(0)
    for t in range(3, rules.N_CARDS):
        before = t - 3
        absent = _subsets_missing_ranks(before, at_least)
        p_absent = Fraction(absent, comb(48, before))
        chance += Fraction(comb(t - 1, 2) * (rules.N_CARDS - t), total) * p_absent
        chance_won += Fraction(comb(t - 1, 2), total) * p_absent
    return chance, chance_won


@cache
def _subsets_missing_ranks(size: int, at_least: int) -> int:
    """Subsets of ``size`` of the 48 non-kings in which at least ``at_least`` ranks are absent."""
    return _subsets_by_size_and_absent()[size][at_least:].sum()


@lru_cache(maxsize=1)
def _subsets_by_size_and_absent():
    """ways[size][absent]: subsets of the 48 non-kings with ``size`` cards and exactly
    ``absent`` of the 12 hour ranks missing, rank by rank (one pass gives every size)."""
    ways = {(0, 0): 1}  # (cards so far, ranks absent so far) -> ways
    for _ in range(rules.N_HOURS):
        step: dict[tuple[int, int], int] = {}
        for (cards, absent), count in ways.items():
            for k in range(rules.PILE_SIZE + 1):
                key = (cards + k, absent + (k == 0))
                step[key] = step.get(key, 0) + count * comb(rules.PILE_SIZE, k)
        ways = step
    table = np.zeros((rules.N_HOURS * rules.PILE_SIZE + 1, rules.N_HOURS + 1), dtype=object)
    for (cards, absent), count in ways.items():
        table[cards, absent] = count
    return table


# --- What the claims read of the report's figures -------------------------------------------


class ClaimCell(Protocol):
    """One cell's figure as the claims read it (`document.CellFigure`)."""

    @property
    def n(self) -> int:
        """Deals the cell played (0 or more)."""

    @property
    def wins(self) -> int:
        """Of those, the deals won (0..n)."""

    @property
    def rate(self) -> float:
        """The win rate wins / n, a share in 0..1 (not a percentage); NaN when n is 0."""

    @property
    def exact(self) -> Fraction | None:
        """The cell's exact chance of winning (`odds.exact_win_of`), None where there is none."""


@runtime_checkable
class ClaimFigures(Protocol):
    """Everything the claims read of a sweep: what `assess` and every claim function take.

    `document.Figures` provides it from the summed summary tables; tests/report/test_claims.py from
    made-up numbers. Shares and rates are in 0..1; counts are numbers of deals (or of blocks
    of deals, or of deaths), never negative.
    """

    @property
    def cells(self) -> Mapping[Cell, ClaimCell]:
        """Every cell the sweep has figures for, with its figure, in the sweep's cell order:
        where several cells fit a claim, the first in this order is taken."""

    @property
    def mode(self) -> str:
        """The sweep's record mode, ``"deals"`` (per-deal rows) or ``"summary"`` (counts per
        batch); it only names the basis of a claim."""

    @property
    def replay(self) -> Replay | None:
        """The standard play replayed on the sweep's first deals (`replay_standard`, checked
        against the sweep's records; its arrays hold one value per replayed deal), or None
        when there is none; read only when `deal_facts` gives None."""

    @property
    def replay_note(self) -> str:
        """Why there is no replay (e.g. ``"no replay (--replay 0)"``); "" when there is one or
        none was needed."""

    def paired(self, a: Cell, b: Cell, confidence: float) -> stats.Paired | None:
        """a's win rate minus b's, on the deals both cells played: the 2x2 table of their
        outcomes (``a_only`` won by a alone, ``b_only`` by b alone), the difference in 0..1
        units with its paired interval at ``confidence`` (`stats.paired_difference`) and the
        exact McNemar p. None when the sweep did not pair the two cells (other deals)."""

    def deal_facts(self) -> tuple[Cell, Sequence[tuple[bool, int, int, int]]] | None:
        """The deal facts counted on every deal of the sweep's first standard cell: (that
        cell, rows ``(won, kings_at_bottom, unvisited_at_third_king, n)``), each row ``n``
        deals with that outcome, that many hour piles (0..12) with a king at the bottom, and
        that many hour piles not yet taken from when the third king was placed. None when
        the records hold no facts (a sweep without a standard cell)."""

    def near_misses(self, cell: Cell, low: int, high: int) -> tuple[int, int]:
        """(deals, wins) of ``cell`` among its deals whose chain first died with ``low`` to
        ``high`` cards still face down (``down_at_stop``, both ends included)."""

    def loss_blocks(self, cell: Cell) -> tuple[int, int]:
        """(blocks, blocks without a win) of ``cell``: its deals cut into blocks of 13
        consecutive deal numbers (a partial block at the end of a batch left out)."""

    def won_turned(self, cells: list[Cell], cards: int = rules.N_CARDS) -> tuple[int, int]:
        """(won deals, won deals that turned exactly ``cards`` cards) of ``cells`` taken together."""

    def rescue_win_turned(self) -> list[str]:
        """One line of text per rescue variant and number of cards its won deals turned
        (e.g. ``"watch 1,234 wins at 52 cards"``), in that order; only shown, never judged."""

    def play_out_deaths(self, cells: list[Cell]) -> tuple[int, int, int]:
        """(deals, later deaths, stray deaths) of the play_out ``cells`` taken together: each
        deal has one first death and each restart one later death (``restarts`` summed);
        stray deaths are those away from where the rules predict (``stray_deaths`` summed)."""


# --- The report's evidence -------------------------------------------------------------------


class FixedN:
    """The report's evidence for a claim on win counts (`inference.claims.Evidence`): fixed-n
    intervals at the claims' confidence, Wilson's for a win rate, Newcombe's paired one for
    a difference."""

    def __init__(self, figures: ClaimFigures):
        self.figures = figures

    def rate(self, cell: Cell) -> float:
        return self.figures.cells[cell].rate

    def interval(self, read: Read) -> tuple[float, float] | None:
        if len(read) == 1:
            entry = self.figures.cells[read[0]]
            return stats.wilson(entry.wins, entry.n, stats.CLAIM_CONFIDENCE) if entry.n else None
        paired = self.figures.paired(*read, stats.CLAIM_CONFIDENCE)
        return None if paired is None else (paired.low, paired.high)


# --- A claim checked --------------------------------------------------------------------------


@dataclass
class Checked:
    """A claim as measured on a sweep: what report.json records of it."""

    claim: Claim
    verdict: str = NOT_MEASURED
    figure: float | None = None
    figure_text: str = ""
    interval: Interval | None = None
    exact: str | None = None
    basis: str = ""
    needs: str | None = None
    detail: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.claim.id

    def not_measured(self, basis: str, needs: str | None = None) -> Checked:
        self.verdict, self.basis = NOT_MEASURED, basis
        self.needs = needs or self.claim.measure.needs()
        return self

    def measure_share(self, part: int, whole: int, chances: int | None = None, counts=True) -> None:
        """The figure is part / whole, decided by the claim's assertion: with the Wilson
        interval, or for never and always the exact (Clopper-Pearson) one on the counts
        themselves (``chances``: what they count as chances, default ``whole``; ``counts``:
        whether an exception is taken at its word). Nothing is measured of no whole."""
        asserts = self.claim.asserts
        if not whole:
            self.verdict = INCONCLUSIVE
            return
        exact = isinstance(asserts, Every)
        self.interval = (stats.clopper_pearson if exact else stats.wilson)(part, whole, C)
        self.figure = part / whole
        if exact:
            chances = whole if chances is None else chances
            self.verdict = asserts.decide(part, whole, chances, self.interval, counts)
        else:
            self.verdict = asserts.verdict(self.interval)

    def measure_paired(self, paired: stats.Paired, decision: Decision) -> None:
        """The figure is a paired difference (`stats.paired_difference`), decided."""
        self.figure, self.interval = paired.difference, (paired.low, paired.high)
        self.verdict = decision.verdict

    def set_exact(self, exact: Fraction | None) -> None:
        self.exact = None if exact is None else odds.fraction_text(exact)

    def record(self) -> dict:
        return {
            "id": self.id,
            "source": self.claim.source_text,
            "sources": [source.record() for source in self.claim.sources],
            "claim": self.claim.says,
            "figure": self.figure,
            "figure_text": self.figure_text,
            "interval": list(self.interval) if self.interval else None,
            "confidence": C,
            "exact": self.exact,
            "verdict": self.verdict,
            "rule": self.claim.rule,
            "basis": self.basis,
            "needs": self.needs,
            "detail": self.detail,
        }


def check(claim: Claim, figures: ClaimFigures) -> Checked:
    """One claim measured on the report's figures."""
    return MEASURED[claim.measure.name](Checked(claim), figures)


def assess(figures: ClaimFigures, claims: Sequence[Claim] | None = None) -> list[Checked]:
    """Every claim (default: the rule pages'), measured on the report's figures."""
    return [check(claim, figures) for claim in (rule_pages() if claims is None else claims)]


# --- How cells are named in a claim's texts ----------------------------------------------------

PLURALS = {"variant": "variants", "strategy": "strategies", "depth": "depths", "finale": "finales"}
PLURALS["order"] = "deal orders"


def varying(cells: Sequence[Cell]) -> list[str]:
    """The axes on which the cells differ, in `rules.AXES` order."""
    return [axis for axis in rules.AXES if len({getattr(cell, axis) for cell in cells}) > 1]


def named(cell: Cell, axes: Sequence[str]) -> str:
    """A cell by its values on ``axes``: "most", "informed (face up)", "exchange bottom"."""
    words = []
    for axis in ("variant", "strategy", "depth", "order", "finale"):
        value = getattr(cell, axis)
        if axis in axes and value is not None:
            words.append(f"(face {value})" if axis == "finale" else value)
    return " ".join(words) or cell.label


def others_text(chosen: Cell, cells: Sequence[Cell], show) -> str | None:
    """ "the other strategies: clockwise 31.58%, ...": the cells beside the one measured."""
    axes = varying(cells)
    rest = [f"{named(cell, axes)} {show(cell)}" for cell in cells if cell != chosen]
    if not rest:
        return None
    what = PLURALS[axes[0]] if len(axes) == 1 else "cells"
    return f"the other {what}: " + ", ".join(rest)


def missing_needs(claim: Claim, candidates: Sequence[Cell], patterns) -> str:
    """What a verdict withheld for want of cells needs: the cells not played."""
    missing = [p for p in patterns if not any(p.matches(cell) for cell in candidates)]
    way = "raise" if claim.measure.moves > 0 else "lower"
    return (
        f"cells {spec_text(missing)}: one not played could {way} the figure and change the verdict"
    )


def paired_text(a: Cell, b: Cell, paired: stats.Paired) -> str:
    """ "most 37.34% vs fewest 28.69%: +8.65 points": a pair by what sets them apart."""
    axes = varying([a, b])
    return (
        f"{named(a, axes)} {pct(paired.a_rate)} vs {named(b, axes)} {pct(paired.b_rate)}: "
        f"{points(paired.difference)}"
    )


def pairing_words(a: Cell, b: Cell) -> tuple[str, str]:
    """(what the paired deals are, how they are paired): by deal number across deal orders."""
    if a.order != b.order:
        return "deal numbers", "paired by deal number"
    return "paired deals", "paired deal by deal"


def exact_difference(figures: ClaimFigures, a: Cell, b: Cell) -> Fraction | None:
    ea, eb = figures.cells[a].exact, figures.cells[b].exact
    return None if ea is None or eb is None else ea - eb


# --- The measures, each evaluated on the report's figures --------------------------------------


def win_rate(checked: Checked, figures: ClaimFigures) -> Checked:
    claim, measure = checked.claim, checked.claim.measure
    candidates = measure.candidates(figures.cells)
    decision = claim.decide_among(candidates, FixedN(figures))
    if decision is None:
        return checked.not_measured(f"no cell of {spec_text(measure.cells)} in this sweep")
    (cell,) = decision.read
    entry = figures.cells[cell]
    checked.measure_share(entry.wins, entry.n)
    if not isinstance(claim.asserts, Every):
        checked.verdict = decision.verdict if entry.n else INCONCLUSIVE
    checked.figure_text = f"{pct(entry.rate)} ({entry.wins:,} of {entry.n:,} deals won)"
    checked.basis = f"cell {cell.label}"
    checked.set_exact(entry.exact)
    if decision.withheld:
        checked.needs = missing_needs(claim, candidates, measure.cells)
    if measure.pick != "first":
        if entry.exact is not None:
            axes = varying(candidates) or ["strategy"]
            checked.detail.append(f"exact value for {named(cell, axes)}: {float(entry.exact):.6f}")
        others = others_text(cell, candidates, lambda c: pct(figures.cells[c].rate))
        checked.detail += [others] if others else []
    return checked


def spread(checked: Checked, figures: ClaimFigures) -> Checked:
    claim, measure = checked.claim, checked.claim.measure
    candidates = measure.candidates(figures.cells)
    decision = claim.decide_among(candidates, FixedN(figures))
    if decision is None:
        return checked.not_measured(
            f"{len(candidates)} cell(s) of {spec_text(measure.cells)} in this sweep"
        )
    best, worst = decision.read
    paired = figures.paired(best, worst, C)
    if paired is None:
        return checked.not_measured(
            f"no paired table for {best.label} and {worst.label}", "both cells in one deal order"
        )
    _paired_figure(checked, figures, decision, paired)
    if decision.withheld:
        checked.needs = missing_needs(claim, candidates, measure.cells)
    ranked = sorted(candidates, key=lambda c: figures.cells[c].rate, reverse=True)
    axes = varying(candidates)
    checked.detail.append(
        "all: " + ", ".join(f"{named(c, axes)} {pct(figures.cells[c].rate)}" for c in ranked)
    )
    return checked


def _paired_figure(
    checked: Checked, figures: ClaimFigures, decision: Decision, paired: stats.Paired, prefix=""
) -> None:
    a, b = decision.read
    what, how = pairing_words(a, b)
    checked.measure_paired(paired, decision)
    checked.figure_text = (
        f"{prefix}{paired_text(a, b, paired)} on {paired.n:,} {what} "
        f"(exact McNemar p {stats.p_text(paired.p_value)})"
    )
    checked.basis = f"cells {a.label} and {b.label}, {how}"
    checked.set_exact(exact_difference(figures, a, b))


def difference(checked: Checked, figures: ClaimFigures) -> Checked:
    claim, measure = checked.claim, checked.claim.measure
    alternatives = measure.alternatives(figures.cells)
    decision = claim.decide_among(alternatives[:1], FixedN(figures))
    if decision is None:
        return checked.not_measured("no such pair of cells in this sweep")
    paired = figures.paired(*decision.read, C)
    if paired is None:
        return checked.not_measured(
            f"no paired table for {' and '.join(c.label for c in decision.read)}"
        )
    several = len(measure.cells) > 1  # the first pair found decides, the others are shown
    prefix = f"{named(decision.read[0], ['variant', 'depth'])}: " if several else ""
    _paired_figure(checked, figures, decision, paired, prefix)
    if decision.withheld:
        checked.needs = missing_needs(
            claim, alternatives[0][2], _b_patterns(measure, decision.read[0])
        )
    for _, a, bs in alternatives[1:]:
        b = chosen(bs, measure.pick, lambda c: figures.cells[c].rate)
        other = figures.paired(a, b, C)
        if other is not None:
            checked.detail.append(f"{named(a, ['variant', 'depth'])}: {paired_text(a, b, other)}")
    return checked


def _b_patterns(measure, a: Cell) -> list:
    """The b cells a difference names beside ``a``, as patterns (for what is missing)."""
    names, lists = zip(*measure.b)
    base = Pattern(a.variant, a.strategy, a.depth)
    return [replace(base, **dict(zip(names, values))) for values in product(*lists)]


def win_rate_where(checked: Checked, figures: ClaimFigures) -> Checked:
    measure = checked.claim.measure
    if FACTS[measure.fact][2]:
        return _fact_win_rate(checked, figures)
    candidates = found(measure.cells, figures.cells)
    if not candidates:
        return checked.not_measured(f"no cell of {spec_text(measure.cells)} in this sweep")
    rows = {cell: figures.near_misses(cell, measure.low, measure.high) for cell in candidates}
    cell = candidates[0]
    n, wins = rows[cell]
    checked.measure_share(wins, n)
    checked.figure_text = (
        f"{pct(checked.figure)} ({wins:,} of {n:,} deals with {measure.selection} won)"
    )
    checked.basis = f"cell {cell.label}, deals with {measure.selection}"
    exact = exact_win_given_down(cell, measure.low, measure.high)
    checked.set_exact(exact)
    if exact is not None:
        checked.detail.append(f"exact value: {float(exact):.6f}")
    others = others_text(
        cell,
        candidates,
        lambda c: f"{pct(rows[c][1] / rows[c][0] if rows[c][0] else None)} of {rows[c][0]:,}",
    )
    checked.detail += [others] if others else []
    return checked


def exact_win_given_down(cell: Cell, low: int, high: int) -> Fraction | None:
    """The exact win rate of a cell among its deals with low..high cards down at the first
    death, by the law of ``down_at_stop`` (standard play wins at 0 down only)."""
    law = odds.down_at_stop_law()
    weight = sum(law[u] for u in range(low, high + 1))
    if not weight:
        return None
    if rules.wins_as_standard(cell.variant):
        return law[0] / weight if low == 0 else Fraction(0)
    if not cell.has_rescue:
        return None
    won = sum(law[u] * odds.exact_win_given_down_of(cell, u) for u in range(low, high + 1))
    return won / weight


def _fact_win_rate(checked: Checked, figures: ClaimFigures) -> Checked:
    measure = checked.claim.measure
    source = _fact_source(figures, checked, measure.fact)
    if source is None:
        return checked
    counts, checked.basis = source
    inside = lambda v: measure.low <= v <= measure.high  # noqa: E731
    n, wins = _tally(counts, inside)
    checked.measure_share(wins, n)
    checked.figure_text = (
        f"{pct(checked.figure)} ({wins:,} of {n:,} deals with {measure.selection} won)"
    )
    exact, share = exact_fact_win(measure.fact, measure.low, measure.high)
    checked.set_exact(exact)
    if exact is not None and share is not None:
        checked.detail.append(
            f"exact value by the Score Four law: {float(exact):.6f} (such deals are "
            f"{pct(float(share))} of all deals)"
        )
    if measure.low < measure.high:
        each = [
            (v, *_tally(counts, lambda x, v=v: x == v))
            for v in range(measure.low, measure.high + 1)
        ]
        checked.detail.append(
            f"by {measure.fact}: " + "; ".join(f"{v}: {w:,} of {m:,} won" for v, m, w in each if m)
        )
    m, w = _tally(counts, lambda v: not inside(v))
    if m:
        checked.detail.append(f"the other deals: {w:,} of {m:,} won")
    return checked


def exact_fact_win(fact: str, low: int, high: int) -> tuple[Fraction | None, Fraction | None]:
    """(exact win rate among the deals whose fact is in low..high, their share of all deals)
    where the rules give one: hours unvisited at the third king by the Score Four law; no
    king at an hour pile's bottom, which never wins (docs/rules.md)."""
    if fact == "unvisited_at_third_king":
        chance, won = exact_unvisited_win(low)
        above, above_won = exact_unvisited_win(high + 1)
        share = chance - above
        return ((won - above_won) / share if share else None), share
    if fact == "kings_at_bottom" and high == 0:
        return Fraction(0), None
    return None, None


def _fact_source(figures: ClaimFigures, checked: Checked, column: str):
    """(counts {(won, fact value): deals}, basis text) from the sweep's records or the replay."""
    facts = figures.deal_facts()
    if facts is not None:
        cell, rows = facts
        index = 1 if column == "kings_at_bottom" else 2
        counts: dict[tuple[bool, int], int] = {}
        for row in rows:
            key = (bool(row[0]), int(row[index]))
            counts[key] = counts.get(key, 0) + int(row[3])
        return counts, (
            f"cell {cell.label}, every deal ({column} counted in the shards' facts tables)"
        )
    replay = figures.replay
    if replay is None or replay.count == 0:
        checked.not_measured(figures.replay_note or "no standard cell and no replay")
        return None
    if replay.mismatches:
        checked.verdict = INCONCLUSIVE
        checked.detail.append("the replay disagrees with the sweep's records, so it is not trusted")
        checked.basis = replay.describe()
        return None
    values = replay.king_bottoms if column == "kings_at_bottom" else replay.unvisited_at_third_king
    keys, n = np.unique(
        np.stack([replay.won.astype(np.int64), values.astype(np.int64)]), axis=1, return_counts=True
    )
    return {(bool(w), int(v)): int(c) for (w, v), c in zip(keys.T, n)}, replay.describe()


def _tally(counts: dict[tuple[bool, int], int], chosen) -> tuple[int, int]:
    """(deals, wins) among the deals whose fact value satisfies ``chosen``."""
    n = sum(c for (_, v), c in counts.items() if chosen(v))
    wins = sum(c for (w, v), c in counts.items() if w and chosen(v))
    return n, wins


def losing_runs(checked: Checked, figures: ClaimFigures) -> Checked:
    measure = checked.claim.measure
    candidates = found(measure.cells, figures.cells)
    if not candidates:
        return checked.not_measured(f"no cell of {first_text(measure.cells)} in this sweep")
    cell = candidates[0]
    blocks, clean = figures.loss_blocks(cell)
    checked.measure_share(clean, blocks)
    checked.figure_text = (
        f"{pct(checked.figure)} of {blocks:,} blocks of {measure.n} consecutive deals had no win"
    )
    records = (
        "per-deal rows" if figures.mode == "deals" else "counted per batch in the summary records"
    )
    checked.basis = f"cell {cell.label}, blocks of {measure.n} consecutive deal numbers ({records})"
    win = figures.cells[cell].exact
    if win is not None:
        exact = (1 - win) ** measure.n
        checked.set_exact(exact)
        checked.detail.append(
            f"exact value (1 - {odds.fraction_text(win)})^{measure.n} = {float(exact):.6f}"
        )
    return checked


def pooled(measure, figures: ClaimFigures) -> list[Cell]:
    """Every cell of the sweep a pooled measure names, of one finale (`one_finale`)."""
    return one_finale([c for c in figures.cells if any(p.matches(c) for p in measure.cells)])


def wins_turning(checked: Checked, figures: ClaimFigures) -> Checked:
    measure = checked.claim.measure
    cells = pooled(measure, figures)
    if not cells:
        return checked.not_measured(f"no cell of {spec_text(measure.cells)} in this sweep")
    total, turned = figures.won_turned(cells, measure.cards)
    checked.measure_share(turned, total)
    checked.figure_text = f"{turned:,} of {total:,} wins turned exactly {measure.cards} cards"
    checked.basis = (
        f"cards_turned of the won deals of cells {', '.join(c.label for c in cells)} "
        "(one finale: both play the same deals)"
    )
    if all(rules.wins_as_standard(c.variant) for c in cells):  # every standard win turns 52
        checked.set_exact(Fraction(measure.cards == rules.N_CARDS))
    rescued = figures.rescue_win_turned()
    if rescued and not any(c.has_rescue for c in cells):
        checked.detail.append("rescued wins (not the claim's game): " + ", ".join(rescued))
    return checked


def deaths_as_predicted(checked: Checked, figures: ClaimFigures) -> Checked:
    measure = checked.claim.measure
    cells = pooled(measure, figures)
    if not cells:
        return checked.not_measured(f"no cell of {spec_text(measure.cells)} in this sweep")
    deals, later, stray = figures.play_out_deaths(cells)
    deaths = deals + later
    checked.measure_share(deaths - stray, deaths, chances=later, counts=False)
    checked.figure_text = (
        f"{deaths - stray:,} of {deaths:,} deaths where the rules predict "
        f"({deals:,} first deaths, {later:,} later deaths, {stray:,} elsewhere)"
    )
    checked.basis = (
        f"restarts and stray_deaths of cells {', '.join(c.label for c in cells)} "
        "(one finale: both play the same deals)"
    )
    if stray:
        checked.detail.append(
            f"{stray:,} death(s) away from where the rules predict, which the rules rule out "
            "(docs/rules.md): the records, not the claim, are in question"
        )
    elif deaths:
        checked.detail.append(
            "every first death was in the centre, and every later death at the very pile its "
            "chain restarted from (hour 1, or the first hour clockwise from it that still held "
            "a card): the dial, not chance, fixes where a chain stops"
        )
    return checked


MEASURED = {
    "win_rate": win_rate,
    "spread": spread,
    "difference": difference,
    "win_rate_where": win_rate_where,
    "losing_runs": losing_runs,
    "wins_turning": wins_turning,
    "deaths_as_predicted": deaths_as_predicted,
}
