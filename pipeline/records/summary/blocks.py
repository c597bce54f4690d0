"""The ``blocks`` table: the deals cut into blocks of ``BLOCK`` consecutive deal numbers
from the start of each summarised batch (a kernel batch of a summary sweep, whose batches the
sweep keeps to multiples of 13; a whole shard when the report reads per-deal rows); a partial
block at a batch's end is left out; ``n`` blocks of a cell had ``wins`` wins (0..13). Runs
of losses come from here, since consecutive deals are gone once counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine.rules import Cell
from pipeline.inference.claims import RUN_BLOCK
from pipeline.records.compiling import compiled_on_first_call
from pipeline.records.summary.labels import cell_labels, strategy_names
from pipeline.records.summary.tables import schemas

BLOCK = RUN_BLOCK  # deals per block: "thirteen straight losses" (a losing_runs claim)


@compiled_on_first_call
def block_tally(wins, present, use_present, tally):
    """tally[c, w] += 1 for each block of BLOCK consecutive deals of cell c with w wins
    (``wins`` and ``present``: cells x deals; a block not all present, if ``use_present``,
    not counted)."""
    # Four tallies taken in turn, then summed: one would make each count wait for the last
    # (runs of blocks with the same wins are the rule), at twice the time.
    tallies = np.zeros((4, BLOCK + 2), dtype=np.int64)
    for c in range(wins.shape[0]):
        tallies[:] = 0
        row, have = wins[c], present[c]
        for b in range(wins.shape[1] // BLOCK):
            in_block = 0
            for k in range(BLOCK):  # a constant count, and no branch: it unrolls
                in_block += row[b * BLOCK + k]
            if use_present:
                whole = True
                for k in range(BLOCK):
                    whole &= have[b * BLOCK + k]
                in_block = in_block if whole else BLOCK + 1  # a block not whole: not counted
            tallies[b & 3, in_block] += 1
        for turn in range(4):
            for k in range(BLOCK + 1):
                tally[c, k] += tallies[turn, k]


def block_table(
    cells: Sequence[Cell],
    wins: np.ndarray,
    present: np.ndarray | None,
    strategies: tuple[str, ...] | None = None,
) -> pa.Table:
    """The ``blocks`` table of ``wins`` (cells x deals), on the deals ``present`` (None:
    every deal)."""
    tally = np.zeros((len(cells), BLOCK + 1), dtype=np.int64)
    block_tally(wins, wins if present is None else present, present is not None, tally)
    return block_table_of(cells, tally, strategies)


def block_table_of(
    cells: Sequence[Cell], tally: np.ndarray, strategies: tuple[str, ...] | None = None
) -> pa.Table:
    """The ``blocks`` table of a block tally (cells x wins 0..BLOCK)."""
    strategies = strategies or strategy_names(cells)
    cell_index, wins = np.nonzero(tally)
    columns = {
        **cell_labels(cells, "", cell_index.astype(np.int64), strategies),
        "wins": pa.array(wins.astype(np.int8)),
        "n": pa.array(tally[cell_index, wins].astype(np.int64)),
    }
    return pa.table(columns, schema=schemas(strategies)["blocks"])
