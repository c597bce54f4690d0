"""The ``pairs`` table: for two cells played on the same deals, the 2x2 table of their
outcomes, ``both`` winning, ``a_only``, ``b_only``, ``neither``. Pairs (`pairing.pairs`): every
two cells of one deal order (the same layouts), and every two cells that differ only in the
deal order (the same deal numbers); cell a comes before cell b in the sweep's cell list.

Counted as popcounts over the cells' wins packed to bits (`bits`), 64 deals a word.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pipeline.engine import pairing
from pipeline.engine.rules import Cell
from pipeline.records.bits import packed_rows, popcount_rows
from pipeline.records.compiling import compiled_on_first_call
from pipeline.records.summary.counters import TABLES
from pipeline.records.summary.labels import cell_labels, strategy_names
from pipeline.records.summary.tables import schemas


def pair_counts(
    wins: np.ndarray, present: np.ndarray | None, pairs: list[tuple[int, int]]
) -> np.ndarray:
    """(both, a_only, b_only, neither) per pair, on the deals both cells played (``wins``
    and ``present``: cells x deals; None: every deal)."""
    out = np.zeros((len(pairs), 4), dtype=np.int64)
    if not pairs:
        return out
    words = packed_rows(wins)
    have = packed_rows(present) if present is not None else None
    by_a: dict[int, list[tuple[int, int]]] = {}
    for row, (a, b) in enumerate(pairs):
        by_a.setdefault(a, []).append((row, b))
    for a, rows_b in by_a.items():
        rows = np.array([row for row, _ in rows_b])
        bs = np.array([b for _, b in rows_b])
        both = popcount_rows(words[a] & words[bs])
        if have is None:
            n = np.full(len(bs), wins.shape[1], dtype=np.int64)
            a_wins = np.full(len(bs), popcount_rows(words[a]), dtype=np.int64)
            b_wins = popcount_rows(words[bs])
        else:
            n = popcount_rows(have[a] & have[bs])
            a_wins = popcount_rows(words[a] & have[bs])
            b_wins = popcount_rows(words[bs] & have[a])
        out[rows, 0] = both
        out[rows, 1] = a_wins - both
        out[rows, 2] = b_wins - both
        out[rows, 3] = n - a_wins - b_wins + both
    return out


def add_pair_sums(wins: np.ndarray, pairs: Sequence[tuple[int, int]], sums: np.ndarray) -> None:
    """Add each pair's (both, a_only, b_only, neither) over every deal of ``wins`` (cells x
    deals, nonzero: a win) to ``sums`` (pairs x 4): `pair_counts` for deals every cell played."""
    if len(pairs):
        add_word_pair_sums(packed_rows(wins), wins.shape[1], pairs, sums)


def add_word_pair_sums(
    words: np.ndarray, deals: int, pairs: Sequence[tuple[int, int]], sums: np.ndarray
) -> None:
    """`add_pair_sums` of wins packed to words (`bits.packed_rows`) over ``deals`` deals: a
    popcount covers 64 deals, where a pass over the deals' bytes cost a pair a byte each."""
    if len(pairs):
        index = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        _add_word_pair_sums(words, index, deals, sums)


@compiled_on_first_call
def _add_word_pair_sums(words, index, deals, sums):
    def popcount(x):  # the bit-counting idiom, which the compiler makes one instruction
        x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
        x = (x & np.uint64(0x3333333333333333)) + (
            (x >> np.uint64(2)) & np.uint64(0x3333333333333333)
        )
        x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
        return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))

    for k in range(index.shape[0]):
        wins_a, wins_b = words[index[k, 0]], words[index[k, 1]]
        both = a_wins = b_wins = 0
        for j in range(words.shape[1]):
            x, y = wins_a[j], wins_b[j]
            both += popcount(x & y)
            a_wins += popcount(x)
            b_wins += popcount(y)
        sums[k, 0] += both
        sums[k, 1] += a_wins - both
        sums[k, 2] += b_wins - both
        sums[k, 3] += deals - a_wins - b_wins + both


def pair_table(
    cells: Sequence[Cell],
    wins: np.ndarray,
    present: np.ndarray | None,
    pairs=None,
    strategies: tuple[str, ...] | None = None,
) -> pa.Table:
    """The ``pairs`` table of ``cells`` (``pairs``: those of `pairing.pairs` to count)."""
    pairs = pairing.pairs(cells) if pairs is None else pairs
    return pair_table_of(cells, pairs, pair_counts(wins, present, pairs), strategies)


def pair_table_of(
    cells: Sequence[Cell], pairs, counts: np.ndarray, strategies: tuple[str, ...] | None = None
) -> pa.Table:
    """The ``pairs`` table of ``pairs`` of ``cells`` whose `pair_counts` are ``counts``
    (``strategies``: the strategy label's names, by default ``cells``')."""
    strategies = strategies or strategy_names(cells)
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    columns = {**cell_labels(cells, "a_", a, strategies), **cell_labels(cells, "b_", b, strategies)}
    for i, name in enumerate(TABLES["pairs"][1]):
        columns[name] = pa.array(counts[:, i])
    return pa.table(columns, schema=schemas(strategies)["pairs"])
