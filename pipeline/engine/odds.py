"""Exact win chances, as rationals computed from first principles (docs/rules.md, exact odds).

Every value here is a `fractions.Fraction` computed by counting; nothing is hard-coded and
no float is involved. The report compares each Monte Carlo figure with these.

Derivation
----------

Standard play ("Score Four"). The cards taken into hand, in the order they are taken, are
distributed like a uniformly random permutation of the deck read until its fourth king: the
chain starts at the centre and each card turned sends it to the pile of that card's rank,
whose next face-down card is, by symmetry of the shuffle, a uniformly random one of the
cards not yet seen. The chain can only die at the centre, on the fourth king
(docs/rules.md). So with a deck of ``suits`` kings among ``n`` cards, the fourth (last) king is the t-th
card read with chance

    P(cards_turned = t) = C(t - 1, suits - 1) / C(n, suits),    t = suits .. n,

which for the 52-card deck is C(t-1, 3) / C(52, 4), t = 4..52. The deal is won when t = 52,
so P(win) = C(51, 3) / C(52, 4) = 4/52 = 1/13.

The first death. When the chain dies with t cards turned, the U = 52 - t cards still face
down are the cards of the permutation after its fourth king: a uniformly random U-subset of
the 48 non-kings (12 hour ranks x 4 suits). Each hour pile q has had exactly as many cards
taken from it as rank-q cards were delivered to it (a card is taken from an hour pile only
after one arrives there, and the last delivery went to the centre), so pile q's face-down
count d_q equals the number of rank-q cards among the U unseen ones. The counts therefore
follow the multivariate hypergeometric law

    P(d_1, ..., d_12 | U) = prod_q C(4, d_q) / C(48, U),    sum_q d_q = U.

The rescue. A strategy that sees only the counts (`clockwise`, `random`, `most`, `fewest`,
with the bottom cards face down or, equally, face up but unread) picks an hour pile p with
d_p > 0, and the hint (docs/rules.md, the hint, seed 004) says the rescue then wins with chance
d_p / U, for `watch` and `one_swap` alike, and for `exchange` at depth `bottom`. Hence

    P(win | U) = E[d_p | U] / U,

with d_p, given the counts d:
  - clockwise: the first nonzero count from hour 1;
  - random:    a uniform choice among the k nonzero counts, so E[d_p | d] = U / k;
  - most:      the largest count (ties do not change the value);
  - fewest:    the smallest positive count.
E[d_p | U] is an exact dynamic programme over the hour ranks: rank by rank, the state is the
running total of face-down cards and the one summary of the counts the strategy reads (first
nonzero count, number of nonzero counts, largest count, smallest positive count), with
integer weights prod C(suits, d_q). Finally

    P(win) = sum_t P(cards_turned = t) * P(win | U = 52 - t),

where P(win | U = 0) = 1: the standard game was already won, no rescue needed.

`clockwise` and `random` come out exactly equal: the counts are exchangeable across ranks,
so the first nonzero count is distributed like a uniformly chosen nonzero one. The code
computes each from its own definition; the tests check the equality rather than assume it.

The deal order (round-robin or packets) only renames which layout a deal number gives, so it
cannot change these chances; the face-up finale only changes what `informed` can see.

Sources: docs/rules.md; the "Score Four" reading of Clock Patience (the turned cards
are a random permutation read to its fourth king); the hint d_p / U of seed 004 (the project
tests that claim by exhaustive play on small decks, see tests/engine/test_odds.py).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import cache
from math import comb

from pipeline.engine import rules
from pipeline.engine.rules import COUNT_STRATEGIES, N_HOURS, PILE_SIZE, Cell

# COUNT_STRATEGIES' odds depend only on the face-down counts, so have exact values here.

# The default deck: 12 hour ranks plus the kings, 4 suits. Functions take the deck's shape as
# parameters so that the tests can check them against brute force on small decks.
HOUR_RANKS = N_HOURS
SUITS = PILE_SIZE


def deck_size(ranks: int = HOUR_RANKS, suits: int = SUITS) -> int:
    """Cards in a deck of ``ranks`` hour ranks plus the kings, ``suits`` of each."""
    return (ranks + 1) * suits


# --- Standard play ------------------------------------------------------------------------


def cards_turned_law(ranks: int = HOUR_RANKS, suits: int = SUITS) -> dict[int, Fraction]:
    """P(cards_turned = t) for standard play, t = suits .. deck size ("Score Four")."""
    cards = deck_size(ranks, suits)
    # The t-th card is the last king, and the other suits - 1 kings lie among the t - 1 before.
    all_king_places = comb(cards, suits)
    law = {
        turned: Fraction(comb(turned - 1, suits - 1), all_king_places)
        for turned in range(suits, cards + 1)
    }
    if sum(law.values()) != 1:
        raise AssertionError("the law of cards_turned does not sum to 1")
    return law


def standard_win(ranks: int = HOUR_RANKS, suits: int = SUITS) -> Fraction:
    """P(win) for standard play: P(cards_turned = every card)."""
    return cards_turned_law(ranks, suits)[deck_size(ranks, suits)]


def down_at_stop_law(ranks: int = HOUR_RANKS, suits: int = SUITS) -> dict[int, Fraction]:
    """P(down_at_stop = U): the face-down cards at the first death, U = cards - cards_turned."""
    cards = deck_size(ranks, suits)
    return {
        cards - turned: chance
        for turned, chance in sorted(cards_turned_law(ranks, suits).items(), reverse=True)
    }


# --- The rescue ---------------------------------------------------------------------------
#
# Each counts-only strategy reads one summary of the counts d_1..d_ranks, built rank by rank
# (clockwise from hour 1), and its chosen pile's expected count is a function of that summary
# and U. A summary of 0 means "no nonzero count yet" where that needs saying.


def _first_nonzero(summary: int, count: int) -> int:
    return summary if summary else count


def _nonzero_piles(summary: int, count: int) -> int:
    return summary + (count > 0)


def _largest(summary: int, count: int) -> int:
    return max(summary, count)


def _smallest_positive(summary: int, count: int) -> int:
    if count == 0:
        return summary
    return count if summary == 0 else min(summary, count)


# strategy -> (how a rank's count updates the summary, E[d_p | summary, U])
_STRATEGY_SUMMARIES: dict[str, tuple[Callable[[int, int], int], Callable[[int, int], Fraction]]] = {
    "clockwise": (_first_nonzero, lambda first, down: Fraction(first)),
    # The random pick is uniform over the k nonzero piles, whose counts add up to U.
    "random": (_nonzero_piles, lambda nonzero, down: Fraction(down, nonzero)),
    "most": (_largest, lambda largest, down: Fraction(largest)),
    "fewest": (_smallest_positive, lambda smallest, down: Fraction(smallest)),
}


def _check_strategy(strategy: str) -> None:
    if strategy not in _STRATEGY_SUMMARIES:
        raise ValueError(
            f"strategy: {strategy!r} has no exact value; those that do: "
            f"{', '.join(COUNT_STRATEGIES)}"
        )


@cache
def _chosen_count_totals(strategy: str, ranks: int, suits: int) -> tuple[Fraction, ...]:
    """For each U: the sum over count vectors of weight * E[d_p | counts].

    A count vector's weight, prod C(suits, d_q), is the number of face-down subsets it stands
    for. Divided by C(ranks * suits, U), the total weight of all U-subsets, it is E[d_p | U].
    """
    update, expected_chosen = _STRATEGY_SUMMARIES[strategy]
    # (face-down total so far, summary) -> number of ways to choose the cards so far
    ways: dict[tuple[int, int], int] = {(0, 0): 1}
    for _rank in range(ranks):
        next_ways: dict[tuple[int, int], int] = {}
        for (down, summary), count_ways in ways.items():
            for count in range(suits + 1):
                key = (down + count, update(summary, count))
                next_ways[key] = next_ways.get(key, 0) + count_ways * comb(suits, count)
        ways = next_ways
    totals = [Fraction(0)] * (ranks * suits + 1)
    for (down, summary), count_ways in ways.items():
        if down > 0:
            totals[down] += count_ways * expected_chosen(summary, down)
    return tuple(totals)


def rescue_win_given_down(
    strategy: str, down: int, ranks: int = HOUR_RANKS, suits: int = SUITS
) -> Fraction:
    """P(win | down_at_stop = U) for watch/one_swap under a counts-only strategy: E[d_p | U] / U.

    U = 0 means the standard game was won at the first death, so no rescue: chance 1.
    """
    _check_strategy(strategy)
    non_kings = ranks * suits
    if not 0 <= down <= non_kings:
        raise ValueError(f"down_at_stop: {down} is not in 0..{non_kings}")
    if down == 0:
        return Fraction(1)
    expected_chosen = _chosen_count_totals(strategy, ranks, suits)[down] / comb(non_kings, down)
    return expected_chosen / down


def rescue_win(strategy: str, ranks: int = HOUR_RANKS, suits: int = SUITS) -> Fraction:
    """P(win) for watch/one_swap under a counts-only strategy, averaged over the first death."""
    return sum(
        (
            chance * rescue_win_given_down(strategy, down, ranks, suits)
            for down, chance in down_at_stop_law(ranks, suits).items()
        ),
        Fraction(0),
    )


# --- Which cells have an exact value ------------------------------------------------------


def exact_win(
    variant: str,
    strategy: str | None = None,
    finale: str = "down",
    order: str = "round-robin",
    depth: str | None = None,
) -> Fraction | None:
    """The exact P(win) of a cell, or None where the project has no exact value.

    Raises `rules.RuleError` for a cell the rules do not allow. For `play_out`, "win" means
    restarts = 0, which is the standard win.
    """
    return exact_win_of(Cell(variant, strategy, finale, order, depth))


def exact_win_of(cell: Cell) -> Fraction | None:
    """The exact P(win) of a cell, or None where the project has no exact value."""
    # Neither the deal order (a relabelling of deal numbers) nor the finale (only `informed`
    # reads the bottom cards) changes the odds of these cells, so only variant, strategy and
    # depth matter.
    if rules.wins_as_standard(cell.variant):
        return standard_win()
    if cell.strategy in COUNT_STRATEGIES and rules.rescue_wins_with_hint(cell):
        return rescue_win(cell.strategy)
    return None


def fraction_text(value: Fraction) -> str:
    """A fraction as the reduced string "a/b" (denominator always written)."""
    return f"{value.numerator}/{value.denominator}"


def exact_values() -> list[dict]:
    """The exact values of docs/rules.md, exact odds, as the records `clocksweep odds --json` prints."""

    def record(variant: str, strategy: str | None, quantity: str, value: Fraction) -> dict:
        return {
            "variant": variant,
            "strategy": strategy,
            "quantity": quantity,
            "exact": fraction_text(value),
        }

    records = [record("standard", None, "P(win)", standard_win())]
    for turned, chance in cards_turned_law().items():
        records.append(record("standard", None, f"P(cards_turned={turned})", chance))
    # Play it out scores restarts; no restart at all is exactly a standard win.
    records.append(record("play_out", None, "P(win)", standard_win()))
    for variant in ("watch", "one_swap"):  # the rescues rules.rescue_wins_with_hint names
        for strategy in COUNT_STRATEGIES:
            records.append(record(variant, strategy, "P(win)", rescue_win(strategy)))
    # Exchanging the king for a pile's bottom card wins with the same chance d_p / U.
    for strategy in COUNT_STRATEGIES:
        records.append(record("exchange", strategy, "P(win) depth=bottom", rescue_win(strategy)))
    return records
