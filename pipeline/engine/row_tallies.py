"""A batch's rows counted into `record.Tallies`, as `kernel.play_cells` counts them where it
makes them: for an engine that gives rows only (the CUDA kernel, `gpu`), so that its summary
shards are the CPU kernel's, byte for byte. The tests hold the two countings to each other."""

from __future__ import annotations

import numba as nb
import numpy as np

from pipeline.engine.kernel import (
    PLAY_OUT,
    ROW_CARDS_TURNED,
    ROW_DOWN_AT_STOP,
    ROW_HINT_DEN,
    ROW_HINT_NUM,
    ROW_KINGS_AT_BOTTOM,
    ROW_RESCUE_PILE,
    ROW_RESTARTS,
    ROW_STRAY_DEATHS,
    ROW_UNVISITED_AT_THIRD_KING,
    ROW_WON,
    STANDARD,
)
from pipeline.engine.measures import NO_COUNT


def count(codes: np.ndarray, rows: np.ndarray, tallies) -> None:
    """Add the records of ``rows`` (fields x cells x deals, `kernel.RESULT_ROWS`) of the cells
    ``codes`` (`Cell.codes`) to ``tallies``."""
    _count(
        codes,
        rows,
        tallies.counts,
        tallies.turned_piles,
        tallies.restarts,
        tallies.restart_slot,
        tallies.facts,
        tallies.hint_code,
    )


# Not cached on disk: numba's cache is keyed to this file, and the constants are `kernel`'s.
@nb.njit
def _count(codes, rows, counts, turned_piles, restarts, restart_slot, facts, hint_code):
    for c in range(rows.shape[1]):
        variant = codes[c, 0]
        for d in range(rows.shape[2]):
            won = np.int64(rows[ROW_WON, c, d])
            down = np.int64(rows[ROW_DOWN_AT_STOP, c, d])
            if variant == PLAY_OUT:
                restarts[
                    restart_slot[c],
                    won,
                    down,
                    np.int64(rows[ROW_RESTARTS, c, d]) - NO_COUNT,
                    np.int64(rows[ROW_STRAY_DEATHS, c, d]) - NO_COUNT,
                ] += 1
            else:
                hint = hint_code[rows[ROW_HINT_NUM, c, d], rows[ROW_HINT_DEN, c, d]]
                counts[c, won, down, hint] += 1
            turned_piles[
                c,
                won,
                np.int64(rows[ROW_CARDS_TURNED, c, d]),
                np.int64(rows[ROW_RESCUE_PILE, c, d]),
            ] += 1
            if variant == STANDARD:
                facts[
                    c,
                    won,
                    np.int64(rows[ROW_KINGS_AT_BOTTOM, c, d]),
                    np.int64(rows[ROW_UNVISITED_AT_THIRD_KING, c, d]),
                ] += 1
