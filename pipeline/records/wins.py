"""A shard's wins, deal by deal and cell by cell: what pairs a cell added to a grown sweep
with the cells played before it (`store.groups`), without playing those again.

A per-deal shard has them in its rows (its outcome column, `summary.OUTCOME`). A summary
shard counts its deals away, so it writes them too: the ``wins`` table, one row per cell with
its labels (as in every summary table) and ``bits``, the cell's wins over the shard's deals
packed to bits (`records.bits`), the first deal in the high bit of the first byte, zero bits
padding the last byte. A cell costs
an eighth of a byte a deal there, against a per-deal row's bytes.

`packed_wins` and `deal_wins` give them back from a file's bytes of either kind; the store
reads a committed file and checks it against the manifest's sha256 first
(`store.files.read_wins`), so that a file changed since it was committed is never paired with
new cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.records import bits, summary


def wins_schema(strategies: tuple[str, ...] = rules.STRATEGIES) -> pa.Schema:
    """The ``wins`` table's schema, its strategy label over ``strategies``."""
    return pa.schema(
        [summary.label_column_field(name, strategies) for name in summary.LABEL_COLUMNS]
        + [pa.field("deals", pa.int64()), pa.field("bits", pa.binary())]
    )


WINS_SCHEMA = wins_schema()  # a sweep's of the built-in strategies only


def wins_table(
    cells: Sequence[Cell],
    packed: np.ndarray,
    count: int,
    strategies: tuple[str, ...] | None = None,
) -> pa.Table:
    """The ``wins`` table of a shard of ``count`` deals: ``packed`` is its wins, cells x
    deals, packed to bits (`np.packbits` along the deals)."""
    strategies = strategies or summary.strategy_names(cells)
    if packed.shape != (len(cells), -(-count // 8)):
        raise ValueError(f"wins of {packed.shape[1]} bytes a cell for {count} deals")
    index = np.arange(len(cells), dtype=np.int64)
    columns = {
        **summary.cell_labels(cells, "", index, strategies),
        "deals": pa.array(np.full(len(cells), count, dtype=np.int64)),
        "bits": bits.bits_column(packed),
    }
    return pa.table(columns, schema=wins_schema(strategies))


def packed_wins(data: bytes, name: str, cells: Sequence[Cell], count: int) -> np.ndarray:
    """The wins (cells x a shard's ``count`` deals, bool) in the bytes of a ``wins`` table's
    file (`wins_table`); ValueError naming the file (``name``) if a row is another cell's
    or shard's, or a cell is missing."""
    lut = summary.label_code_lut(cells)
    wins = np.zeros((len(cells), count), dtype=bool)
    seen = np.zeros((len(cells), count), dtype=bool)
    for batch in pq.ParquetFile(pa.BufferReader(data)).read().to_batches():
        runs, starts, _ = summary.batch_runs(batch, lut)
        for cell, start in zip(runs, starts):
            if cell < 0 or batch.column("deals")[start].as_py() != count:
                raise ValueError(f"{name}: a row of another cell or shard")
            wins[cell] = bits.unpacked(batch.column("bits")[start].as_py(), count)
            seen[cell] = True
    return _every_deal(wins, seen, name)


def deal_wins(data: bytes, name: str, cells: Sequence[Cell], first: int, count: int) -> np.ndarray:
    """The wins (cells x deals ``first`` .. ``first + count - 1``, bool) in the bytes of a
    file of per-deal rows; ValueError naming the file (``name``) if it holds a deal outside
    them, or lacks a cell's deals."""
    parquet = pq.ParquetFile(pa.BufferReader(data))
    lut = summary.label_code_lut(cells)
    wins = np.zeros((len(cells), count), dtype=bool)
    seen = np.zeros((len(cells), count), dtype=bool)
    for group in range(parquet.num_row_groups):
        batch_table = parquet.read_row_group(
            group, columns=["deal", summary.OUTCOME, *summary.LABEL_COLUMNS]
        )
        for batch in batch_table.to_batches():
            runs, starts, ends = summary.batch_runs(batch, lut)
            deals = batch.column("deal").to_numpy()  # uint64: deal numbers reach 2**64 - 1
            if len(deals) and not (first <= int(deals.min()) and int(deals.max()) < first + count):
                raise ValueError(f"{name}: a deal outside the shard's")
            offsets = (deals - np.uint64(first)).astype(np.int64)
            played = batch.column(summary.OUTCOME).to_numpy(zero_copy_only=False)
            for cell, start, end in zip(runs, starts, ends):
                if cell < 0:
                    continue  # a cell of no interest here
                wins[cell, offsets[start:end]] = played[start:end]
                seen[cell, offsets[start:end]] = True
    return _every_deal(wins, seen, name)


def _every_deal(wins: np.ndarray, seen: np.ndarray, name: str) -> np.ndarray:
    if not seen.all():
        raise ValueError(f"{name}: not every deal of the cells asked for is in it")
    return wins
