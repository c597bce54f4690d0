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

The exchange at the top. It wins only on a pile holding one face-down card, and then as the
exchange at the bottom does (docs/rules.md), so for a counts-only strategy

    P(win | d) = [d_p = 1] * 1 / U,

and the dynamic programme above carries, instead of E[d_p], the chance that the chosen pile
holds one card (for `random`, the share of the nonzero counts that are 1).

Rescues that read the bottom cards (`oracle` under either finale, `informed` with face-up
finales, which plays as the oracle there). Let S be the k hour piles still holding cards at
the first death and f(q) the home of pile q's bottom card: f maps S into S, since a bottom
card of rank r is unseen and so pile r still holds a card. A rescue at p wins exactly when
every pile of S reaches p along f (docs/rules.md, why the bottom cards decide), which for a
map means: its graph is connected and p lies on its one cycle. The oracle takes such a p
whenever there is one, so it wins exactly when f is connected (at the top: connected, with a
pile of one card on the cycle).

Given the counts d, the U unseen cards lie in a uniformly random arrangement, so the k
bottom cards are an ordered sample without replacement from them: a map f with in-degrees
m_r has chance prod_r (d_r)_{m_r} / (U)_k, (x)_m the falling factorial. Summing over the
connected maps: choose the cycle's set C (|C| = L, (L - 1)! cyclic orders) and a forest on
S rooted in C. The forest form of Cayley's formula, sum over forests rooted in C of
prod_i x_i^{children(i)} = (sum_{i in C} x_i) * X^(k - L - 1) with X = sum_{i in S} x_i, and
the Vandermonde identity, which turns x^b X^n into prod_i (d_i)_{b_i} * (U - |b|)_n when each
x_i^m is read as (d_i)_m, give

    P(connected | d) = [ (k - 1)! prod_S d_i
                         + sum_{C, 0 < L < k} (L - 1)! prod_C d_i * sum_{c in C} (d_c - 1)
                                                               * (U - L - 1)_{k - L - 1} ] / (U)_k,

the sum over C taken rank by rank by a small dynamic programme. It depends on d only as a
multiset, so the average over the count vectors of U runs over their multiplicities.

The deal order (round-robin or packets) only renames which layout a deal number gives, so it
cannot change these chances; the face-up finale only changes what `informed` can see.

Sources: docs/rules.md; the "Score Four" reading of Clock Patience (the turned cards
are a random permutation read to its fourth king); the hint d_p / U of seed 004 (the project
tests that claim by exhaustive play on small decks, see tests/engine/test_odds.py).
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from math import comb, factorial, perm

from pipeline.engine import rules
from pipeline.engine.rules import BOTTOM_STRATEGIES, N_HOURS, PILE_SIZE, Cell

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


# --- play_out's restarts --------------------------------------------------------------------
#
# The chains of a deal played out read one uniformly random order of its cards, cut in turn:
# the first at its last king (Score Four, above); a restart takes the top card of the first
# hour clockwise with cards, q, whose pile then plays the centre's part (one visit more than
# its cards), so that chain reads the cards left, in a uniformly random order again, until
# the last of rank q. Order the ranks by where each one's last card lies in that order (a
# uniformly random order of the ranks, by symmetry), the king read as the lowest rank and
# hour h as h: the first chain ends at the king; each restart takes the lowest rank of those
# whose last card lies further on, and its chain ends there. So the chains end exactly at the
# right-to-left minima of a uniform random order of the ranks + 1 ranks, and restarts is
# their number less one. A position i from the right end is such a minimum with chance 1/i,
# independently of the others (Feller's coupling), so restarts + 1 has the law of the
# cycles of a uniform random permutation: c(ranks + 1, k + 1) / (ranks + 1)! for k restarts,
# c the unsigned Stirling numbers of the first kind, whatever the suits, with mean
# H(ranks + 1) - 1 (1/2 + ... + 1/13 on the full deck, about 2.18).


def restarts_law(ranks: int = HOUR_RANKS, suits: int = SUITS) -> dict[int, Fraction]:
    """P(restarts = k) for `play_out`, k = 0 .. ranks (the same for any ``suits``)."""
    ranks_in_all = ranks + 1
    cycles = [1]  # coefficients of x (x + 1) ... (x + i - 1), lowest power first
    for i in range(ranks_in_all):
        cycles = [
            (cycles[c - 1] if c else 0) + i * (cycles[c] if c < len(cycles) else 0)
            for c in range(len(cycles) + 1)
        ]
    permutations = factorial(ranks_in_all)
    law = {c - 1: Fraction(cycles[c], permutations) for c in range(1, ranks_in_all + 1)}
    if sum(law.values()) != 1 or law[0] != Fraction(1, ranks_in_all):
        raise AssertionError("the law of restarts does not sum to 1, or P(0) is not P(win)")
    return law


def restarts_mean(ranks: int = HOUR_RANKS, suits: int = SUITS) -> Fraction:
    """E[restarts] for `play_out`: H(ranks + 1) - 1."""
    return sum((k * chance for k, chance in restarts_law(ranks, suits).items()), Fraction(0))


# --- The rescue ---------------------------------------------------------------------------
#
# Each counts-only strategy reads one summary of the counts d_1..d_ranks, built rank by rank
# (clockwise from hour 1), and its chosen pile's expected count is a function of that summary
# and U. A summary of 0 means "no nonzero count yet" where that needs saying.


def _first_nonzero(summary: int, count: int) -> int:
    return summary if summary else count


def _piles_by_size(summary: tuple[int, ...], count: int) -> tuple[int, ...]:
    if not count:
        return summary
    return summary[: count - 1] + (summary[count - 1] + 1,) + summary[count:]


def _largest(summary: int, count: int) -> int:
    return max(summary, count)


def _smallest_positive(summary: int, count: int) -> int:
    if count == 0:
        return summary
    return count if summary == 0 else min(summary, count)


def _the_size(size: int) -> dict[int, Fraction]:
    return {size: Fraction(1)}


# strategy -> (the summary before any rank (given the suits), how a rank's count updates it,
#              the law of d_p, the chosen pile's count, given the summary)
_STRATEGY_SUMMARIES = {
    "clockwise": (lambda suits: 0, _first_nonzero, _the_size),
    # The random pick is uniform over the nonzero piles: the summary is how many hold each size.
    "random": (
        lambda suits: (0,) * suits,
        _piles_by_size,
        lambda sizes: {k: Fraction(n, sum(sizes)) for k, n in enumerate(sizes, 1) if n},
    ),
    "most": (lambda suits: 0, _largest, _the_size),
    "fewest": (lambda suits: 0, _smallest_positive, _the_size),
}


def _check_rescue(strategy: str, depth: str) -> None:
    if strategy not in rules.STRATEGIES:
        raise ValueError(f"strategy: {strategy!r}; expected one of {', '.join(rules.STRATEGIES)}")
    if depth not in rules.DEPTHS:
        raise ValueError(f"depth: {depth!r}; expected one of {', '.join(rules.DEPTHS)}")


@cache
def chosen_size_totals(strategy: str, ranks: int, suits: int) -> tuple[dict[int, Fraction], ...]:
    """For each U: k -> the sum over count vectors of weight * P(d_p = k | counts), p the pile
    the counts-only strategy picks. Divided by C(ranks * suits, U) it is P(d_p = k | U).

    A count vector's weight, prod C(suits, d_q), is the number of face-down subsets it stands
    for, so the weights at U add up to C(ranks * suits, U), the number of U-subsets.
    """
    start, update, sizes = _STRATEGY_SUMMARIES[strategy]
    # (face-down total so far, summary) -> number of ways to choose the cards so far
    ways = {(0, start(suits)): 1}
    for _rank in range(ranks):
        next_ways = {}
        for (down, summary), count_ways in ways.items():
            for count in range(suits + 1):
                key = (down + count, update(summary, count))
                next_ways[key] = next_ways.get(key, 0) + count_ways * comb(suits, count)
        ways = next_ways
    totals = [{} for _ in range(ranks * suits + 1)]
    for (down, summary), count_ways in ways.items():
        if down > 0:
            for size, chance in sizes(summary).items():
                totals[down][size] = totals[down].get(size, 0) + count_ways * chance
    return tuple(totals)


@cache
def _chosen_pile_totals(strategy: str, depth: str, ranks: int, suits: int) -> tuple[Fraction, ...]:
    """For each U: the sum over count vectors of weight * E[d_p | counts] (depth "bottom") or
    weight * P(d_p = 1 | counts) (depth "top"): a rescue at p wins with chance d_p / U at the
    bottom, [d_p = 1] / U at the top."""
    return tuple(
        sum((k * total for k, total in by_size.items()), Fraction(0))
        if depth == "bottom"
        else Fraction(by_size.get(1, 0))
        for by_size in chosen_size_totals(strategy, ranks, suits)
    )


@cache
def bottom_map_chance(counts: tuple[int, ...], through_single: bool = False) -> Fraction:
    """P(the bottom-card map on piles holding ``counts`` face-down cards is connected), the
    unseen cards in a uniformly random arrangement; with ``through_single``, connected with a
    pile of one card on its cycle. ``counts`` are the positive counts, in any order."""
    if any(count <= 0 for count in counts):
        raise ValueError(f"counts: {counts}; expected positive counts")
    k, down = len(counts), sum(counts)
    if k == 0:
        return Fraction(1)
    # (cycle size L, a one-card pile in the cycle) -> sum over cycle sets C of prod_C d
    # (products) and of prod_C d * sum_{c in C} (d_c - 1) (spreads), pile by pile.
    products = {(0, False): 1}
    spreads = {(0, False): 0}
    for count in counts:
        next_products, next_spreads = dict(products), dict(spreads)
        for (size, single), product in products.items():
            key = (size + 1, single or count == 1)
            next_products[key] = next_products.get(key, 0) + product * count
            next_spreads[key] = (
                next_spreads.get(key, 0)
                + spreads[(size, single)] * count
                + product * count * (count - 1)
            )
        products, spreads = next_products, next_spreads
    connected = 0
    for (size, single), product in products.items():
        if size == 0 or (through_single and not single):
            continue
        if size == k:  # every pile on the cycle: a permutation, no forest
            connected += factorial(k - 1) * product
        else:
            trees = perm(down - size - 1, k - size - 1)
            connected += factorial(size - 1) * spreads[(size, single)] * trees
    return Fraction(connected, perm(down, k))


@cache
def _bottom_reader_totals(depth: str, ranks: int, suits: int) -> tuple[Fraction, ...]:
    """For each U: the sum over count vectors of weight * P(the oracle wins | counts)."""
    totals = [Fraction(0)] * (ranks * suits + 1)

    def spread(piles_left: int, count: int, counts: tuple[int, ...], vectors: int, weight: int):
        # Multiplicities: how many ranks hold each count, from ``count`` down to 0.
        if count == 0:
            down = sum(counts)
            if down > 0:
                chance = bottom_map_chance(counts, through_single=depth == "top")
                totals[down] += vectors * weight * chance
            return
        for ranks_here in range(piles_left + 1):
            spread(
                piles_left - ranks_here,
                count - 1,
                counts + (count,) * ranks_here,
                vectors * comb(piles_left, ranks_here),
                weight * comb(suits, count) ** ranks_here,
            )

    spread(ranks, suits, (), 1, 1)
    return tuple(totals)


def rescue_win_given_down(
    strategy: str,
    down: int,
    ranks: int = HOUR_RANKS,
    suits: int = SUITS,
    depth: str = "bottom",
) -> Fraction:
    """P(win | down_at_stop = U) for a rescue under ``strategy``.

    ``depth`` "top" is the exchange at the top; "bottom" stands for the exchange at the bottom,
    the Watch and the one swap alike. `informed` means `informed` with face-up finales, where it
    plays as `oracle`. U = 0 means the standard game was won at the first death, so no rescue:
    chance 1.
    """
    _check_rescue(strategy, depth)
    non_kings = ranks * suits
    if not 0 <= down <= non_kings:
        raise ValueError(f"down_at_stop: {down} is not in 0..{non_kings}")
    if down == 0:
        return Fraction(1)
    subsets = comb(non_kings, down)
    if strategy in BOTTOM_STRATEGIES:
        return _bottom_reader_totals(depth, ranks, suits)[down] / subsets
    chosen = _chosen_pile_totals(strategy, depth, ranks, suits)[down] / subsets
    return chosen / down


# --- Strategies of the user's -------------------------------------------------------------
#
# One that reads only the counts (and `rand`, which is independent of the deal) picks a pile
# from the count vector d alone, so the sum above runs over every vector d with its weight
# prod C(suits, d_q): 5**12 vectors, each played by the strategy compiled (`custom.count_totals`,
# a second or so; 46 times as many calls, a minute or more, for one that reads `rand`, once
# for each of its values, weighted by its law). Kept on disk once done (`exact_cache`). The
# enumeration sums the weight by the size k of the pile chosen; a rescue at the bottom wins
# with chance d_p / U, at the top [d_p = 1] / U: so the sums of k times those, and of k = 1.


@cache
def _custom_totals(strategy: rules.Custom, ranks: int, suits: int) -> tuple[tuple[int, ...], ...]:
    from pipeline.engine import exact_cache

    by_size = exact_cache.count_totals(strategy, ranks, suits)
    bottom = tuple(sum(k * total for k, total in enumerate(column, 1)) for column in zip(*by_size))
    return bottom, by_size[0]


def custom_size_totals(strategy: rules.Custom) -> tuple[dict[int, int], ...]:
    """For each U: k -> the enumeration's weight of the pile chosen holding k cards (as
    `chosen_size_totals`, times RAND_GRID), on the full deck."""
    from pipeline.engine import exact_cache

    by_size = exact_cache.count_totals(strategy, HOUR_RANKS, SUITS)
    return tuple(
        {k: total for k, total in enumerate(column, 1) if total} for column in zip(*by_size)
    )


def custom_recomputed_of(cell: Cell) -> str | None:
    """Why the exact value of ``cell``, a counts-only strategy of the user's, was enumerated
    again in this process: the copy of its totals kept on disk was not trusted
    (`exact_cache.recomputed`). None if it was not, or for any other cell."""
    if cell.custom is None or not cell.custom.counts_only:
        return None
    from pipeline.engine import exact_cache

    return exact_cache.recomputed(cell.custom, HOUR_RANKS, SUITS)


def custom_rescue_win_given_down(
    strategy: rules.Custom,
    down: int,
    ranks: int = HOUR_RANKS,
    suits: int = SUITS,
    depth: str = "bottom",
) -> Fraction:
    """P(win | down_at_stop = U) for a rescue under a counts-only strategy of the user's (as
    `rescue_win_given_down` for a built-in one). StrategyError if it names no pile holding
    cards for some count vector."""
    if not strategy.counts_only:
        raise ValueError(f"strategy: {strategy.name!r} reads more than the counts: no exact value")
    if depth not in rules.DEPTHS:
        raise ValueError(f"depth: {depth!r}; expected one of {', '.join(rules.DEPTHS)}")
    if down == 0:
        return Fraction(1)
    bottom, top = _custom_totals(strategy, ranks, suits)
    chosen = (bottom if depth == "bottom" else top)[down]
    return Fraction(chosen, comb(ranks * suits, down) * rules.RAND_GRID * down)


def custom_rescue_win(
    strategy: rules.Custom, ranks: int = HOUR_RANKS, suits: int = SUITS, depth: str = "bottom"
) -> Fraction:
    """P(win) for a rescue under a counts-only strategy of the user's (`rescue_win`)."""
    return sum(
        (
            chance * custom_rescue_win_given_down(strategy, down, ranks, suits, depth)
            for down, chance in down_at_stop_law(ranks, suits).items()
        ),
        Fraction(0),
    )


def rescue_win(
    strategy: str, ranks: int = HOUR_RANKS, suits: int = SUITS, depth: str = "bottom"
) -> Fraction:
    """P(win) for a rescue under ``strategy`` (see `rescue_win_given_down`), averaged over the
    first death."""
    return sum(
        (
            chance * rescue_win_given_down(strategy, down, ranks, suits, depth)
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


def _rescue_depth(cell: Cell) -> str:
    # The Watch and the one swap win from the same piles as the exchange at the bottom.
    return "top" if cell.depth == "top" else "bottom"


def exact_win_of(cell: Cell) -> Fraction | None:
    """The exact P(win) of a cell, or None where the project has no exact value."""
    # Neither the deal order (a relabelling of deal numbers) nor the finale (only `informed`
    # reads the bottom cards, and it has face-up finales only) changes the odds of these
    # cells, so only variant, strategy and depth matter.
    if rules.wins_as_standard(cell.variant):
        return standard_win()
    if cell.custom is not None:
        if not cell.custom.counts_only:
            return None
        return custom_rescue_win(cell.custom, depth=_rescue_depth(cell))
    if cell.has_rescue:
        return rescue_win(cell.strategy, depth=_rescue_depth(cell))
    return None


def exact_win_given_down_of(cell: Cell, down: int) -> Fraction | None:
    """The exact P(win | down_at_stop = down) of a rescue cell, None for other cells (and
    for a strategy of the user's that reads more than the counts)."""
    if not cell.has_rescue:
        return None
    if cell.custom is not None:
        if not cell.custom.counts_only:
            return None
        return custom_rescue_win_given_down(cell.custom, down, depth=_rescue_depth(cell))
    return rescue_win_given_down(cell.strategy, down, depth=_rescue_depth(cell))


def bound_of(cell: Cell) -> tuple[str, Fraction] | None:
    """What no strategy of ``cell``'s kind can beat, and whose exact value that is; None for
    a cell without a rescue.

    Given all a player sees with the bottoms face down (the counts, the cards turned, and a
    draw of its own), the unseen cards lie in a uniformly random arrangement, so a rescue at
    p wins with chance d_p / U, at the top [d_p = 1] / U (docs/rules.md, the hint). A
    strategy that reads no bottom card therefore wins with chance at most E[max_p d_p / U]:
    `most`'s value; at the top, E[[some d_p = 1] / U]: `fewest`'s, which takes a pile of one
    card whenever there is one. One that reads the face-up bottoms sees what the `oracle`
    peeks at, and wins at most as often."""
    if not cell.has_rescue:
        return None
    depth = _rescue_depth(cell)
    if cell.strategy in BOTTOM_STRATEGIES or (
        cell.custom is not None and cell.custom.reads_bottoms
    ):
        return "oracle", rescue_win("oracle", depth=depth)
    best = "fewest" if depth == "top" else "most"
    return best, rescue_win(best, depth=depth)


def record_line(record: dict) -> str:
    """A record of `exact_values` as `clocksweep odds` prints it: who and what, the reduced
    fraction, and its decimal."""
    numerator, _, denominator = record["exact"].partition("/")
    decimal = int(numerator) / int(denominator or 1)
    depth = record["depth"] and f"depth={record['depth']}"
    who = " ".join(filter(None, (record["variant"], record["strategy"], depth)))
    return f"{who:<32} {record['quantity']:<20} {record['exact']:>48}  = {decimal:.10f}"


def fraction_text(value: Fraction) -> str:
    """A fraction as the reduced string "a/b" (denominator always written)."""
    return f"{value.numerator}/{value.denominator}"


def _record(variant, strategy, depth, quantity: str, value: Fraction) -> dict:
    """One record of `clocksweep odds --json`."""
    return {
        "variant": variant,
        "strategy": strategy,
        "depth": depth,
        "quantity": quantity,
        "exact": fraction_text(value),
    }


def custom_exact_values(strategy: rules.Custom) -> list[dict]:
    """A counts-only strategy of the user's exact P(win) under each rescue, as the records
    `clocksweep odds --strategy` prints (`exact_values`' form)."""
    records = []
    for variant in rules.RESCUE_VARIANTS:
        for depth in rules.DEPTHS if variant == "exchange" else (None,):
            value = custom_rescue_win(strategy, depth=depth or "bottom")
            records.append(_record(variant, strategy.name, depth, "P(win)", value))
    return records


def exact_values() -> list[dict]:
    """The exact values of docs/rules.md, exact odds, as the records `clocksweep odds --json`
    prints: variant, strategy and depth (null where they do not apply), quantity, exact."""
    record = _record
    records = [record("standard", None, None, "P(win)", standard_win())]
    for turned, chance in cards_turned_law().items():
        records.append(record("standard", None, None, f"P(cards_turned={turned})", chance))
    # Play it out scores restarts; no restart at all is exactly a standard win.
    records.append(record("play_out", None, None, "P(win)", standard_win()))
    # One record per rescue cell of the one enumeration, less the axes that change no odds
    # (finale, order): by variant, then depth, then strategy.
    rescues = {
        (cell.variant, cell.depth, cell.strategy)
        for cell in rules.all_cells(orders=rules.ORDERS[:1])
        if cell.has_rescue
    }
    for variant, depth, strategy in sorted(
        rescues,
        key=lambda r: (
            rules.VARIANTS.index(r[0]),
            rules.DEPTHS.index(r[1]) if r[1] else -1,
            rules.STRATEGIES.index(r[2]),
        ),
    ):
        value = rescue_win(strategy, depth=depth or "bottom")
        records.append(record(variant, strategy, depth, "P(win)", value))
    return records
