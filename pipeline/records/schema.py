"""The per-deal result schema: one definition, used by the sweep that writes and the report that reads.

Version ``RESULT_SCHEMA_VERSION`` is stored in every Parquet file's metadata; a change of
columns or meaning is a new version.

Per-deal records (record mode ``deals``), one row per deal x cell:

| column         | type            | meaning                                                       |
|----------------|-----------------|---------------------------------------------------------------|
| seed           | uint64          | the sweep's seed                                              |
| deal           | uint64          | the deal number                                               |
| order          | string (dict)   | deal order: round-robin, packets                              |
| variant        | string (dict)   | standard, watch, one_swap, exchange, play_out                 |
| strategy       | string (dict)   | rescue strategy; null for standard and play_out               |
| finale         | string (dict)   | down, up                                                      |
| depth          | string (dict)   | exchange only: bottom, top; null elsewhere                    |
| won            | bool            | every card turned (play_out: with no restart)                 |
| cards_turned   | int8            | cards taken into hand over the whole deal, rescue included    |
| down_at_stop   | int8            | face-down cards when the chain first died                     |
| rescue_pile    | int8            | hour 1..12 of the rescue; null if none                        |
| hint           | float32         | the hint's chance for the rescue pile; null if no rescue      |
| restarts       | int8            | play_out only: restarts needed; null elsewhere                |
| stray_deaths   | int8            | play_out only: deaths away from where the rules predict       |

Two facts of a deal that claims are about (hour piles whose bottom card is a king; hours not
yet taken from when the third king was placed) are not columns here: they are the same under
every cell, so each shard counts them, by standard cell and outcome, in a small ``facts``
table beside its rows (`summary.FactCounts`). Version 2 wrote them on each deal's `standard`
row, where they cost a third of the bytes and a fifth of the writing of standard play.

A rescued win turns 53 cards under `one_swap` and `exchange` (the fourth king is taken into
hand twice) and 52 under `watch`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.engine import rules
from pipeline.engine.record import NO_COUNT, NO_PILE
from pipeline.engine.rules import Cell

RESULT_SCHEMA_VERSION = "clocksweep-deals/3"

LABEL_COLUMNS = tuple(rules.AXES)  # order, variant, strategy, finale, depth

DEAL_SCHEMA = pa.schema(
    [
        ("seed", pa.uint64()),
        ("deal", pa.uint64()),
        ("order", pa.dictionary(pa.int8(), pa.string())),
        ("variant", pa.dictionary(pa.int8(), pa.string())),
        ("strategy", pa.dictionary(pa.int8(), pa.string())),
        ("finale", pa.dictionary(pa.int8(), pa.string())),
        ("depth", pa.dictionary(pa.int8(), pa.string())),
        ("won", pa.bool_()),
        ("cards_turned", pa.int8()),
        ("down_at_stop", pa.int8()),
        ("rescue_pile", pa.int8()),
        ("hint", pa.float32()),
        ("restarts", pa.int8()),
        ("stray_deaths", pa.int8()),
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
    "won",
    "cards_turned",
    "down_at_stop",
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


def deal_table(
    seed: int, first: int, results: dict[str, np.ndarray], cells: list[Cell]
) -> pa.Table:
    """Kernel results for ``cells`` x deals ``first``.. as one Arrow table, cell by cell."""
    count = results["won"].shape[1]
    deals = np.arange(first, first + count, dtype=np.uint64)
    pieces = []
    for index, cell in enumerate(cells):
        rescued = results["rescue_pile"][index] != NO_PILE
        hint = np.divide(
            results["hint_num"][index].astype(np.float32),
            results["hint_den"][index].astype(np.float32),
            out=np.zeros(count, dtype=np.float32),
            where=rescued,
        )
        restarts = results["restarts"][index]
        stray = results["stray_deaths"][index]
        columns = {
            "seed": pa.array(np.full(count, seed, dtype=np.uint64)),
            "deal": pa.array(deals),
            **{
                name: _constant(getattr(cell, name), count, DEAL_SCHEMA.field(name).type)
                for name in LABEL_COLUMNS
            },
            "won": pa.array(results["won"][index].astype(bool)),
            "cards_turned": pa.array(results["cards_turned"][index]),
            "down_at_stop": pa.array(results["down_at_stop"][index]),
            "rescue_pile": pa.array(results["rescue_pile"][index], mask=~rescued),
            "hint": pa.array(hint, mask=~rescued),
            "restarts": pa.array(restarts, mask=restarts == NO_COUNT),
            "stray_deaths": pa.array(stray, mask=stray == NO_COUNT),
        }
        pieces.append(pa.table(columns, schema=DEAL_SCHEMA))
    return pa.concat_tables(pieces) if pieces else DEAL_SCHEMA.empty_table()
