"""Which cells are paired deal by deal, and what a pair compares: the one rule that the
records (the pairs their tables count), the stop rule (the pairs its tallies count) and the
report (the comparisons it shows) all read.

Cells of one deal order play the same layouts; cells that differ in their deal order alone
play the same deal numbers (two layouts of one shuffle). Either way their outcomes can be
compared deal by deal.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.engine import rules
from pipeline.engine.rules import Cell

# What a pair compares (`kind`): its cells differ in the strategy alone, in the deal order
# alone, in the finale alone; an informed strategy on face-up bottoms against a counts-only
# one on face-down bottoms; a rescue against standard play.
KINDS = ("strategy", "order", "finale", "foresight", "rescue_vs_standard")


def differing(a: Cell, b: Cell) -> list[str]:
    """The axes (`rules.AXES`, in that order) on which a and b differ."""
    return [axis for axis in rules.AXES if getattr(a, axis) != getattr(b, axis)]


def paired(a: Cell, b: Cell) -> bool:
    """Whether a and b are compared deal by deal: one deal order, or differing in it alone."""
    return a.order == b.order or differing(a, b) == ["order"]


def kind(a: Cell, b: Cell) -> str | None:
    """What a pair of cells compares (one of `KINDS`), or None (paired, but not a comparison
    anyone reads: kept in the records' pairs table only, or not paired at all)."""
    differ = differing(a, b)
    if differ in (["strategy"], ["order"], ["finale"]):
        return differ[0]
    if sorted(differ) == ["finale", "strategy"] and "informed" in (a.strategy, b.strategy):
        informed, other = (a, b) if a.strategy == "informed" else (b, a)
        if informed.finale == "up" and other.strategy in rules.COUNT_STRATEGIES:
            return "foresight"
    if (
        a.order == b.order
        and a.finale == b.finale
        and "standard" in (a.variant, b.variant)
        and (a.has_rescue or b.has_rescue)
    ):
        return "rescue_vs_standard"
    return None


def pairs(cells: Sequence[Cell], of_kind: str | None = None) -> list[tuple[int, int]]:
    """(a, b), a < b, of the cells paired deal by deal (`paired`), or only those of one kind."""
    return [
        (a, b)
        for a in range(len(cells))
        for b in range(a + 1, len(cells))
        if paired(cells[a], cells[b]) and (of_kind is None or kind(cells[a], cells[b]) == of_kind)
    ]
