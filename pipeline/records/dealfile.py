"""Per-deal Parquet files, encoded straight from the kernel's arrays.

pyarrow's writer encodes every value of every column one by one, even where a column is null
throughout or constant, and so cost a per-deal sweep a large share of its time
(`benchmarks/writer_bench.py` measures the two side by side). This module writes the same table
for the one schema `schema.DEAL_WRITE_SCHEMA` knowing what the columns are: a label or a null
column is constant per cell, so it is a few runs, not a value per row; the rest are small
integers, packed in one numba pass each.

What it writes is plain Parquet (format 2, data pages version 1, uncompressed, no statistics),
the encodings pyarrow was told to use (`files.parquet_options`):

- integers (``seed``, ``deal`` and the int8 measures): DELTA_BINARY_PACKED;
- labels and the float measure: RLE_DICTIONARY, over a PLAIN dictionary page (a label's
  dictionary is every name the rules have, in their order, so a code means the same in every
  file; the float's is the values present);
- the bool measure: PLAIN (bit-packed);
- definition levels of the nullable columns: RLE (the run-length / bit-packed hybrid).

Each measure's column is encoded as its declaration says (`measures.MEASURES`: its type, the
cells it is defined on, the kernel's arrays and sentinel), so none is named here.

with Arrow's schema in the footer (``ARROW:schema``, as pyarrow stores it), so readers give back
the schema's types: dictionaries for labels, uint64, int8. The tests read what it writes with
pyarrow, Polars and DuckDB and compare it, row by row, with `schema.deal_table`.

References: the Parquet format (github.com/apache/parquet-format: Encodings.md, parquet.thrift):
the footer and page headers in Thrift's compact protocol are `parquet_format`'s, the values'
encodings `parquet_encodings`'.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pipeline import __version__
from pipeline.engine.measures import BY_NAME, Measure
from pipeline.records.parquet_encodings import (
    compress,
    counting_values,
    delta_values,
    fraction_codes,
    hybrid,
    hybrid_buffer,
    levels_bytes,
    present,
    runs_bytes,
)
from pipeline.records.parquet_format import (
    BOOLEAN,
    BYTE_ARRAY,
    DATA_PAGE,
    DELTA_BINARY_PACKED,
    DICTIONARY_PAGE,
    FLOAT,
    INT32,
    INT64,
    MAGIC,
    PLAIN,
    RLE,
    RLE_DICTIONARY,
    T_BINARY,
    T_I32,
    T_I64,
    T_LIST,
    T_STRUCT,
    UNCOMPRESSED,
    page_header,
    schema_element,
    struct,
)

# --- Columns ---------------------------------------------------------------------------------


class _Chunk:
    """One column's pages in one row group: what the footer needs to find and read them."""

    def __init__(
        self, pieces: list, physical: int, encodings: list[int], dictionary_size: int | None = None
    ):
        self.pieces = pieces
        self.physical = physical
        self.encodings = encodings
        self.size = sum(memoryview(piece).nbytes for piece in pieces)
        self.dictionary_size = dictionary_size  # bytes of the dictionary page, if there is one


class _Presence(NamedTuple):
    """Where a nullable field has a value: one level a row, how many are 1, and the levels as
    a data page holds them (encoded once, for every column that shares them)."""

    levels: np.ndarray
    count: int
    page: bytes


def _presence(values: np.ndarray, absent: int) -> _Presence:
    """A field present where ``values`` != ``absent``."""
    levels, count = present(values, absent)
    rows = values.shape[0]
    page = levels_bytes([(int(count > 0), rows)] if count in (0, rows) else levels)
    return _Presence(levels, count, page)


def _data_page(rows: int, encoding: int, levels, values) -> list:
    body_size = (0 if levels is None else len(levels)) + memoryview(values).nbytes
    pieces = [page_header(DATA_PAGE, body_size, rows, encoding)]
    if levels is not None:
        pieces.append(levels)
    pieces.append(values)
    return pieces


def _null_chunk(rows: int, physical: int) -> _Chunk:
    """A nullable column null throughout: one run of definition level 0, no values (and no
    dictionary, as pyarrow writes a dictionary column no row fills)."""
    return _Chunk(_data_page(rows, PLAIN, levels_bytes([(0, rows)]), b""), physical, [PLAIN, RLE])


def _delta_chunk(encoded, rows: int, physical: int) -> _Chunk:
    """A required integer column of ``rows`` values, delta-encoded as ``encoded``."""
    return _Chunk(
        _data_page(rows, DELTA_BINARY_PACKED, None, encoded), physical, [DELTA_BINARY_PACKED]
    )


def _integer_chunk(
    values: np.ndarray, rows: int, physical: int, presence: _Presence | None = None
) -> _Chunk:
    """An integer column: ``values`` for every row (required: cycled through if shorter), or,
    when nullable, those where ``presence`` says. Deltas are taken in 64 bits: right for
    INT64, and for INT32 while they fit in 32 bits (an int8 field's do)."""
    if presence is None:
        return _delta_chunk(delta_values(values, rows), rows, physical)
    if presence.count == 0:
        return _null_chunk(rows, physical)
    kept = values if presence.count == rows else compress(values, presence.levels, presence.count)
    pieces = _data_page(rows, DELTA_BINARY_PACKED, presence.page, delta_values(kept))
    return _Chunk(pieces, physical, [DELTA_BINARY_PACKED, RLE])


def _dictionary_chunk(
    dictionary_page: bytes,
    dictionary_count: int,
    runs: list[tuple[int, int]] | None,
    codes: np.ndarray | None,
    rows: int,
    nullable: bool,
    levels_page,
    physical: int,
) -> _Chunk:
    """A dictionary-encoded column: its dictionary page, then the codes of its present values,
    given as (code, length) runs or as an array."""
    width = max(1, (dictionary_count - 1).bit_length())
    if codes is not None:
        out = hybrid_buffer(codes.shape[0], width)
        data = bytes([width]) + bytes(out[: hybrid(codes, width, out, 0)])
    else:
        data = bytes([width]) + runs_bytes(runs, width)
    header = page_header(DICTIONARY_PAGE, len(dictionary_page), dictionary_count, PLAIN)
    pieces = [header, dictionary_page] + _data_page(
        rows, RLE_DICTIONARY, levels_page if nullable else None, data
    )
    encodings = [PLAIN, RLE_DICTIONARY] + ([RLE] if nullable else [])
    return _Chunk(pieces, physical, encodings, len(header) + len(dictionary_page))


def _fraction_chunk(numerators, denominators, present: _Presence, rows: int) -> _Chunk:
    """A float column of fractions (a measure given by the kernel as a numerator and a
    denominator) on the rows ``present`` says, over a dictionary of the values present."""
    if present.count == 0:
        return _null_chunk(rows, FLOAT)
    codes, numerators, denominators = fraction_codes(
        numerators, denominators, present.levels, present.count
    )
    dictionary = (numerators.astype(np.float32) / denominators.astype(np.float32)).astype("<f4")
    return _dictionary_chunk(
        dictionary.tobytes(), len(dictionary), None, codes, rows, True, present.page, FLOAT
    )


# Each measure's physical type, by its declared type (`measures.Measure.dtype`).
_PHYSICAL = {"bool": BOOLEAN, "int8": INT32, "float32": FLOAT}


class _Batch(NamedTuple):
    """One batch of kernel results as `DealFileEncoder.encode_batch` encodes it: ``flat``,
    each result array a row per deal x cell; ``rows``, their count; ``presences``, where
    each measure has a value, by the array that holds its sentinel (made once, for every
    measure that shares it)."""

    seed: int
    first: int
    count: int
    cells: list
    flat: dict[str, np.ndarray]
    rows: int
    presences: dict[str, _Presence]

    def presence(self, measure: Measure) -> _Presence:
        held = measure.sentinel_array
        if held not in self.presences:
            self.presences[held] = _presence(self.flat[held], measure.missing)
        return self.presences[held]


def _measure_chunk(measure: Measure, batch: _Batch) -> _Chunk:
    """A measure's column (`measures.MEASURES`), as its declaration says: null throughout
    where no cell has it (without looking), bit-packed if a bool, a fraction's values over a
    dictionary, integers delta-encoded; null at the kernel's sentinel (`Measure.missing`)."""
    rows = batch.rows
    if not any(measure.defined_on(cell) for cell in batch.cells):
        return _null_chunk(rows, _PHYSICAL[measure.dtype])
    values = [batch.flat[name] for name in measure.kernel]
    if measure.dtype == "bool":
        packed = np.packbits(values[0].view(np.bool_), bitorder="little")
        return _Chunk(_data_page(rows, PLAIN, None, packed), BOOLEAN, [PLAIN])
    present = None if measure.missing is None else batch.presence(measure)
    if len(values) == 2:
        return _fraction_chunk(*values, present, rows)
    return _integer_chunk(values[0], rows, INT32, present)


def _plain_strings(names) -> bytes:
    return b"".join(len(name.encode()).to_bytes(4, "little") + name.encode() for name in names)


def _merged_runs(runs: list[tuple]) -> list[tuple]:
    merged: list[list] = []
    for value, length in runs:
        if length == 0:
            continue
        if merged and merged[-1][0] == value:
            merged[-1][1] += length
        else:
            merged.append([value, length])
    return [tuple(run) for run in merged]


# --- The file --------------------------------------------------------------------------------


class RowGroup(NamedTuple):
    """One batch of kernel results encoded (`DealFileEncoder.encode_batch`): its columns'
    pages, which need only their place in a file to be written there (`write_row_group`)."""

    chunks: list[_Chunk]
    rows: int


class DealFileEncoder:
    """Writes a per-deal Parquet file to ``sink`` (anything with ``write``): `write_batch` for
    each batch of kernel results (one row group each), then `close` for the footer. With no
    sink it only encodes (`encode_batch`): row groups for a file written elsewhere.

    ``file_schema`` is the per-deal schema as written (`schema.DEAL_WRITE_SCHEMA`),
    ``label_names`` each label column's dictionary, ``metadata`` the file's key-value metadata.
    """

    def __init__(
        self,
        sink,
        file_schema: pa.Schema,
        label_names: dict[str, tuple],
        metadata: dict[bytes, bytes],
    ):
        self.sink = sink
        self.schema = file_schema
        self.label_names = label_names
        self.metadata = metadata
        self.offset = 0
        self.row_groups: list[bytes] = []
        self.rows = 0
        if sink is not None:
            self._write(MAGIC)
        self._dictionary_pages = {
            name: _plain_strings(names) for name, names in label_names.items()
        }

    def _write(self, data) -> None:
        self.sink.write(data)
        self.offset += memoryview(data).nbytes

    def write_batch(self, seed: int, first: int, results: dict[str, np.ndarray], cells) -> int:
        """Kernel results for ``cells`` x deals ``first``.. as one row group (`encode_batch`).
        Gives the rows written."""
        group = self.encode_batch(seed, first, results, cells)
        if group.rows:
            self.write_row_group(group.chunks, group.rows)
        return group.rows

    def encode_batch(
        self, seed: int, first: int, results: dict[str, np.ndarray], cells, keep: bool = False
    ) -> RowGroup:
        """Kernel results for ``cells`` x deals ``first``.. encoded as one row group: the rows
        of `schema.deal_table`, cell by cell. ``keep``: its pages copied out of the encoders'
        buffers (made for the largest encoding a column can have), to be kept a while.

        It relies on the kernel's conventions (`kernel.RESULT_FIELDS`), as the sweep's tasks
        give them: int8 arrays, one row per cell; each measure's sentinel (`Measure.missing`)
        where a deal has no value of it, and values only on the cells it is defined on (a
        fraction's denominator above 0 with them). A column no cell can fill is written null
        without looking.
        """
        cells = list(cells)
        n_cells, count = next(iter(results.values())).shape
        if n_cells != len(cells):
            raise ValueError(f"results for {n_cells} cells, but {len(cells)} cells given")
        wrong = [name for name, values in results.items() if values.dtype != np.int8]
        if wrong:
            raise ValueError(f"results not int8, as the kernel gives them: {', '.join(wrong)}")
        rows = n_cells * count
        if rows == 0:
            return RowGroup([], 0)
        flat = {name: values.reshape(-1) for name, values in results.items()}
        batch = _Batch(seed, first, count, cells, flat, rows, {})
        chunks = [self._column(field, batch) for field in self.schema]
        if keep:
            for chunk in chunks:
                chunk.pieces = [
                    piece.copy() if isinstance(piece, np.ndarray) else piece
                    for piece in chunk.pieces
                ]
        return RowGroup(chunks, rows)

    def write_row_group(self, chunks: list[_Chunk], rows: int) -> None:
        """Write one row group, ``chunks`` being its columns in the schema's order."""
        columns = []
        for field, chunk in zip(self.schema, chunks):
            start = self.offset
            for piece in chunk.pieces:
                self._write(piece)
            dictionary_offset = start if chunk.dictionary_size is not None else None
            data_offset = start + (chunk.dictionary_size or 0)
            metadata = struct(
                (1, T_I32, chunk.physical),
                (2, T_LIST, (T_I32, chunk.encodings)),
                (3, T_LIST, (T_BINARY, [field.name])),
                (4, T_I32, UNCOMPRESSED),
                (5, T_I64, rows),
                (6, T_I64, chunk.size),
                (7, T_I64, chunk.size),
                (9, T_I64, data_offset),
                (11, T_I64, dictionary_offset),
            )
            columns.append(struct((2, T_I64, 0), (3, T_STRUCT, metadata)))
            chunk.pieces = None
        size = sum(chunk.size for chunk in chunks)
        self.row_groups.append(
            struct(
                (1, T_LIST, (T_STRUCT, columns)),
                (2, T_I64, size),
                (3, T_I64, rows),
                (5, T_I64, self.offset - size),
                (6, T_I64, size),
            )
        )
        self.rows += rows

    def _column(self, field: pa.Field, batch: _Batch) -> _Chunk:
        name, rows = field.name, batch.rows
        if name == "seed":
            return _delta_chunk(counting_values(batch.seed, 1, rows), rows, INT64)
        if name == "deal":  # the batch's deal numbers, cell after cell
            return _delta_chunk(counting_values(batch.first, batch.count, rows), rows, INT64)
        if name in self.label_names:
            return self._label_chunk(field, batch)
        if name in BY_NAME:
            return _measure_chunk(BY_NAME[name], batch)
        raise KeyError(f"{name}: not a column of the per-deal schema")

    def _label_chunk(self, field: pa.Field, batch: _Batch) -> _Chunk:
        """A label column: a run a cell, over the dictionary of the rules' names."""
        names, count, rows = self.label_names[field.name], batch.count, batch.rows
        values = [getattr(cell, field.name) for cell in batch.cells]
        runs = _merged_runs([(names.index(value), count) for value in values if value is not None])
        if not runs:  # no cell has this label: null throughout, as pyarrow writes it
            return _null_chunk(rows, BYTE_ARRAY)
        levels_page = None
        if field.nullable:
            levels_page = levels_bytes(
                _merged_runs([(int(value is not None), count) for value in values])
            )
        return _dictionary_chunk(
            self._dictionary_pages[field.name],
            len(names),
            runs,
            None,
            rows,
            field.nullable,
            levels_page,
            BYTE_ARRAY,
        )

    def close(self) -> None:
        """The footer: the schema, the row groups, and the key-value metadata (the file's own,
        then Arrow's schema with it under ``ARROW:schema``, as pyarrow writes them)."""
        arrow_schema = self.schema.with_metadata(self.metadata)
        key_values = list(self.metadata.items())
        key_values.append(
            (b"ARROW:schema", base64.b64encode(arrow_schema.serialize().to_pybytes()))
        )
        root = struct((4, T_BINARY, "schema"), (5, T_I32, len(self.schema)))
        footer = struct(
            (1, T_I32, 2),
            (2, T_LIST, (T_STRUCT, [root] + [schema_element(field) for field in self.schema])),
            (3, T_I64, self.rows),
            (4, T_LIST, (T_STRUCT, self.row_groups)),
            (
                5,
                T_LIST,
                (
                    T_STRUCT,
                    [struct((1, T_BINARY, key), (2, T_BINARY, value)) for key, value in key_values],
                ),
            ),
            (6, T_BINARY, f"clocksweep version {__version__}"),
        )
        self._write(footer)
        self._write(len(footer).to_bytes(4, "little"))
        self._write(MAGIC)
