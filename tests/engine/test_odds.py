"""Tests of the exact values (pipeline/engine/odds.py), each by a route independent of the one tested.

- The Score Four law and 1/13: summed, and against the direct count 4/52 (the last of 52
  cards is a king with chance 4/52).
- The rescue dynamic programme: against brute-force enumeration of every face-down subset
  on small decks, with the pile chosen by `rules.choose_pile` itself.
- The premises of the derivation (Score Four, uniform face-down subset, hint = d_p / U):
  against exhaustive play of every deal of small decks, by a small engine written here
  from SPEC sections 3-4.
- The 52-card values: against Monte Carlo, by random permutations read to their fourth
  king, and by the reference engine when `pipeline.engine.reference` exists.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from fractions import Fraction
from itertools import combinations, permutations

import pytest

from pipeline.engine import odds, rules

SMALL_DECKS = [(3, 2), (3, 3), (4, 2), (4, 3)]  # (hour ranks, suits)


# --- Standard play ------------------------------------------------------------------------


def test_cards_turned_law_sums_to_one_and_covers_4_to_52():
    law = odds.cards_turned_law()
    assert sorted(law) == list(range(4, 53))
    assert sum(law.values()) == 1
    assert all(chance > 0 for chance in law.values())


def test_standard_win_is_one_in_thirteen_by_the_last_card():
    # Independent route: the deal is won when the last card of the permutation is a king,
    # which happens with chance 4/52 (Score Four; SPEC section 6).
    assert odds.standard_win() == Fraction(4, 52) == Fraction(1, 13)


def test_down_at_stop_law_mirrors_cards_turned():
    law = odds.cards_turned_law()
    down_law = odds.down_at_stop_law()
    assert sorted(down_law) == list(range(0, 49))
    assert all(down_law[52 - turned] == chance for turned, chance in law.items())


def test_small_deck_laws_sum_to_one():
    for ranks, suits in SMALL_DECKS:
        assert sum(odds.cards_turned_law(ranks, suits).values()) == 1
        assert odds.standard_win(ranks, suits) == Fraction(1, ranks + 1)


# --- The rescue DP against brute force over face-down subsets -----------------------------


def padded_counts(counts: list[int]) -> list[int]:
    """Counts on a small deck's hours, padded to the 13 piles `rules` works with."""
    return list(counts) + [0] * (rules.N_PILES - len(counts))


def chosen_counts(strategy: str, counts: list[int]) -> list[int]:
    """d_p for the pile `rules.choose_pile` takes, once per `random` draw (once otherwise)."""
    down = padded_counts(counts)
    eligible = rules.eligible_piles(down)
    no_bottoms = [0] * rules.N_PILES  # counts-only strategies never read them
    draws = range(len(eligible)) if strategy == "random" else [0]
    return [
        down[rules.choose_pile(strategy, "watch", None, down, no_bottoms, draw)] for draw in draws
    ]


def expected_chosen_count(strategy: str, counts: list[int]) -> Fraction:
    """E[d_p] for the pile `rules.choose_pile` takes; `random` averaged over its draws."""
    chosen = chosen_counts(strategy, counts)
    return Fraction(sum(chosen), len(chosen))


@pytest.mark.parametrize("ranks,suits", SMALL_DECKS)
def test_rescue_dp_matches_brute_force_over_subsets(ranks, suits):
    # At the bottom the rescue wins with chance d_p / U; at the top only from a pile of one
    # card, and then with chance 1 / U (docs/rules.md, the hint).
    non_kings = [(rank, suit) for rank in range(ranks) for suit in range(suits)]
    for strategy in rules.COUNT_STRATEGIES:
        for down in range(1, len(non_kings) + 1):
            totals = {"bottom": Fraction(0), "top": Fraction(0)}
            subsets = 0
            for face_down in combinations(non_kings, down):
                counts = [0] * ranks
                for rank, _suit in face_down:
                    counts[rank] += 1
                totals["bottom"] += expected_chosen_count(strategy, counts) / down
                chosen = chosen_counts(strategy, counts)
                totals["top"] += Fraction(chosen.count(1), len(chosen)) / down
                subsets += 1
            for depth, total in totals.items():
                assert (
                    odds.rescue_win_given_down(strategy, down, ranks, suits, depth)
                    == total / subsets
                ), (strategy, ranks, suits, down, depth)


def connected(bottom_home: dict[int, int]) -> set[int]:
    """The piles every pile reaches along bottom_home (the map's cycle if it is connected,
    else nothing), by walking from each pile."""
    piles = set(bottom_home)
    common = set(piles)
    for start in piles:
        seen, pile = set(), start
        while pile not in seen:
            seen.add(pile)
            pile = bottom_home[pile]
        common &= seen
    return common


def distinct_arrangements(cards: list[int]):
    return set(permutations(cards))


@pytest.mark.parametrize(
    "counts",
    [
        (1,),
        (2,),
        (1, 1),
        (2, 1),
        (1, 1, 1),
        (2, 2),
        (3, 1),
        (2, 1, 1),
        (3, 2, 1),
        (2, 2, 2),
        (1, 1, 1, 1),
        (4, 1, 1),
        (2, 2, 1, 1),
        (3, 1, 1, 1),
        (1, 1, 1, 1, 1),
        (2, 1, 1, 1, 1),
    ],
)
def test_bottom_map_chance_against_every_arrangement(counts):
    # Pile i holds counts[i] unseen cards, and counts[i] cards of rank i are unseen; every
    # arrangement of those cards into the piles is equally likely. Each pile's bottom is its
    # last card; the map sends a pile to the home of its bottom card.
    cards = [rank for rank, count in enumerate(counts) for _ in range(count)]
    ends = [sum(counts[: i + 1]) - 1 for i in range(len(counts))]
    arrangements = connected_ones = through_single = 0
    for arrangement in distinct_arrangements(cards):
        arrangements += 1
        cycle = connected({pile: arrangement[end] for pile, end in enumerate(ends)})
        connected_ones += bool(cycle)
        through_single += any(counts[pile] == 1 for pile in cycle)
    assert odds.bottom_map_chance(counts) == Fraction(connected_ones, arrangements)
    assert odds.bottom_map_chance(counts, through_single=True) == Fraction(
        through_single, arrangements
    )
    assert odds.bottom_map_chance(tuple(reversed(counts))) == odds.bottom_map_chance(counts)


def test_no_rescue_needed_when_nothing_is_face_down():
    assert all(odds.rescue_win_given_down(s, 0) == 1 for s in rules.COUNT_STRATEGIES)
    with pytest.raises(ValueError):
        odds.rescue_win_given_down("clockwise", 49)
    with pytest.raises(ValueError):
        odds.rescue_win_given_down("nobody", 10)
    with pytest.raises(ValueError):
        odds.rescue_win_given_down("oracle", 10, depth="middle")
    assert all(odds.rescue_win_given_down(s, 0, depth="top") == 1 for s in rules.STRATEGIES)


# --- Exhaustive play of every deal of small decks -----------------------------------------
#
# Suits never affect play, so a deal is a sequence of ranks, each with `suits` copies; every
# such sequence is equally likely (each stands for the same number of card orders). Packets
# layout: the order only relabels deals, and every deal is enumerated.


def rank_sequences(ranks_left: list[int]):
    """Every distinct ordering of a multiset of ranks, given as counts per rank."""
    if not any(ranks_left):
        yield ()
        return
    for rank, left in enumerate(ranks_left):
        if left:
            ranks_left[rank] -= 1
            for rest in rank_sequences(ranks_left):
                yield (rank, *rest)
            ranks_left[rank] += 1


def run_chain(piles: list[list[int]], hand: int, stop_at_king: bool) -> int:
    """Deliver and take until the chain dies (or the king comes up); returns the cards taken."""
    king = len(piles) - 1
    taken = 0
    while not (stop_at_king and hand == king):
        if not piles[hand]:
            break
        hand = piles[hand].pop(0)
        taken += 1
    return taken


def rescue_is_won(piles: list[list[int]], pile: int, variant: str, depth: str | None) -> bool:
    """Play a rescue at `pile` (SPEC section 4) from the first death; whether it wins."""
    piles = [list(cards) for cards in piles]
    king = len(piles) - 1
    if variant == "watch":
        run_chain(piles, piles[pile].pop(0), stop_at_king=False)
    elif variant == "one_swap":
        piles[pile].append(king)
        run_chain(piles, piles[pile].pop(0), stop_at_king=True)
    elif variant == "exchange":
        position = len(piles[pile]) - 1 if depth == "bottom" else 0
        hand, piles[pile][position] = piles[pile][position], king
        run_chain(piles, hand, stop_at_king=True)
    return not any(piles)


RESCUES = [("watch", None), ("one_swap", None), ("exchange", "bottom"), ("exchange", "top")]
# Every deal of these decks is played: (hour ranks, suits).
EXHAUSTIVE_DECKS = [(3, 2), (2, 3), (2, 4), (4, 2)]


@pytest.mark.parametrize("ranks,suits", EXHAUSTIVE_DECKS)
def test_exhaustive_play_confirms_the_derivation(ranks, suits):
    king = ranks
    deals = 0
    turned_counts = Counter()
    # (counts, pile, variant, depth) -> [wins, deals]: the hint's claim for each visible state
    outcome_by_view = defaultdict(lambda: [0, 0])
    # (strategy, variant, depth, U) -> [expected wins, deals]
    outcome_by_down = defaultdict(lambda: [Fraction(0), 0])
    for sequence in rank_sequences([suits] * (ranks + 1)):
        deals += 1
        piles = [list(sequence[p * suits : (p + 1) * suits]) for p in range(ranks + 1)]
        turned = 1 + run_chain(piles, piles[king].pop(0), stop_at_king=False)
        turned_counts[turned] += 1
        counts = [len(piles[p]) for p in range(ranks)]
        down = sum(counts)
        # Premise: the chain only dies at the centre, with each hour's face-down count equal
        # to its rank's unseen cards.
        assert not piles[king]
        assert Counter(c for p in range(ranks) for c in piles[p]) == Counter(
            {p: counts[p] for p in range(ranks) if counts[p]}
        )
        if down == 0:
            continue
        eligible = [p for p in range(ranks) if counts[p]]
        wins_at = {
            (variant, depth, p): rescue_is_won(piles, p, variant, depth)
            for variant, depth in RESCUES
            for p in eligible
        }
        for (variant, depth, p), won in wins_at.items():
            tally = outcome_by_view[(tuple(counts), p, variant, depth)]
            tally[0] += won
            tally[1] += 1
        for strategy in rules.COUNT_STRATEGIES:
            padded = padded_counts(counts)
            draws = range(len(eligible)) if strategy == "random" else [0]
            choices = [
                rules.choose_pile(strategy, "watch", None, padded, [0] * rules.N_PILES, draw)
                for draw in draws
            ]
            for variant, depth in RESCUES:
                won = Fraction(sum(wins_at[(variant, depth, p)] for p in choices), len(choices))
                tally = outcome_by_down[(strategy, variant, depth, down)]
                tally[0] += won
                tally[1] += 1
        # The oracle (and `informed` face up) wins whenever some rescue wins.
        for variant, depth in RESCUES:
            tally = outcome_by_down[("oracle", variant, depth, down)]
            tally[0] += any(wins_at[(variant, depth, p)] for p in eligible)
            tally[1] += 1

    # Score Four on the small deck.
    law = odds.cards_turned_law(ranks, suits)
    assert {t: Fraction(n, deals) for t, n in turned_counts.items()} == {
        t: chance for t, chance in law.items() if chance
    }

    # The hint is exact for every visible state and pile (rules.hint, finale "down").
    for (counts, p, variant, depth), (wins, n) in outcome_by_view.items():
        down_list = padded_counts(list(counts))
        claimed = rules.hint(variant, depth, "down", p, down_list, [0] * rules.N_PILES)
        assert Fraction(wins, n) == claimed, (counts, p, variant, depth)

    # The conditional chances of every rescue, counts-only strategies and the oracle; the
    # Watch and the one swap win as the exchange at the bottom does.
    for (strategy, variant, depth, down), (wins, n) in outcome_by_down.items():
        assert wins / n == odds.rescue_win_given_down(
            strategy, down, ranks, suits, depth or "bottom"
        ), (strategy, variant, depth, down)
    for strategy in (*rules.COUNT_STRATEGIES, "oracle", "informed"):
        for variant, depth in RESCUES:
            wins = turned_counts[(ranks + 1) * suits] + sum(
                tally[0]
                for (s, v, d, _down), tally in outcome_by_down.items()
                if (s, v, d) == ("oracle" if strategy == "informed" else strategy, variant, depth)
            )
            assert wins / deals == odds.rescue_win(strategy, ranks, suits, depth or "bottom")


# --- Relations between the strategies -----------------------------------------------------


def test_clockwise_equals_random_exactly():
    # Computed from separate definitions; equal because the counts are exchangeable.
    for down in range(49):
        assert odds.rescue_win_given_down("clockwise", down) == odds.rescue_win_given_down(
            "random", down
        )
    assert odds.rescue_win("clockwise") == odds.rescue_win("random")


def test_most_beats_clockwise_beats_fewest():
    most, clockwise, fewest = (odds.rescue_win(s) for s in ("most", "clockwise", "fewest"))
    # Even the worst counts-only rescue beats no rescue: it adds to every standard win.
    assert most > clockwise > fewest > odds.standard_win()


# --- Records and cells --------------------------------------------------------------------


def test_exact_values_records():
    records = odds.exact_values()
    keyed = {(r["variant"], r["strategy"], r["depth"], r["quantity"]): r["exact"] for r in records}
    assert len(keyed) == len(records)
    assert all(set(r) == {"variant", "strategy", "depth", "quantity", "exact"} for r in records)
    assert keyed[("standard", None, None, "P(win)")] == "1/13"
    assert keyed[("play_out", None, None, "P(win)")] == "1/13"
    assert keyed[("standard", None, None, "P(cards_turned=4)")] == f"1/{math.comb(52, 4)}"
    law = [Fraction(keyed[("standard", None, None, f"P(cards_turned={t})")]) for t in range(4, 53)]
    assert sum(law) == 1
    rescues = [("watch", None), ("one_swap", None), ("exchange", "bottom"), ("exchange", "top")]
    for variant, depth in rescues:
        for strategy in rules.STRATEGIES:
            text = keyed[(variant, strategy, depth, "P(win)")]
            # Reduced "a/b": Fraction(text) round-trips to the same text.
            assert odds.fraction_text(Fraction(text)) == text
            assert Fraction(text) == odds.rescue_win(strategy, depth=depth or "bottom")
    assert len(records) == 1 + 49 + 1 + len(rescues) * len(rules.STRATEGIES)


def test_exact_win_cells():
    watch_most = odds.rescue_win("most")
    for finale in rules.FINALES:
        for order in rules.ORDERS:
            assert odds.exact_win("standard", None, finale, order) == Fraction(1, 13)
            for strategy in rules.COUNT_STRATEGIES:
                for variant in ("watch", "one_swap"):
                    assert odds.exact_win(variant, strategy, finale, order) == odds.rescue_win(
                        strategy
                    )
                assert odds.exact_win(
                    "exchange", strategy, finale, order, "bottom"
                ) == odds.rescue_win(strategy)
                assert odds.exact_win(
                    "exchange", strategy, finale, order, "top"
                ) == odds.rescue_win(strategy, depth="top")
            for variant in ("watch", "one_swap"):
                assert odds.exact_win(variant, "oracle", finale, order) == odds.rescue_win("oracle")
            for depth in rules.DEPTHS:
                assert odds.exact_win(
                    "exchange", "oracle", finale, order, depth
                ) == odds.rescue_win("oracle", depth=depth)
    # informed plays as the oracle with face-up finales, its only ones
    assert odds.exact_win("watch", "informed", "up") == odds.rescue_win("oracle")
    assert odds.exact_win("exchange", "informed", "up", depth="top") == odds.rescue_win(
        "oracle", depth="top"
    )
    assert odds.exact_win("exchange", "most") == watch_most  # depth defaults to bottom
    with pytest.raises(rules.RuleError):
        odds.exact_win("watch", None)


# --- Monte Carlo on the 52-card deck ------------------------------------------------------


def within_four_standard_errors(samples: list[float], exact: Fraction) -> tuple[bool, str]:
    n = len(samples)
    mean = sum(samples) / n
    variance = sum((x - mean) ** 2 for x in samples) / (n - 1)
    error = math.sqrt(variance / n)
    ok = abs(mean - float(exact)) <= 4 * error
    return ok, f"mean {mean:.5f}, exact {float(exact):.5f}, SE {error:.5f}, n {n}"


def test_monte_carlo_random_permutations_read_to_the_fourth_king():
    # Samples the first death from its definition (a shuffled deck read to its fourth king),
    # not from the law under test, and averages the hint's chance d_p / U.
    rng = random.Random(20240613)
    deck = [card // 4 for card in range(52)]  # ranks; 12 is the king
    samples = {strategy: [] for strategy in rules.COUNT_STRATEGIES}
    turned_samples = []
    for _ in range(20000):
        rng.shuffle(deck)
        kings_seen = 0
        for position, rank in enumerate(deck):  # noqa: B007 (position is read after the loop)
            kings_seen += rank == rules.KING
            if kings_seen == 4:
                break
        turned_samples.append(position + 1)
        face_down = deck[position + 1 :]
        down = len(face_down)
        counts = padded_counts([face_down.count(rank) for rank in range(12)])
        for strategy in rules.COUNT_STRATEGIES:
            if down == 0:
                samples[strategy].append(1.0)
                continue
            draw = rng.randrange(len(rules.eligible_piles(counts)))
            pile = rules.choose_pile(strategy, "watch", None, counts, [0] * 13, draw)
            samples[strategy].append(counts[pile] / down)
    for strategy, values in samples.items():
        ok, detail = within_four_standard_errors(values, odds.rescue_win(strategy))
        assert ok, f"{strategy}: {detail}"
    mean_turned = sum(t * chance for t, chance in odds.cards_turned_law().items())
    ok, detail = within_four_standard_errors(turned_samples, mean_turned)
    assert ok, f"cards_turned: {detail}"


def test_monte_carlo_reference_engine():
    reference = pytest.importorskip("pipeline.engine.reference")
    seed = 20240613
    deals = 2000
    cells = [rules.Cell("standard"), rules.Cell("play_out")] + [
        rules.Cell(variant, strategy)
        for variant in ("watch", "one_swap", "exchange")  # exchange at its default, bottom
        for strategy in rules.COUNT_STRATEGIES
    ]
    for cell in cells:
        results = [reference.play(seed, deal, cell) for deal in range(deals)]
        exact = odds.exact_win_of(cell)
        won = [float(result.won) for result in results]
        ok, detail = within_four_standard_errors(won, exact)
        assert ok, f"{cell.label}, won: {detail}"
        if cell.has_rescue:
            # The hint's chance where a rescue happened, the (certain) win where none did:
            # same expectation, less noise.
            chances = [
                float(result.hint) if result.hint is not None else float(result.won)
                for result in results
            ]
            ok, detail = within_four_standard_errors(chances, exact)
            assert ok, f"{cell.label}, hint: {detail}"


# --- play_out's restarts ------------------------------------------------------------------


def played_out(piles: list[list[int]]) -> tuple[int, int]:
    """A deal played out by the small engine here (docs/rules.md, `play_out`): after each
    death, a restart at the first hour with a face-down card, taking its top card. Gives
    (restarts, deaths away from where the rules predict: the first not at the centre, a
    later one not at its restart pile)."""
    king = len(piles) - 1
    restarts, stray, root, hand = 0, 0, king, king
    while True:
        while piles[hand]:
            hand = piles[hand].pop(0)
        stray += hand != root
        hours_left = [p for p in range(king) if piles[p]]
        if not hours_left:
            return restarts, stray
        restarts, root = restarts + 1, hours_left[0]
        hand = root


@pytest.mark.parametrize("ranks,suits", EXHAUSTIVE_DECKS)
def test_the_law_of_restarts_holds_on_every_deal_of_small_decks(ranks, suits):
    restarts = Counter()
    for sequence in rank_sequences([suits] * (ranks + 1)):
        piles = [list(sequence[p * suits : (p + 1) * suits]) for p in range(ranks + 1)]
        count, stray = played_out(piles)
        assert stray == 0, sequence  # every later death is at its restart pile
        restarts[count] += 1
    deals = sum(restarts.values())
    law = odds.restarts_law(ranks, suits)
    assert {k: Fraction(n, deals) for k, n in restarts.items()} == {
        k: chance for k, chance in law.items() if chance
    }
    assert odds.restarts_mean(ranks, suits) == sum(
        (Fraction(k * n, deals) for k, n in restarts.items()), Fraction(0)
    )


def test_the_law_of_restarts_on_the_full_deck():
    law = odds.restarts_law()
    assert law[0] == odds.standard_win() == Fraction(1, 13)  # no restart: a standard win
    assert set(law) == set(range(13)) and all(chance > 0 for chance in law.values())
    assert law[12] == Fraction(1, math.factorial(13))  # one chain for each rank, in order
    assert odds.restarts_mean() == sum(Fraction(1, i) for i in range(2, 14))


def test_the_kernel_restarts_as_the_law_says():
    """200,000 deals of play_out from the kernel: each P(restarts = k) with an expected count
    of 5 or more, and the mean, within 4 standard errors of the law (its own)."""
    from pipeline.engine import kernel

    deals = 200_000
    counts = kernel.play(20261207, 0, deals, [rules.Cell("play_out")])["restarts"][0]
    assert (kernel.play(20261207, 0, 1000, [rules.Cell("play_out")])["stray_deaths"] == 0).all()
    law = odds.restarts_law()
    for k, chance in law.items():
        if deals * chance < 5:
            continue
        error = math.sqrt(float(chance * (1 - chance)) / deals)
        share = float((counts == k).mean())
        assert abs(share - float(chance)) <= 4 * error, (k, share, float(chance), error)
    mean = float(odds.restarts_mean())
    spread = math.sqrt(sum(float(p) * (k - mean) ** 2 for k, p in law.items()))
    assert abs(float(counts.mean()) - mean) <= 4 * spread / math.sqrt(deals)


# --- The rescue's cards turned ------------------------------------------------------------


def turned_in_rescue(piles: list[list[int]], pile: int, variant: str, depth: str | None) -> int:
    """The cards a rescue at `pile` turns after the first death, by the small engine here:
    the card it takes into hand, then the chain (the king included, where it comes up)."""
    piles = [list(cards) for cards in piles]
    king = len(piles) - 1
    if variant == "watch":
        return 1 + run_chain(piles, piles[pile].pop(0), stop_at_king=False)
    if variant == "one_swap":
        piles[pile].append(king)
        return 1 + run_chain(piles, piles[pile].pop(0), stop_at_king=True)
    position = len(piles[pile]) - 1 if depth == "bottom" else 0
    hand, piles[pile][position] = piles[pile][position], king
    return 1 + run_chain(piles, hand, stop_at_king=True)


# The decks of EXHAUSTIVE_DECKS but (4, 2), whose 113,400 deals the test above plays already:
# four strategies at four rescues each, again, would take the suite 20 s more.
@pytest.mark.parametrize("ranks,suits", [(3, 2), (2, 3), (2, 4)])
def test_the_law_of_cards_turned_under_each_rescue_holds_on_every_deal(ranks, suits):
    """Every deal of small decks, each rescue at the pile each counts-only strategy picks
    (`random`: each of its draws, weighed equally): the law of cards_turned exactly."""
    from pipeline.engine import laws

    king = ranks
    turned = defaultdict(Counter)  # (strategy, variant, depth) -> cards turned -> weight
    deals = 0
    for sequence in rank_sequences([suits] * (ranks + 1)):
        deals += 1
        piles = [list(sequence[p * suits : (p + 1) * suits]) for p in range(ranks + 1)]
        first = 1 + run_chain(piles, piles[king].pop(0), stop_at_king=False)
        counts = [len(piles[p]) for p in range(ranks)]
        eligible = [p for p in range(ranks) if counts[p]]
        for strategy in rules.COUNT_STRATEGIES:
            draws = range(len(eligible)) if strategy == "random" and eligible else [0]
            for variant, depth in RESCUES:
                for draw in draws:
                    total = first
                    if eligible:
                        pile = rules.choose_pile(
                            strategy, variant, depth, padded_counts(counts), [0] * 13, draw
                        )
                        total += turned_in_rescue(piles, pile, variant, depth)
                    turned[(strategy, variant, depth)][total] += Fraction(1, len(draws))
    for (strategy, variant, depth), weights in turned.items():
        sizes = laws.sizes_given_down(odds.chosen_size_totals(strategy, ranks, suits))
        law = laws.rescue_turned_law(sizes, variant, depth or "bottom", ranks, suits)
        assert {t: w / deals for t, w in weights.items()} == law, (strategy, variant, depth)


def test_the_kernel_turns_cards_in_a_rescue_as_the_law_says():
    """100,000 kernel deals of four rescue cells, one of each rescue: each P(cards_turned = t)
    with an expected count of 5 or more within 4 standard errors of the law."""
    from pipeline.engine import kernel, laws

    deals = 100_000
    cells = [
        rules.Cell("watch", "most"),
        rules.Cell("one_swap", "random"),
        rules.Cell("exchange", "clockwise", depth="bottom"),
        rules.Cell("exchange", "fewest", depth="top"),
    ]
    played = kernel.play(20261208, 0, deals, cells)["cards_turned"]
    for row, cell in enumerate(cells):
        law = laws.law_of("cards_turned", cell).chances
        for t, chance in law.items():
            if deals * chance < 5:
                continue
            error = math.sqrt(float(chance * (1 - chance)) / deals)
            share = float((played[row] == t).mean())
            assert abs(share - float(chance)) <= 4 * error, (cell.label, t, share, float(chance))
