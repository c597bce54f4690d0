"""A deal's result under one cell, as both engines give it: the per-deal result fields
(docs/results.md) that the reference engine returns for one deal and the kernel encodes, a
deal to a column, in its int8 arrays. `from_kernel` is the one place where the kernel's
encoding (0 for no rescue pile or hint, -1 for no restart count) is read back for one deal;
the records' writers read the same encoding, a column at a time (`records.schema`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class DealRecord:
    won: bool
    cards_turned: int
    down_at_stop: int  # face-down cards when the chain first died
    rescue_pile: int | None  # hour 1..12 of the rescue, None without one
    hint: Fraction | None  # the chance the rescue wins, given what the player sees
    restarts: int | None  # play_out only


def from_kernel(results: dict[str, np.ndarray], cell: int, deal: int) -> DealRecord:
    """Deal ``deal`` (its column) of cell ``cell`` (its row) of `kernel.play`'s results."""
    pile = int(results["rescue_pile"][cell, deal])
    denominator = int(results["hint_den"][cell, deal])
    restarts = int(results["restarts"][cell, deal])
    return DealRecord(
        won=bool(results["won"][cell, deal]),
        cards_turned=int(results["cards_turned"][cell, deal]),
        down_at_stop=int(results["down_at_stop"][cell, deal]),
        rescue_pile=pile or None,
        hint=Fraction(int(results["hint_num"][cell, deal]), denominator) if denominator else None,
        restarts=None if restarts == -1 else restarts,
    )
