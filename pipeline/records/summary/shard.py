"""A run of deals summarised: its records counted (`counters`), its wins kept for the pairs
and blocks, its deal facts (`facts`), and the six tables made from them.

A kernel batch (`ShardSummary.add_matrix`) and per-deal rows read back (`add_runs`) take the
same path: rows as the kernel codes them (`counters.Rows`), counted by one pass. A summary
shard's batches (`KernelBatches`) are counted by the kernel itself as it plays
(`KernelBatches.kernel_tallies`, `record.Tallies`), which gives only the wins: a pass over
its rows written and read back cost a seventh of a task.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine import pairing
from pipeline.engine.record import Tallies
from pipeline.engine.rules import Cell
from pipeline.records import schema
from pipeline.records.summary.blocks import BLOCK, block_table, block_table_of, block_tally
from pipeline.records.summary.counters import (
    COUNTED,
    OUTCOME,
    Counters,
    deal_rows,
    kernel_rows,
)
from pipeline.records.summary.facts import FactCounts
from pipeline.records.summary.labels import cell_labels, strategy_names
from pipeline.records.summary.pairs import add_pair_sums, pair_table, pair_table_of
from pipeline.records.summary.tables import schemas


class ShardSummary:
    """The summary tables of one run of deals (a kernel batch, or a shard's per-deal rows).

    Rows may arrive in any order and in pieces; each deal x cell must come once. ``first``
    and ``count`` give the deal numbers covered, for the pair and block tables.
    """

    def __init__(
        self,
        cells: Sequence[Cell],
        first: int,
        count: int,
        strategies: tuple[str, ...] | None = None,
    ):
        self.cells = list(cells)
        # The strategy label's names in its tables (`strategy_names`; those of more cells
        # than these where its tables are summed with theirs).
        self.strategies = strategies or strategy_names(self.cells)
        self.first, self.count = first, count
        n_cells = len(self.cells)
        self.wins = np.zeros((n_cells, count), dtype=bool)  # cells x deals
        self.present = np.zeros((n_cells, count), dtype=bool)
        self.complete = False  # set when every deal x cell is known to be present
        self.counters = Counters(self.cells)
        self.facts = FactCounts(self.cells, self.strategies)

    def add_matrix(self, results: dict[str, np.ndarray]) -> None:
        """Add kernel results for every cell and deal (``results`` as `kernel.play` gives)."""
        n_cells, count = results[OUTCOME].shape
        if (n_cells, count) != self.wins.shape:
            raise ValueError(
                f"results are {n_cells} cells x {count} deals; "
                f"expected {self.wins.shape[0]} x {self.wins.shape[1]}"
            )
        rows = kernel_rows(results)
        self.counters.add(rows, self.wins, self.present, False)  # the matrix is the wins
        self._add_wins(rows.outcome.reshape(n_cells, count))
        self.facts.add_results(results)

    def _add_wins(self, wins: np.ndarray) -> None:
        self.wins[...] = wins
        self.present[...] = True
        self.complete = True

    def add_runs(self, run_cells, starts, ends, rows: schema.DealColumns) -> None:
        """Add per-deal rows in runs of one cell: rows starts[i]..ends[i]-1 are cell
        run_cells[i] (an index into the cell list); ``rows`` as the kernel codes them
        (`schema.DealColumns`). Runs too many to count one by one (rows not grouped by
        cell) are grouped first (`add_rows`)."""
        if len(starts) > max(1024, len(rows.deal_offset) // 256):
            self.add_rows(np.repeat(run_cells, np.asarray(ends) - np.asarray(starts)), rows)
        else:
            self._count_runs(run_cells, starts, ends, rows)

    def add_rows(self, cell, rows: schema.DealColumns) -> None:
        """`add_runs` for rows in any order: ``cell`` indexes the cell list, per row."""
        cell = np.asarray(cell)
        if len(cell) == 0:
            return
        if (cell < 0).any() or (cell >= len(self.cells)).any():
            raise ValueError("a row of a cell the sweep does not list")
        change = np.flatnonzero(cell[1:] != cell[:-1]) + 1
        if len(change) > max(256, len(cell) // 1024):  # interleaved cells: group them first
            order = np.argsort(cell, kind="stable")
            cell, rows = cell[order], rows.taken(order)
            change = np.flatnonzero(cell[1:] != cell[:-1]) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(cell)]))
        self._count_runs(cell[starts], starts, ends, rows)

    def _count_runs(self, run_cells, starts, ends, rows: schema.DealColumns) -> None:
        """Count per-deal rows in runs of one cell, marking their wins and deals."""
        self.counters.add(deal_rows(run_cells, starts, ends, rows), self.wins, self.present, True)

    def tables(self) -> dict[str, pa.Table]:
        """The six summary tables of everything added (``facts`` only from `add_matrix`:
        per-deal rows do not carry the facts)."""
        present = None if self.complete or self.present.all() else self.present
        return {
            **self._counted_tables(),
            "pairs": pair_table(self.cells, self.wins, present, strategies=self.strategies),
            "blocks": block_table(self.cells, self.wins, present, self.strategies),
            "facts": self.facts.table(),
        }

    def _counted_tables(self) -> dict[str, pa.Table]:
        out = {}
        for table in COUNTED:
            cell, columns = self.counters.columns(table)
            labels = cell_labels(self.cells, "", cell, self.strategies)
            out[table] = pa.table({**labels, **columns}, schema=schemas(self.strategies)[table])
        return out


class KernelBatches(ShardSummary):
    """A summary shard's counts over its kernel batches, added one by one (`add_matrix`):
    the tallies summed as they come, each batch's pairs and blocks counted from its wins and
    summed, and every table made once, at the end (each batch's own tables, summed by
    `combine`, cost a twentieth of the kernel's time)."""

    def __init__(self, cells: Sequence[Cell], strategies: tuple[str, ...] | None = None):
        super().__init__(cells, 0, 0, strategies)
        self.pairs = pairing.pairs(self.cells)
        self.pair_sums = np.zeros((len(self.pairs), 4), dtype=np.int64)
        self.block_sums = np.zeros((len(self.cells), BLOCK + 1), dtype=np.int64)

    def kernel_tallies(self) -> Tallies:
        """The tallies as the kernel counts a batch into them (`kernel.play` with
        ``tallies``); then `add_wins` with the batch's wins."""
        return self.counters.kernel_tallies(self.facts.kernel_tally())

    def add_wins(self, wins: np.ndarray) -> None:
        """Add the pairs and blocks of a batch's wins (cells x deals, nonzero: a win), whose
        records are counted in the tallies."""
        add_pair_sums(wins, self.pairs, self.pair_sums)
        block_tally(wins, wins, False, self.block_sums)

    def add_matrix(self, results: dict[str, np.ndarray]) -> None:
        shape = results[OUTCOME].shape
        self.wins = self.present = np.empty(shape, dtype=bool)  # the batch's shape; not filled
        super().add_matrix(results)

    def _add_wins(self, wins: np.ndarray) -> None:
        self.add_wins(wins)
        self.wins = self.present = np.zeros((len(self.cells), 0), dtype=bool)

    def merge(self, other: KernelBatches) -> None:
        """Add the counts of the batches ``other`` was given (of the same cells)."""
        self.counters.merge(other.counters)
        self.pair_sums += other.pair_sums
        self.block_sums += other.block_sums
        self.facts.merge(other.facts)

    def tables(self) -> dict[str, pa.Table]:
        return {
            **self._counted_tables(),
            "pairs": pair_table_of(self.cells, self.pairs, self.pair_sums, self.strategies),
            "blocks": block_table_of(self.cells, self.block_sums, self.strategies),
            "facts": self.facts.table(),
        }


def summarise(results: dict[str, np.ndarray], cells: Sequence[Cell]) -> dict[str, pa.Table]:
    """One batch of kernel results (cells x deals, as `kernel.play` gives) as summary tables."""
    count = results[OUTCOME].shape[1]
    shard = ShardSummary(cells, 0, count)
    shard.add_matrix(results)
    return shard.tables()
