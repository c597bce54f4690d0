"""Unit tests of the claims' measures and verdict rules (pipeline/inference/claims.py, as
pipeline/report/claims.py evaluates them) on made-up figures: the rule pages' eleven, read
from the shipped claims file, and claims of one's own written as a user writes them.

`FakeFigures` implements `claims.ClaimFigures` from numbers written here: no Ray, no files,
no kernel. Every expected verdict follows from the claim's ``rule`` text and the numbers
chosen, as the comment beside each says; where an interval decides, the test first checks
(with `pipeline.inference.stats`, never with the claim under test) that the numbers put the
interval where the comment says. tests/report/test_report.py holds the end-to-end tests on real sweeps.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from pipeline.engine import odds
from pipeline.engine.rules import COUNT_STRATEGIES, Cell
from pipeline.inference import claim_file, stats
from pipeline.inference import claims as verdicts
from pipeline.inference.claims import CONFIRMED, INCONCLUSIVE, NOT_MEASURED, REFUTED, Claim, Value
from pipeline.records import summary
from pipeline.report import claims, document

C = stats.CLAIM_CONFIDENCE  # every claim's interval is at 99.9%
TOL = verdicts.TOLERANCE  # 0.005


def wilson(wins: int, n: int) -> tuple[float, float]:
    return stats.wilson(wins, n, C)


def clopper_pearson(wins: int, n: int) -> tuple[float, float]:
    return stats.clopper_pearson(wins, n, C)


def newcombe(both: int, a_only: int, b_only: int, neither: int) -> tuple[float, float]:
    paired = stats.paired_difference(both, a_only, b_only, neither, C)
    return paired.low, paired.high


# --- The fake figures -----------------------------------------------------------------------


class FakeCell:
    """A cell's figure (`claims.ClaimCell`): n deals, wins of them, maybe an exact value."""

    def __init__(self, n: int, wins: int, exact: Fraction | None = None):
        self.n, self.wins, self.exact = n, wins, exact

    @property
    def rate(self) -> float:
        return self.wins / self.n if self.n else math.nan


class FakeFigures:
    """`claims.ClaimFigures` from made-up numbers. Its only public members are the
    interface's, so a claim reading anything else fails here with AttributeError.

    cells: {cell: (n, wins)} or {cell: FakeCell}; pairs: {(a, b): (both, a_only, b_only,
    neither)}; intervals: {(a, b): (low, high)} to give instead of the pair's own interval
    (an interval exactly at a bound); facts: (cell, rows) as `deal_facts` gives; down:
    {cell: {down_at_stop: (deals, wins)}}; blocks: {cell: (blocks, blocks without a win)};
    turned: {cell: (won deals, of them at 52 cards)}; deaths: {cell: (deals, later, stray)}.
    """

    def __init__(
        self,
        cells=None,
        *,
        mode="deals",
        replay=None,
        replay_note="",
        pairs=None,
        intervals=None,
        facts=None,
        down=None,
        blocks=None,
        turned=None,
        rescued=(),
        deaths=None,
    ):
        self.cells = {
            cell: value if isinstance(value, FakeCell) else FakeCell(*value)
            for cell, value in (cells or {}).items()
        }
        self.mode, self.replay, self.replay_note = mode, replay, replay_note
        self._pairs, self._intervals = dict(pairs or {}), dict(intervals or {})
        self._facts, self._down, self._blocks = facts, dict(down or {}), dict(blocks or {})
        self._turned, self._rescued, self._deaths = (
            dict(turned or {}),
            list(rescued),
            dict(deaths or {}),
        )

    def paired(self, a, b, confidence):
        if (a, b) in self._pairs:
            both, a_only, b_only, neither = self._pairs[(a, b)]
        elif (b, a) in self._pairs:
            both, b_only, a_only, neither = self._pairs[(b, a)]
        else:
            return None
        paired = stats.paired_difference(both, a_only, b_only, neither, confidence)
        if (a, b) in self._intervals:
            low, high = self._intervals[(a, b)]
            paired = replace(paired, low=low, high=high)
        return paired

    def deal_facts(self):
        return self._facts

    def near_misses(self, cell, low, high):
        rows = self._down.get(cell, {})
        n = sum(deals for down, (deals, _) in rows.items() if low <= down <= high)
        wins = sum(won for down, (_, won) in rows.items() if low <= down <= high)
        return n, wins

    def loss_blocks(self, cell):
        return self._blocks.get(cell, (0, 0))

    def won_turned(self, cells, cards=52):
        assert cards == 52  # the only count the made-up figures hold
        return (
            sum(self._turned.get(c, (0, 0))[0] for c in cells),
            sum(self._turned.get(c, (0, 0))[1] for c in cells),
        )

    def rescue_win_turned(self):
        return list(self._rescued)

    def play_out_deaths(self, cells):
        rows = [self._deaths.get(c, (0, 0, 0)) for c in cells]
        return tuple(sum(row[i] for row in rows) for i in range(3))


def fixed_interval(monkeypatch, interval):
    """Make every share interval the claims compute `interval`: to put an end exactly on a bound."""
    monkeypatch.setattr(stats, "wilson", lambda *args, **kwargs: interval)
    monkeypatch.setattr(stats, "clopper_pearson", lambda *args, **kwargs: interval)


def replay_of(won, unvisited, king_bottoms, checked=0, mismatches=0) -> claims.Replay:
    return claims.Replay(
        7,
        0,
        "round-robin",
        np.asarray(won, dtype=bool),
        np.asarray(unvisited, dtype=np.int8),
        np.asarray(king_bottoms, dtype=np.int8),
        checked,
        mismatches,
    )


STANDARD = Cell()
STANDARD_PACKETS = Cell(order="packets")
STANDARD_UP = Cell(finale="up")
PLAY_OUT = Cell("play_out")
PLAY_OUT_UP = Cell("play_out", finale="up")


def watch(strategy, finale="down", order="round-robin"):
    return Cell("watch", strategy, finale, order)


def one_swap(strategy, finale="down", order="round-robin"):
    return Cell("one_swap", strategy, finale, order)


def exchange(strategy, depth, finale="down", order="round-robin"):
    return Cell("exchange", strategy, finale, order, depth)


RULES = {claim.id: claim for claim in claims.rule_pages()}


def check(claim_id: str, figures) -> claims.Checked:
    """A rule page's claim, as the shipped claims file writes it, measured on ``figures``."""
    return claims.check(RULES[claim_id], figures)


LOST = RULES["unvisited_by_third_king"].asserts.bound.number  # "already lost": below 1%
ORDINARY = RULES["thirteen_losses_ordinary"].asserts.bound.number  # at least 5%


def not_measured(claim) -> bool:
    return claim.verdict == NOT_MEASURED and bool(claim.needs)


def needs_and_inconclusive(claim) -> bool:
    return claim.verdict == INCONCLUSIVE and bool(claim.needs)


# --- The shared verdict rules ---------------------------------------------------------------


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.07, 0.078), CONFIRMED),  # holds 1/13 = 0.0769, half width 0.004 <= 0.005
        ((0.06, 0.09), INCONCLUSIVE),  # holds 1/13, half width 0.015
        ((0.08, 0.085), REFUTED),  # all above 1/13
        ((0.06, 0.07), REFUTED),  # all below 1/13
        ((1 / 13, 1 / 13 + 0.008), CONFIRMED),  # 1/13 is the lower end: inside
        ((1 / 13 - 0.008, 1 / 13), CONFIRMED),  # 1/13 is the upper end: inside
        ((1 / 13, 1 / 13), CONFIRMED),  # a point interval at the value
    ],
)
def test_exact_value_verdict(interval, verdict):
    assert verdicts.Equals(Value.of(Fraction(1, 13))).verdict(interval) == verdict


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.4, 0.5), CONFIRMED),
        ((0.1, 0.2), REFUTED),
        ((0.3, 0.4), INCONCLUSIVE),
        ((1 / 3, 0.5), INCONCLUSIVE),  # a lower end at the threshold is not above it
        ((0.2, 1 / 3), INCONCLUSIVE),  # an upper end at the threshold is not below it
    ],
)
def test_above_verdict(interval, verdict):
    assert verdicts.Above(Value.of(Fraction(1, 3))).verdict(interval) == verdict


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.0, 0.005), CONFIRMED),
        ((0.02, 0.03), REFUTED),
        ((0.005, 0.02), INCONCLUSIVE),
        ((0.0, 0.01), INCONCLUSIVE),  # an upper end at the threshold is not below it
        ((0.01, 0.02), INCONCLUSIVE),  # a lower end at the threshold is not above it
    ],
)
def test_below_verdict(interval, verdict):
    assert verdicts.Below(Value.of(0.01)).verdict(interval) == verdict


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((-0.004, 0.004), CONFIRMED),
        ((-TOL, TOL), CONFIRMED),  # within +-0.005, ends included
        ((0.0, 0.004), CONFIRMED),
        ((-0.004, 0.0), CONFIRMED),  # an end at 0 does not exclude 0
        ((-0.02, 0.02), INCONCLUSIVE),
        ((-0.001, 0.006), INCONCLUSIVE),
        ((0.001, 0.004), REFUTED),
        ((-0.03, -0.01), REFUTED),  # 0 excluded (even within +-0.005)
    ],
)
def test_no_difference_verdict(interval, verdict):
    assert verdicts.NoDifference().verdict(interval) == verdict


# --- one_in_13 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "wins, n, verdict",
    [
        # Wilson [0.0742, 0.0797] holds 1/13 = 0.07692; half width 0.0028 <= 0.005.
        (7692, 100_000, CONFIRMED),
        # Wilson [0.0674, 0.0727]: its upper end is below 1/13.
        (7000, 100_000, REFUTED),
        # Wilson [0.0871, 0.0930]: its lower end is above 1/13.
        (9000, 100_000, REFUTED),
        # Wilson [0.0536, 0.1095] holds 1/13 but is 0.028 wide each side.
        (77, 1000, INCONCLUSIVE),
        # Exactly 1/13 on 30,771 deals: half width 0.0049999 <= 0.005, the fewest deals (in
        # steps of 13) that pin it; 13 fewer leave 0.0050009 > 0.005.
        (2367, 30_771, CONFIRMED),
        (2366, 30_758, INCONCLUSIVE),
    ],
)
def test_one_in_13_verdicts(wins, n, verdict):
    low, high = wilson(wins, n)
    inside, narrow = low <= 1 / 13 <= high, (high - low) / 2 <= TOL
    assert (not inside, inside and narrow) == (verdict == REFUTED, verdict == CONFIRMED)
    claim = check("one_in_13", FakeFigures({STANDARD: (n, wins)}))
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == wins / n and claim.interval == (low, high)
    assert claim.basis == f"cell {STANDARD.label}"


@pytest.mark.parametrize("interval", [(1 / 13, 1 / 13 + 0.008), (1 / 13 - 0.008, 1 / 13)])
def test_one_in_13_at_an_end_of_the_interval(monkeypatch, interval):
    # 1/13 at an end of the interval lies inside it; half width 0.004 <= 0.005: confirmed.
    fixed_interval(monkeypatch, interval)
    assert check("one_in_13", FakeFigures({STANDARD: (1000, 77)})).verdict == CONFIRMED


def test_one_in_13_no_deals():
    # A standard cell of 0 deals measures nothing: inconclusive, though the cell is there.
    claim = check("one_in_13", FakeFigures({STANDARD: (0, 0)}))
    assert claim.verdict == INCONCLUSIVE and claim.needs is None


def test_one_in_13_needs_a_standard_cell():
    claim = check("one_in_13", FakeFigures({watch("most"): (100_000, 7692)}))
    assert not_measured(claim) and claim.needs == "a cell of standard, play_out"
    assert claim.figure is None and claim.interval is None


def test_one_in_13_which_cell():
    confirming, refuting = (100_000, 7692), (100_000, 9000)  # as in test_one_in_13_verdicts
    # play_out's restart-free deals stand in when there is no standard cell.
    claim = check("one_in_13", FakeFigures({watch("most"): refuting, PLAY_OUT: confirming}))
    assert claim.verdict == CONFIRMED and claim.basis == f"cell {PLAY_OUT.label}"
    # The standard cell comes first.
    claim = check("one_in_13", FakeFigures({PLAY_OUT: refuting, STANDARD: confirming}))
    assert claim.verdict == CONFIRMED and claim.basis == f"cell {STANDARD.label}"
    # Round-robin before packets, and finale down (in either order) before up.
    claim = check("one_in_13", FakeFigures({STANDARD_PACKETS: refuting, STANDARD: confirming}))
    assert claim.basis == f"cell {STANDARD.label}"
    claim = check("one_in_13", FakeFigures({STANDARD_UP: confirming, STANDARD_PACKETS: refuting}))
    assert claim.verdict == REFUTED and claim.basis == f"cell {STANDARD_PACKETS.label}"
    # With finale down missing, up stands in.
    claim = check("one_in_13", FakeFigures({STANDARD_UP: confirming}))
    assert claim.verdict == CONFIRMED and claim.basis == f"cell {STANDARD_UP.label}"


# --- better_than_one_in_three -------------------------------------------------------------


@pytest.mark.parametrize(
    "wins, n, verdict",
    [
        (400, 1000, CONFIRMED),  # Wilson [0.3504, 0.4518]: lower end above 1/3
        (250, 1000, REFUTED),  # Wilson [0.2078, 0.2976]: upper end below 1/3
        (340, 1000, INCONCLUSIVE),  # Wilson [0.2927, 0.3908] holds 1/3
        (1000, 3000, INCONCLUSIVE),  # exactly 1/3: Wilson [0.3057, 0.3622] holds it
    ],
)
def test_better_than_one_in_three_verdicts(wins, n, verdict):
    low, high = wilson(wins, n)
    assert (low > 1 / 3, high < 1 / 3) == (verdict == CONFIRMED, verdict == REFUTED)
    # most the best of every counts-only strategy (the others at half its wins).
    others = {one_swap(s): (n, wins // 2) for s in ("clockwise", "random", "fewest")}
    figures = FakeFigures({one_swap("most"): (n, wins), **others})
    claim = check("better_than_one_in_three", figures)
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == wins / n and claim.interval == (low, high)


def test_better_than_one_in_three_is_not_refuted_while_a_strategy_is_missing():
    # 250 of 1000 is below 1/3 (refuted above, with every strategy); fewest is not played,
    # and might be the choice that beats 1/3. Above 1/3 needs one strategy only.
    some = {one_swap(s): (1000, 250) for s in ("clockwise", "random", "most")}
    claim = check("better_than_one_in_three", FakeFigures(some))
    assert needs_and_inconclusive(claim)
    assert (
        claim.needs
        == "cells one_swap fewest: one not played could raise the figure and change the verdict"
    )
    some[one_swap("most")] = (1000, 400)
    assert check("better_than_one_in_three", FakeFigures(some)).verdict == CONFIRMED


def test_better_than_one_in_three_takes_the_best_strategy():
    # most's 400/1000 is confirmed on its own (above); clockwise's 250 and fewest's 100 would
    # be refuted, but the claim is about the best choice.
    figures = FakeFigures(
        {
            one_swap("clockwise"): (1000, 250),
            one_swap("fewest"): (1000, 100),
            one_swap("most"): FakeCell(1000, 400, Fraction(2, 5)),
            one_swap("oracle"): (1000, 900),
        }
    )  # peeks: not a way to play
    claim = check("better_than_one_in_three", figures)
    assert claim.verdict == CONFIRMED and claim.basis == f"cell {one_swap('most').label}"
    assert claim.exact == "2/5" and "exact value for most: 0.400000" in claim.detail
    assert claim.detail[-1] == "the other strategies: clockwise 25.00%, fewest 10.00%"


@pytest.mark.parametrize("interval", [(1 / 3, 0.4), (0.3, 1 / 3)])
def test_better_than_one_in_three_interval_at_the_bound(monkeypatch, interval):
    # A lower end at 1/3 is not above it, an upper end at 1/3 not below it: inconclusive.
    fixed_interval(monkeypatch, interval)
    claim = check("better_than_one_in_three", FakeFigures({one_swap("most"): (1000, 400)}))
    assert claim.verdict == INCONCLUSIVE


def test_better_than_one_in_three_no_deals():
    claim = check("better_than_one_in_three", FakeFigures({one_swap("most"): (0, 0)}))
    assert claim.verdict == INCONCLUSIVE and claim.needs is None


def test_better_than_one_in_three_needs_a_counts_only_one_swap_cell():
    # informed reads the face-up bottoms and oracle peeks: neither is a counts-only choice.
    for cells in (
        {},
        {STANDARD: (1000, 77)},
        {one_swap("informed", "up"): (1000, 900), one_swap("oracle"): (1000, 900)},
    ):
        claim = check("better_than_one_in_three", FakeFigures(cells))
        assert not_measured(claim)
        assert claim.needs == "a cell of one_swap {clockwise, random, most, fewest}"


def test_better_than_one_in_three_face_up_stands_in():
    # A counts-only strategy plays alike under both finales: finale up stands in for down.
    claim = check("better_than_one_in_three", FakeFigures({one_swap("most", "up"): (1000, 400)}))
    assert claim.verdict == CONFIRMED and claim.basis == f"cell {one_swap('most', 'up').label}"


# --- pick_makes_no_difference -------------------------------------------------------------

MOST, FEWEST, CLOCKWISE, RANDOM = (
    watch("most"),
    watch("fewest"),
    watch("clockwise"),
    watch("random"),
)


def every_watch_strategy(n: int, most_wins: int, fewest_wins: int) -> dict:
    """Watch cells of every counts-only strategy, most ranked best and fewest worst (clockwise
    and random at fewest's rate: a tie for the worst goes to the last, fewest)."""
    most_wins += most_wins == fewest_wins
    return {
        MOST: (n, most_wins),
        **{watch(s): (n, fewest_wins) for s in ("clockwise", "random", "fewest")},
    }


@pytest.mark.parametrize(
    "table, within, verdict",
    [
        # most 600 vs fewest 400 of 1000: Newcombe [0.146, 0.252] excludes 0.
        ((350, 250, 50, 350), False, REFUTED),
        # 100,000 deals, 100 discordant each way: [-0.00047, +0.00047] within +-0.005.
        ((10_000, 100, 100, 89_800), True, CONFIRMED),
        # 1000 deals, 10 discordant each way: [-0.0169, +0.0169] holds 0, wider than +-0.005.
        ((100, 10, 10, 880), False, INCONCLUSIVE),
        # 200 vs 100 discordant of 100,000: [+0.00043, +0.00158] lies within +-0.005 but excludes
        # 0; the rule refutes on excluding 0 first, so a real difference of 0.1 point refutes.
        ((10_000, 200, 100, 89_700), True, REFUTED),
    ],
)
def test_pick_makes_no_difference_verdicts(table, within, verdict):
    both, a_only, b_only, _ = table
    low, high = newcombe(*table)
    assert (low > 0 or high < 0) == (verdict == REFUTED)
    assert (-TOL <= low and high <= TOL) == within
    n = sum(table)
    figures = FakeFigures(
        every_watch_strategy(n, both + a_only, both + b_only), pairs={(MOST, FEWEST): table}
    )
    claim = check("pick_makes_no_difference", figures)
    assert claim.verdict == verdict and claim.needs is None
    assert claim.basis == f"cells {MOST.label} and {FEWEST.label}, paired deal by deal"
    assert claim.interval == (low, high) and claim.figure == pytest.approx((a_only - b_only) / n)


def test_pick_makes_no_difference_is_not_confirmed_over_some_strategies():
    # clockwise and random alone: no difference between them is not none between every pick
    # (most and fewest differ most). A difference between two refutes on its own.
    none_between = (10_000, 100, 100, 89_800)  # confirmed above, with every strategy
    figures = FakeFigures(
        {CLOCKWISE: (100_000, 10_100), RANDOM: (100_000, 10_100)},
        pairs={(CLOCKWISE, RANDOM): none_between},
    )
    claim = check("pick_makes_no_difference", figures)
    assert needs_and_inconclusive(claim)
    assert claim.needs == (
        "cells watch {most, fewest}: one not played could raise the figure and change the verdict"
    )
    apart = (350, 250, 50, 350)  # refuted above
    figures = FakeFigures(
        {CLOCKWISE: (1000, 600), RANDOM: (1000, 400)}, pairs={(CLOCKWISE, RANDOM): apart}
    )
    assert check("pick_makes_no_difference", figures).verdict == REFUTED


def test_pick_makes_no_difference_compares_the_best_with_the_worst():
    # Rates: clockwise 0.5, most 0.6, fewest 0.4: the pair is most minus fewest (refuted, as
    # above), whatever clockwise's tables say; the pair's table is stored either way round.
    figures = FakeFigures(
        {CLOCKWISE: (1000, 500), FEWEST: (1000, 400), MOST: (1000, 600)},
        pairs={(FEWEST, MOST): (350, 50, 250, 350), (CLOCKWISE, MOST): (500, 0, 100, 400)},
    )
    claim = check("pick_makes_no_difference", figures)
    assert claim.verdict == REFUTED and claim.figure == pytest.approx(0.2)
    assert claim.basis == f"cells {MOST.label} and {FEWEST.label}, paired deal by deal"
    assert claim.detail == ["all: most 60.00%, clockwise 50.00%, fewest 40.00%"]


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.0, 0.004), CONFIRMED),  # an end at 0 does not exclude 0; within +-0.005
        ((-TOL, TOL), CONFIRMED),  # exactly +-0.005: within
        ((0.0, 0.006), INCONCLUSIVE),  # holds 0, reaches past +0.005
    ],
)
def test_pick_makes_no_difference_interval_at_the_bounds(interval, verdict):
    figures = FakeFigures(
        every_watch_strategy(1000, 110, 110),
        pairs={(MOST, FEWEST): (100, 10, 10, 880)},
        intervals={(MOST, FEWEST): interval},
    )
    assert check("pick_makes_no_difference", figures).verdict == verdict


def test_pick_makes_no_difference_no_deals():
    # No paired deals: the interval is all of [-1, 1], which holds 0 and is not within +-0.005.
    figures = FakeFigures({MOST: (0, 0), FEWEST: (0, 0)}, pairs={(MOST, FEWEST): (0, 0, 0, 0)})
    claim = check("pick_makes_no_difference", figures)
    assert claim.verdict == INCONCLUSIVE and claim.interval == (-1.0, 1.0)


def test_pick_makes_no_difference_needs_two_paired_cells():
    for cells in (
        {},
        {MOST: (1000, 600)},
        {MOST: (1000, 600), watch("informed", "up"): (1000, 900)},
    ):
        claim = check("pick_makes_no_difference", FakeFigures(cells))
        assert not_measured(claim) and claim.needs.startswith("at least two cells of watch")
    # Two cells, but in different deal orders: never paired.
    fewest_packets = watch("fewest", order="packets")
    claim = check(
        "pick_makes_no_difference", FakeFigures({MOST: (1000, 600), fewest_packets: (1000, 400)})
    )
    assert not_measured(claim) and claim.needs == "both cells in one deal order"


# --- near_misses_come_home ------------------------------------------------------------------


@pytest.mark.parametrize(
    "wins, n, verdict",
    [
        (600, 1000, CONFIRMED),  # Wilson [0.548, 0.650]: lower end above 1/2
        (400, 1000, REFUTED),  # Wilson [0.350, 0.452]: upper end below 1/2
        (520, 1000, INCONCLUSIVE),  # Wilson [0.468, 0.571] holds 1/2
        (500, 1000, INCONCLUSIVE),  # exactly 1/2: Wilson [0.448, 0.552]
    ],
)
def test_near_misses_come_home_verdicts(wins, n, verdict):
    low, high = wilson(wins, n)
    assert (low > 0.5, high < 0.5) == (verdict == CONFIRMED, verdict == REFUTED)
    # The near misses, split over 1..3 cards down, with deals at 0 and 4 down that are not
    # near misses (all won at 0, none at 4: counted, either would move the figure).
    split = {
        1: (n // 2, wins // 2),
        2: (n // 4, wins // 4),
        3: (n - n // 2 - n // 4, wins - wins // 2 - wins // 4),
        0: (5000, 5000),
        4: (5000, 0),
    }
    claim = check(
        "near_misses_come_home", FakeFigures({RANDOM: (20_000, 9000)}, down={RANDOM: split})
    )
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == wins / n and claim.interval == (low, high)
    assert claim.exact is not None  # the exact value is shown; the verdict does not use it


def test_near_misses_come_home_reads_the_random_pick_first():
    # random's 400/1000 (refuted) decides, not clockwise's or most's 600/1000 (confirmed on
    # their own), though clockwise comes first in rules.COUNT_STRATEGIES.
    figures = FakeFigures(
        {CLOCKWISE: (9000, 5000), MOST: (9000, 5000), RANDOM: (9000, 4000)},
        down={CLOCKWISE: {2: (1000, 600)}, MOST: {2: (1000, 600)}, RANDOM: {2: (1000, 400)}},
    )
    claim = check("near_misses_come_home", figures)
    assert claim.verdict == REFUTED and claim.basis.startswith(f"cell {RANDOM.label}")
    assert (
        claim.detail[-1] == "the other strategies: clockwise 60.00% of 1,000, most 60.00% of 1,000"
    )
    # Without random, another counts-only strategy stands in.
    figures = FakeFigures({MOST: (9000, 5000)}, down={MOST: {2: (1000, 600)}})
    claim = check("near_misses_come_home", figures)
    assert claim.verdict == CONFIRMED and claim.basis.startswith(f"cell {MOST.label}")


def test_near_misses_come_home_interval_at_the_bound(monkeypatch):
    # A lower end at 1/2 is not above it: inconclusive.
    fixed_interval(monkeypatch, (0.5, 0.6))
    claim = check(
        "near_misses_come_home",
        FakeFigures({RANDOM: (9000, 5000)}, down={RANDOM: {2: (1000, 550)}}),
    )
    assert claim.verdict == INCONCLUSIVE


def test_near_misses_come_home_no_near_misses():
    # Deals at 0 and 4+ cards down only: no near miss, nothing measured.
    figures = FakeFigures({RANDOM: (9000, 5000)}, down={RANDOM: {0: (1000, 1000), 4: (1000, 100)}})
    claim = check("near_misses_come_home", figures)
    assert claim.verdict == INCONCLUSIVE and claim.figure is None and claim.interval is None


def test_near_misses_come_home_needs_a_counts_only_watch_cell():
    for cells in ({}, {STANDARD: (1000, 77)}, {watch("oracle"): (1000, 900)}):
        claim = check("near_misses_come_home", FakeFigures(cells))
        assert not_measured(claim)
        assert claim.needs == "a cell of watch {random, clockwise, most, fewest}"


# --- unvisited_by_third_king ---------------------------------------------------------------


def facts_rows(by_unvisited: dict[int, tuple[int, int]], kings_at_bottom: int = 1):
    """`deal_facts` rows (won, kings_at_bottom, unvisited_at_third_king, n) from
    {unvisited: (deals, wins)}."""
    rows = []
    for unvisited, (deals, wins) in sorted(by_unvisited.items()):
        rows += [
            (True, kings_at_bottom, unvisited, wins),
            (False, kings_at_bottom, unvisited, deals - wins),
        ]
    return STANDARD, [row for row in rows if row[3]]


@pytest.mark.parametrize(
    "wins, n, verdict",
    [
        (0, 2000, CONFIRMED),  # Wilson [0, 0.0054]: upper end below 1%
        (100, 2000, REFUTED),  # Wilson [0.0362, 0.0686]: lower end above 1%
        (2, 200, INCONCLUSIVE),  # Wilson [0.0014, 0.0690] holds 1%
        (10, 1000, INCONCLUSIVE),  # exactly 1%: Wilson [0.0037, 0.0268]
    ],
)
def test_unvisited_by_third_king_verdicts(wins, n, verdict):
    low, high = wilson(wins, n)
    assert (high < LOST, low > LOST) == (verdict == CONFIRMED, verdict == REFUTED)
    # The deals with 2 or more hour piles unvisited, split over 2, 3 and 5; those with 0 or 1
    # unvisited (half of them won) are not the claim's.
    split = {
        2: (n // 2, wins // 2),
        3: (n // 4, wins // 4),
        5: (n - n // 2 - n // 4, wins - wins // 2 - wins // 4),
        0: (4000, 2000),
        1: (4000, 2000),
    }
    claim = check(
        "unvisited_by_third_king",
        FakeFigures({STANDARD: (8000 + n, 4000 + wins)}, facts=facts_rows(split)),
    )
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == wins / n and claim.interval == (low, high)
    assert claim.basis.startswith(f"cell {STANDARD.label}, every deal")
    assert f"by unvisited_at_third_king: 2: {wins // 2:,} of {n // 2:,} won; " in claim.detail[1]


@pytest.mark.parametrize("interval", [(0.0, 0.01), (0.01, 0.02)])
def test_unvisited_by_third_king_interval_at_the_bound(monkeypatch, interval):
    # An upper end at 1% is not below it, a lower end at 1% not above it: inconclusive.
    fixed_interval(monkeypatch, interval)
    claim = check("unvisited_by_third_king", FakeFigures(facts=facts_rows({2: (1000, 10)})))
    assert claim.verdict == INCONCLUSIVE


def test_unvisited_by_third_king_no_such_deals():
    claim = check(
        "unvisited_by_third_king", FakeFigures(facts=facts_rows({0: (1000, 500), 1: (1000, 100)}))
    )
    assert claim.verdict == INCONCLUSIVE and claim.figure is None and claim.needs is None


def test_unvisited_by_third_king_from_the_replay():
    # No facts in the records: the replay's deals are counted. 2000 deals with 2 unvisited,
    # none won (confirmed, as 0/2000 above), and 1000 with 0 unvisited, all won.
    won = [False] * 2000 + [True] * 1000
    unvisited = [2] * 2000 + [0] * 1000
    replay = replay_of(won, unvisited, [1] * 3000, checked=3000)
    claim = check("unvisited_by_third_king", FakeFigures(replay=replay))
    assert claim.verdict == CONFIRMED and claim.figure == 0.0
    assert (
        claim.basis == replay.describe()
        and "agree with the sweep's records on 3,000 of 3,000" in claim.basis
    )


def test_unvisited_by_third_king_distrusts_a_replay_that_disagrees():
    replay = replay_of([False] * 2000, [2] * 2000, [1] * 2000, checked=2000, mismatches=1)
    claim = check("unvisited_by_third_king", FakeFigures(replay=replay))
    assert claim.verdict == INCONCLUSIVE and claim.figure is None
    assert "not trusted" in claim.detail[-1] and claim.basis == replay.describe()


def test_unvisited_by_third_king_needs_facts_or_a_replay():
    for figures in (
        FakeFigures(),
        FakeFigures(replay=replay_of([], [], [])),
        FakeFigures(replay_note="no replay (--replay 0)"),
    ):
        claim = check("unvisited_by_third_king", figures)
        assert not_measured(claim) and "standard cell" in claim.needs
        assert claim.basis == (figures.replay_note or "no standard cell and no replay")


# --- no_win_without_king_bottom -----------------------------------------------------------


def king_rows(deals: int, wins: int):
    """`deal_facts` rows: ``deals`` deals without a king at an hour bottom, ``wins`` of them
    won, beside 10,000 deals with kings at the bottom (1,000 won) that are not the claim's."""
    rows = [
        (True, 0, 0, wins),
        (False, 0, 0, deals - wins),
        (True, 2, 0, 1000),
        (False, 2, 0, 9000),
    ]
    return STANDARD, [row for row in rows if row[3]]


@pytest.mark.parametrize(
    "wins, n, verdict",
    [
        (1, 5000, REFUTED),  # one win among them refutes
        (0, 985, CONFIRMED),  # Clopper-Pearson [0, 0.0076870]: upper end below 1/130 = 0.0076923
        (0, 984, INCONCLUSIVE),  # [0, 0.0076947]: one deal fewer and the upper end is above 1/130
    ],
)
def test_no_win_without_king_bottom_verdicts(wins, n, verdict):
    low, high = clopper_pearson(wins, n)
    if not wins:
        assert (high < 1 / 130) == (verdict == CONFIRMED)
    claim = check("no_win_without_king_bottom", FakeFigures(facts=king_rows(n, wins)))
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == wins / n and claim.interval == (low, high)
    assert claim.detail == ["the other deals: 1,000 of 10,000 won"]


def test_no_win_without_king_bottom_interval_at_the_bound(monkeypatch):
    # An upper end at 1/130 is not below it: inconclusive.
    fixed_interval(monkeypatch, (0.0, 1 / 130))
    assert (
        check("no_win_without_king_bottom", FakeFigures(facts=king_rows(5000, 0))).verdict
        == INCONCLUSIVE
    )


def test_no_win_without_king_bottom_no_such_deals():
    claim = check("no_win_without_king_bottom", FakeFigures(facts=king_rows(0, 0)))
    assert claim.verdict == INCONCLUSIVE and claim.figure is None and claim.needs is None


def test_no_win_without_king_bottom_from_the_replay():
    # 1000 replayed deals without a king at the bottom, one of them won: refuted.
    replay = replay_of([True] + [False] * 999 + [True] * 50, [0] * 1050, [0] * 1000 + [3] * 50)
    claim = check("no_win_without_king_bottom", FakeFigures(replay=replay))
    assert (
        claim.verdict == REFUTED and claim.figure == 1 / 1000 and claim.basis == replay.describe()
    )


def test_no_win_without_king_bottom_needs_facts_or_a_replay():
    claim = check("no_win_without_king_bottom", FakeFigures({watch("most"): (1000, 500)}))
    assert not_measured(claim) and "kings_at_bottom" in claim.needs


# --- thirteen_losses_ordinary ---------------------------------------------------------------


@pytest.mark.parametrize(
    "clean, blocks, verdict",
    [
        (300, 1000, CONFIRMED),  # Wilson [0.2547, 0.3496]: lower end at least 5%
        (10, 1000, REFUTED),  # Wilson [0.0037, 0.0268]: upper end below 5%
        (5, 100, INCONCLUSIVE),  # Wilson [0.0129, 0.1750] holds 5%
        (50, 1000, INCONCLUSIVE),  # exactly 5%: Wilson [0.0318, 0.0779]
    ],
)
def test_thirteen_losses_ordinary_verdicts(clean, blocks, verdict):
    low, high = wilson(clean, blocks)
    assert (low >= ORDINARY, high < ORDINARY) == (
        verdict == CONFIRMED,
        verdict == REFUTED,
    )
    claim = check(
        "thirteen_losses_ordinary",
        FakeFigures({STANDARD: (13 * blocks, blocks)}, blocks={STANDARD: (blocks, clean)}),
    )
    assert claim.verdict == verdict and claim.needs is None
    assert claim.figure == clean / blocks and claim.interval == (low, high)


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.05, 0.06), CONFIRMED),  # "at least 5%": a lower end at 5% confirms
        ((0.04, 0.05), INCONCLUSIVE),  # an upper end at 5% is not below it
    ],
)
def test_thirteen_losses_ordinary_interval_at_the_bound(monkeypatch, interval, verdict):
    fixed_interval(monkeypatch, interval)
    claim = check(
        "thirteen_losses_ordinary",
        FakeFigures({STANDARD: (13_000, 1000)}, blocks={STANDARD: (1000, 50)}),
    )
    assert claim.verdict == verdict


def test_thirteen_losses_ordinary_no_blocks():
    # Fewer than 13 deals: no block, nothing measured.
    claim = check("thirteen_losses_ordinary", FakeFigures({STANDARD: (12, 1)}))
    assert claim.verdict == INCONCLUSIVE and claim.figure is None and claim.needs is None


def test_thirteen_losses_ordinary_which_cell_and_mode():
    figures = FakeFigures(
        {PLAY_OUT: (13_000, 1000)}, mode="summary", blocks={PLAY_OUT: (1000, 300)}
    )
    claim = check("thirteen_losses_ordinary", figures)
    assert claim.verdict == CONFIRMED and claim.basis.startswith(f"cell {PLAY_OUT.label}")
    assert "counted per batch in the summary records" in claim.basis
    claim = check(
        "thirteen_losses_ordinary",
        FakeFigures({STANDARD: (13_000, 1000)}, blocks={STANDARD: (1000, 300)}),
    )
    assert "per-deal rows" in claim.basis


def test_thirteen_losses_ordinary_needs_a_standard_cell():
    claim = check(
        "thirteen_losses_ordinary", FakeFigures({MOST: (13_000, 1000)}, blocks={MOST: (1000, 300)})
    )
    assert not_measured(claim) and claim.needs == "a cell of standard, play_out"


# --- foresight_no_agency ----------------------------------------------------------------------

INFORMED = watch("informed", "up")


def blind_beside(cell: Cell, n: int, wins: int = 0) -> dict:
    """The other counts-only strategies of ``cell``'s variant, depth, finale and order, each
    ``wins`` of ``n`` deals: with fewer wins than ``cell``, it stays the best of them."""
    return {replace(cell, strategy=s): (n, wins) for s in COUNT_STRATEGIES if s != cell.strategy}


def foresight_figures(table, blind=MOST, informed=INFORMED, every_blind=True, **kwargs):
    """The informed cell and a blind one, paired by ``table`` (both, a_only, b_only, neither),
    and (``every_blind``) the other blind strategies beside it, winning nothing."""
    n = sum(table)
    return FakeFigures(
        {
            informed: (n, table[0] + table[1]),
            blind: (n, table[0] + table[2]),
            **(blind_beside(blind, n) if every_blind else {}),
        },
        pairs={(informed, blind): table},
        **kwargs,
    )


@pytest.mark.parametrize(
    "table, verdict",
    [
        # informed 700 vs most 300 of 1000: Newcombe [0.347, 0.448] lies above 0.
        ((300, 400, 0, 300), REFUTED),
        # [-0.00047, +0.00047] within +-0.005 (as for pick_makes_no_difference).
        ((10_000, 100, 100, 89_800), CONFIRMED),
        # [-0.0169, +0.0169] holds 0, wider than +-0.005.
        ((100, 10, 10, 880), INCONCLUSIVE),
        # informed clearly worse, [-0.448, -0.347]: not above 0, not within +-0.005.
        ((300, 0, 400, 300), INCONCLUSIVE),
    ],
)
def test_foresight_no_agency_verdicts(table, verdict):
    low, high = newcombe(*table)
    assert (low > 0) == (verdict == REFUTED)
    assert (-TOL <= low and high <= TOL) == (verdict == CONFIRMED)
    claim = check("foresight_no_agency", foresight_figures(table))
    assert claim.verdict == verdict and claim.needs is None and claim.interval == (low, high)
    assert claim.basis == f"cells {INFORMED.label} and {MOST.label}, paired deal by deal"


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((0.0, 0.004), CONFIRMED),  # a lower end at 0 is not above 0; within +-0.005
        ((-TOL, TOL), CONFIRMED),  # exactly +-0.005: within
        ((0.0, 0.006), INCONCLUSIVE),
    ],
)
def test_foresight_no_agency_interval_at_the_bounds(interval, verdict):
    figures = foresight_figures((100, 10, 10, 880), intervals={(INFORMED, MOST): interval})
    assert check("foresight_no_agency", figures).verdict == verdict


def test_foresight_no_agency_against_the_best_blind_strategy():
    # Blind rates: clockwise 0.2, most 0.3: the pair is informed vs most (refuted, as above);
    # against clockwise it would be within tolerance.
    figures = FakeFigures(
        {
            INFORMED: (1000, 700),
            CLOCKWISE: (1000, 200),
            MOST: (1000, 300),
            **blind_beside(MOST, 1000),
        },
        pairs={
            (INFORMED, MOST): (300, 400, 0, 300),
            (INFORMED, CLOCKWISE): (10_000, 100, 100, 89_800),
        },
    )
    claim = check("foresight_no_agency", figures)
    assert (
        claim.verdict == REFUTED
        and claim.basis == f"cells {INFORMED.label} and {MOST.label}, paired deal by deal"
    )


def test_foresight_no_agency_first_rescue_decides():
    # watch (confirmed numbers) comes before one_swap (refuted numbers); one_swap is detail.
    swap_informed, swap_most = one_swap("informed", "up"), one_swap("most")
    figures = FakeFigures(
        {
            swap_informed: (1000, 700),
            swap_most: (1000, 300),
            INFORMED: (100_000, 10_100),
            MOST: (100_000, 10_100),
            **blind_beside(MOST, 100_000),
        },
        pairs={
            (swap_informed, swap_most): (300, 400, 0, 300),
            (INFORMED, MOST): (10_000, 100, 100, 89_800),
        },
    )
    claim = check("foresight_no_agency", figures)
    assert claim.verdict == CONFIRMED and claim.basis.startswith(f"cells {INFORMED.label}")
    assert claim.detail[0].startswith(
        "one_swap: informed (face up) 70.00% vs most (face down) 30.00%"
    )


def test_foresight_no_agency_exchange_pairs_by_depth():
    # exchange at the top, informed vs most: refuted; most at the bottom is not its pair.
    informed = exchange("informed", "top", "up")
    most_top, most_bottom = exchange("most", "top"), exchange("most", "bottom")
    figures = FakeFigures(
        {
            informed: (1000, 700),
            most_top: (1000, 300),
            most_bottom: (1000, 600),
            **blind_beside(most_top, 1000),
        },
        pairs={(informed, most_top): (300, 400, 0, 300)},
    )
    claim = check("foresight_no_agency", figures)
    assert claim.verdict == REFUTED and claim.figure_text.startswith("exchange top: informed")


def test_foresight_no_agency_is_decided_only_as_the_blind_strategies_played_can_decide_it():
    # informed beats most (refuted above, with every blind strategy), but a blind strategy not
    # played might win as often as informed: informed minus the best of them could be lower.
    claim = check("foresight_no_agency", foresight_figures((300, 400, 0, 300), every_blind=False))
    assert needs_and_inconclusive(claim)
    assert claim.needs == (
        "cells watch {clockwise, random, fewest} finale=down: one not played could lower the "
        "figure and change the verdict"
    )
    # No difference (confirmed above) needs every one too: a better blind strategy lowers it.
    claim = check(
        "foresight_no_agency", foresight_figures((10_000, 100, 100, 89_800), every_blind=False)
    )
    assert needs_and_inconclusive(claim)


def test_foresight_no_agency_no_deals():
    claim = check("foresight_no_agency", foresight_figures((0, 0, 0, 0), every_blind=False))
    assert claim.verdict == INCONCLUSIVE and claim.interval == (-1.0, 1.0)


def test_foresight_no_agency_needs_a_pair():
    table = (300, 400, 0, 300)
    for figures in (
        FakeFigures(),
        FakeFigures({INFORMED: (1000, 700)}),  # no blind cell
        foresight_figures(table, blind=watch("most", order="packets")),  # another deal order
        foresight_figures(table, blind=watch("most", "up")),  # a blind cell must be face down
        FakeFigures({INFORMED: (1000, 700), MOST: (1000, 300)}),  # not paired
    ):
        claim = check("foresight_no_agency", figures)
        assert not_measured(claim) and "informed" in claim.needs and claim.figure is None


# --- deal_order_no_change -------------------------------------------------------------------


def order_figures(table, a=STANDARD, b=STANDARD_PACKETS, pairs=None, **kwargs):
    """Cells a and b, paired by ``table`` (both, a_only, b_only, neither), and ``pairs`` besides."""
    n = sum(table)
    return FakeFigures(
        {a: (n, table[0] + table[1]), b: (n, table[0] + table[2])},
        pairs={(a, b): table, **(pairs or {})},
        **kwargs,
    )


@pytest.mark.parametrize(
    "table, verdict",
    [
        ((10_000, 100, 100, 89_800), CONFIRMED),  # [-0.00047, +0.00047] within +-0.005
        ((350, 250, 50, 350), REFUTED),  # [0.146, 0.252] excludes 0
        ((100, 10, 10, 880), INCONCLUSIVE),  # [-0.0169, +0.0169] holds 0, wider than +-0.005
    ],
)
def test_deal_order_no_change_verdicts(table, verdict):
    low, high = newcombe(*table)
    assert (low > 0 or high < 0, -TOL <= low and high <= TOL) == (
        verdict == REFUTED,
        verdict == CONFIRMED,
    )
    claim = check("deal_order_no_change", order_figures(table))
    assert claim.verdict == verdict and claim.needs is None and claim.interval == (low, high)
    assert (
        claim.basis == f"cells {STANDARD.label} and {STANDARD_PACKETS.label}, paired by deal number"
    )
    assert claim.detail == []  # no play_out pair to show beside standard's


@pytest.mark.parametrize(
    "interval, verdict",
    [
        ((-TOL, TOL), CONFIRMED),
        ((0.0, 0.004), CONFIRMED),
        ((-0.006, 0.0), INCONCLUSIVE),
    ],
)
def test_deal_order_no_change_interval_at_the_bounds(interval, verdict):
    figures = order_figures((100, 10, 10, 880), intervals={(STANDARD, STANDARD_PACKETS): interval})
    assert check("deal_order_no_change", figures).verdict == verdict


def test_deal_order_no_change_play_out_stands_in():
    claim = check(
        "deal_order_no_change",
        order_figures((350, 250, 50, 350), PLAY_OUT, Cell("play_out", order="packets")),
    )
    assert claim.verdict == REFUTED and claim.basis.startswith(f"cells {PLAY_OUT.label}")


def test_deal_order_no_change_shows_play_out_beside_standard():
    # Standard decides (confirmed); play_out, which stands in for it, is shown beside it.
    play_out_packets = Cell("play_out", order="packets")
    figures = order_figures(
        (10_000, 100, 100, 89_800), pairs={(PLAY_OUT, play_out_packets): (350, 250, 50, 350)}
    )
    figures.cells[PLAY_OUT], figures.cells[play_out_packets] = (
        FakeCell(1000, 600),
        FakeCell(1000, 400),
    )
    claim = check("deal_order_no_change", figures)
    assert claim.verdict == CONFIRMED and claim.figure_text.startswith("standard: round-robin")
    assert claim.detail == ["play_out: round-robin 60.00% vs packets 40.00%: +20.00 points"]


def test_deal_order_no_change_no_deals():
    claim = check("deal_order_no_change", order_figures((0, 0, 0, 0)))
    assert claim.verdict == INCONCLUSIVE and claim.interval == (-1.0, 1.0)


def test_deal_order_no_change_needs_both_orders():
    for cells in (
        {},
        {STANDARD: (1000, 77)},
        {STANDARD_PACKETS: (1000, 77)},
        # face-up cells do not stand in here
        {STANDARD_UP: (1000, 77), Cell(finale="up", order="packets"): (1000, 77)},
        {MOST: (1000, 500), watch("most", order="packets"): (1000, 500)},
    ):
        claim = check("deal_order_no_change", FakeFigures(cells))
        assert not_measured(claim) and "packets" in claim.needs


# --- won_deal_52_flips ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wins, at_52, verdict",
    [
        (100, 99, REFUTED),  # one win turned another number of cards
        (100, 100, CONFIRMED),  # every one at 52, exactly MIN_WINS_52 = 100 wins
        (99, 99, INCONCLUSIVE),  # every one at 52, but fewer than 100 wins
        (0, 0, INCONCLUSIVE),  # no win at all
    ],
)
def test_won_deal_52_flips_verdicts(wins, at_52, verdict):
    figures = FakeFigures(
        {STANDARD: (10_000, wins)},
        turned={STANDARD: (wins, at_52)},
        rescued=["watch 5 wins at 40 cards"],
    )
    claim = check("won_deal_52_flips", figures)
    assert claim.verdict == verdict and claim.needs is None
    if wins:
        assert claim.figure == at_52 / wins and claim.interval == clopper_pearson(at_52, wins)
    else:
        assert claim.figure is None and claim.interval is None
    # Rescued wins are shown, not judged.
    assert claim.detail == ["rescued wins (not the claim's game): watch 5 wins at 40 cards"]


def test_won_deal_52_flips_counts_one_finale_and_every_order():
    # The two finales play the same deals: 60 wins counted once are fewer than 100.
    figures = FakeFigures(
        {STANDARD: (1000, 60), STANDARD_UP: (1000, 60)},
        turned={STANDARD: (60, 60), STANDARD_UP: (60, 60)},
    )
    assert check("won_deal_52_flips", figures).verdict == INCONCLUSIVE
    # The two deal orders play other deals: 60 + 60 = 120 wins, all at 52.
    figures = FakeFigures(
        {STANDARD: (1000, 60), STANDARD_PACKETS: (1000, 60)},
        turned={STANDARD: (60, 60), STANDARD_PACKETS: (60, 60)},
    )
    assert check("won_deal_52_flips", figures).verdict == CONFIRMED
    # With face-up cells only, they are counted.
    figures = FakeFigures({STANDARD_UP: (1000, 100)}, turned={STANDARD_UP: (100, 100)})
    assert check("won_deal_52_flips", figures).verdict == CONFIRMED


def test_won_deal_52_flips_needs_a_standard_cell():
    claim = check(
        "won_deal_52_flips", FakeFigures({PLAY_OUT: (1000, 77)}, turned={PLAY_OUT: (200, 200)})
    )
    assert not_measured(claim) and claim.needs == "a cell of standard"


# --- play_out_deaths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "later, stray, verdict",
    [
        (100, 0, REFUTED),  # no stray death among exactly MIN_LATER_DEATHS = 100 later deaths
        (99, 0, INCONCLUSIVE),  # no stray death, but fewer than 100 later deaths
        # A death away from its predicted pile, which the rules rule out: a first death there
        # would refute the claim, a later one confirm it, and stray_deaths counts both.
        (100, 1, INCONCLUSIVE),
        (0, 1, INCONCLUSIVE),
    ],
)
def test_play_out_deaths_verdicts(later, stray, verdict):
    deals = 1000
    claim = check(
        "play_out_deaths",
        FakeFigures({PLAY_OUT: (deals, 77)}, deaths={PLAY_OUT: (deals, later, stray)}),
    )
    assert claim.verdict == verdict and claim.needs is None
    deaths = deals + later
    assert claim.figure == (deaths - stray) / deaths
    assert claim.interval == clopper_pearson(deaths - stray, deaths)
    named = [line for line in claim.detail if "away from where the rules predict" in line]
    assert bool(named) == (stray > 0), claim.detail


def test_play_out_deaths_no_deals():
    claim = check("play_out_deaths", FakeFigures({PLAY_OUT: (0, 0)}, deaths={PLAY_OUT: (0, 0, 0)}))
    assert claim.verdict == INCONCLUSIVE and claim.figure is None and claim.interval is None


def test_play_out_deaths_counts_one_finale():
    # The two finales play the same deals: 60 later deaths counted once are fewer than 100.
    figures = FakeFigures(
        {PLAY_OUT: (1000, 77), PLAY_OUT_UP: (1000, 77)},
        deaths={PLAY_OUT: (1000, 60, 0), PLAY_OUT_UP: (1000, 60, 0)},
    )
    assert check("play_out_deaths", figures).verdict == INCONCLUSIVE


def test_play_out_deaths_needs_a_play_out_cell():
    claim = check(
        "play_out_deaths", FakeFigures({STANDARD: (1000, 77)}, deaths={STANDARD: (1000, 500, 0)})
    )
    assert not_measured(claim) and claim.needs == "a cell of play_out"


# --- assess and the interface -----------------------------------------------------------------


def test_assess_on_no_cells_says_what_each_claim_needs():
    made = claims.assess(FakeFigures())
    assert [claim.id for claim in made] == list(RULES)
    for claim in made:
        assert not_measured(claim), claim.id
        json.dumps(claim.record())


def test_assess_on_made_up_figures_gives_records():
    figures = FakeFigures(
        {
            STANDARD: (100_000, 7692),
            STANDARD_PACKETS: (100_000, 7692),
            one_swap("most"): (1000, 400),
            MOST: (1000, 600),
            CLOCKWISE: (1000, 500),
            RANDOM: (1000, 500),
            FEWEST: (1000, 400),
            INFORMED: (1000, 700),
            PLAY_OUT: (1000, 77),
        },
        pairs={
            (MOST, FEWEST): (350, 250, 50, 350),
            (INFORMED, MOST): (300, 400, 0, 300),
            (STANDARD, STANDARD_PACKETS): (7600, 92, 92, 92_216),
        },
        facts=facts_rows({2: (2000, 0), 0: (1000, 500)}),
        down={RANDOM: {1: (1000, 600)}},
        blocks={STANDARD: (7692, 2300)},
        turned={STANDARD: (15_384, 15_384)},
        deaths={PLAY_OUT: (1000, 100, 0)},
    )
    verdicts = {claim.id: claim.verdict for claim in claims.assess(figures)}
    # Each as in that claim's own tests above; kings_at_bottom is 1 in every facts row, so
    # no_win_without_king_bottom has no deal to measure.
    assert verdicts == {
        "one_in_13": CONFIRMED,
        "better_than_one_in_three": CONFIRMED,
        "pick_makes_no_difference": REFUTED,
        "near_misses_come_home": CONFIRMED,
        "unvisited_by_third_king": CONFIRMED,
        "no_win_without_king_bottom": INCONCLUSIVE,
        "thirteen_losses_ordinary": CONFIRMED,
        "foresight_no_agency": REFUTED,
        "deal_order_no_change": CONFIRMED,
        "won_deal_52_flips": CONFIRMED,
        "play_out_deaths": REFUTED,
    }
    low, high = newcombe(7600, 92, 92, 92_216)  # deal_order_no_change's pair: confirmed
    assert -TOL <= low <= 0 <= high <= TOL
    assert wilson(2300, 7692)[0] >= ORDINARY  # thirteen_losses_ordinary: confirmed
    for claim in claims.assess(figures):
        record = json.loads(json.dumps(claim.record()))
        assert record["verdict"] == verdicts[claim.id] and record["rule"] and record["sources"]


def test_the_fake_and_the_report_figures_provide_the_interface():
    assert isinstance(FakeFigures(), claims.ClaimFigures)
    # The report's own Figures, on empty summary tables (no sweep, no files).
    tables = {name: pl.from_arrow(schema.empty_table()) for name, schema in summary.SCHEMAS.items()}
    loaded = document.Loaded("nowhere", None, {}, "deals", [], [], [], tables)
    figures = document.Figures(loaded, None, "no replay (--replay 0)")
    assert isinstance(figures, claims.ClaimFigures)
    assert all(not_measured(claim) for claim in claims.assess(figures))


# --- Claims of one's own: the vocabulary beyond the rule pages' use of it ---------------------


def own(measure_lines: str, asserts: str, cells: str = '{ variant = "standard" }') -> Claim:
    """A claim as a user writes one (`claim_file.parse`)."""
    text = (
        f'[[claim]]\nid = "mine"\nsays = "s"\nsource = {{ title = "t" }}\n{measure_lines}\n'
        f"cells = {cells}\nasserts = {asserts}\n"
    )
    (claim,) = claim_file.parse(text, "mine.toml")
    return claim


@pytest.mark.parametrize(
    "asserts, verdict",
    [
        # Wilson [0.0742, 0.0797] of 7692 / 100,000 (as for one_in_13; checked below).
        ("{ between = [0.07, 0.08] }", CONFIRMED),  # inside 7% to 8%
        ("{ between = [0.075, 0.08] }", INCONCLUSIVE),  # reaches below 7.5%
        ("{ between = [0.08, 0.09] }", REFUTED),  # wholly below 8%
        ("{ at_most = 0.0797 }", INCONCLUSIVE),  # its upper end is above 0.0797
        ("{ at_most = 0.08 }", CONFIRMED),
        ("{ at_least = 0.08 }", REFUTED),
        ('{ equals = "1/13", tolerance = 0.001 }', INCONCLUSIVE),  # half-width 0.0028 > 0.001
        ("{ equals = 0.0769 }", CONFIRMED),
    ],
)
def test_own_win_rate_claims(asserts, verdict):
    low, high = wilson(7692, 100_000)
    assert 0.0797 < high < 0.08 and 0.0741 < low < 0.075 and (high - low) / 2 > 0.001
    claim = claims.check(
        own('measure = "win_rate"', asserts), FakeFigures({STANDARD: (100_000, 7692)})
    )
    assert claim.verdict == verdict and claim.interval == (low, high)
    assert claim.record()["source"] == '"t"' and claim.record()["sources"] == [
        {"title": "t", "url": None}
    ]


@pytest.mark.parametrize("wins, verdict", [(0, CONFIRMED), (1, REFUTED)])
def test_own_never_claim_counts_on_the_exact_interval(wins, verdict):
    claim = own('measure = "win_rate"', "{ never = true, chances = 1000 }")
    checked = claims.check(claim, FakeFigures({STANDARD: (1000, wins)}))
    assert checked.verdict == verdict and checked.interval == clopper_pearson(wins, 1000)
    # Fewer chances than asked: none seen decides nothing.
    checked = claims.check(claim, FakeFigures({STANDARD: (999, 0)}))
    assert checked.verdict == INCONCLUSIVE


def test_own_difference_of_the_worst_and_its_withholding():
    # most minus the worst of clockwise and fewest: fewest (400) is worse than clockwise (500).
    claim = own(
        'measure = "difference"\na = { strategy = "most" }\nb = { strategy = ["clockwise", "fewest"] }\npick = "worst"',
        "{ at_most = 0.1 }",
        '{ variant = "watch" }',
    )
    table = (350, 250, 50, 350)  # most 600 vs fewest 400: Newcombe [0.146, 0.252]
    figures = FakeFigures(
        {MOST: (1000, 600), CLOCKWISE: (1000, 500), FEWEST: (1000, 400)},
        pairs={(MOST, FEWEST): table},
    )
    checked = claims.check(claim, figures)
    assert checked.verdict == REFUTED and checked.interval == newcombe(*table)
    assert checked.basis == f"cells {MOST.label} and {FEWEST.label}, paired deal by deal"
    # Without clockwise the worst could only be worse: "refuted" (the lower end above 0.1)
    # stands; with fewest missing, most minus clockwise would be read instead.
    figures = FakeFigures({MOST: (1000, 600), FEWEST: (1000, 400)}, pairs={(MOST, FEWEST): table})
    assert claims.check(claim, figures).verdict == REFUTED


def test_own_claim_on_cells_the_sweep_lacks_is_not_measured():
    claim = own(
        'measure = "win_rate"',
        "{ above = 0.5 }",
        '{ variant = "exchange", strategy = "oracle", depth = "top" }',
    )
    checked = claims.check(claim, FakeFigures({STANDARD: (1000, 77)}))
    assert checked.verdict == NOT_MEASURED and checked.figure is None
    assert checked.needs == "a cell of exchange oracle depth=top"


def test_own_down_at_stop_claim_on_standard_play():
    # Standard play wins only with nothing left face down: among 0..2 down, the exact value
    # is P(0 down) / P(0..2 down) by the law of down_at_stop.
    claim = own(
        'measure = "win_rate_where"\nfact = "down_at_stop"\nrange = [0, 2]', "{ above = 0.5 }"
    )
    figures = FakeFigures(
        {STANDARD: (9000, 700)}, down={STANDARD: {0: (700, 700), 1: (300, 0), 5: (8000, 0)}}
    )
    checked = claims.check(claim, figures)
    law = odds.down_at_stop_law()
    assert checked.exact == odds.fraction_text(law[0] / (law[0] + law[1] + law[2]))
    assert checked.figure == 0.7 and checked.verdict == CONFIRMED  # Wilson [0.649, 0.747]
    assert wilson(700, 1000)[0] > 0.5
