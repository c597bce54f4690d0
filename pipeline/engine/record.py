"""A deal's result under one cell, as both engines give it: the per-deal result fields
(docs/results.md) that the reference engine returns for one deal and the kernel encodes, a
deal to a column, in its int8 arrays. `from_kernel` is the one place where the kernel's
encoding (`NO_PILE`, `NO_COUNT`) is read back for one deal; the records' writers and the
summary's tally read the same constants, a column at a time (`records.schema`,
`records.dealfile`, `records.summary`), and the kernel writes them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from pipeline.engine import rules

# How the kernel's int8 arrays say "no value": the one definition of its sentinels.
NO_PILE = 0  # rescue_pile and hint_den with no rescue (hours are 1..12, a denominator >= 1)
NO_COUNT = -1  # restarts and stray_deaths outside play_out (counts are >= 0)


class Tallies(NamedTuple):
    """Records counted where the kernel makes them (`kernel.play` with tallies), in place of
    its rows: dense int64 arrays indexed by a record's values, each array's shape its layout
    (`records.summary` makes them and reads them back). Values index as they are, but the
    sentinels: ``restarts`` and ``stray`` less NO_COUNT (0 for none), the hint by its code."""

    counts: np.ndarray  # cells x won x down_at_stop x hint code (but play_out cells)
    turned_piles: np.ndarray  # cells x won x cards_turned x rescue_pile (NO_PILE: none)
    restarts: np.ndarray  # play_out slots x won x down_at_stop x restarts x stray_deaths
    restart_slot: np.ndarray  # per cell: its slot in ``restarts`` (play_out cells)
    facts: np.ndarray  # cells x won x kings_at_bottom x unvisited_at_third_king (standard)
    hint_code: np.ndarray  # the hint's code by (hint_num, hint_den); 0: no rescue


@dataclass(frozen=True)
class DealRecord:
    won: bool
    cards_turned: int
    down_at_stop: int  # face-down cards when the chain first died
    rescue_pile: int | None  # hour 1..12 of the rescue, None without one
    hint: Fraction | None  # the chance the rescue wins, given what the player sees
    restarts: int | None  # play_out only
    stray_deaths: int | None  # play_out only: deaths away from where the rules predict

    def row(self, cell, seed: int | None, deal: int | None) -> dict:
        """The per-deal result row (docs/results.md, per-deal columns) of this deal under
        ``cell``, the hint as a float; ``seed`` and ``deal`` None for a deal no number names."""
        hint = None if self.hint is None else float(self.hint)
        return {
            "seed": seed,
            "deal": deal,
            **{axis: getattr(cell, axis) for axis in rules.AXES},
            "won": self.won,
            "cards_turned": self.cards_turned,
            "down_at_stop": self.down_at_stop,
            "rescue_pile": self.rescue_pile,
            "hint": hint,
            "restarts": self.restarts,
            "stray_deaths": self.stray_deaths,
        }


def from_kernel(results: dict[str, np.ndarray], cell: int, deal: int) -> DealRecord:
    """Deal ``deal`` (its column) of cell ``cell`` (its row) of `kernel.play`'s results."""
    pile = int(results["rescue_pile"][cell, deal])
    denominator = int(results["hint_den"][cell, deal])
    restarts = int(results["restarts"][cell, deal])
    stray = int(results["stray_deaths"][cell, deal])
    return DealRecord(
        won=bool(results["won"][cell, deal]),
        cards_turned=int(results["cards_turned"][cell, deal]),
        down_at_stop=int(results["down_at_stop"][cell, deal]),
        rescue_pile=None if pile == NO_PILE else pile,
        hint=None
        if denominator == NO_PILE
        else Fraction(int(results["hint_num"][cell, deal]), denominator),
        restarts=None if restarts == NO_COUNT else restarts,
        stray_deaths=None if stray == NO_COUNT else stray,
    )
