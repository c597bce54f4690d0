"""Per-deal Parquet files, encoded straight from the kernel's arrays.

pyarrow's writer encodes every value of every column one by one, even where a column is null
throughout or constant, and so cost a per-deal sweep a large share of its time
(`benchmarks/writer_bench.py` measures the two side by side). This module writes the same table
for the one schema `schema.DEAL_WRITE_SCHEMA` knowing what the columns are: a label or a null
column is constant per cell, so it is a few runs, not a value per row; the rest are small
integers, packed in one numba pass each.

What it writes is plain Parquet (format 2, data pages version 1, uncompressed, no statistics),
the encodings pyarrow was told to use (`files.parquet_options`):

- integers (``seed``, ``deal`` and the int8 fields): DELTA_BINARY_PACKED;
- labels and ``hint``: RLE_DICTIONARY, over a PLAIN dictionary page (a label's dictionary is
  every name the rules have, in their order, so a code means the same in every file; the
  hint's is the values present);
- ``won``: PLAIN (bit-packed);
- definition levels of the nullable columns: RLE (the run-length / bit-packed hybrid).

with Arrow's schema in the footer (``ARROW:schema``, as pyarrow stores it), so readers give back
the schema's types: dictionaries for labels, uint64, int8. The tests read what it writes with
pyarrow, Polars and DuckDB and compare it, row by row, with `schema.deal_table`.

References: the Parquet format (github.com/apache/parquet-format: Encodings.md, parquet.thrift)
and Thrift's compact protocol, of which the footer and page headers need the few types below.
"""

from __future__ import annotations

import base64
import functools
from typing import NamedTuple

import numba as nb
import numpy as np
import pyarrow as pa

from pipeline import __version__
from pipeline.engine.measures import NO_COUNT, NO_PILE

# --- Thrift compact protocol (only what Parquet's headers use) -----------------------------

_BOOL, _I8, _I32, _I64, _BINARY, _LIST, _STRUCT = (
    "bool",
    "i8",
    "i32",
    "i64",
    "binary",
    "list",
    "struct",
)
_TYPE_CODE = {_I8: 3, _I32: 5, _I64: 6, _BINARY: 8, _LIST: 9, _STRUCT: 12}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _thrift_value(kind: str, value) -> bytes:
    if kind == _I8:
        return bytes([value & 0xFF])
    if kind in (_I32, _I64):
        return _varint(_zigzag(value))
    if kind == _BINARY:
        data = value.encode() if isinstance(value, str) else bytes(value)
        return _varint(len(data)) + data
    if kind == _STRUCT:
        return value  # already encoded by `_struct`
    raise ValueError(kind)


def _struct(*fields: tuple) -> bytes:
    """A Thrift struct in the compact protocol: ``fields`` are (id, kind, value) by rising id;
    a value of None is left out (an optional field not set). A list is (element kind, items)."""
    out = bytearray()
    last = 0
    for field_id, kind, value in fields:
        if value is None:
            continue
        code = (1 if value else 2) if kind == _BOOL else _TYPE_CODE[kind]
        if 0 < field_id - last <= 15:
            out.append((field_id - last) << 4 | code)
        else:
            out.append(code)
            out += _varint(_zigzag(field_id))
        last = field_id
        if kind == _LIST:
            element, items = value
            size = len(items)
            out.append((size << 4 if size < 15 else 0xF0) | _TYPE_CODE[element])
            if size >= 15:
                out += _varint(size)
            for item in items:
                out += _thrift_value(element, item)
        elif kind != _BOOL:
            out += _thrift_value(kind, value)
    out.append(0)
    return bytes(out)


# --- Parquet's enums (parquet.thrift) ------------------------------------------------------

BOOLEAN, INT32, INT64, FLOAT, BYTE_ARRAY = 0, 1, 2, 4, 6  # physical types
REQUIRED, OPTIONAL = 0, 1  # repetition
PLAIN, RLE, DELTA_BINARY_PACKED, RLE_DICTIONARY = 0, 3, 5, 8  # encodings
DATA_PAGE, DICTIONARY_PAGE = 0, 2
UNCOMPRESSED = 0
MAGIC = b"PAR1"

# Logical types (the LogicalType union: 1 STRING, 10 INTEGER) and the older converted types.
_STRING = _struct((1, _STRUCT, _struct()))
_UTF8 = 0
_CONVERTED_INT = {(8, True): 15, (64, False): 14, (64, True): 18}  # INT_8, UINT_64, INT_64


def _integer_type(bits: int, signed: bool) -> bytes:
    return _struct((10, _STRUCT, _struct((1, _I8, bits), (2, _BOOL, signed))))


def _schema_element(field: pa.Field) -> bytes:
    """A leaf of the Parquet schema for an Arrow field of the per-deal schema."""
    kind = field.type
    logical = converted = None
    if pa.types.is_dictionary(kind) or pa.types.is_string(kind):
        physical, logical, converted = BYTE_ARRAY, _STRING, _UTF8
    elif pa.types.is_boolean(kind):
        physical = BOOLEAN
    elif pa.types.is_float32(kind):
        physical = FLOAT
    elif pa.types.is_integer(kind):
        bits, signed = kind.bit_width, pa.types.is_signed_integer(kind)
        physical = INT64 if bits == 64 else INT32
        logical, converted = _integer_type(bits, signed), _CONVERTED_INT[(bits, signed)]
    else:
        raise TypeError(f"{field.name}: {kind} is not a type of the per-deal schema")
    return _struct(
        (1, _I32, physical),
        (3, _I32, OPTIONAL if field.nullable else REQUIRED),
        (4, _BINARY, field.name),
        (6, _I32, converted),
        (10, _STRUCT, logical),
    )


def _page_header(page_type: int, size: int, num_values: int, encoding: int) -> bytes:
    if page_type == DICTIONARY_PAGE:
        detail = (7, _STRUCT, _struct((1, _I32, num_values), (2, _I32, encoding)))
    else:
        detail = (
            5,
            _STRUCT,
            _struct((1, _I32, num_values), (2, _I32, encoding), (3, _I32, RLE), (4, _I32, RLE)),
        )
    return _struct((1, _I32, page_type), (2, _I32, size), (3, _I32, size), detail)


# --- Value encodings, in numba ---------------------------------------------------------------

_U7 = np.uint64(7)
_LOW7 = np.uint64(0x7F)
_HIGH = np.uint64(0x80)
_BYTE = np.uint64(0xFF)
_EIGHT = np.uint64(8)
_ONE = np.uint64(1)
_SIXTEEN, _TWENTY_FOUR, _WORD = np.uint64(16), np.uint64(24), np.uint64(32)
_DELTA_BLOCK, _MINIBLOCKS, _MINIBLOCK = 128, 4, 32


@nb.njit(cache=True)
def _put_varint(out, pos, value):
    value = np.uint64(value)
    while value >= _HIGH:
        out[pos] = np.uint8((value & _LOW7) | _HIGH)
        pos += 1
        value >>= _U7
    out[pos] = np.uint8(value)
    return pos + 1


@nb.njit(cache=True)
def _zigzag64(value):
    """`_zigzag` for the numba encoders: a signed 64-bit value as the unsigned one varints take."""
    value = np.int64(value)
    return np.uint64((value << 1) ^ (value >> 63))


@nb.njit(cache=True)
def _bit_width(value):
    """Bits needed for the unsigned ``value`` (0 for 0)."""
    value = np.uint64(value)
    width = 0
    while value:
        width += 1
        value >>= _ONE
    return width


@nb.njit(cache=True)
def _pack(values, start, stop, width, out, pos):
    """Bit-pack ``values[start:stop]`` (unsigned), least significant bit first, ``width`` bits
    each, into ``out`` from ``pos``; values past the end of ``values`` are packed as 0. One bit
    at a time: the general case of `_pack_words`, for what that cannot take (widths over 32,
    a padded last group), which is a few values a page at most."""
    size = ((stop - start) * width + 7) // 8
    out[pos : pos + size] = 0
    bit = 0
    for index in range(start, stop):
        value = np.uint64(values[index]) if index < values.shape[0] else np.uint64(0)
        for shift in range(width):
            if (value >> np.uint64(shift)) & _ONE:
                out[pos + (bit >> 3)] |= np.uint8(1 << (bit & 7))
            bit += 1
    return pos + size


@nb.njit(cache=True)
def _pack_words(values, begin, count, width, out, pos):
    """Bit-pack ``values[begin:begin + count]`` at ``width`` bits (at most 32), ``count`` a
    multiple of 8 so that they fill whole bytes: the fast case of `_pack`, which empties its
    accumulator a 32-bit word at a time."""
    acc = np.uint64(0)
    bits = np.uint64(0)
    step = np.uint64(width)
    for k in range(begin, begin + count):
        acc |= np.uint64(values[k]) << bits
        bits += step
        if bits >= _WORD:
            out[pos] = np.uint8(acc & _BYTE)
            out[pos + 1] = np.uint8((acc >> _EIGHT) & _BYTE)
            out[pos + 2] = np.uint8((acc >> _SIXTEEN) & _BYTE)
            out[pos + 3] = np.uint8((acc >> _TWENTY_FOUR) & _BYTE)
            pos += 4
            acc >>= _WORD
            bits -= _WORD
    while bits:
        out[pos] = np.uint8(acc & _BYTE)
        pos += 1
        acc >>= _EIGHT
        bits -= _EIGHT
    return pos


@nb.njit(cache=True, nogil=True)
def _delta_binary_packed(cycle, n, out, pos):
    """DELTA_BINARY_PACKED of ``n`` values that go through ``cycle`` over and over (a column's
    values, the seed once, a cell's deal numbers), so a repeated column is never built.
    Blocks of 128 deltas in 4 miniblocks, each miniblock's deltas less the block's least,
    bit-packed at its own width. Arithmetic wraps at 64 bits, as the format says, so any
    uint64 or int64 sequence round-trips."""
    period = cycle.shape[0]
    pos = _put_varint(out, pos, _DELTA_BLOCK)
    pos = _put_varint(out, pos, _MINIBLOCKS)
    pos = _put_varint(out, pos, n)
    first = np.int64(cycle[0]) if n else np.int64(0)
    pos = _put_varint(out, pos, _zigzag64(first))
    # One block's deltas, padded with zeros to whole miniblocks: the format pads the last.
    adjusted = np.zeros(_DELTA_BLOCK, dtype=np.uint64)
    previous = np.uint64(first)
    at = 1 % period if n else 0  # where in the cycle the next value is
    index = 1
    while index < n:
        size = min(_DELTA_BLOCK, n - index)
        least = np.int64(0)
        for k in range(size):
            value = np.uint64(np.int64(cycle[at]))
            at += 1
            if at == period:
                at = 0
            delta = np.int64(value - previous)
            previous = value
            adjusted[k] = np.uint64(delta)
            if k == 0 or delta < least:
                least = delta
        pos = _put_varint(out, pos, _zigzag64(least))
        for k in range(size):
            adjusted[k] -= np.uint64(least)
        for k in range(size, _DELTA_BLOCK):
            adjusted[k] = 0
        widths_at = pos
        pos += _MINIBLOCKS
        for block in range(_MINIBLOCKS):
            begin = block * _MINIBLOCK
            if begin >= size:
                out[widths_at + block] = 0
                continue
            largest = np.uint64(0)
            for k in range(begin, begin + _MINIBLOCK):
                largest |= adjusted[k]
            width = _bit_width(largest)
            out[widths_at + block] = width
            if width == 0:
                continue
            if width <= 32:
                pos = _pack_words(adjusted, begin, _MINIBLOCK, width, out, pos)
            else:
                pos = _pack(adjusted, begin, begin + _MINIBLOCK, width, out, pos)
        index += size
    return pos


@nb.njit(cache=True)
def _run_at(values, index, n):
    """Whether eight equal values start at ``index``."""
    if index + 8 > n:
        return False
    first = values[index]
    for k in range(index + 1, index + 8):
        if values[k] != first:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _hybrid(values, width, out, pos):
    """The RLE / bit-packed hybrid: a run of 8 or more equal values is one (count, value) pair;
    anything else is bit-packed in groups of 8 (the last padded) up to the next such run."""
    n = values.shape[0]
    value_bytes = (width + 7) // 8
    index = 0
    while index < n:
        if _run_at(values, index, n):
            end = index + 8
            while end < n and values[end] == values[index]:
                end += 1
            pos = _put_varint(out, pos, (end - index) << 1)
            value = np.uint64(values[index])
            for k in range(value_bytes):
                out[pos] = np.uint8((value >> np.uint64(8 * k)) & _BYTE)
                pos += 1
            index = end
        else:
            start = index
            groups = 0
            while True:
                groups += 1
                index += 8
                if index >= n or _run_at(values, index, n):
                    break
            pos = _put_varint(out, pos, (groups << 1) | 1)
            whole = min(8 * groups, (n - start) // 8 * 8)  # the groups not padded
            pos = _pack_words(values, start, whole, width, out, pos)
            if whole < 8 * groups:
                pos = _pack(values, start + whole, start + 8 * groups, width, out, pos)
    return pos


@nb.njit(cache=True, nogil=True)
def _present(values, absent):
    """1 where ``values`` != ``absent`` (the definition levels of a field null where the
    kernel wrote its sentinel for "no value")."""
    levels = np.empty(values.shape[0], dtype=np.uint8)
    count = 0
    for k in range(values.shape[0]):
        here = values[k] != absent
        levels[k] = here
        count += here
    return levels, count


@nb.njit(cache=True, nogil=True)
def _compress(values, levels, count):
    kept = np.empty(count, dtype=values.dtype)
    at = 0
    for k in range(values.shape[0]):
        if levels[k]:
            kept[at] = values[k]
            at += 1
    return kept


@nb.njit(cache=True, nogil=True)
def _hint_codes(numerators, denominators, levels, count):
    """The hint d/U of each rescued row as an index into a dictionary of the distinct values,
    in order of first appearance: (indices, numerators, denominators of the dictionary).
    Distinct values are distinct fractions in lowest terms: for the small integers here (at
    most 127) unequal fractions give unequal float32s, and equal ones the same (division is
    correctly rounded). A row costs one table lookup; a pair seen first, one gcd."""
    code_of_pair = np.full((128, 128), -1, dtype=np.int32)  # by (d, U) as the kernel gives it
    code_of_fraction = np.full((128, 128), -1, dtype=np.int32)  # by (d, U) in lowest terms
    codes = np.empty(count, dtype=np.uint16)
    dict_num = np.empty(128 * 128, dtype=np.int64)
    dict_den = np.empty(128 * 128, dtype=np.int64)
    size = 0
    at = 0
    for k in range(numerators.shape[0]):
        if not levels[k]:
            continue
        a, b = np.int64(numerators[k]), np.int64(denominators[k])
        if a < 0 or b <= 0:
            raise ValueError("a hint with a negative numerator or a denominator not positive")
        code = code_of_pair[a, b]
        if code < 0:
            x, y = a, b
            while y:
                x, y = y, x % y
            code = code_of_fraction[a // x, b // x]
            if code < 0:
                code = size
                code_of_fraction[a // x, b // x] = code
                dict_num[size] = a // x
                dict_den[size] = b // x
                size += 1
            code_of_pair[a, b] = code
        codes[at] = code
        at += 1
    return codes, dict_num[:size], dict_den[:size]


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


# The numba encoders write into a buffer without bounds checks, so each buffer is made as
# large as the encoding can ever be for the values it gets.


def _hybrid_buffer(values: int, width: int) -> np.ndarray:
    """For `_hybrid`: each 8 values cost at most ``width`` bytes and a header of at most 5
    (bit-packed), or a header of at most 5 and a value of ``ceil(width / 8)`` bytes (a run)."""
    return np.empty((values + 7) // 8 * (width + 8) + 64, dtype=np.uint8)


def _delta_buffer(values: int) -> np.ndarray:
    """For `_delta_binary_packed`: 4 varints of header; a block of 128 deltas, whole or not, at
    most a 10-byte varint, 4 widths and 4 miniblocks of 32 values at 64 bits."""
    block = 10 + _MINIBLOCKS + _DELTA_BLOCK * 8
    return np.empty((values + _DELTA_BLOCK - 1) // _DELTA_BLOCK * block + 64, dtype=np.uint8)


def _runs_bytes(runs: list[tuple[int, int]], width: int) -> bytes:
    """(value, length) runs as the hybrid's run-length runs: a header, then the value."""
    size = (width + 7) // 8
    return b"".join(_varint(length << 1) + value.to_bytes(size, "little") for value, length in runs)


def _levels_bytes(levels: np.ndarray | list[tuple[int, int]]) -> bytes:
    """Definition levels (bit width 1) as a data page v1 holds them: their length, then the
    hybrid. Given as (level, length) runs, or as one level a row."""
    if isinstance(levels, list):
        body = _runs_bytes(levels, 1)
    else:
        out = _hybrid_buffer(levels.shape[0], 1)
        body = bytes(out[: _hybrid(levels, 1, out, 0)])
    return len(body).to_bytes(4, "little") + body


class _Presence(NamedTuple):
    """Where a nullable field has a value: one level a row, how many are 1, and the levels as
    a data page holds them (encoded once, for every column that shares them)."""

    levels: np.ndarray
    count: int
    page: bytes


def _presence(values: np.ndarray, absent: int) -> _Presence:
    """A field present where ``values`` != ``absent``."""
    levels, count = _present(values, absent)
    rows = values.shape[0]
    page = _levels_bytes([(int(count > 0), rows)] if count in (0, rows) else levels)
    return _Presence(levels, count, page)


def _data_page(rows: int, encoding: int, levels, values) -> list:
    body_size = (0 if levels is None else len(levels)) + memoryview(values).nbytes
    pieces = [_page_header(DATA_PAGE, body_size, rows, encoding)]
    if levels is not None:
        pieces.append(levels)
    pieces.append(values)
    return pieces


def _delta_values(cycle: np.ndarray, n: int | None = None) -> np.ndarray:
    """``n`` values (by default ``len(cycle)``) going through ``cycle``, delta-encoded."""
    n = cycle.shape[0] if n is None else n
    out = _delta_buffer(n)
    return out[: _delta_binary_packed(cycle, n, out, 0)]


def _delta_header(n: int, first: int) -> bytes:
    """What `_delta_binary_packed` writes before its blocks: the block size, the miniblocks,
    the count, and the first value (a uint64 as the int64 of its bits)."""
    signed = first - (1 << 64) if first >= 1 << 63 else first
    return _varint(_DELTA_BLOCK) + _varint(_MINIBLOCKS) + _varint(n) + _varint(_zigzag(signed))


@functools.lru_cache(maxsize=16)
def _counting_blocks(period: int, n: int) -> bytes:
    """The blocks of `_delta_values` of ``n`` values going through first, first + 1, ...,
    first + period - 1 over and over (a seed: period 1; a batch's deal numbers, cell after
    cell): they hold the deltas alone, which are the same whatever first is."""
    encoded = _delta_values(np.arange(period, dtype=np.uint64), n)
    return bytes(encoded[len(_delta_header(n, 0)) :])


def _counting_values(first: int, period: int, n: int) -> bytes:
    """`_delta_values` of ``n`` values going through first, ..., first + period - 1 (at most
    2**64 - 1), without making them: ``first``'s header, then the blocks any first has."""
    return _delta_header(n, first) + _counting_blocks(period, n)


def _null_chunk(rows: int, physical: int) -> _Chunk:
    """A nullable column null throughout: one run of definition level 0, no values (and no
    dictionary, as pyarrow writes a dictionary column no row fills)."""
    return _Chunk(_data_page(rows, PLAIN, _levels_bytes([(0, rows)]), b""), physical, [PLAIN, RLE])


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
        return _delta_chunk(_delta_values(values, rows), rows, physical)
    if presence.count == 0:
        return _null_chunk(rows, physical)
    kept = values if presence.count == rows else _compress(values, presence.levels, presence.count)
    pieces = _data_page(rows, DELTA_BINARY_PACKED, presence.page, _delta_values(kept))
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
        out = _hybrid_buffer(codes.shape[0], width)
        data = bytes([width]) + bytes(out[: _hybrid(codes, width, out, 0)])
    else:
        data = bytes([width]) + _runs_bytes(runs, width)
    header = _page_header(DICTIONARY_PAGE, len(dictionary_page), dictionary_count, PLAIN)
    pieces = [header, dictionary_page] + _data_page(
        rows, RLE_DICTIONARY, levels_page if nullable else None, data
    )
    encodings = [PLAIN, RLE_DICTIONARY] + ([RLE] if nullable else [])
    return _Chunk(pieces, physical, encodings, len(header) + len(dictionary_page))


def _hint_chunk(flat: dict, rescued: _Presence, rows: int) -> _Chunk:
    """The hint d/U of the rescued rows, over a dictionary of the values present."""
    if rescued.count == 0:
        return _null_chunk(rows, FLOAT)
    codes, numerators, denominators = _hint_codes(
        flat["hint_num"], flat["hint_den"], rescued.levels, rescued.count
    )
    dictionary = (numerators.astype(np.float32) / denominators.astype(np.float32)).astype("<f4")
    return _dictionary_chunk(
        dictionary.tobytes(), len(dictionary), None, codes, rows, True, rescued.page, FLOAT
    )


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
        give them: int8 arrays, one row per cell; a positive rescue pile and its hint only
        in cells with a rescue, a denominator above 0 with it; restarts and stray deaths other
        than `record.NO_COUNT` only in play_out. A column no cell can fill is written null without looking.
        """
        cells = list(cells)
        n_cells, count = results["won"].shape
        if n_cells != len(cells):
            raise ValueError(f"results for {n_cells} cells, but {len(cells)} cells given")
        wrong = [name for name, values in results.items() if values.dtype != np.int8]
        if wrong:
            raise ValueError(f"results not int8, as the kernel gives them: {', '.join(wrong)}")
        rows = n_cells * count
        if rows == 0:
            return RowGroup([], 0)
        flat = {name: values.reshape(-1) for name, values in results.items()}
        # Where the rescue's two columns have values.
        rescued = (
            _presence(flat["rescue_pile"], NO_PILE)
            if any(cell.has_rescue for cell in cells)
            else None
        )
        chunks = [
            self._column(field, seed, first, count, cells, flat, rows, rescued)
            for field in self.schema
        ]
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
            metadata = _struct(
                (1, _I32, chunk.physical),
                (2, _LIST, (_I32, chunk.encodings)),
                (3, _LIST, (_BINARY, [field.name])),
                (4, _I32, UNCOMPRESSED),
                (5, _I64, rows),
                (6, _I64, chunk.size),
                (7, _I64, chunk.size),
                (9, _I64, data_offset),
                (11, _I64, dictionary_offset),
            )
            columns.append(_struct((2, _I64, 0), (3, _STRUCT, metadata)))
            chunk.pieces = None
        size = sum(chunk.size for chunk in chunks)
        self.row_groups.append(
            _struct(
                (1, _LIST, (_STRUCT, columns)),
                (2, _I64, size),
                (3, _I64, rows),
                (5, _I64, self.offset - size),
                (6, _I64, size),
            )
        )
        self.rows += rows

    def _column(self, field: pa.Field, seed, first, count, cells, flat, rows, rescued) -> _Chunk:
        name = field.name
        if name == "seed":
            return _delta_chunk(_counting_values(seed, 1, rows), rows, INT64)
        if name == "deal":  # the batch's deal numbers, cell after cell
            return _delta_chunk(_counting_values(first, count, rows), rows, INT64)
        if name in self.label_names:
            names = self.label_names[name]
            values = [getattr(cell, name) for cell in cells]
            runs = _merged_runs(
                [(names.index(value), count) for value in values if value is not None]
            )
            if not runs:  # no cell has this label: null throughout, as pyarrow writes it
                return _null_chunk(rows, BYTE_ARRAY)
            levels_page = None
            if field.nullable:
                levels_page = _levels_bytes(
                    _merged_runs([(int(value is not None), count) for value in values])
                )
            return _dictionary_chunk(
                self._dictionary_pages[name],
                len(names),
                runs,
                None,
                rows,
                field.nullable,
                levels_page,
                BYTE_ARRAY,
            )
        if name == "won":
            packed = np.packbits(flat["won"].view(np.bool_), bitorder="little")
            return _Chunk(_data_page(rows, PLAIN, None, packed), BOOLEAN, [PLAIN])
        if name in ("cards_turned", "down_at_stop"):
            return _integer_chunk(flat[name], rows, INT32)
        if name in ("rescue_pile", "hint"):
            if rescued is None:  # no cell has a rescue
                return _null_chunk(rows, FLOAT if name == "hint" else INT32)
            if name == "rescue_pile":
                return _integer_chunk(flat[name], rows, INT32, rescued)
            return _hint_chunk(flat, rescued, rows)
        if name in ("restarts", "stray_deaths"):
            if not any(cell.variant == "play_out" for cell in cells):
                return _null_chunk(rows, INT32)
            return _integer_chunk(flat[name], rows, INT32, _presence(flat[name], NO_COUNT))
        raise KeyError(f"{name}: not a column of the per-deal schema")

    def close(self) -> None:
        """The footer: the schema, the row groups, and the key-value metadata (the file's own,
        then Arrow's schema with it under ``ARROW:schema``, as pyarrow writes them)."""
        arrow_schema = self.schema.with_metadata(self.metadata)
        key_values = list(self.metadata.items())
        key_values.append(
            (b"ARROW:schema", base64.b64encode(arrow_schema.serialize().to_pybytes()))
        )
        root = _struct((4, _BINARY, "schema"), (5, _I32, len(self.schema)))
        footer = _struct(
            (1, _I32, 2),
            (2, _LIST, (_STRUCT, [root] + [_schema_element(field) for field in self.schema])),
            (3, _I64, self.rows),
            (4, _LIST, (_STRUCT, self.row_groups)),
            (
                5,
                _LIST,
                (
                    _STRUCT,
                    [_struct((1, _BINARY, key), (2, _BINARY, value)) for key, value in key_values],
                ),
            ),
            (6, _BINARY, f"clocksweep version {__version__}"),
        )
        self._write(footer)
        self._write(len(footer).to_bytes(4, "little"))
        self._write(MAGIC)
