"""The exact law of each measure of a deal under each cell, where one is known, and why none is
where it is not: a law is a property of a measure (`measures`) and a cell, built from the odds
(`odds`). The report sets every distribution it counts beside its law (`law_of`), and
`clocksweep odds --law` prints them (`law_records`).

Which cells have which law (docs/rules.md, "Exact laws"):

- ``down_at_stop``: every cell. The chain to the first death is standard play's.
- ``cards_turned``: standard play (Score Four); play_out, always every card; and each rescue
  of a counts-only strategy. Given what the player sees at the first death, the unseen cards
  lie in a uniformly random order, and each hour's face-down count is its rank's unseen
  cards. So the chain after a rescue at p reads them until the last card of rank p (the
  Watch, the one swap, the exchange at the bottom), or the first (at the top, where the king
  waits on top of p). With k = d_p of the U cards down, that card is the t-th read with
  chance C(t-1, k-1) / C(U, k) (the last) or C(U-t, k-1) / C(U, k) (the first). The one swap
  and the exchange turn the king once more. The law of k given U is the strategy's
  (`odds.chosen_size_totals`; a strategy of the user's: its enumeration's totals).
- ``restarts``: play_out, c(13, k+1) / 13! (`odds.restarts_law`).
- ``stray_deaths``: play_out, always 0. Each chain dies at the pile of its root's rank (the
  derivation of restarts), so a stray death is a fault of the engine.
- ``rescue_pile``: none known. Which hour a strategy picks is not derived, only the size of
  its pile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from math import comb

from pipeline.engine import measures, odds, rules
from pipeline.engine.rules import Cell

# The measures whose values the report counts, each beside its law: a deal's small integers
# (``won`` is the win rate's, with its exact value by cell; ``hint`` has its calibration).
DISTRIBUTED = tuple(measure.name for measure in measures.MEASURES if measure.dtype == "int8")


@dataclass(frozen=True)
class Law:
    """The law of ``measure`` on a cell: each value's chance, or None where none is known;
    ``source``, where it comes from, or why there is none."""

    measure: str
    chances: Mapping[int, Fraction] | None
    source: str

    @property
    def known(self) -> bool:
        return self.chances is not None

    def mean(self) -> Fraction | None:
        if self.chances is None:
            return None
        return sum((value * chance for value, chance in self.chances.items()), Fraction(0))


def law_of(measure: str, cell: Cell) -> Law | None:
    """The law of ``measure`` (one of `DISTRIBUTED`) on ``cell``; None where the measure has
    no value on the cell."""
    if not measures.BY_NAME[measure].defined_on(cell):
        return None
    chances, source = _LAWS[measure](cell)
    return Law(measure, chances, source)


def _down_at_stop(cell: Cell) -> tuple[dict | None, str]:
    return odds.down_at_stop_law(), "the first death's, as in standard play (down_at_stop_law)"


def _restarts(cell: Cell) -> tuple[dict | None, str]:
    return odds.restarts_law(), "c(13, k+1) / 13!: cycles of a random permutation (restarts_law)"


def _stray_deaths(cell: Cell) -> tuple[dict | None, str]:
    return {0: Fraction(1)}, "none: each chain dies at its root's pile (as restarts_law shows)"


def _rescue_pile(cell: Cell) -> tuple[dict | None, str]:
    return None, "none known: the hour a strategy picks is not derived, only its pile's size"


def _cards_turned(cell: Cell) -> tuple[dict | None, str]:
    if cell.variant == "standard":
        return odds.cards_turned_law(), "Score Four: the last king's place (cards_turned_law)"
    if cell.variant == "play_out":
        return {odds.deck_size(): Fraction(1)}, "every card: play_out restarts until none is down"
    law = _rescue_turned(cell.variant, cell.strategy, _depth(cell), cell.custom)
    if law is None:
        return None, (
            "none known: the pile it picks depends on more than the counts, and the length "
            "of the chain after its rescue is not derived (its win chance is)"
        )
    return law, (
        "the rescue's chain read to the last (at the top: the first) card of its pile's "
        "rank, by the law of that pile's size"
    )


_LAWS: dict[str, Callable[[Cell], tuple[dict | None, str]]] = {
    "cards_turned": _cards_turned,
    "down_at_stop": _down_at_stop,
    "rescue_pile": _rescue_pile,
    "restarts": _restarts,
    "stray_deaths": _stray_deaths,
}
if set(_LAWS) != set(DISTRIBUTED):
    raise AssertionError("a measure the report counts has no entry in laws._LAWS")


@cache
def _rescue_turned(variant: str, strategy: str, depth: str, mine: rules.Custom | None):
    """A rescue's law of cards_turned, or None: once for each of the cells that share it,
    whatever their finale and order."""
    sizes = chosen_sizes_of(strategy, mine)
    return None if sizes is None else rescue_turned_law(sizes, variant, depth)


def _depth(cell: Cell) -> str:
    return "top" if cell.depth == "top" else "bottom"  # the Watch and the one swap: bottom


def chosen_sizes_of(
    strategy: str, mine: rules.Custom | None = None
) -> tuple[Mapping[int, Fraction], ...] | None:
    """For each U: k -> P(d_p = k | U) for the pile p that ``strategy`` (``mine``, for one of
    the user's) picks, where it reads only the counts (and rand); None where it reads more."""
    if mine is not None:
        if not mine.counts_only:
            return None
        return sizes_given_down(odds.custom_size_totals(mine), rules.RAND_GRID)
    if strategy in rules.COUNT_STRATEGIES:
        return sizes_given_down(odds.chosen_size_totals(strategy, odds.HOUR_RANKS, odds.SUITS))
    return None


def sizes_given_down(
    totals: tuple[Mapping[int, Fraction | int], ...], grid: int = 1
) -> tuple[dict[int, Fraction], ...]:
    """P(d_p = k | U) from an enumeration's weights by U and k, each count vector weighed
    ``grid`` times (once for each value of rand): the weights at U sum to grid * C(n, U)."""
    non_kings = len(totals) - 1
    return tuple(
        {k: Fraction(total) / (grid * comb(non_kings, down)) for k, total in by_size.items()}
        for down, by_size in enumerate(totals)
    )


def rescue_turned_law(
    sizes: tuple[Mapping[int, Fraction], ...],
    variant: str,
    depth: str,
    ranks: int = odds.HOUR_RANKS,
    suits: int = odds.SUITS,
) -> dict[int, Fraction]:
    """P(cards_turned = t) for a rescue ``variant`` at ``depth``, ``sizes[U]`` being the law
    of the chosen pile's face-down count given U cards down (see the module's note)."""
    cards = odds.deck_size(ranks, suits)
    again = 0 if variant == "watch" else 1  # the one swap and the exchange turn the king again
    law: dict[int, Fraction] = {}
    for down, chance in odds.down_at_stop_law(ranks, suits).items():
        if not down:
            law[cards] = law.get(cards, Fraction(0)) + chance  # won at the first death
            continue
        for k, given in sizes[down].items():
            for read in range(1, down + 1):
                ways = comb(read - 1, k - 1) if depth == "bottom" else comb(down - read, k - 1)
                if ways:
                    turned = cards - down + read + again
                    law[turned] = law.get(turned, Fraction(0)) + chance * given * Fraction(
                        ways, comb(down, k)
                    )
    if sum(law.values()) != 1:
        raise AssertionError(f"the law of cards_turned under {variant} does not sum to 1")
    return dict(sorted(law.items()))


# --- `clocksweep odds --law` ----------------------------------------------------------------


def law_cells(customs: tuple[rules.Custom, ...] = ()) -> list[Cell]:
    """One cell for each law there is: the built-in cells but for finale and order, which
    change no law; with ``customs``, each of those strategies under each rescue instead."""
    if customs:
        return [
            Cell(variant, custom.name, depth=depth, custom=custom)
            for custom in customs
            for variant in rules.RESCUE_VARIANTS
            for depth in (("bottom", "top") if variant == "exchange" else (None,))
        ]
    return rules.all_cells(finales=("down",), orders=("round-robin",))


def law_records(measure: str, customs: tuple[rules.Custom, ...] = ()) -> list[dict]:
    """The exact law of ``measure`` on each cell of `law_cells`, a record per value with a
    chance: the cell, the value, its chance as a reduced fraction; a cell with no law known,
    one record saying why."""
    records = []
    for cell in law_cells(customs):
        law = law_of(measure, cell)
        if law is None:
            continue
        who = cell.label.removesuffix(" finale=down order=round-robin")
        if not law.known:
            records.append({"measure": measure, "cell": who, "value": None, "exact": None})
            records[-1]["none_known"] = law.source
            continue
        records += [
            {"measure": measure, "cell": who, "value": value, "exact": odds.fraction_text(p)}
            for value, p in law.chances.items()
            if p
        ]
    return records


def record_line(record: dict) -> str:
    """A record of `law_records` as `clocksweep odds --law` prints it."""
    if record["exact"] is None:
        return f"{record['cell']:<32} {record['none_known']}"
    numerator, _, denominator = record["exact"].partition("/")
    decimal = int(numerator) / int(denominator or 1)
    return f"{record['cell']:<32} {record['value']:>3}  {record['exact']:>48}  = {decimal:.12f}"
