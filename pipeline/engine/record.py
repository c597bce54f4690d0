"""A deal's result under one cell, as both engines give it: the per-deal result fields
(`measures`, docs/results.md) that the reference engine returns for one deal and the kernel
encodes, a deal to a column, in its int8 arrays. `from_kernel` is the one place where the
kernel's encoding (`measures.NO_PILE`, `measures.NO_COUNT`) is read back for one deal; the
records' writers and the summary's tally read the same constants, a column at a time
(`records.schema`, `records.dealfile`, `records.summary`), and the kernel writes them."""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from pipeline.engine import rules
from pipeline.engine.measures import MEASURES, NO_COUNT, NO_PILE

__all__ = ["NO_COUNT", "NO_PILE", "DealRecord", "Tallies", "from_kernel"]  # the sentinels too


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
    """A value of each measure (`measures.MEASURES`, in their order), None where the cell
    has none: the fields below are the declarations' names, which a test holds equal."""

    won: bool
    cards_turned: int
    down_at_stop: int
    rescue_pile: int | None
    hint: Fraction | None  # exact here; a float in the records
    restarts: int | None
    stray_deaths: int | None

    def row(self, cell, seed: int | None, deal: int | None) -> dict:
        """The per-deal result row (docs/results.md, per-deal columns) of this deal under
        ``cell``, the hint as a float; ``seed`` and ``deal`` None for a deal no number names."""
        values = [
            None if v is None else float(v) if isinstance(v, Fraction) else v for v in astuple(self)
        ]
        return {
            "seed": seed,
            "deal": deal,
            **{axis: getattr(cell, axis) for axis in rules.AXES},
            **dict(zip((f.name for f in fields(self)), values)),
        }


def from_kernel(results: dict[str, np.ndarray], cell: int, deal: int) -> DealRecord:
    """Deal ``deal`` (its column) of cell ``cell`` (its row) of `kernel.play`'s results."""
    return DealRecord(*(_kernel_value(measure, results, cell, deal) for measure in MEASURES))


def _kernel_value(measure, results: dict[str, np.ndarray], cell: int, deal: int):
    """One measure's value of one deal, as the kernel's arrays hold it: None at its
    sentinel, a bool for a bool, the hint's fraction from its numerator and denominator."""
    first, *rest = (int(results[name][cell, deal]) for name in measure.kernel)
    held = int(results[measure.sentinel_array][cell, deal])
    if measure.missing is not None and held == measure.missing:
        return None
    if measure.dtype == "bool":
        return bool(first)
    return Fraction(first, rest[0]) if rest else first
