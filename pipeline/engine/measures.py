"""The measures of a deal, each declared once: its name, its column's type, its range, what
it means, the cells where it is defined, and how the kernel says "no value" where it is not.
Its exact law on each cell, or why none is known, is `laws`'.

The two engines compute each measure (`reference`, `kernel`); everything that carries one
reads it from here: the per-deal records' schema (`records.schema`), a deal's record
(`record.DealRecord`), and docs/results.md's table of columns, which a test holds to these
declarations. Adding a measure is a declaration here, the two engines, and its law in
`laws` (one is known or it is not).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.engine import rules
from pipeline.engine.rules import Cell

# Where a measure is defined: on every cell, on the cells with a rescue, on play_out's.
EVERY, RESCUE, PLAY_OUT = "every cell", "cells with a rescue", "play_out cells"
# How the kernel's int8 arrays say "no value": the one definition of its sentinels.
NO_PILE = 0  # rescue_pile and hint_den with no rescue (hours are 1..12, a denominator >= 1)
NO_COUNT = -1  # restarts and stray_deaths outside play_out (counts are >= 0)


@dataclass(frozen=True)
class Measure:
    """One measure of a deal under a cell: a column of the per-deal records."""

    name: str
    dtype: str  # the column's type, as numpy and Arrow name it
    low: float  # its smallest value where defined
    high: float  # and its largest
    meaning: str  # in a line, as docs/results.md says it
    defined: str  # EVERY, RESCUE or PLAY_OUT: the cells it has a value on
    kernel: tuple[str, ...]  # the kernel's result arrays it is read from (`kernel.RESULT_FIELDS`)
    missing: int | None = None  # the kernel's sentinel where it has no value
    missing_in: str = ""  # the array that holds the sentinel, if not the first of ``kernel``

    def defined_on(self, cell: Cell) -> bool:
        """Whether ``cell``'s deals have a value of this measure (elsewhere: null)."""
        if self.defined == RESCUE:
            return cell.variant in rules.RESCUE_VARIANTS
        if self.defined == PLAY_OUT:
            return cell.variant == "play_out"
        return True

    @property
    def nullable(self) -> bool:
        return self.defined != EVERY

    @property
    def sentinel_array(self) -> str:
        """The kernel's array whose value `missing` says this measure has none."""
        return self.missing_in or self.kernel[0]


MEASURES = (
    Measure(
        "won",
        "bool",
        0,
        1,
        "the deal was won (play_out: with no restart)",
        EVERY,
        ("won",),
    ),
    Measure(
        "cards_turned",
        "int8",
        4,
        53,
        "cards taken into hand over the whole deal, rescue included",
        EVERY,
        ("cards_turned",),
    ),
    Measure(
        "down_at_stop",
        "int8",
        0,
        48,
        "face-down cards when the chain first died",
        EVERY,
        ("down_at_stop",),
    ),
    Measure(
        "rescue_pile",
        "int8",
        1,
        rules.N_HOURS,
        "hour 1..12 of the rescue; null if there was none",
        RESCUE,
        ("rescue_pile",),
        missing=NO_PILE,
    ),
    Measure(
        "hint",
        "float32",
        0,
        1,
        "the hint's chance for the rescue pile, as num/den in float32; null if no rescue",
        RESCUE,
        ("hint_num", "hint_den"),
        missing=NO_PILE,
        missing_in="rescue_pile",  # no rescue, no hint
    ),
    Measure(
        "restarts",
        "int8",
        0,
        48,
        "play_out only: restarts needed; null elsewhere",
        PLAY_OUT,
        ("restarts",),
        missing=NO_COUNT,
    ),
    Measure(
        "stray_deaths",
        "int8",
        0,
        48,
        "play_out only: deaths away from where the rules predict; null elsewhere",
        PLAY_OUT,
        ("stray_deaths",),
        missing=NO_COUNT,
    ),
)
BY_NAME = {measure.name: measure for measure in MEASURES}
NAMES = tuple(BY_NAME)
