"""The per-deal result schema: one definition, used by the sweep that writes and the report that reads.

Version ``RESULT_SCHEMA_VERSION`` is stored in every Parquet file's metadata; a change of
columns or meaning is a new version.

Per-deal records (record mode ``deals``), one row per deal x cell: the seed, the deal number,
the cell's axes (`rules.AXES`, as dictionary-encoded strings), then one column per measure of
a deal, of the type its declaration gives (`measures.MEASURES`; docs/results.md's table).

Two facts of a deal that claims are about (hour piles whose bottom card is a king; hours not
yet taken from when the third king was placed) are not columns here: they are the same under
every cell, so each shard counts them, by standard cell and outcome, in a small ``facts``
table beside its rows (`summary.FactCounts`). Version 2 wrote them on each deal's `standard`
row, where they cost a third of the bytes and a fifth of the writing of standard play.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine import rules
from pipeline.engine.measures import MEASURES, Measure
from pipeline.engine.rules import Cell

RESULT_SCHEMA_VERSION = "clocksweep-deals/3"

LABEL_COLUMNS = tuple(rules.AXES)  # order, variant, strategy, finale, depth

_ARROW_TYPES = {"bool": pa.bool_(), "int8": pa.int8(), "float32": pa.float32()}
DEAL_SCHEMA = pa.schema(
    [
        ("seed", pa.uint64()),
        ("deal", pa.uint64()),
        *((name, pa.dictionary(pa.int8(), pa.string())) for name in LABEL_COLUMNS),
        *((measure.name, _ARROW_TYPES[measure.dtype]) for measure in MEASURES),
    ]
)


# Columns every row has (docs/results.md): written as required, they have no definition levels
# to write or read. Any other column, present or future, stays nullable.
REQUIRED_DEAL_COLUMNS = (
    "seed",
    "deal",
    "order",
    "variant",
    "finale",
    *(measure.name for measure in MEASURES if not measure.nullable),
)
# DEAL_SCHEMA as the per-deal files hold it.
DEAL_WRITE_SCHEMA = pa.schema(
    [field.with_nullable(field.name not in REQUIRED_DEAL_COLUMNS) for field in DEAL_SCHEMA]
)


def _constant(value, n: int, type_: pa.DataType) -> pa.Array:
    if value is None:
        return pa.nulls(n, type=type_)
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int8)), pa.array([value], type=pa.string())
    )


def _measure_column(measure: Measure, results: dict[str, np.ndarray], index: int) -> pa.Array:
    """One measure's column of cell ``index`` of the kernel's results: null at its sentinel,
    a measure of two arrays their quotient in float32 (0 where there is none, under the mask)."""
    first, *rest = (results[name][index] for name in measure.kernel)
    held = results[measure.sentinel_array][index]
    mask = None if measure.missing is None else held == measure.missing
    if rest:
        values = np.divide(
            first.astype(np.float32),
            rest[0].astype(np.float32),
            out=np.zeros(len(first), dtype=np.float32),
            where=~mask,
        )
    else:
        values = first.astype(measure.dtype, copy=False)
    return pa.array(values, mask=mask)


def deal_table(
    seed: int, first: int, results: dict[str, np.ndarray], cells: list[Cell]
) -> pa.Table:
    """Kernel results for ``cells`` x deals ``first``.. as one Arrow table, cell by cell."""
    count = next(iter(results.values())).shape[1]
    deals = np.arange(first, first + count, dtype=np.uint64)
    pieces = []
    for index, cell in enumerate(cells):
        columns = {
            "seed": pa.array(np.full(count, seed, dtype=np.uint64)),
            "deal": pa.array(deals),
            **{
                name: _constant(getattr(cell, name), count, DEAL_SCHEMA.field(name).type)
                for name in LABEL_COLUMNS
            },
            **{measure.name: _measure_column(measure, results, index) for measure in MEASURES},
        }
        pieces.append(pa.table(columns, schema=DEAL_SCHEMA))
    return pa.concat_tables(pieces) if pieces else DEAL_SCHEMA.empty_table()


@dataclass(frozen=True)
class DealColumns:
    """Per-deal rows as the kernel codes them, what the summary counts (`summary.ShardSummary
    .add_runs`): each row's deal less the shard's first, and an array per measure
    (`measures.MEASURES`), its sentinel where it has no value, a fraction as a float32 (0
    where there is none). The inverse of `deal_table`, a record batch at a time (`kernel_coded`)."""

    deal_offset: np.ndarray
    by_measure: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.by_measure[name]

    def taken(self, rows) -> DealColumns:
        """These rows, in the order (or the part) ``rows`` indexes."""
        return DealColumns(
            np.asarray(self.deal_offset)[rows],
            {name: np.asarray(column)[rows] for name, column in self.by_measure.items()},
        )


def kernel_coded(batch: pa.RecordBatch, first: int) -> DealColumns:
    """A batch of per-deal rows (of a shard whose first deal is ``first``) as `DealColumns`."""
    return DealColumns(
        (batch.column("deal").to_numpy() - np.uint64(first)).view(np.int64),
        {measure.name: _coded(batch.column(measure.name), measure) for measure in MEASURES},
    )


def _coded(column: pa.Array, measure: Measure) -> np.ndarray:
    """A measure's column with its nulls as the kernel says "no value"."""
    if column.null_count:
        fill = 0 if measure.missing is None or measure.dtype == "float32" else measure.missing
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False).astype(measure.dtype, copy=False)
