"""The label columns of the summary tables: each a cell's axis (`rules.AXES`), written as
Polars writes an Enum over the rules' names, and read back from a row batch as the cell it
names.

They are dictionary-encoded with uint8 indices over the rules' names (the strategy label:
the built-in strategies, then the user's), so Polars reads them back as Enums without
decoding strings. In ``pairs`` each comes twice, prefixed ``a_`` and ``b_``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.records import schema

LABEL_COLUMNS = schema.LABEL_COLUMNS


# Polars' own field metadata of an Enum (its categories, each as "<bytes>;<name>"), as its
# export writes it: tests/records/test_summary.py checks that Polars still exports this field.
POLARS_ENUM_KEY = b"_PL_ENUM_VALUES2"


def strategy_names(cells: Sequence[Cell]) -> tuple[str, ...]:
    """The names of the strategy label in tables of ``cells``: the built-in strategies, then
    the user's among ``cells`` in the order they come (a sweep of built-ins only: the
    rules' names, as before there were others)."""
    mine = (cell.strategy for cell in cells if cell.custom is not None)
    return rules.STRATEGIES + tuple(dict.fromkeys(mine))


def label_names(name: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> tuple[str, ...]:
    """The names of a label column (``name``, an axis): the rules', and for the strategy,
    ``strategies`` (`strategy_names`)."""
    return strategies if name == "strategy" else rules.AXES[name]


@functools.cache
def label_field(name: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> pa.Field:
    """The Arrow field of a label column: Polars' export of an Enum over its names
    (`label_names`), made here, so that a worker writing a shard need not import Polars (a
    tenth of a second and more of each worker's first shard)."""
    values = "".join(f"{len(value.encode())};{value}" for value in label_names(name, strategies))
    return pa.field(
        name,
        pa.dictionary(pa.uint8(), pa.large_string(), ordered=True),
        metadata={POLARS_ENUM_KEY: values.encode()},
    )


def _label_name(column: str) -> str:
    return column[2:] if column[:2] in ("a_", "b_") else column


@functools.cache
def label_column_field(column: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> pa.Field:
    base = label_field(_label_name(column), strategies)
    return pa.field(column, base.type, nullable=True, metadata=base.metadata)


def _label_array(
    column: str, values: list[str | None], index: np.ndarray, strategies: tuple[str, ...]
) -> pa.Array:
    """A label column for rows whose cell is ``index`` (into ``values``, one per cell)."""
    field = label_column_field(column, strategies)
    names = label_names(_label_name(column), strategies)
    codes = np.array([names.index(v) if v is not None else 0 for v in values], dtype=np.uint8)
    null = np.array([v is None for v in values], dtype=bool)
    row_codes = codes[index] if len(values) else np.zeros(0, dtype=np.uint8)
    mask = null[index] if null.any() else None
    return pa.DictionaryArray.from_arrays(
        pa.array(row_codes, type=pa.uint8(), mask=mask),
        pa.array(list(names), type=field.type.value_type),
        ordered=field.type.ordered,
    )


def cell_labels(
    cells: Sequence[Cell], prefix: str, index: np.ndarray, strategies: tuple[str, ...]
) -> dict[str, pa.Array]:
    """The label columns of rows whose cell is ``index`` (into ``cells``)."""
    return {
        f"{prefix}{name}": _label_array(
            f"{prefix}{name}", [getattr(cell, name) for cell in cells], index, strategies
        )
        for name in LABEL_COLUMNS
    }


class LabelLut(NamedTuple):
    """Which cell a row's labels name (`label_code_lut`): ``strategies``, the strategy
    label's names; ``radices``, each label column's names, null and a name of none of them
    (a strategy of the user's that other cells play); ``cells``, the cell index by label
    code, -1 for labels of no cell."""

    strategies: tuple[str, ...]
    radices: np.ndarray
    cells: np.ndarray


def label_code(cell: Cell, strategies: tuple[str, ...] = rules.STRATEGIES) -> int:
    """A cell's labels as one integer: mixed radix over LABEL_COLUMNS, each digit a name's
    index, the names' count for null (and one more for a name of none: `label_codes`)."""
    code = 0
    for name in reversed(LABEL_COLUMNS):
        names, value = label_names(name, strategies), getattr(cell, name)
        code = code * (len(names) + 2) + (names.index(value) if value is not None else len(names))
    return code


def label_code_lut(cells: Sequence[Cell]) -> LabelLut:
    """The cell index of each label code (`label_code`) of ``cells``' labels."""
    strategies = strategy_names(cells)
    radices = np.array(
        [len(label_names(name, strategies)) + 2 for name in LABEL_COLUMNS], dtype=np.int64
    )
    lut = np.full(int(np.prod(radices)), -1, dtype=np.int64)
    for index, cell in enumerate(cells):
        lut[label_code(cell, strategies)] = index
    return LabelLut(strategies, radices, lut)


def label_codes(
    column: pa.Array, name: str, strategies: tuple[str, ...] = rules.STRATEGIES
) -> tuple[np.ndarray, np.ndarray]:
    """A label column of a row batch: (dictionary index per row, index in the label's names
    per dictionary entry, then the names' count for null). An entry of none of the names (a
    strategy of the user's that cells of another group play, in that group's files) has
    the count plus one: rows of it are of no cell of ``strategies``'."""
    names = label_names(name, strategies)
    n = len(column)
    if column.null_count == n:
        return np.zeros(n, dtype=np.int8), np.array([len(names)])
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    dictionary = column.dictionary.to_pylist()
    indices = column.indices
    if column.null_count:
        indices = pc.fill_null(indices, len(dictionary))
    return (
        indices.to_numpy(zero_copy_only=False),
        np.array(
            [names.index(v) if v in names else len(names) + 1 for v in dictionary] + [len(names)]
        ),
    )


def batch_runs(batch, lut: LabelLut) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A row batch's rows as runs of one cell: (cell index per run, starts, ends).

    Labels come in long runs (a writer writes a cell's deals together), so each label's
    changes are found by one vectorised comparison and only run starts are looked up.
    """
    n = batch.num_rows
    labels = [
        (name, *label_codes(batch.column(name), name, lut.strategies)) for name in LABEL_COLUMNS
    ]
    change = np.unique(
        np.concatenate([np.flatnonzero(index[1:] != index[:-1]) + 1 for _, index, _ in labels])
    )
    starts = np.concatenate(([0], change)).astype(np.int64)
    ends = np.concatenate((change, [n])).astype(np.int64)
    code = np.zeros(len(starts), dtype=np.int64)
    for (_, index, names), radix in zip(reversed(labels), reversed(lut.radices)):
        code = code * int(radix) + names[index[starts].astype(np.int64)]
    return lut.cells[code], starts, ends
