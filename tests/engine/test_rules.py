"""Tests of the pure rules (pipeline/engine/rules.py) on hand-built cases, each worked out from SPEC.md.

- Cells: what the rules allow (SPEC sections 4-5) and the messages that name what is wrong.
- `all_cells`: every meaningful cell once, nothing else, checked against brute force.
- Layout: which deck position lands where, for both deal orders (SPEC section 2).
- The bottom-card predicate (`bottoms_reach`, `rescue_wins`) on graphs drawn by hand.
- Strategies: their choices and the clockwise tie-break (SPEC section 5).
- The hint: d_p / U, 0 for an exchange at the top of a pile with more than one card, and a
  certainty (0 or 1) under face-up finales.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from pipeline.engine import rules
from pipeline.engine.rules import CENTRE, Cell, RuleError

# --- Cells --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, names",
    [
        (dict(variant="patience"), ("variant", "'patience'", "standard")),
        (dict(variant="watch", strategy="greedy"), ("strategy", "'greedy'", "clockwise")),
        (dict(finale="sideways"), ("finale", "'sideways'", "down, up")),
        (dict(order="spiral"), ("order", "'spiral'", "round-robin")),
        (
            dict(variant="exchange", strategy="most", depth="middle"),
            ("depth", "'middle'", "bottom"),
        ),
    ],
)
def test_unknown_names_are_rejected_naming_the_parameter_and_what_is_allowed(kwargs, names):
    with pytest.raises(RuleError) as caught:
        Cell(**kwargs)
    for name in names:
        assert name in str(caught.value)


def test_rule_error_is_a_value_error():
    assert issubclass(RuleError, ValueError)


@pytest.mark.parametrize("variant", rules.RESCUE_VARIANTS)
def test_informed_needs_face_up_finales(variant):
    depth = "bottom" if variant == "exchange" else None
    with pytest.raises(RuleError, match="informed"):
        Cell(variant, "informed", "down", depth=depth)
    assert Cell(variant, "informed", "up", depth=depth).strategy == "informed"


@pytest.mark.parametrize("variant", ["standard", "play_out"])
@pytest.mark.parametrize("strategy", rules.STRATEGIES)
def test_variants_without_rescue_take_no_strategy(variant, strategy):
    with pytest.raises(RuleError, match="strategy"):
        Cell(variant, strategy, "up")


@pytest.mark.parametrize("variant", rules.RESCUE_VARIANTS)
def test_rescue_variants_need_a_strategy(variant):
    with pytest.raises(RuleError, match="strategy"):
        Cell(variant)


@pytest.mark.parametrize("variant", ["standard", "play_out", "watch", "one_swap"])
@pytest.mark.parametrize("depth", rules.DEPTHS)
def test_depth_only_for_exchange(variant, depth):
    strategy = "most" if variant in rules.RESCUE_VARIANTS else None
    with pytest.raises(RuleError, match="depth"):
        Cell(variant, strategy, depth=depth)


def test_exchange_depth_defaults_to_bottom():
    cell = Cell("exchange", "clockwise")
    assert cell.depth == "bottom"
    assert cell == Cell("exchange", "clockwise", depth="bottom")
    assert Cell("exchange", "clockwise", depth="top").depth == "top"


def test_defaults_are_standard_play_finale_down_round_robin():
    cell = Cell()
    assert (cell.variant, cell.strategy, cell.finale, cell.order, cell.depth) == (
        "standard",
        None,
        "down",
        "round-robin",
        None,
    )
    assert not cell.has_rescue
    assert Cell("watch", "most").has_rescue


def test_codes_are_indices_into_the_name_tuples():
    cell = Cell("exchange", "fewest", "up", "packets", "top")
    assert cell.codes() == (3, 3, 1, 1, 1)
    assert Cell().codes() == (0, -1, 0, 0, -1)


# --- all_cells ----------------------------------------------------------------------------


def every_allowed_cell() -> set[Cell]:
    """Brute force: every combination of names (or none) that the rules accept."""
    allowed = set()
    for combination in itertools.product(
        rules.VARIANTS,
        (None, *rules.STRATEGIES),
        rules.FINALES,
        rules.ORDERS,
        (None, *rules.DEPTHS),
    ):
        try:
            allowed.add(Cell(*combination))
        except RuleError:
            pass
    return allowed


def test_all_cells_is_every_allowed_cell_once():
    cells = rules.all_cells()
    assert len(cells) == len(set(cells))
    assert set(cells) == every_allowed_cell()


def test_all_cells_counts():
    # Per order and finale: standard, play_out; watch and one_swap with each strategy;
    # exchange with each strategy at two depths. `informed` only with finale up.
    per_order = (2 + 5 + 5 + 10) + (2 + 6 + 6 + 12)
    assert len(rules.all_cells()) == 2 * per_order == 96


def test_all_cells_expands_only_meaningful_cells():
    for cell in rules.all_cells():
        assert (cell.strategy is None) == (cell.variant not in rules.RESCUE_VARIANTS)
        assert (cell.depth is None) == (cell.variant != "exchange")
        if cell.strategy == "informed":
            assert cell.finale == "up"


def test_all_cells_restricted():
    cells = rules.all_cells(finales=("down",), orders=("packets",), depths=("top",))
    assert {c.finale for c in cells} == {"down"}
    assert {c.order for c in cells} == {"packets"}
    assert {c.depth for c in cells} == {None, "top"}
    assert len(cells) == 2 + 5 + 5 + 5


# --- Cards and layout ---------------------------------------------------------------------


def test_cards_text_and_home():
    assert [rules.card_text(c) for c in (0, 1, 2, 3, 51)] == ["AC", "AD", "AH", "AS", "KS"]
    assert rules.card_text(4 * 9 + 2) == "TH"
    for card in range(52):
        assert rules.parse_card(rules.card_text(card)) == card
        assert rules.home_of(card) == rules.rank_of(card) == card // 4
    assert rules.home_of(rules.parse_card("KD")) == CENTRE
    assert rules.home_of(rules.parse_card("QS")) == 11  # hour 12
    for bad in ("1C", "KX", "K", "KCS", "kc"):
        with pytest.raises(ValueError):
            rules.parse_card(bad)


def test_round_robin_layout():
    # The deck given as its own positions: pile q gets q, q+13, q+26, q+39; the last dealt
    # (q+39) is its top, the first (q) its bottom.
    piles = rules.lay_out(list(range(52)), "round-robin")
    assert len(piles) == 13
    for q in range(13):
        assert piles[q] == [q + 39, q + 26, q + 13, q]


def test_packets_layout():
    piles = rules.lay_out(list(range(52)), "packets")
    for q in range(13):
        assert piles[q] == [4 * q + 3, 4 * q + 2, 4 * q + 1, 4 * q]


@pytest.mark.parametrize("order", rules.ORDERS)
def test_layout_uses_every_position_once(order):
    piles = rules.lay_out(list(range(52)), order)
    assert sorted(c for pile in piles for c in pile) == list(range(52))


def test_unknown_order_in_layout():
    with pytest.raises(ValueError, match="order"):
        rules.deal_position("spiral", 0, 0)


# --- The bottom-card predicate ------------------------------------------------------------

ALL_HOLD = [True] * 12 + [False]  # at a death the centre is empty


def pointers(**edges) -> list[int]:
    """bottom_home with the given edges (p0=3 means pile 0's bottom card is a 4), self elsewhere."""
    homes = list(range(13))
    for name, target in edges.items():
        homes[int(name[1:])] = target
    return homes


def test_bottoms_reach_direct_star():
    homes = [CENTRE] * 13
    assert rules.bottoms_reach(homes, [True] * 13, CENTRE)


def test_bottoms_reach_long_chain():
    # 0 -> 1 -> ... -> 11 -> centre: twelve steps, the longest path there is.
    homes = [q + 1 for q in range(12)] + [CENTRE]
    assert rules.bottoms_reach(homes, ALL_HOLD, CENTRE)
    # Broken at the end: 11 points back at 0, a cycle that never meets the centre.
    homes[11] = 0
    assert not rules.bottoms_reach(homes, ALL_HOLD, CENTRE)


def test_bottoms_reach_cycle_without_the_end_loses():
    holds = [q in (0, 1, 2) for q in range(13)]
    homes = pointers(p0=1, p1=0, p2=CENTRE)
    assert not rules.bottoms_reach(homes, holds, CENTRE)
    # The same cycle is fine if the chain must die on it: any pile of the cycle as the end.
    assert rules.bottoms_reach(pointers(p0=1, p1=0, p2=0), holds, 0)
    assert rules.bottoms_reach(pointers(p0=1, p1=0, p2=0), holds, 1)
    # ... but not at a pile off the cycle.
    assert not rules.bottoms_reach(pointers(p0=1, p1=0, p2=0), holds, 2)


def test_bottoms_reach_ignores_piles_without_cards():
    holds = [q in (0, 1) for q in range(13)]
    homes = pointers(p0=1, p1=CENTRE, p5=6, p6=5)  # 5 <-> 6 cycle, but they hold nothing
    assert rules.bottoms_reach(homes, holds, CENTRE)
    holds[5] = True
    assert not rules.bottoms_reach(homes, holds, CENTRE)


def test_rescue_wins_on_a_cycle():
    # Piles 0, 1, 2 hold cards, bottoms 0 -> 1 -> 2 -> 0; pile 3 hangs off the cycle (3 -> 0).
    down = [2, 1, 3, 1] + [0] * 9
    homes = pointers(p0=1, p1=2, p2=0, p3=0)
    # watch: the chain dies at the rescue pile, so it wins exactly on the cycle.
    assert [rules.rescue_wins("watch", None, p, homes, down) for p in range(4)] == [
        True,
        True,
        True,
        False,
    ]
    # one_swap / exchange at the bottom: the king below the pile leads on to the centre.
    for variant, depth in (("one_swap", None), ("exchange", "bottom")):
        assert [rules.rescue_wins(variant, depth, p, homes, down) for p in range(4)] == [
            True,
            True,
            True,
            False,
        ]
    assert rules.winning_piles("watch", None, homes, down) == [0, 1, 2]


def test_exchange_at_the_top_wins_only_from_a_single_card_pile():
    # Same graph; pile 1 holds one card, piles 0 and 2 more.
    down = [2, 1, 3, 1] + [0] * 9
    homes = pointers(p0=1, p1=2, p2=0, p3=0)
    assert [rules.rescue_wins("exchange", "top", p, homes, down) for p in range(4)] == [
        False,
        True,
        False,
        False,
    ]


def test_rescue_wins_needs_a_rescue_variant():
    with pytest.raises(RuleError):
        rules.rescue_wins("standard", None, 0, list(range(13)), [1] + [0] * 12)


def test_two_components_lose_everywhere():
    down = [1, 1, 1, 1] + [0] * 9
    homes = pointers(p0=1, p1=0, p2=3, p3=2)
    for variant, depth in (
        ("watch", None),
        ("one_swap", None),
        ("exchange", "bottom"),
        ("exchange", "top"),
    ):
        assert rules.winning_piles(variant, depth, homes, down) == []


# --- Strategies ---------------------------------------------------------------------------

# Hours 2..4 and 6..7 hold cards; 3 and 4 tie for most, 6 and 7 tie for fewest.
DOWN = [0, 2, 3, 3, 0, 1, 1, 0, 0, 0, 0, 0, 0]
NO_WIN_HOMES = pointers(p1=2, p2=1, p3=5, p5=6, p6=5)  # two cycles: no pile wins


def choose(strategy, down=DOWN, homes=NO_WIN_HOMES, random_index=0, variant="watch", depth=None):
    return rules.choose_pile(strategy, variant, depth, down, homes, random_index)


def test_eligible_piles_are_hours_with_cards_clockwise():
    assert rules.eligible_piles(DOWN) == [1, 2, 3, 5, 6]
    # The centre is never eligible, even holding cards.
    assert rules.eligible_piles([0] * 12 + [4]) == []


def test_clockwise_takes_the_first_hour_with_cards():
    assert choose("clockwise") == 1


def test_most_and_fewest_break_ties_clockwise():
    assert choose("most") == 2
    assert choose("fewest") == 5
    # Reversed ties: the earlier hour still wins.
    down = [0, 1, 1, 0, 3, 3] + [0] * 7
    assert choose("most", down=down) == 4
    assert choose("fewest", down=down) == 1


def test_random_indexes_the_eligible_piles_clockwise():
    assert [choose("random", random_index=i) for i in range(5)] == [1, 2, 3, 5, 6]


@pytest.mark.parametrize("strategy", ["informed", "oracle"])
def test_informed_and_oracle_take_the_first_winner_else_most(strategy):
    assert choose(strategy) == choose("most") == 2
    # One cycle 1 -> 2 -> 3 -> 5 -> 6 -> 1: every holding pile wins; the first is hour 2.
    homes = pointers(p1=2, p2=3, p3=5, p5=6, p6=1)
    assert choose(strategy, homes=homes) == 1
    # Cycle 5 <-> 6 with the others hanging on it: only 5 and 6 win; first is 5.
    homes = pointers(p1=2, p2=3, p3=5, p5=6, p6=5)
    assert choose(strategy, homes=homes) == 5
    # At the top of a pile, only a one-card winner wins: pile 5 holds one card.
    assert choose(strategy, homes=homes, variant="exchange", depth="top") == 5
    down = [0, 2, 3, 3, 0, 2, 2, 0, 0, 0, 0, 0, 0]
    assert choose(strategy, down=down, homes=homes, variant="exchange", depth="top") == 2


def test_unknown_strategy_is_rejected():
    with pytest.raises(RuleError):
        choose("greedy")


# --- The hint -----------------------------------------------------------------------------


def test_hint_is_d_over_u_with_face_down_finales():
    homes = NO_WIN_HOMES
    for variant, depth in (("watch", None), ("one_swap", None), ("exchange", "bottom")):
        assert rules.hint(variant, depth, "down", 2, DOWN, homes) == Fraction(3, 10)
        assert rules.hint(variant, depth, "down", 5, DOWN, homes) == Fraction(1, 10)


def test_hint_for_exchange_at_the_top():
    # More than one card: the king comes straight back on the pile's next turn, chance 0.
    assert rules.hint("exchange", "top", "down", 2, DOWN, NO_WIN_HOMES) == 0
    # A single card: the king is also the bottom card, as at depth bottom.
    assert rules.hint("exchange", "top", "down", 5, DOWN, NO_WIN_HOMES) == Fraction(1, 10)


def test_hint_is_certain_with_face_up_finales():
    homes = pointers(p1=2, p2=3, p3=5, p5=6, p6=5)  # only 5 and 6 win (watch)
    got = [rules.hint("watch", None, "up", p, DOWN, homes) for p in (1, 2, 3, 5, 6)]
    assert got == [0, 0, 0, 1, 1]
    assert all(isinstance(value, Fraction) for value in got)
    assert rules.hint("exchange", "top", "up", 6, DOWN, homes) == 1
    down = [0, 2, 3, 3, 0, 1, 2] + [0] * 6
    assert rules.hint("exchange", "top", "up", 6, down, homes) == 0
