"""The engines: one conformance harness for every cell and both engines, the kernel against the
reference deal by deal and field by field, and Monte Carlo against the exact values.

1. The harness (`test_conformance`), parametrized over `rules.all_cells()` (every variant x
   strategy x finale x order x depth) x engine (reference, kernel). Each deal is also played
   by a ten-line standard chain written here (`first_death`), which gives the state at the
   first death independently of both engines. Checked on every deal: 52 cards accounted for;
   the first death is at the centre on the fourth king; a standard win turns 52 cards and
   happens exactly when the bottom cards lead every hour pile to the centre (SPEC section 5,
   the BEST theorem), so never without a king at the bottom of an hour pile (SPEC section 6);
   the rescue pile had face-down cards and is the one the strategy's definition names, ties
   clockwise; the hint is d_p / U (0 for an exchange at the top of a pile of more than one
   card; 0 or 1 under face-up finales); watch wins turn 52 cards, one_swap and exchange 53;
   a rescue wins exactly when the rules' bottom-card predicate says so; play_out turns every
   card, and every later death is at its restart pile.
2. Batch independence: the kernel gives the same (seed, deal, cell) result whatever range,
   split or list of cells it is played in.
3. Kernel against reference on every cell, deal by deal, every field:
   `DEAL_CELLS_COMPARED` = 4 seeds x 250 deals x 96 cells = 96,000 deal-cells.
4. Identities between cells that follow from the rules (watch, one_swap and exchange at the
   bottom win on the same deals; oracle wins whenever any strategy does; ...).
5. Monte Carlo against `pipeline.engine.odds`: 2,000,000 kernel deals; tolerances from the standard
   error under the exact value, thresholds stated in each test.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2, norm

from pipeline.engine import deals, odds, reference, rules
from pipeline.engine.record import DealRecord, from_kernel
from pipeline.engine.rules import CENTRE, KING, N_HOURS, Cell

CELLS = rules.all_cells()
CELL_INDEX = {cell: c for c, cell in enumerate(CELLS)}
ENGINES = ("reference", "kernel")

HARNESS_SEED = 20261129
REFERENCE_HARNESS_DEALS = 100  # per cell: 96 x 100 reference plays, every step inspected
KERNEL_HARNESS_DEALS = 20_000  # per cell, array checks
KERNEL_ORACLE_DEALS = 2_000  # per cell, checked deal by deal against `first_death`

# (seed, first deal): small numbers, across 2**32, large, and up to 2**64 - 1.
SEEDS_COMPARED = ((0, 0), (1, 2**32 - 125), (2**32 + 5, 10**12), (2**64 - 1, 2**64 - 250))
DEALS_PER_SEED = 250
DEAL_CELLS_COMPARED = len(SEEDS_COMPARED) * DEALS_PER_SEED * len(CELLS)  # 96,000

STAT_SEED = 424242
STAT_DEALS = 2_000_000
Z_LIMIT = 4.0  # win rates: within 4 standard errors of the exact value
P_THRESHOLD = 1e-4  # chi-square tests pass with p > 1e-4
FAMILY_ALPHA = 1e-4  # hint bins: Bonferroni over the bins, two-sided, family-wise 1e-4


# --- The independent standard chain -------------------------------------------------------


@dataclass(frozen=True)
class FirstDeath:
    """The table at the first death of standard play, worked out here from the layout."""

    taken: tuple[int, ...]  # cards taken into hand, in order
    death: int  # pile where the chain died
    down: tuple[int, ...]  # face-down count per pile at the death
    bottom_home: tuple[int, ...]  # home of each pile's bottom card at the death (self if none)
    start_bottom_home: tuple[int, ...]  # ... and at the deal


def first_death(piles: list[list[int]]) -> FirstDeath:
    """Standard play (SPEC section 3) on piles of cards listed top first."""
    down = [list(pile) for pile in piles]
    taken = []
    pile = CENTRE
    while down[pile]:
        card = down[pile].pop(0)
        taken.append(card)
        pile = card // 4  # its home
    return FirstDeath(
        tuple(taken),
        pile,
        tuple(len(p) for p in down),
        tuple(p[-1] // 4 if p else q for q, p in enumerate(down)),
        tuple(p[-1] // 4 for p in piles),
    )


@functools.cache
def winners_of(state: FirstDeath, variant: str, depth: str | None) -> tuple[int, ...]:
    """The hour piles where a rescue wins, by the rules' bottom-card predicate (cached)."""
    return tuple(rules.winning_piles(variant, depth, list(state.bottom_home), list(state.down)))


@functools.cache
def bottoms_lead_to_centre(state: FirstDeath) -> bool:
    return rules.bottoms_reach(list(state.start_bottom_home), [True] * 13, CENTRE)


def deal_state(seed: int, deal: int) -> dict[str, FirstDeath]:
    deck = deals.shuffled_deck(seed, deal)
    return {order: first_death(rules.lay_out(deck, order)) for order in rules.ORDERS}


def expected_pile(cell: Cell, state: FirstDeath, seed: int, deal: int) -> int:
    """The hour pile the strategy's definition names (SPEC section 5), ties clockwise."""
    down = state.down
    eligible = [q for q in range(N_HOURS) if down[q] > 0]
    most = max(eligible, key=lambda q: (down[q], -q))
    if cell.strategy == "clockwise":
        return eligible[0]
    if cell.strategy == "most":
        return most
    if cell.strategy == "fewest":
        return min(eligible, key=lambda q: (down[q], q))
    if cell.strategy == "random":
        return eligible[deals.strategy_draw(seed, deal, len(eligible))]
    winners = winners_of(state, cell.variant, cell.depth)
    return winners[0] if winners else most


def check_deal(cell: Cell, row: DealRecord, state: FirstDeath, seed: int, deal: int) -> None:
    """Every fact about one deal's row that the rules fix, whichever engine played it."""
    where = f"seed {seed} deal {deal} {cell.label}: {row}"
    unseen = sum(state.down)
    # The chain dies only at the centre (SPEC section 3); every engine shares that chain.
    assert state.death == CENTRE, where
    assert row.down_at_stop == unseen == 52 - len(state.taken), where
    standard_win = unseen == 0
    # BEST theorem (SPEC section 5): standard play wins iff the bottoms lead to the centre.
    assert standard_win == bottoms_lead_to_centre(state), where
    if standard_win:  # SPEC section 6: never without a king at the bottom of an hour pile
        assert KING in state.start_bottom_home[:N_HOURS], where

    if cell.variant == "standard":
        assert row == DealRecord(standard_win, len(state.taken), unseen, None, None, None, None), (
            where
        )
        return
    if cell.variant == "play_out":
        assert row.cards_turned == 52, where
        assert row.rescue_pile is None and row.hint is None, where
        assert row.restarts is not None and (row.restarts == 0) == standard_win, where
        assert row.stray_deaths == 0, where  # every death where the rules predict it
        assert row.won == standard_win, where
        return
    assert row.restarts is None and row.stray_deaths is None, where
    if standard_win:
        assert row == DealRecord(True, 52, 0, None, None, None, None), where
        return

    pile = row.rescue_pile - 1
    assert 0 <= pile < N_HOURS and state.down[pile] > 0, where
    assert pile == expected_pile(cell, state, seed, deal), where
    wins = pile in winners_of(state, cell.variant, cell.depth)
    assert row.won == wins, where
    full = 52 if cell.variant == "watch" else 53  # one_swap and exchange turn the king twice
    assert (row.cards_turned == full) == row.won, where
    assert len(state.taken) < row.cards_turned <= full, where
    top_of_several = cell.depth == "top" and state.down[pile] > 1
    if cell.finale == "up":
        assert row.hint == Fraction(int(wins)), where
    elif top_of_several:
        assert row.hint == 0, where
    else:
        assert row.hint == Fraction(state.down[pile], unseen), where
    if top_of_several:
        assert not row.won, where


# --- 1. The conformance harness ------------------------------------------------------------


@pytest.fixture(scope="module")
def harness_states():
    count = max(REFERENCE_HARNESS_DEALS, KERNEL_ORACLE_DEALS)
    return [deal_state(HARNESS_SEED, deal) for deal in range(count)]


@pytest.fixture(scope="module")
def harness_kernel():
    from pipeline.engine import kernel

    return kernel.play(HARNESS_SEED, 0, KERNEL_HARNESS_DEALS, CELLS)


def check_reference_steps(cell: Cell, result, table: reference.Table, state: FirstDeath):
    """Facts about the reference engine's trajectory, step by step."""
    steps = table.steps
    assert sorted(table.all_cards()) == list(range(52))  # 52 cards accounted for
    takes = [s.card for s in steps if s.action == "take"]
    assert tuple(takes[: len(state.taken)]) == state.taken  # the shared standard chain
    rescued = any(s.action == "rescue" for s in steps)
    assert rescued == (result.rescue_pile is not None)
    # Exchange takes its card into hand without a "take" step.
    assert result.cards_turned == len(takes) + (rescued and cell.variant == "exchange")
    deaths = [i for i, s in enumerate(steps) if s.action == "death"]
    assert tuple(steps[i].pile for i in deaths) == result.deaths
    # The first death: at the centre, on the fourth king, all four kings placed.
    first = deaths[0]
    assert steps[first].pile == CENTRE
    placed = [s for s in steps[:first] if s.action == "place"]
    assert sum(s.card // 4 == KING for s in placed) == 4
    assert placed[-1].card // 4 == KING and placed[-1].pile == CENTRE
    if cell.variant == "play_out":
        # A chain that starts by taking from pile r can only die at r (SPEC section 5).
        assert result.deaths[1:] == result.restart_piles
        assert table.cards_down() == 0
    elif rescued:
        assert len(deaths) == 2
        if cell.variant == "watch":
            assert result.deaths[1] == result.rescue_pile - 1
        else:  # the deal ends when the king comes up again
            last = [s for s in steps if s.action == "place"][-1]
            assert result.deaths[1] == CENTRE and last.card // 4 == KING
        assert result.won == (table.cards_down() == 0)
    else:
        assert len(deaths) == 1


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("cell", CELLS, ids=lambda cell: cell.label.replace(" ", ","))
def test_conformance(cell, engine, harness_states, request):
    if engine == "reference":
        for deal in range(REFERENCE_HARNESS_DEALS):
            state = harness_states[deal][cell.order]
            table = reference.Table(down=reference.layout(HARNESS_SEED, deal, cell.order))
            result = reference.play(HARNESS_SEED, deal, cell, table)
            check_deal(cell, result.record, state, HARNESS_SEED, deal)
            check_reference_steps(cell, result, table, state)
        return

    out = request.getfixturevalue("harness_kernel")
    c = CELL_INDEX[cell]
    won, turned, down = out["won"][c], out["cards_turned"][c], out["down_at_stop"][c]
    pile, num, den = out["rescue_pile"][c], out["hint_num"][c], out["hint_den"][c]
    restarts, stray = out["restarts"][c], out["stray_deaths"][c]
    # Array checks over every harness deal.
    assert ((0 <= down) & (down <= 48)).all()
    assert ((pile == 0) == (den == 0)).all()  # a hint exactly with a rescue
    assert ((0 <= num) & (num <= den)).all()
    if cell.variant == "standard":
        assert (won == (down == 0)).all() and (turned == 52 - down).all()
        assert (turned[won == 1] == 52).all()
    if cell.variant == "play_out":
        assert (turned == 52).all() and (stray == 0).all()
        assert ((restarts == 0) == (down == 0)).all() and (won == (down == 0)).all()
    else:
        assert (restarts == -1).all() and (stray == -1).all()
    if cell.has_rescue:
        assert ((pile > 0) == (down > 0)).all()
        full = 52 if cell.variant == "watch" else 53
        rescued = down > 0
        assert ((turned == full) == (won == 1))[rescued].all()
        assert (turned[~rescued] == 52).all() and won[~rescued].all()
    else:
        assert (pile == 0).all()
    # Deal by deal against the standard chain played here.
    for deal in range(KERNEL_ORACLE_DEALS):
        row = from_kernel(out, c, deal)
        check_deal(cell, row, harness_states[deal][cell.order], HARNESS_SEED, deal)


def test_harness_sees_every_kind_of_outcome(harness_kernel):
    """The harness is only as good as its deals: each kind of outcome occurs in them."""
    won = harness_kernel["won"]
    down = harness_kernel["down_at_stop"]
    assert won[CELL_INDEX[Cell()]].sum() > 100  # standard wins
    for variant in rules.RESCUE_VARIANTS:
        depth = "bottom" if variant == "exchange" else None
        c = CELL_INDEX[Cell(variant, "oracle", depth=depth)]
        assert (won[c] & (down[c] > 0)).sum() > 1000  # rescued wins
        assert (~won[c].astype(bool) & (down[c] > 0)).sum() > 1000  # rescued losses
    top = CELL_INDEX[Cell("exchange", "oracle", depth="top")]
    assert (won[top] & (down[top] > 0)).sum() > 10
    assert harness_kernel["restarts"][CELL_INDEX[Cell("play_out")]].max() >= 3


# --- 2. Batch independence ----------------------------------------------------------------


@pytest.mark.parametrize("seed, first", [(1, 0), (2**64 - 1, 2**64 - 600)])
def test_kernel_result_does_not_depend_on_the_batch(seed, first):
    from pipeline.engine import kernel

    count = 600
    whole = kernel.play(seed, first, count, CELLS)
    # The same range in three calls.
    splits = ((0, 1), (1, 237), (237, count))  # odd sizes: the kernel may pair deals up
    parts = [kernel.play(seed, first + a, b - a, CELLS) for a, b in splits]
    for name, values in whole.items():
        assert np.array_equal(np.concatenate([p[name] for p in parts], axis=1), values), name
    # Each cell on its own.
    for c, cell in enumerate(CELLS):
        alone = kernel.play(seed, first, count, [cell])
        for name, values in whole.items():
            assert np.array_equal(alone[name][0], values[c]), (cell.label, name)
    # Cells in another order, some twice.
    order = list(range(len(CELLS)))[::-1] + [5, 40, 5]
    mixed = kernel.play(seed, first, count, [CELLS[c] for c in order])
    for name, values in whole.items():
        assert np.array_equal(mixed[name], values[order]), name


def test_kernel_rejects_ranges_past_the_last_deal():
    from pipeline.engine import kernel

    with pytest.raises(ValueError):
        kernel.play(0, 2**64 - 10, 11, [Cell()])
    with pytest.raises(ValueError):
        kernel.play(-1, 0, 1, [Cell()])
    assert kernel.play(0, 2**64 - 10, 10, [Cell()])["won"].shape == (1, 10)


# --- 3. Kernel against reference ----------------------------------------------------------

FIELDS = ("won", "cards_turned", "down_at_stop", "rescue_pile", "hint", "restarts")


@pytest.mark.parametrize("seed, first", SEEDS_COMPARED)
def test_kernel_equals_reference_on_every_cell(seed, first):
    """Deal by deal, field by field, every cell of `rules.all_cells()` (96): together over
    `SEEDS_COMPARED` that is DEAL_CELLS_COMPARED = 4 x 250 x 96 = 96,000 deal-cells.

    The trajectory too, where the kernel shows it: its cards_turned is the reference's count
    of cards taken into hand (its "take" steps, plus the card an exchange takes).
    """
    from pipeline.engine import kernel

    out = kernel.play(seed, first, DEALS_PER_SEED, CELLS)
    compared = 0
    mismatches = []
    for d in range(DEALS_PER_SEED):
        deal = first + d
        deck = deals.shuffled_deck(seed, deal)
        layouts = {order: rules.lay_out(deck, order) for order in rules.ORDERS}
        for c, cell in enumerate(CELLS):
            table = reference.Table(down=[list(pile) for pile in layouts[cell.order]])
            expected = reference.play(seed, deal, cell, table).record
            got = from_kernel(out, c, d)
            takes = sum(step.action == "take" for step in table.steps)
            exchanged = cell.variant == "exchange" and expected.rescue_pile is not None
            if got.cards_turned != takes + exchanged:
                mismatches.append((deal, cell.label, "takes", got.cards_turned, takes))
            for field in FIELDS:
                if getattr(got, field) != getattr(expected, field):
                    mismatches.append(
                        (deal, cell.label, field, getattr(got, field), getattr(expected, field))
                    )
            compared += 1
    assert not mismatches, (
        f"{len(mismatches)} mismatches (deal, cell, field, kernel, reference): {mismatches[:10]}"
    )
    assert compared == DEALS_PER_SEED * len(CELLS) == DEAL_CELLS_COMPARED // len(SEEDS_COMPARED)
    print(f"seed {seed}: {compared} deal-cells compared, kernel == reference")


# --- 4. Identities between cells ----------------------------------------------------------


def cells_with(**fixed):
    return [c for c in CELLS if all(getattr(c, k) == v for k, v in fixed.items())]


def test_every_cell_shares_the_first_death(harness_kernel):
    down = harness_kernel["down_at_stop"]
    for order in rules.ORDERS:
        standard = down[CELL_INDEX[Cell(order=order)]]
        for cell in cells_with(order=order):
            assert np.array_equal(down[CELL_INDEX[cell]], standard), cell.label


def test_watch_one_swap_and_exchange_bottom_win_the_same_deals(harness_kernel):
    # SPEC section 5: each wins iff every holding pile's bottom-card path leads to the rescue
    # pile (watch) or through it to the king below it (one_swap, exchange at the bottom).
    won = harness_kernel["won"]
    for order in rules.ORDERS:
        for finale in rules.FINALES:
            for strategy in rules.STRATEGIES:
                if strategy == "informed" and finale == "down":
                    continue
                watch = won[CELL_INDEX[Cell("watch", strategy, finale, order)]]
                for variant in ("one_swap", "exchange"):
                    other = won[CELL_INDEX[Cell(variant, strategy, finale, order)]]
                    assert np.array_equal(watch, other), (variant, strategy, finale, order)


def test_winning_rescues_walked_agree_with_the_shortcut(harness_kernel):
    """Played with every cell, the kernel knows which piles win (informed, oracle and face-up
    cells need them) and does not walk a winning continuation; with only counts-only cells
    under face-down finales it knows none and walks every continuation to its last card.
    The two must agree on every field."""
    from pipeline.engine import kernel

    walked = [
        cell
        for cell in CELLS
        if cell.has_rescue and cell.finale == "down" and cell.strategy not in ("informed", "oracle")
    ]
    alone = kernel.play(HARNESS_SEED, 0, KERNEL_HARNESS_DEALS, walked)
    assert alone["won"].any()
    for c, cell in enumerate(walked):
        for name, values in alone.items():
            assert np.array_equal(values[c], harness_kernel[name][CELL_INDEX[cell]]), (
                cell.label,
                name,
            )


def bottom_graphs() -> list[dict[int, int]]:
    """Bottom-card graphs (hour pile -> home of its bottom card, over the piles holding cards)
    that random deals rarely make, then 2,000 random ones."""
    graphs = [
        {q: (q + 1) % N_HOURS for q in range(N_HOURS)},  # one cycle through every hour
        {q: q ^ 1 for q in range(N_HOURS)},  # six cycles of two
        {q: 0 for q in range(N_HOURS)},  # a star into a loop at hour 1
        {q: max(q - 1, 0) for q in range(N_HOURS)},  # a path into a loop at hour 1
        {q: (q + 1) % 11 for q in range(11)} | {11: 3},  # a long cycle and a leaf
        {7: 7},  # one pile, pointing at itself
    ]
    rng = np.random.default_rng(20261129)
    for _ in range(2000):
        holding = sorted(rng.choice(N_HOURS, size=rng.integers(1, N_HOURS + 1), replace=False))
        graphs.append({int(q): int(rng.choice(holding)) for q in holding})
    return graphs


def test_watch_winners_against_the_rules_on_made_up_graphs():
    """`kernel.watch_winners` (every winning pile at once, by pointer doubling) against
    `rules.bottoms_reach` for each pile."""
    from pipeline.engine import kernel

    for graph in bottom_graphs():
        bottom_home = [graph.get(q, q) for q in range(rules.N_PILES)]
        holds = [q in graph for q in range(rules.N_PILES)]
        powers = np.zeros((5, rules.N_PILES), dtype=np.uint8)
        powers[0] = bottom_home
        holding = np.int64(sum(1 << q for q in graph))
        mask = kernel.watch_winners(powers, holding, min(graph), np.zeros(16, dtype=np.uint8))
        expected = sum(1 << p for p in graph if rules.bottoms_reach(bottom_home, holds, p))
        assert mask == expected, graph


def test_oracle_wins_whenever_any_strategy_wins(harness_kernel):
    won = harness_kernel["won"]
    for cell in CELLS:
        if cell.has_rescue:
            oracle = Cell(cell.variant, "oracle", cell.finale, cell.order, cell.depth)
            assert (won[CELL_INDEX[cell]] <= won[CELL_INDEX[oracle]]).all(), cell.label


def test_informed_plays_as_oracle_when_the_bottoms_are_face_up(harness_kernel):
    # With face-up finales the bottom cards are everything the oracle needs (SPEC section 5).
    for cell in cells_with(strategy="informed"):
        oracle = Cell(cell.variant, "oracle", cell.finale, cell.order, cell.depth)
        for name, values in harness_kernel.items():
            assert np.array_equal(values[CELL_INDEX[cell]], values[CELL_INDEX[oracle]]), name


def test_face_up_finales_change_only_the_hint(harness_kernel):
    # "foresight but no actual agency" (seed 001): the same pile, the same outcome.
    for cell in cells_with(finale="down"):
        up = CELL_INDEX[Cell(cell.variant, cell.strategy, "up", cell.order, cell.depth)]
        for name in ("won", "cards_turned", "down_at_stop", "rescue_pile", "restarts"):
            assert np.array_equal(harness_kernel[name][CELL_INDEX[cell]], harness_kernel[name][up])


# --- 5. Monte Carlo against the exact values ----------------------------------------------

COUNT_STRATEGIES = rules.COUNT_STRATEGIES
STAT_CELLS = [Cell()] + [
    Cell(variant, strategy, "up" if strategy == "informed" else "down", depth=depth)
    for variant, depth in (
        ("watch", None),
        ("one_swap", None),
        ("exchange", "bottom"),
        ("exchange", "top"),
    )
    for strategy in rules.STRATEGIES
]


@pytest.fixture(scope="module")
def stat_results():
    from pipeline.engine import kernel

    return kernel.play(STAT_SEED, 0, STAT_DEALS, STAT_CELLS)


def z_score(successes: int, n: int, p: Fraction) -> float:
    p = float(p)
    return (successes / n - p) / math.sqrt(p * (1 - p) / n)


def test_standard_wins_one_in_thirteen(stat_results):
    """P(win) = 1/13 (SPEC section 6), within 4 SE over 2,000,000 deals."""
    wins = int(stat_results["won"][0].sum())
    assert abs(z_score(wins, STAT_DEALS, odds.standard_win())) < Z_LIMIT
    assert odds.standard_win() == Fraction(1, 13)


def test_cards_turned_follows_score_four(stat_results):
    """P(cards_turned = t) = C(t-1, 3) / C(52, 4), t = 4..52: chi-square, 48 df, p > 1e-4.

    The smallest expected count is 2,000,000 / 270,725 = 7.4 (t = 4), above 5.
    """
    law = odds.cards_turned_law()
    assert law == {t: Fraction(math.comb(t - 1, 3), math.comb(52, 4)) for t in range(4, 53)}
    observed = np.bincount(stat_results["cards_turned"][0], minlength=53)
    assert observed[:4].sum() == 0
    expected = np.array([float(law[t]) * STAT_DEALS for t in range(4, 53)])
    assert expected.min() > 5
    statistic = (((observed[4:] - expected) ** 2) / expected).sum()
    assert chi2.sf(statistic, len(expected) - 1) > P_THRESHOLD


@pytest.mark.parametrize("cell", STAT_CELLS[1:], ids=lambda cell: cell.label.replace(" ", ","))
def test_rescue_win_rate_matches_the_exact_value(cell, stat_results):
    """Every rescue cell (watch, one_swap, exchange at either depth, under every strategy,
    `informed` with face-up finales): the win rate within 4 SE of `odds.exact_win_of` over
    2,000,000 deals."""
    exact = odds.exact_win_of(cell)
    assert exact is not None and 0 < exact < 1
    wins = int(stat_results["won"][STAT_CELLS.index(cell)].sum())
    assert abs(z_score(wins, STAT_DEALS, exact)) < Z_LIMIT, (wins / STAT_DEALS, float(exact))


@pytest.mark.parametrize("strategy", COUNT_STRATEGIES)
def test_win_chance_given_the_rescue_is_the_hint(strategy, stat_results):
    """P(win | rescue at p) = d_p / U (SPEC section 5), a claim tested rather than assumed.

    Rescued `watch` deals are binned by their hint d_p / U; in every bin of 2,000 deals or
    more the observed win rate lies within z* standard errors of the hint, z* the two-sided
    Bonferroni bound for a family-wise error of 1e-4 over the bins of the four strategies
    (4 x bins of this one; never below 4); and the bins' squared z-scores sum to a chi-square
    with p > 1e-4.
    A hint of 1 (every unseen card in the chosen pile) must win every time.
    """
    c = STAT_CELLS.index(Cell("watch", strategy))
    rescued = stat_results["rescue_pile"][c] > 0
    num = stat_results["hint_num"][c][rescued].astype(np.int64)
    den = stat_results["hint_den"][c][rescued].astype(np.int64)
    won = stat_results["won"][c][rescued].astype(np.int64)
    keys, inverse = np.unique(num * 64 + den, return_inverse=True)
    counts = np.bincount(inverse)
    win_counts = np.bincount(inverse, weights=won)
    by_hint = defaultdict(lambda: [0, 0])  # hint -> [rescues, wins]; d_p / U in lowest terms
    for key, n, wins in zip(keys.tolist(), counts.tolist(), win_counts.tolist()):
        hint = Fraction(key // 64, key % 64)
        by_hint[hint][0] += n
        by_hint[hint][1] += int(wins)
    if Fraction(1) in by_hint:
        n, wins = by_hint.pop(Fraction(1))
        assert wins == n
    bins = {h: v for h, v in by_hint.items() if v[0] >= 2000}
    assert len(bins) >= 20  # enough bins for the test to mean something
    tests_in_family = len(COUNT_STRATEGIES) * len(bins)  # Bonferroni, the four strategies alike
    z_star = max(Z_LIMIT, float(norm.isf(FAMILY_ALPHA / (2 * tests_in_family))))
    zs = {h: z_score(wins, n, h) for h, (n, wins) in bins.items()}
    worst = max(zs, key=lambda h: abs(zs[h]))
    assert abs(zs[worst]) < z_star, (worst, bins[worst], zs[worst], z_star)
    statistic = sum(z * z for z in zs.values())
    assert chi2.sf(statistic, len(zs)) > P_THRESHOLD
    print(
        f"{strategy}: {len(bins)} bins, worst z {zs[worst]:+.2f} (limit {z_star:.2f}), "
        f"chi-square p {chi2.sf(statistic, len(zs)):.3f}"
    )
