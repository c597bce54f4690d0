"""The seeds' claims (docs/claims.md): each measured, with its interval and a verdict by a stated rule.

Every claim gives: the seed file(s) it comes from, the claim in the seed's words, the figure
measured, its interval at the claims' confidence (`stats.CLAIM_CONFIDENCE`: eleven verdicts
from one sweep should not refute anything by chance), the rule that decides the verdict, the
verdict (``confirmed``, ``refuted`` or ``inconclusive``), and what was measured on which
cells. A claim the sweep's cells cannot answer is ``inconclusive`` and says which cells it
needs.

The verdict rules and their tolerance are stated once, in `inference.claims`, and so are the
claims a win count decides (`inference.claims.DECLARED`), which a stop rule decides too: the
functions here evaluate those declarations on the report's fixed-n intervals and say what
was measured.

Two claims are about facts of a deal beyond its outcome: which hour piles the chain has
taken from by the third king, and the bottom cards of the layout. Each shard counts them on
its standard cells, by outcome, in its ``facts`` table (``unvisited_at_third_king``,
``kings_at_bottom``; both record modes), so they are measured on every deal of the sweep's
standard cell. A sweep without a standard cell gets a replay of its first deals instead
(`replay_standard`: the kernel's standard play on the same seed, deal numbers and order),
checked in per-deal mode against the sweep's own record of each deal's outcome where it has
one.

The claims read a sweep only through `ClaimFigures` (below): the report's `document.Figures`
provides it, and tests/report/test_claims.py tests every verdict rule on made-up figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache, lru_cache
from math import comb
from typing import Protocol, runtime_checkable

import numpy as np

from pipeline.engine import odds, rules
from pipeline.engine.rules import Cell
from pipeline.inference import stats
from pipeline.inference.claims import (  # the verdict rules, stated once
    CONFIRMED,
    DECLARED,
    INCONCLUSIVE,
    REFUTED,
    STANDARD_PLAY,
    TOLERANCE,
    Decision,
    Read,
    above_verdict,
    below_verdict,
)
from pipeline.inference.claims import primary as primary_of

# The rule pages the claims were read from: the file (recorded in report.json), and the
# page's title, by which a reader knows it (docs/claims.md).
SEED_FILES = {
    "000": "seeds/000_9c29d9ee3d4d562e.txt",
    "001": "seeds/001_63b3aa3b115562ea.txt",
    "003": "seeds/003_3f08b9ca55270cfd.txt",
    "004": "seeds/004_7b9774a89f335a61.txt",
}
PAGE_TITLES = {
    "000": "Clock",
    "001": "Clock rules",
    "003": "Clock Patience",
    "004": "Clock Solitaire Rules: How to Play Clock Patience",
}


def source_text(seed_files: list[str]) -> str:
    """Where a claim comes from, as a reader would name it: the rule pages' titles."""
    if len(seed_files) == len(SEED_FILES):
        return "every rule page"
    seeds = [seed for seed, path in SEED_FILES.items() if path in seed_files]
    return "; ".join(f'"{PAGE_TITLES[seed]}"' for seed in seeds)


NEAR_MISS = 3  # "a couple of cards to go": at most this many cards down at the first death
ORDINARY = 0.05  # an event is "ordinary" if it happens at least this often (not significant at 5%)
LOST = 0.01  # a position is "already lost" if fewer than this share of such deals win
MIN_WINS_52 = 100  # won deals needed before "every win turns 52 cards" means something
MIN_LATER_DEATHS = 100  # later deaths needed for the play-it-out claim
COUNTS_TEXT = ", ".join(rules.COUNT_STRATEGIES)  # the strategies that see only the counts
LEVEL = stats.CLAIM_LEVEL  # the claims' confidence, as the rules print it ("99.9%")


@dataclass
class Claim:
    id: str
    seeds: tuple[str, ...]
    claim: str
    rule: str
    verdict: str = INCONCLUSIVE
    figure: float | None = None
    figure_text: str = ""
    interval: tuple[float, float] | None = None
    exact: str | None = None
    basis: str = ""
    needs: str | None = None
    detail: list[str] = field(default_factory=list)

    def measure_share(self, part: int, whole: int, interval: tuple[float, float]) -> None:
        """The figure is part / whole, with its interval; neither when there is no whole."""
        self.figure = part / whole if whole else None
        self.interval = interval if whole else None

    def measure_paired(self, paired: stats.Paired) -> None:
        """The figure is a paired difference (`stats.paired_difference`), with its interval."""
        self.figure, self.interval = paired.difference, (paired.low, paired.high)

    def record(self) -> dict:
        return {
            "id": self.id,
            "seed_file": ", ".join(SEED_FILES[s] for s in self.seeds),
            "seed_files": [SEED_FILES[s] for s in self.seeds],
            "claim": self.claim,
            "figure": self.figure,
            "figure_text": self.figure_text,
            "interval": list(self.interval) if self.interval else None,
            "confidence": stats.CLAIM_CONFIDENCE,
            "exact": self.exact,
            "verdict": self.verdict,
            "rule": self.rule,
            "basis": self.basis,
            "needs": self.needs,
            "detail": self.detail,
        }


# --- Texts ----------------------------------------------------------------------------------


def missing_text(variant: str, strategies) -> str:
    """A claim's needs: the counts-only strategies of ``variant`` not in the sweep."""
    missing = [s for s in rules.COUNT_STRATEGIES if s not in strategies]
    return f"cells {variant} x {{{', '.join(missing)}}}, finale=down"


def pct(x: float | None, digits: int = 2) -> str:
    return (
        "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}%"
    )


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

    def won_turned(self, cells: list[Cell]) -> tuple[int, int]:
        """(won deals, won deals that turned all 52 cards) of ``cells`` taken together."""

    def rescue_win_turned(self) -> list[str]:
        """One line of text per rescue variant and number of cards its won deals turned
        (e.g. ``"watch 1,234 wins at 52 cards"``), in that order; only shown, never judged."""

    def play_out_deaths(self, cells: list[Cell]) -> tuple[int, int, int]:
        """(deals, later deaths, stray deaths) of the play_out ``cells`` taken together: each
        deal has one first death and each restart one later death (``restarts`` summed);
        stray deaths are those away from where the rules predict (``stray_deaths`` summed)."""


# --- The claims ---------------------------------------------------------------------------


class FixedN:
    """The report's evidence for a declared claim (`inference.claims.Evidence`): fixed-n
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


def decide(claim_id: str, figures: ClaimFigures) -> Decision | None:
    """A declared claim's decision on the report's figures (None: the cells cannot answer)."""
    return DECLARED[claim_id].decide(figures.cells, FixedN(figures))


def candidates(claim_id: str, figures: ClaimFigures) -> list[Cell]:
    """The cells a declared claim chooses among in this sweep."""
    return DECLARED[claim_id].measure.candidates(figures.cells)


def primary(
    figures: ClaimFigures,
    variant: str,
    strategy: str | None = None,
    finale: str = "down",
    depth: str | None = None,
) -> Cell | None:
    """The sweep's cell of a variant/strategy/finale (`inference.claims.primary`)."""
    return primary_of(figures.cells, variant, strategy, finale, depth)


def standard_cell(figures: ClaimFigures) -> Cell | None:
    """The sweep's standard cell (`primary`), else that of a variant whose deals are won
    exactly when standard play wins them (`rules.wins_as_standard`: play_out's restart-free
    deals)."""
    return next((cell for variant in STANDARD_PLAY if (cell := primary(figures, variant))), None)


def one_in_13(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "one_in_13",
        ("000", "001", "003", "004"),
        'Standard play wins one deal in thirteen (000: "one deal in thirteen"; 001: "The 1-in-13 '
        'figure is exact"; 003: "The chances of winning are 1 in 13"; 004: "About 1 game in 13").',
        f"confirmed if 1/13 lies inside the {LEVEL} interval of the standard win rate and the "
        f"interval's half width is at most {pct(TOLERANCE)}; refuted if 1/13 lies outside it; "
        "otherwise inconclusive (too few deals).",
        exact="1/13",
    )
    decision = decide("one_in_13", figures)
    if decision is None:
        claim.needs = "a standard cell (variant standard, or play_out whose restart-free deals are standard wins)"
        claim.basis = "no standard cell in this sweep"
        return claim
    return _rate_claim(claim, figures, decision)


def _rate_claim(
    claim: Claim, figures: ClaimFigures, decision: Decision, wins_of: str = "deals"
) -> Claim:
    (cell,) = decision.read
    entry = figures.cells[cell]
    claim.figure = entry.rate
    claim.interval = stats.wilson(entry.wins, entry.n, stats.CLAIM_CONFIDENCE)
    claim.figure_text = f"{pct(entry.rate)} ({entry.wins:,} of {entry.n:,} {wins_of} won)"
    claim.basis = f"cell {cell.label}"
    claim.verdict = decision.verdict
    return claim


def better_than_one_in_three(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "better_than_one_in_three",
        ("004",),
        'The one-swap house rule "raises the chance of winning from 1 in 13 to better than 1 in 3 '
        'if you choose well".',
        f"the best one_swap strategy a player can use with the bottoms face down ({COUNTS_TEXT}) "
        f"is measured; confirmed if the lower end of its {LEVEL} interval is above 1/3, "
        "refuted if the upper end is below 1/3 (and every one of those strategies was played), "
        "otherwise inconclusive.",
    )
    decision = decide("better_than_one_in_three", figures)
    if decision is None:
        claim.needs = f"cells one_swap x {{{COUNTS_TEXT}}}, finale=down"
        claim.basis = "no one_swap cell with a counts-only strategy in this sweep"
        return claim
    _rate_claim(claim, figures, decision)
    played = candidates("better_than_one_in_three", figures)
    if decision.withheld:
        claim.needs = (
            missing_text("one_swap", [c.strategy for c in played])
            + ": a strategy not played may beat 1/3"
        )
    (best,) = decision.read
    exact = figures.cells[best].exact
    if exact is not None:
        claim.exact = odds.fraction_text(exact)
        claim.detail.append(f"exact value for {best.strategy}: {float(exact):.6f}")
    others = ", ".join(f"{c.strategy} {pct(figures.cells[c].rate)}" for c in played if c != best)
    if others:
        claim.detail.append(f"the other strategies: {others}")
    return claim


def pick_makes_no_difference(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "pick_makes_no_difference",
        ("000",),
        'Under Watch, "which card you pick makes no difference to whether the chain survives".',
        "the Watch strategies a player can use with the bottoms face down are compared on the same "
        f"deals, the best against the worst; refuted if the {LEVEL} paired interval of their "
        f"difference excludes 0, confirmed if it lies within +-{pct(TOLERANCE)} (and every one of "
        "those strategies was played), otherwise inconclusive.",
    )
    cells = candidates("pick_makes_no_difference", figures)
    decision = decide("pick_makes_no_difference", figures)
    if decision is None:
        claim.needs = (
            f"at least two cells watch x {{{COUNTS_TEXT}}}, finale=down "
            "(most and fewest differ most)"
        )
        claim.basis = f"{len(cells)} watch cell(s) with a counts-only strategy in this sweep"
        return claim
    best, worst = decision.read
    if decision.interval is None:
        claim.basis = f"no paired table for {best.label} and {worst.label}"
        claim.needs = "both cells in one deal order"
        return claim
    paired = figures.paired(best, worst, stats.CLAIM_CONFIDENCE)
    claim.measure_paired(paired)
    claim.figure_text = (
        f"{best.strategy} {pct(paired.a_rate)} vs {worst.strategy} {pct(paired.b_rate)}: "
        f"{points(paired.difference)} on {paired.n:,} paired deals "
        f"(exact McNemar p {stats.p_text(paired.p_value)})"
    )
    claim.basis = f"cells {best.label} and {worst.label}, paired deal by deal"
    claim.verdict = decision.verdict
    if decision.withheld:
        claim.needs = (
            missing_text("watch", [c.strategy for c in cells])
            + ": no difference among some strategies is not none among all"
        )
    ranked = sorted(cells, key=lambda c: figures.cells[c].rate, reverse=True)
    claim.detail.append(
        "all: " + ", ".join(f"{c.strategy} {pct(figures.cells[c].rate)}" for c in ranked)
    )
    return claim


def near_misses_come_home(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "near_misses_come_home",
        ("000",),
        'Watch brings "the near misses, the deals that stall with a couple of cards to go, mostly home".',
        f"a near miss is a deal whose chain first dies with 1 to {NEAR_MISS} cards face down; Watch with a "
        "random pick (a player picking without a reason, as 000 says the pick does not matter) is "
        f"measured on them; confirmed if the lower end of the {LEVEL} interval of its win rate is above "
        '1/2 ("mostly"), refuted if the upper end is below 1/2, otherwise inconclusive.',
    )
    cells = [
        c
        for s in ("random",) + tuple(x for x in rules.COUNT_STRATEGIES if x != "random")
        if (c := primary(figures, "watch", s))
    ]
    if not cells:
        claim.needs = "a cell watch x random (or another counts-only strategy), finale=down"
        claim.basis = "no watch cell in this sweep"
        return claim
    rows = {}
    for cell in cells:
        n, wins = figures.near_misses(cell, 1, NEAR_MISS)
        rows[cell] = (n, wins)
    cell = cells[0]
    n, wins = rows[cell]
    interval = stats.wilson(wins, n, stats.CLAIM_CONFIDENCE)
    claim.measure_share(wins, n, interval)
    claim.figure_text = f"{pct(claim.figure)} of {n:,} near misses won ({cell.strategy} pick)"
    claim.basis = f"cell {cell.label}, deals with 1 <= down_at_stop <= {NEAR_MISS}"
    claim.verdict = above_verdict(interval, 0.5) if n else INCONCLUSIVE
    law = odds.down_at_stop_law()
    weight = sum(law[u] for u in range(1, NEAR_MISS + 1))
    exact = (
        sum(law[u] * odds.rescue_win_given_down(cell.strategy, u) for u in range(1, NEAR_MISS + 1))
        / weight
    )
    claim.exact = odds.fraction_text(exact)
    claim.detail.append(f"exact value: {float(exact):.6f}")
    others = [
        f"{c.strategy} {pct(w / m if m else None)} of {m:,}"
        for c, (m, w) in rows.items()
        if c != cell
    ]
    if others:
        claim.detail.append("other picks: " + ", ".join(others))
    return claim


def _fact_source(figures: ClaimFigures, claim: Claim, column: str):
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
        claim.needs = (
            f"a standard cell (the shards count its {column}), or a replay of the "
            "sweep's deals (report --replay N, with the deal scheme the sweep used)"
        )
        claim.basis = figures.replay_note or "no standard cell and no replay"
        return None
    if replay.mismatches:
        claim.detail.append("the replay disagrees with the sweep's records, so it is not trusted")
        claim.basis = replay.describe()
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


def unvisited_by_third_king(figures: ClaimFigures) -> Claim:
    chance, chance_won = exact_unvisited_win(2)
    exact = chance_won / chance
    claim = Claim(
        "unvisited_by_third_king",
        ("000",),
        '"If two or three positions have never been visited at all" by the time the third king '
        'shows, "it is already lost".',
        "deals where at least two hour piles have not been taken from when the third king is "
        f"placed are taken; confirmed if the upper end of the {LEVEL} interval of their win rate is "
        f"below {pct(LOST, 0)} (practically lost), refuted if its lower end is above {pct(LOST, 0)}, "
        "otherwise inconclusive.",
        exact=odds.fraction_text(exact),
    )
    claim.detail.append(
        f"exact value by the Score Four law: {float(exact):.6f} (such deals are "
        f"{pct(float(chance))} of all deals)"
    )
    source = _fact_source(figures, claim, "unvisited_at_third_king")
    if source is None:
        return claim
    counts, claim.basis = source
    n, wins = _tally(counts, lambda v: v >= 2)
    interval = stats.wilson(wins, n, stats.CLAIM_CONFIDENCE)
    claim.measure_share(wins, n, interval)
    claim.figure_text = f"{pct(claim.figure)} ({wins:,} of {n:,} such deals won)"
    claim.verdict = below_verdict(interval, LOST) if n else INCONCLUSIVE
    for k in (2, 3):
        m, w = _tally(counts, lambda v, k=k: v == k)
        if m:
            claim.detail.append(f"exactly {k} unvisited: {w:,} of {m:,} won")
    return claim


def no_win_without_king_bottom(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "no_win_without_king_bottom",
        ("003",),
        '"There is no possible way to win the game if none of the bottommost cards in the twelve '
        'circle piles at the start of play is a king."',
        "deals with no king at the bottom of an hour pile are taken; refuted if any of them wins; "
        f"confirmed if none does and the upper end of the {LEVEL} (exact) interval of their win rate is "
        "below 1/130, a tenth of the usual 1/13 (so such deals would have shown wins if they won at "
        "even a tenth of the usual rate); otherwise inconclusive.",
        exact="0/1",
    )
    source = _fact_source(figures, claim, "kings_at_bottom")
    if source is None:
        return claim
    counts, claim.basis = source
    n, wins = _tally(counts, lambda v: v == 0)
    interval = stats.clopper_pearson(wins, n, stats.CLAIM_CONFIDENCE)
    claim.measure_share(wins, n, interval)
    claim.figure_text = f"{wins:,} wins among {n:,} deals with no king at an hour pile's bottom"
    if wins:
        claim.verdict = REFUTED
    elif n and interval[1] < 1 / 130:
        claim.verdict = CONFIRMED
    m, w = _tally(counts, lambda v: v > 0)
    if m:
        claim.detail.append(f"deals with a king at some hour bottom: {w:,} of {m:,} won")
    return claim


def thirteen_losses_ordinary(figures: ClaimFigures) -> Claim:
    exact = Fraction(12, 13) ** 13
    claim = Claim(
        "thirteen_losses_ordinary",
        ("001",),
        '"Expect long losing runs: thirteen straight losses is entirely ordinary."',
        "the deals are cut into blocks of 13 consecutive deal numbers and the share of blocks "
        'without a win is measured in standard play; "ordinary" means it happens at least '
        f"{pct(ORDINARY, 0)} of the time (not surprising at the usual 5% level): confirmed if the "
        f"lower end of its {LEVEL} interval is at least {pct(ORDINARY, 0)}, refuted if the upper end is "
        "below it, otherwise inconclusive.",
        exact=odds.fraction_text(exact),
    )
    claim.detail.append(f"exact value (12/13)^13 = {float(exact):.6f}")
    cell = standard_cell(figures)
    if cell is None:
        claim.needs = "a standard cell"
        claim.basis = "no standard cell in this sweep"
        return claim
    blocks, clean = figures.loss_blocks(cell)
    interval = stats.wilson(clean, blocks, stats.CLAIM_CONFIDENCE)
    claim.measure_share(clean, blocks, interval)
    claim.figure_text = (
        f"{pct(claim.figure)} of {blocks:,} blocks of 13 consecutive deals had no win"
    )
    claim.basis = (
        f"cell {cell.label}, blocks of 13 consecutive deal numbers "
        f"({'per-deal rows' if figures.mode == 'deals' else 'counted per batch in the summary records'})"
    )
    if blocks:
        low, high = interval
        claim.verdict = (
            CONFIRMED if low >= ORDINARY else REFUTED if high < ORDINARY else INCONCLUSIVE
        )
    return claim


FORESIGHT_CELLS = (("watch", None), ("one_swap", None), ("exchange", "bottom"), ("exchange", "top"))


def foresight_no_agency(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "foresight_no_agency",
        ("001",),
        'Face-up finales (the bottom card of each pile dealt face up) add "foresight but no actual agency".',
        "with a rescue there is a choice to make: the informed strategy (reading the face-up bottoms) "
        "is compared, deal by deal, with the best strategy that sees only the counts; refuted if the "
        f"{LEVEL} paired interval of informed minus that lies above 0 (reading the bottoms wins deals "
        f"that could not be won otherwise), confirmed if it lies within +-{pct(TOLERANCE)}, "
        "otherwise inconclusive. In standard play there is no choice at all, so nothing to measure.",
    )
    for variant, depth in FORESIGHT_CELLS:
        found = _informed_against_best_blind(figures, variant, depth)
        if found is not None:
            _foresight_pair(claim, variant, depth, *found)
    if claim.figure is None:
        claim.needs = (
            "cells <rescue variant> x informed, finale=up, and the same variant with a "
            "counts-only strategy, finale=down, in the same deal order"
        )
        claim.basis = "no such pair of cells in this sweep"
    standard_up, standard_down = (
        primary(figures, "standard", finale="up"),
        primary(figures, "standard"),
    )
    if standard_up and standard_down and standard_up.order == standard_down.order:
        paired = figures.paired(standard_up, standard_down, stats.CLAIM_CONFIDENCE)
        if paired is not None:
            claim.detail.append(
                f"standard play, face up vs face down: {paired.a_only + paired.b_only} "
                f"of {paired.n:,} deals differ (no choice to make)"
            )
    return claim


def _informed_against_best_blind(figures: ClaimFigures, variant: str, depth: str | None):
    """(informed cell, best counts-only cell, their paired difference) of a rescue variant,
    the counts-only cells face down in the informed cell's deal order; None if missing."""
    informed = primary(figures, variant, "informed", "up", depth)
    if informed is None:
        return None
    blind = [
        c
        for s in rules.COUNT_STRATEGIES
        if (
            c := next(
                (
                    x
                    for x in figures.cells
                    if (x.variant, x.strategy, x.finale, x.depth, x.order)
                    == (variant, s, "down", depth, informed.order)
                ),
                None,
            )
        )
    ]
    if not blind:
        return None
    best = max(blind, key=lambda c: figures.cells[c].rate)
    paired = figures.paired(informed, best, stats.CLAIM_CONFIDENCE)
    return None if paired is None else (informed, best, paired)


def _foresight_pair(
    claim: Claim, variant: str, depth: str | None, informed: Cell, best: Cell, paired
) -> None:
    """The first pair found measures the claim; later ones are shown beside it."""
    text = (
        f"{variant}{' ' + depth if depth else ''}: informed (face up) {pct(paired.a_rate)} vs "
        f"{best.strategy} (face down) {pct(paired.b_rate)}: {points(paired.difference)}"
    )
    if claim.figure is not None:
        claim.detail.append(text)
        return
    claim.measure_paired(paired)
    claim.figure_text = (
        text + f" on {paired.n:,} paired deals (exact McNemar p {stats.p_text(paired.p_value)})"
    )
    claim.basis = f"cells {informed.label} and {best.label}, paired deal by deal"
    low, high = paired.low, paired.high
    if low > 0:
        claim.verdict = REFUTED
    elif -TOLERANCE <= low and high <= TOLERANCE:
        claim.verdict = CONFIRMED


def deal_order_no_change(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "deal_order_no_change",
        ("004",),
        '"It does not matter how you deal them. Some people deal one card at a time around the clock, '
        "and some deal four cards to a pile before moving on. As long as the deck was shuffled, the "
        'result is the same."',
        "standard play dealt round-robin and in packets is compared on the same deal numbers; "
        f"refuted if the {LEVEL} paired interval of the difference in win rate excludes 0, confirmed if "
        f"it lies within +-{pct(TOLERANCE)}, otherwise inconclusive.",
        exact="0/1",
    )
    decision = decide("deal_order_no_change", figures)
    if decision is None:
        claim.needs = "cells standard x order=round-robin and standard x order=packets"
        claim.basis = "this sweep does not play both deal orders in standard play"
        return claim
    pair = decision.read
    paired = figures.paired(*pair, stats.CLAIM_CONFIDENCE)
    claim.measure_paired(paired)
    claim.figure_text = (
        f"round-robin {pct(paired.a_rate)} vs packets {pct(paired.b_rate)}: "
        f"{points(paired.difference)} on {paired.n:,} deal numbers "
        f"(exact McNemar p {stats.p_text(paired.p_value)})"
    )
    claim.basis = f"cells {pair[0].label} and {pair[1].label}, paired by deal number"
    claim.verdict = decision.verdict
    others = []
    for cell in figures.cells:
        if cell.order == "round-robin" and cell.variant not in ("standard",):
            twin = Cell(cell.variant, cell.strategy, cell.finale, "packets", cell.depth)
            if twin in figures.cells:
                p = figures.paired(cell, twin, stats.CLAIM_CONFIDENCE)
                if p is not None and (p.low > 0 or p.high < 0):
                    others.append(f"{cell.label}: {points(p.difference)}")
    claim.detail.append(
        "other cells whose two deal orders differ beyond chance: " + (", ".join(others) or "none")
    )
    return claim


def one_finale(cells: list) -> list:
    """Cells of one finale only: the finale changes only what `informed` reads, so standard and
    play_out cells of both finales play the very same deals, which must not count twice."""
    first = min(cell.finale for cell in cells)
    return [cell for cell in cells if cell.finale == first]


def won_deal_52_flips(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "won_deal_52_flips",
        ("001",),
        '"A won game is exactly 52 flips."',
        "refuted if any standard win turned a number of cards other than 52; confirmed if every one "
        f"did and there were at least {MIN_WINS_52} wins; otherwise inconclusive.",
        exact="1/1",
    )
    cells = [c for c in figures.cells if c.variant == "standard"]
    if not cells:
        claim.needs = "a standard cell"
        claim.basis = "no standard cell in this sweep"
        return claim
    total, at_52 = figures.won_turned(one_finale(cells))
    interval = stats.clopper_pearson(at_52, total, stats.CLAIM_CONFIDENCE)
    claim.measure_share(at_52, total, interval)
    claim.figure_text = f"{at_52:,} of {total:,} standard wins turned exactly 52 cards"
    claim.basis = (
        "cards_turned of won deals in the standard cells (one finale: both play the same deals)"
    )
    if total != at_52:
        claim.verdict = REFUTED
    elif total >= MIN_WINS_52:
        claim.verdict = CONFIRMED
    rescued = figures.rescue_win_turned()
    if rescued:
        claim.detail.append("rescued wins (not the claim's game): " + ", ".join(rescued))
    return claim


def play_out_deaths(figures: ClaimFigures) -> Claim:
    claim = Claim(
        "play_out_deaths",
        ("000",),
        'Under Play it out, "the first death is always in the centre but later ones can strand you anywhere".',
        "stray_deaths counts deaths away from where the rules predict (the first at the centre, each "
        "later one at the pile its chain restarted from); the first half holds if no first death is "
        "away from the centre; the second half is refuted if no later death is away from its restart "
        f"pile among at least {MIN_LATER_DEATHS} later deaths, and the claim with it; otherwise "
        "inconclusive. A death away from where the rules predict is one the rules rule out, and "
        "stray_deaths does not tell a first death (against the first half) from a later one (for "
        "the second): it is named, and decides nothing.",
    )
    cells = [c for c in figures.cells if c.variant == "play_out"]
    if not cells:
        claim.needs = "a play_out cell"
        claim.basis = "no play_out cell in this sweep"
        return claim
    deals, later, stray = figures.play_out_deaths(one_finale(cells))
    deaths = deals + later
    interval = (
        stats.clopper_pearson(deaths - stray, deaths, stats.CLAIM_CONFIDENCE) if deaths else None
    )
    claim.measure_share(deaths - stray, deaths, interval)
    claim.figure_text = (
        f"{deaths - stray:,} of {deaths:,} deaths where the rules predict "
        f"({deals:,} first deaths, {later:,} later deaths, {stray:,} elsewhere)"
    )
    claim.basis = (
        "restarts and stray_deaths of the play_out cells (one finale: both play the same deals)"
    )
    if stray == 0 and later >= MIN_LATER_DEATHS:
        claim.verdict = REFUTED
        claim.detail.append("first half confirmed: every first death was in the centre")
        claim.detail.append(
            "second half refuted: every later death came at the very pile the chain "
            "restarted from (hour 1, or the first hour clockwise from it that still held "
            "a card), so the dial, not chance, fixes where it stops"
        )
    elif stray > 0:
        claim.detail.append(
            f"{stray:,} death(s) away from where the rules predict, which the rules rule out "
            "(docs/rules.md): the records, not the claim, are in question"
        )
    return claim


CLAIMS = (
    one_in_13,
    better_than_one_in_three,
    pick_makes_no_difference,
    near_misses_come_home,
    unvisited_by_third_king,
    no_win_without_king_bottom,
    thirteen_losses_ordinary,
    foresight_no_agency,
    deal_order_no_change,
    won_deal_52_flips,
    play_out_deaths,
)
CLAIM_IDS = tuple(function.__name__ for function in CLAIMS)


def assess(figures: ClaimFigures) -> list[Claim]:
    """Every claim of docs/claims.md, measured on the report's figures."""
    return [function(figures) for function in CLAIMS]
