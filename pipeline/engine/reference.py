"""The reference engine: plays one deal at a time, readably, and can replay it step by step.

It follows the rules of `pipeline.engine.rules` literally, with the piles as Python lists, and is
the yardstick the fast kernel is tested against, deal by deal and field by field. Clarity
comes before speed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from pipeline.engine import custom, deals, rules
from pipeline.engine.record import DealRecord
from pipeline.engine.rules import (
    CENTRE,
    KING,
    N_HOURS,
    N_PILES,
    PILE_SIZE,
    Cell,
    card_text,
    home_of,
    pile_name,
    rank_of,
)


@dataclass(frozen=True)
class Step:
    """One thing that happened at the table, for replays and trajectory comparisons."""

    action: str  # "take", "place", "death", "rescue", "restart"
    pile: int
    card: int | None = None
    detail: str = ""

    def describe(self) -> str:
        card = card_text(self.card) if self.card is not None else ""
        if self.action == "take":
            return f"take {card} from {pile_name(self.pile)}"
        if self.action == "place":
            return f"place {card} under {pile_name(self.pile)}"
        if self.action == "death":
            return f"the chain dies at {pile_name(self.pile)}"
        return f"{self.action} at {pile_name(self.pile)}" + (
            f": {self.detail}" if self.detail else ""
        )


@dataclass(frozen=True)
class DealResult:
    """What one deal played under one cell gives: the fields of a per-deal result row."""

    won: bool
    cards_turned: int
    down_at_stop: int
    rescue_pile: int | None  # hour 1..12
    hint: Fraction | None
    restarts: int | None
    kings_at_bottom: int = 0  # hour piles whose bottom card is a king, as dealt
    unvisited_at_third_king: int = 0  # hours never taken from when the third king was placed
    deaths: tuple[int, ...] = ()  # pile index of every death, in order
    restart_piles: tuple[int, ...] = ()

    @property
    def record(self) -> DealRecord:
        """The per-deal result fields, as the kernel's results give them too."""
        return DealRecord(
            self.won,
            self.cards_turned,
            self.down_at_stop,
            self.rescue_pile,
            self.hint,
            self.restarts,
            self.stray_deaths,
        )

    @property
    def stray_deaths(self) -> int | None:
        """play_out only: deaths away from where the rules predict, the first at the centre
        and each later one at the pile its chain restarted from."""
        if self.restarts is None:
            return None
        expected = (CENTRE, *self.restart_piles)
        return sum(died != where for died, where in zip(self.deaths, expected))


@dataclass
class Table:
    """The layout as play changes it: face-down piles (top first), face-up cards, the hand."""

    down: list[list[int]]
    up: list[list[int]] = field(default_factory=lambda: [[] for _ in range(N_PILES)])
    hand: int | None = None
    set_aside: list[int] = field(default_factory=list)
    cards_turned: int = 0
    steps: list[Step] = field(default_factory=list)
    unvisited_at_third_king: int | None = None

    def take(self, pile: int) -> None:
        """Take the top face-down card of a pile into hand."""
        self.hand = self.down[pile].pop(0)
        self.cards_turned += 1
        self.steps.append(Step("take", pile, self.hand))

    def run_chain(self) -> int:
        """Deliver the card in hand and keep taking; gives the pile where the chain dies."""
        while True:
            pile = home_of(self.hand)
            self.up[pile].append(self.hand)
            self.steps.append(Step("place", pile, self.hand))
            if (
                pile == CENTRE
                and len(self.up[CENTRE]) == 3
                and self.unvisited_at_third_king is None
            ):
                # Seed 000's omen: hours still untouched when the third king shows.
                self.unvisited_at_third_king = sum(
                    len(self.down[hour]) == PILE_SIZE for hour in range(N_HOURS)
                )
            self.hand = None
            if not self.down[pile]:
                self.steps.append(Step("death", pile))
                return pile
            self.take(pile)

    def down_counts(self) -> list[int]:
        return [len(pile) for pile in self.down]

    def bottom_homes(self) -> list[int]:
        # A pile with no cards points at itself; no path from a pile with cards leads there.
        return [home_of(pile[-1]) if pile else q for q, pile in enumerate(self.down)]

    def cards_down(self) -> int:
        return sum(len(pile) for pile in self.down)

    def all_cards(self) -> list[int]:
        """Every card on the table, wherever it is: the conservation check's input."""
        cards = [c for pile in self.down for c in pile] + [c for pile in self.up for c in pile]
        cards += self.set_aside
        if self.hand is not None:
            cards.append(self.hand)
        return cards


def layout(seed: int, deal: int, order: str) -> list[list[int]]:
    """The thirteen piles of a deal, top first (index 12 = the centre)."""
    return rules.lay_out(deals.shuffled_deck(seed, deal), order)


def play(seed: int, deal: int, cell: Cell, table: Table | None = None) -> DealResult:
    """Play one deal under one cell. Pass a ``table`` to keep its steps for a replay."""
    if table is None:
        table = Table(down=layout(seed, deal, cell.order))
    dealt = [list(pile) for pile in table.down]
    deaths, restart_piles = [], []

    kings_at_bottom = sum(rank_of(table.down[hour][-1]) == KING for hour in range(N_HOURS))
    table.take(CENTRE)
    deaths.append(table.run_chain())
    down_at_stop = table.cards_down()
    rescue_pile = hint = restarts = None

    if down_at_stop and cell.has_rescue:
        down = table.down_counts()
        bottom_home = table.bottom_homes()
        n_eligible = len(rules.eligible_piles(down))
        random_index = (
            deals.strategy_draw(seed, deal, n_eligible) if cell.strategy == "random" else 0
        )
        if cell.custom is not None:
            pile = custom_pile(seed, deal, cell.custom, table, dealt, deaths[0])
        else:
            pile = rules.choose_pile(
                cell.strategy, cell.variant, cell.depth, down, bottom_home, random_index
            )
        rescue_pile = pile + 1
        hint = rules.hint(cell.variant, cell.depth, cell.finale, pile, down, bottom_home)
        king = table.up[CENTRE].pop()  # the fourth king, just placed
        rescue(table, cell, pile, king)
        deaths.append(table.run_chain())
    elif cell.variant == "play_out":
        restarts = 0
        while table.cards_down():
            # Restart at hour 1, or the first hour clockwise from it that holds a card.
            pile = rules.eligible_piles(table.down_counts())[0]
            restarts += 1
            restart_piles.append(pile)
            table.steps.append(Step("restart", pile))
            table.take(pile)
            deaths.append(table.run_chain())

    return DealResult(
        # Play it out always turns every card; its score is the restarts, and a deal counts
        # as won only when it needed none (a standard win).
        won=table.cards_down() == 0 and not restarts,
        cards_turned=table.cards_turned,
        down_at_stop=down_at_stop,
        rescue_pile=rescue_pile,
        hint=hint,
        restarts=restarts,
        kings_at_bottom=kings_at_bottom,
        unvisited_at_third_king=table.unvisited_at_third_king,
        deaths=tuple(deaths),
        restart_piles=tuple(restart_piles),
    )


def custom_pile(
    seed: int, deal: int, strategy: rules.Custom, table: Table, dealt: list[list[int]], died: int
) -> int:
    """The pile a strategy of the user's rescues at: its Python function, shown what the
    player sees (`rules.SEES`) of the table at the first death, ``dealt`` being the layout."""
    taken = [
        [rank_of(card) for card in pile[: len(pile) - len(table.down[q])]]
        for q, pile in enumerate(dealt)
    ]
    bottoms = [rank_of(pile[-1]) for pile in dealt]
    rand = 0.0
    if "rand" in strategy.sees:
        rand = rules.rand_value(deals.strategy_draw(seed, deal, rules.RAND_GRID))
    seen = custom.seen_matrix(taken, died)
    return custom.pick_python(strategy, deal, table.down_counts(), seen, bottoms, rand)


def rescue(table: Table, cell: Cell, pile: int, king: int) -> None:
    """Apply the cell's rescue at ``pile`` with the fourth king; the hand then holds a card."""
    if cell.variant == "watch":
        table.set_aside.append(king)
        table.steps.append(Step("rescue", pile, king, "the king is set aside"))
        table.take(pile)
    elif cell.variant == "one_swap":
        table.down[pile].append(king)
        table.steps.append(Step("rescue", pile, king, "the king is tucked under the pile"))
        table.take(pile)
    elif cell.variant == "exchange":
        position = len(table.down[pile]) - 1 if cell.depth == "bottom" else 0
        table.down[pile][position], table.hand = king, table.down[pile][position]
        table.cards_turned += 1
        table.steps.append(
            Step("rescue", pile, table.hand, f"the king takes the {cell.depth} card's place")
        )
    else:
        raise rules.RuleError(f"variant {cell.variant!r} has no rescue")
