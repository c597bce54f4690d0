"""The rules of Clock Patience and its rescue house rules, as pure functions.

This module is the single source of truth for the names of things (variants, strategies,
modifiers, deal orders), for what a cell of a sweep may be, and for the decisions a rescue
makes. It does no I/O and holds no state; both engines (`reference`, `kernel`) follow it.

Piles are indexed 0..12: index 0..11 are hours 1..12, index 12 is the centre. A card is an
integer 0..51, ``rank * 4 + suit``, ranks A..K = 0..12, suits C, D, H, S = 0..3; so a card's
home pile index is simply its rank.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from math import lcm

from pipeline import echoed

RANKS = "A23456789TJQK"
SUITS = "CDHS"
N_CARDS = 52
N_PILES = 13
N_HOURS = 12
CENTRE = 12
PILE_SIZE = 4
KING = 12

# The names a sweep may use, in the order their integer codes follow (the kernel uses the
# index of a name in these tuples).
VARIANTS = ("standard", "watch", "one_swap", "exchange", "play_out")
RESCUE_VARIANTS = ("watch", "one_swap", "exchange")
STRATEGIES = ("clockwise", "random", "most", "fewest", "informed", "oracle")
FINALES = ("down", "up")
ORDERS = ("round-robin", "packets")
DEPTHS = ("bottom", "top")
CUSTOM = len(STRATEGIES)  # the strategy code of every strategy of the user's (`Cell.codes`)

# The axes a cell varies on, with their names: the label columns of every record, in this order.
AXES = {
    "order": ORDERS,
    "variant": VARIANTS,
    "strategy": STRATEGIES,
    "finale": FINALES,
    "depth": DEPTHS,
}
# What a sweep's grid plays on an axis it does not name (in the order a config lists its axes).
AXIS_DEFAULTS = {
    "variant": ("standard",),
    "strategy": STRATEGIES,
    "finale": ("down",),
    "order": ("round-robin",),
    "depth": ("bottom",),
}

# Strategies that choose from what a player sees with the bottoms face down (the face-down
# counts), and those that look at cards no player sees: an upper bound, not a way to play.
COUNT_STRATEGIES = ("clockwise", "random", "most", "fewest")
PEEKING_STRATEGIES = ("oracle",)
# Strategies that pick from the bottom cards (`informed` face up, `oracle` peeking): both take
# the first pile whose rescue the bottoms prove wins.
BOTTOM_STRATEGIES = ("informed", "oracle")

# --- Strategies of the user's -------------------------------------------------------------
#
# A strategy of the user's is a function whose parameters, by their names, say what it sees
# at the rescue (docs/rules.md, strategies of your own): `counts`, the face-down cards of each
# hour pile (int64[12], hours 1..12); `seen`, the cards taken so far (int64[13, 14]: row q,
# pile q; column r < 13, cards of rank r taken from it; column 13, 1 at the pile where the
# chain died); `bottoms`, each pile's bottom card as dealt, its rank (int64[13], face-up
# finales only); `rand`, a number from the deal's strategy stream. It returns an hour 1..12
# of a pile that holds face-down cards.
SEES = ("counts", "seen", "bottoms", "rand")
MAX_CUSTOM = 8  # strategies of the user's one sweep (one kernel call) may play
SEEN_COLUMNS = N_PILES + 1  # the ranks A..K, then where the chain died
DIED = N_PILES  # `seen`'s column of the pile where the chain died

# `rand` is uniform on [0, 1) rounded to the middle of its interval between consecutive
# fractions k/n with n <= 12 (the Farey sequence of order 12): so int(rand * n) is an exactly
# uniform choice among n piles for every n from 1 to 12, rand < k/n has chance exactly k/n,
# and rand takes RAND_VALUES' 46 values only, which is what lets `odds` give the exact value
# of a strategy that reads it. It is drawn as an integer uniform in [0, RAND_GRID) from the
# deal's strategy stream, as `random`'s draw is (`deals.strategy_draw`).
RAND_GRID = lcm(*range(1, N_HOURS + 1))  # 27720: every k/n, n <= 12, is a multiple of 1/RAND_GRID
# The fractions k/n, n <= 12, in [0, 1], as numerators over RAND_GRID, ascending.
RAND_BREAKS = tuple(
    sorted({k * (RAND_GRID // n) for n in range(1, N_HOURS + 1) for k in range(n)} | {RAND_GRID})
)
# `rand`'s law: (value, chance) per interval; the value is a float as the engines give it.
RAND_LAW = tuple(
    (Fraction(low + high, 2 * RAND_GRID), Fraction(high - low, RAND_GRID))
    for low, high in zip(RAND_BREAKS, RAND_BREAKS[1:])
)
RAND_VALUES = tuple(float(value) for value, _ in RAND_LAW)


def rand_value(draw: int) -> float:
    """`rand` for a draw uniform in [0, RAND_GRID): the middle of the interval between
    consecutive fractions k/n (n <= 12) that holds draw / RAND_GRID."""
    if not 0 <= draw < RAND_GRID:
        raise ValueError(f"draw: {draw} is not in 0..{RAND_GRID - 1}")
    return RAND_VALUES[bisect_right(RAND_BREAKS, draw) - 1]


@dataclass(frozen=True, order=True)
class Custom:
    """A rescue strategy of the user's (`pipeline.engine.custom` reads and compiles it).

    Two are the same strategy when their name, what they see, their source's digest and the
    digest of what it reaches outside its file (its helpers, `reach`) are: where the source
    came from, and its text (the digest stands for it), do not count.
    """

    name: str  # its label in every record: the function's name
    sees: tuple[str, ...]  # its parameters, from SEES, in the function's order
    digest: str  # sha256 of the source below
    reaches: str = ""  # sha256 of the helpers and values it reads from elsewhere ("" if none)
    spec: str = field(
        default="", compare=False, kw_only=True
    )  # as the config names it: FILE.py:FUNCTION
    source: str = field(
        default="", compare=False, repr=False, kw_only=True
    )  # its file's or module's text

    def __post_init__(self) -> None:
        if self.name in STRATEGIES:
            raise RuleError(
                f"strategy: {self.spec or self.name!r} clashes with the built-in strategy "
                f"{echoed(self.name)}; rename the function"
            )
        unknown = [name for name in self.sees if name not in SEES]
        if unknown:
            raise RuleError(
                f"strategy: {echoed(self.name)} asks for {echoed(unknown[0])}; a strategy may see "
                f"{', '.join(SEES)}"
            )

    @property
    def reads_bottoms(self) -> bool:
        return "bottoms" in self.sees

    @property
    def counts_only(self) -> bool:
        """Whether it reads nothing but the counts (and `rand`): then `odds` has its value."""
        return not {"seen", "bottoms"} & set(self.sees)


def rank_of(card: int) -> int:
    return card // 4


def home_of(card: int) -> int:
    """The pile index a card is delivered to: its rank (kings to the centre, index 12)."""
    return card // 4


def card_text(card: int) -> str:
    return RANKS[card // 4] + SUITS[card % 4]


def parse_card(text: str) -> int:
    if len(text) != 2 or text[0] not in RANKS or text[1] not in SUITS:
        raise ValueError(f"not a card: {echoed(text)} (rank in {RANKS}, then suit in {SUITS})")
    return RANKS.index(text[0]) * 4 + SUITS.index(text[1])


def pile_name(pile: int) -> str:
    return "centre" if pile == CENTRE else f"hour {pile + 1}"


# --- Layout -----------------------------------------------------------------------------


def deal_position(order: str, pile: int, depth_from_top: int) -> int:
    """The position in the shuffled deck (0 = dealt first) of a pile's card, counted from the top.

    The first card dealt to a pile is its bottom, the last its top.
    """
    dealt_at = PILE_SIZE - 1 - depth_from_top
    if order == "round-robin":
        return dealt_at * N_PILES + pile
    if order == "packets":
        return pile * PILE_SIZE + dealt_at
    raise ValueError(f"order: {echoed(order)}; allowed: {', '.join(ORDERS)}")


def lay_out(deck: list[int], order: str) -> list[list[int]]:
    """The thirteen piles a shuffled deck makes, each listed top first."""
    return [
        [deck[deal_position(order, pile, k)] for k in range(PILE_SIZE)] for pile in range(N_PILES)
    ]


# --- Cells ------------------------------------------------------------------------------


class RuleError(ValueError):
    """A cell, or one of its parameters, that the rules do not allow; the message says why."""


@dataclass(frozen=True, order=True)
class Cell:
    """One combination of rules a deal is played under."""

    variant: str = "standard"
    strategy: str | None = None
    finale: str = "down"
    order: str = "round-robin"
    depth: str | None = None
    # A strategy of the user's: ``strategy`` is then its name.
    custom: Custom | None = None

    def __post_init__(self) -> None:
        check_choice("variant", self.variant, VARIANTS)
        check_choice("finale", self.finale, FINALES)
        check_choice("order", self.order, ORDERS)
        if self.custom is not None and self.strategy != self.custom.name:
            raise RuleError(
                f"strategy: {echoed(self.strategy)} is not the name of its function {echoed(self.custom.name)}"
            )
        if self.variant in RESCUE_VARIANTS:
            if self.strategy is None:
                raise RuleError(
                    f"strategy: variant {echoed(self.variant)} needs one of {', '.join(STRATEGIES)}"
                )
            if self.custom is None:
                check_choice("strategy", self.strategy, STRATEGIES)
            if self.strategy == "informed" and self.finale != "up":
                raise RuleError(
                    "strategy: 'informed' reads the face-up bottom cards, so it needs finale = 'up'"
                )
            if self.custom is not None and self.custom.reads_bottoms and self.finale != "up":
                raise RuleError(
                    f"strategy: {echoed(self.strategy)} reads bottoms, the face-up bottom cards, "
                    "so it needs finale = 'up'"
                )
        elif self.strategy is not None:
            raise RuleError(
                f"strategy: variant {echoed(self.variant)} has no rescue, so no strategy "
                f"(strategies apply to {', '.join(RESCUE_VARIANTS)})"
            )
        if self.variant == "exchange":
            if self.depth is None:
                object.__setattr__(self, "depth", "bottom")
            check_choice("depth", self.depth, DEPTHS)
        elif self.depth is not None:
            raise RuleError(
                f"depth: only variant 'exchange' has a depth, not {echoed(self.variant)}"
            )

    @property
    def has_rescue(self) -> bool:
        return self.variant in RESCUE_VARIANTS

    @property
    def label(self) -> str:
        parts = [self.variant]
        if self.strategy:
            parts.append(self.strategy)
        if self.depth:
            parts.append(f"depth={self.depth}")
        parts.append(f"finale={self.finale}")
        parts.append(f"order={self.order}")
        return " ".join(parts)

    def codes(self) -> tuple[int, int, int, int, int]:
        """Integer codes for the kernel: indices into the name tuples, -1 for none; a
        strategy of the user's is CUSTOM (the kernel adds its place among the call's)."""
        if self.custom is not None:
            strategy = CUSTOM
        else:
            strategy = STRATEGIES.index(self.strategy) if self.strategy else -1
        return (
            VARIANTS.index(self.variant),
            strategy,
            FINALES.index(self.finale),
            ORDERS.index(self.order),
            DEPTHS.index(self.depth) if self.depth else -1,
        )


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise RuleError(f"{name}: {echoed(value)} is not known; allowed: {', '.join(allowed)}")


def expand(grid: dict[str, tuple[str, ...]], customs: tuple[Custom, ...] = ()) -> list[Cell]:
    """Every cell the rules allow in a grid (a tuple of names per axis of AXES), in the one
    order every sweep and record uses: order, finale, variant, then strategy and depth.
    Strategies apply to rescue variants only, depths to `exchange` only; other combinations
    (such as `informed` with face-down finales) are left out. RuleError if none is left.
    A strategy named in ``customs`` is that strategy of the user's."""
    by_name = {custom.name: custom for custom in customs}
    cells, refusals = [], []
    for order, finale, variant in product(grid["order"], grid["finale"], grid["variant"]):
        strategies = grid["strategy"] if variant in RESCUE_VARIANTS else (None,)
        depths = grid["depth"] if variant == "exchange" else (None,)
        for strategy, depth in product(strategies, depths):
            try:
                cells.append(Cell(variant, strategy, finale, order, depth, by_name.get(strategy)))
            except RuleError as refusal:
                refusals.append(str(refusal))
    if not cells:
        raise RuleError(
            "grid: expands to no cell that the rules allow"
            + (f": {refusals[0]}" if refusals else "")
        )
    return cells


def all_cells(finales=FINALES, orders=ORDERS, depths=DEPTHS) -> list[Cell]:
    """Every meaningful cell: rescue variants with each strategy, the rest without."""
    return expand({**AXES, "finale": finales, "order": orders, "depth": depths})


def wins_as_standard(variant: str) -> bool:
    """Variants whose deals are won exactly when standard play wins them (play_out's
    restart-free deals)."""
    return variant in ("standard", "play_out")


# --- What decides a rescued deal ----------------------------------------------------------
#
# A chain that starts by taking a card from a pile without one arriving there can only die
# at that pile, and it turns every card exactly when, from every other pile that still holds
# cards, following "bottom card -> its home -> that pile's bottom card -> ..." reaches the
# pile where it must die (the last-exit tree of the BEST theorem). Every rescue therefore
# comes down to one predicate over the piles' bottom cards.


def bottoms_reach(bottom_home: list[int], holds_cards: list[bool], end: int) -> bool:
    """Whether, from every pile that holds cards, the bottom-card pointers lead to ``end``.

    ``bottom_home[q]`` is the home of pile q's bottom card; ``end`` is the pile where the chain
    must die. A pile whose path cycles without meeting ``end`` proves the deal lost.
    """
    reaches = [False] * N_PILES
    reaches[end] = True
    for start in range(N_PILES):
        if not holds_cards[start] or reaches[start]:
            continue
        path = []
        pile = start
        # A path of more than 13 steps must cycle.
        while not reaches[pile] and len(path) <= N_PILES:
            path.append(pile)
            pile = bottom_home[pile]
        if not reaches[pile]:
            return False
        for visited in path:
            reaches[visited] = True
    return True


def rescue_wins(
    variant: str, depth: str | None, pile: int, bottom_home: list[int], down: list[int]
) -> bool:
    """Whether rescuing at ``pile`` wins, from the bottom cards at the first death.

    ``down[q]`` is pile q's face-down count at the death; ``bottom_home[q]`` the home of its
    bottom card (meaningful where ``down[q] > 0``). The centre is empty at the death.
    """
    holds = [d > 0 for d in down]
    if variant == "watch":
        # The chain restarts from `pile` without a card arriving there: it dies at `pile`.
        return bottoms_reach(bottom_home, holds, pile)
    homes = list(bottom_home)
    if variant == "one_swap":
        # The king goes under `pile`: its bottom now leads to the centre, where the chain ends.
        homes[pile] = CENTRE
        return bottoms_reach(homes, holds, CENTRE)
    if variant == "exchange":
        # The king replaces one of `pile`'s cards; it is its new bottom only at depth
        # "bottom", or when the pile held a single card.
        if depth == "bottom" or down[pile] == 1:
            homes[pile] = CENTRE
        return bottoms_reach(homes, holds, CENTRE)
    raise RuleError(f"variant {echoed(variant)} has no rescue")


def winning_piles(
    variant: str, depth: str | None, bottom_home: list[int], down: list[int]
) -> list[int]:
    """The hour piles where a rescue wins, clockwise from hour 1."""
    return [
        p
        for p in range(N_HOURS)
        if down[p] > 0 and rescue_wins(variant, depth, p, bottom_home, down)
    ]


def eligible_piles(down: list[int]) -> list[int]:
    """Hour piles a rescue may use: those that still hold face-down cards, clockwise from 1."""
    return [p for p in range(N_HOURS) if down[p] > 0]


def choose_pile(
    strategy: str,
    variant: str,
    depth: str | None,
    down: list[int],
    bottom_home: list[int],
    random_index: int,
) -> int:
    """The hour pile a strategy rescues at.

    ``random_index`` is the `random` strategy's draw, uniform in [0, number of eligible piles).
    ``bottom_home`` is read only by `informed` (the cell guarantees the bottoms are face up)
    and by `oracle` (which peeks). Ties go to the first pile clockwise from hour 1.
    """
    eligible = eligible_piles(down)
    if strategy == "clockwise":
        return eligible[0]
    if strategy == "random":
        return eligible[random_index]
    if strategy == "fewest":
        return min(eligible, key=lambda p: (down[p], p))
    most = min(eligible, key=lambda p: (-down[p], p))
    if strategy == "most":
        return most
    if strategy in ("informed", "oracle"):
        winners = winning_piles(variant, depth, bottom_home, down)
        return winners[0] if winners else most
    raise RuleError(f"strategy: {echoed(strategy)} is not known; allowed: {', '.join(STRATEGIES)}")


class StrategyError(RuleError):
    """A strategy of the user's that raised, or named no pile a rescue may use, on a deal."""


def pick_problem(hour, down: list[int]) -> str | None:
    """Why a strategy's answer ``hour`` is not a rescue pile, given the face-down counts
    ``down`` (by pile index): None if it is one."""
    holding = ", ".join(str(p + 1) for p in eligible_piles(down))
    if isinstance(hour, bool) or not isinstance(hour, int):
        return f"not an hour, an integer 1..{N_HOURS} (hours holding cards: {holding})"
    if not 1 <= hour <= N_HOURS:
        return f"not an hour 1..{N_HOURS} (hours holding cards: {holding})"
    if down[hour - 1] == 0:
        return f"hour {hour} holds no face-down card (hours holding cards: {holding})"
    return None


def strategy_error(name: str, deal: int | None, hour: object, why: str) -> StrategyError:
    """The one line a strategy that gave no rescue pile stops a sweep with."""
    where = f"deal {deal}" if deal is not None else "a deal"
    return StrategyError(f"strategy {echoed(name)} returned hour {hour} on {where}: {why}")


def hint(
    variant: str,
    depth: str | None,
    finale: str,
    pile: int,
    down: list[int],
    bottom_home: list[int],
) -> Fraction:
    """The hint's chance of winning by rescuing at ``pile``, given what the player sees.

    With only face-down counts visible, every arrangement of the unseen cards is equally
    likely, and the rescued chain wins exactly when the last of those cards to turn is of the
    rescue pile's rank: chance d_p / U. Exchanging at the top of a pile with more than one
    card puts the king where the next card of that rank turns it up at once: chance 0.
    With face-up finales the bottom cards decide the deal, so the hint is certain: 0 or 1.
    """
    if finale == "up":
        return Fraction(int(rescue_wins(variant, depth, pile, bottom_home, down)))
    if variant == "exchange" and depth == "top" and down[pile] > 1:
        return Fraction(0)
    return Fraction(down[pile], sum(down))
