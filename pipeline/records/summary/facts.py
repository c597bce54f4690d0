"""The ``facts`` table: for `standard` cells only, deals with each outcome and each
(kings_at_bottom, unvisited_at_third_king): facts of the deal (hour piles with a king at the
bottom; hours not yet taken from when the third king was placed) that two claims of the
seeds are about.

A per-deal sweep writes this table too, one file per shard beside its per-deal file: the
facts belong to the deal rather than to a cell, and the claims need only these counts, so
per-deal records do not carry them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.records.compiling import compiled_on_first_call
from pipeline.records.summary.counters import OUTCOME, TABLES
from pipeline.records.summary.labels import cell_labels, strategy_names
from pipeline.records.summary.tables import schemas

FACT_RANGE = rules.N_HOURS + 1  # 0..12 hour piles
FACTS = TABLES["facts"][0][1:]  # the facts, after the outcome


@compiled_on_first_call
def _tally_facts(wins, kings, unvisited, tally):
    """Count deals by (outcome, kings, unvisited) into ``tally``; the first deal out of
    range, or -1. (One pass, rather than numpy's bincount over keys built first.)"""
    for i in range(len(wins)):
        k, u = kings[i], unvisited[i]
        if k < 0 or k >= FACT_RANGE or u < 0 or u >= FACT_RANGE:
            return i
    for i in range(len(wins)):
        tally[((wins[i] != 0) * FACT_RANGE + kings[i]) * FACT_RANGE + unvisited[i]] += 1
    return -1


class FactCounts:
    """The ``facts`` table of a run of deals: deals of each standard cell by outcome and
    facts. Both record modes write it, one file per shard."""

    def __init__(self, cells: Sequence[Cell], strategies: tuple[str, ...] | None = None):
        self.cells = list(cells)
        self.strategies = strategies or strategy_names(self.cells)  # the label's names
        self.tally = np.zeros((len(self.cells), 2 * FACT_RANGE * FACT_RANGE), dtype=np.int64)

    def add(self, cell: int, wins, kings_at_bottom, unvisited_at_third_king) -> None:
        """Add the deal facts of deals of one (standard) cell."""
        as8 = lambda a: np.ascontiguousarray(a, dtype=np.int8)  # noqa: E731
        bad = _tally_facts(
            as8(wins), as8(kings_at_bottom), as8(unvisited_at_third_king), self.tally[cell]
        )
        if bad >= 0:
            raise ValueError(
                f"deal {bad} of the batch: a deal fact out of range "
                "(kings_at_bottom, unvisited_at_third_king: 0..12)"
            )

    def add_results(self, results: dict[str, np.ndarray]) -> None:
        """Add the standard cells' deals of kernel results (``results`` as `kernel.play` gives)."""
        for c, cell in enumerate(self.cells):
            if cell.variant == "standard":
                self.add(c, results[OUTCOME][c], *(results[fact][c] for fact in FACTS))

    def merge(self, other: FactCounts) -> None:
        """Add the counts of other deals of the same cells."""
        self.tally += other.tally

    def kernel_tally(self) -> np.ndarray:
        """The tally as the kernel counts into it: cells x outcome x kings x unvisited."""
        return self.tally.reshape(len(self.cells), 2, FACT_RANGE, FACT_RANGE)

    def table(self) -> pa.Table:
        cell, key = np.nonzero(self.tally)
        n = self.tally[cell, key]
        keys = (
            (key // FACT_RANGE**2).astype(bool),
            (key // FACT_RANGE % FACT_RANGE).astype(np.int8),
            (key % FACT_RANGE).astype(np.int8),
        )
        columns = {
            **cell_labels(self.cells, "", cell, self.strategies),
            **{name: pa.array(values) for name, values in zip(TABLES["facts"][0], keys)},
            "n": pa.array(n.astype(np.int64)),
        }
        return pa.table(columns, schema=schemas(self.strategies)["facts"])
