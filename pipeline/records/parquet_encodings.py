"""Parquet's value encodings, in numba, for `dealfile`: DELTA_BINARY_PACKED for integers,
the RLE / bit-packed hybrid for dictionary codes and definition levels, and a float column's
values present as codes into a dictionary of the distinct fractions (Encodings.md,
github.com/apache/parquet-format).

The numba encoders write into a buffer without bounds checks (`hybrid_buffer`,
`delta_buffer` make each as large as the encoding can ever be).
"""

from __future__ import annotations

import functools

import numba as nb
import numpy as np

from pipeline.records.parquet_format import varint, zigzag

# --- Value encodings, in numba ---------------------------------------------------------------

_U7 = np.uint64(7)
_LOW7 = np.uint64(0x7F)
_HIGH = np.uint64(0x80)
_BYTE = np.uint64(0xFF)
_EIGHT = np.uint64(8)
_ONE = np.uint64(1)
_SIXTEEN, _TWENTY_FOUR, _WORD = np.uint64(16), np.uint64(24), np.uint64(32)
DELTA_BLOCK, MINIBLOCKS, MINIBLOCK = 128, 4, 32


@nb.njit(cache=True)
def put_varint(out, pos, value):
    value = np.uint64(value)
    while value >= _HIGH:
        out[pos] = np.uint8((value & _LOW7) | _HIGH)
        pos += 1
        value >>= _U7
    out[pos] = np.uint8(value)
    return pos + 1


@nb.njit(cache=True)
def zigzag64(value):
    """`zigzag` for the numba encoders: a signed 64-bit value as the unsigned one varints take."""
    value = np.int64(value)
    return np.uint64((value << 1) ^ (value >> 63))


@nb.njit(cache=True)
def bit_width(value):
    """Bits needed for the unsigned ``value`` (0 for 0)."""
    value = np.uint64(value)
    width = 0
    while value:
        width += 1
        value >>= _ONE
    return width


@nb.njit(cache=True)
def pack(values, start, stop, width, out, pos):
    """Bit-pack ``values[start:stop]`` (unsigned), least significant bit first, ``width`` bits
    each, into ``out`` from ``pos``; values past the end of ``values`` are packed as 0. One bit
    at a time: the general case of `pack_words`, for what that cannot take (widths over 32,
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
def pack_words(values, begin, count, width, out, pos):
    """Bit-pack ``values[begin:begin + count]`` at ``width`` bits (at most 32), ``count`` a
    multiple of 8 so that they fill whole bytes: the fast case of `pack`, which empties its
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
def delta_binary_packed(cycle, n, out, pos):
    """DELTA_BINARY_PACKED of ``n`` values that go through ``cycle`` over and over (a column's
    values, the seed once, a cell's deal numbers), so a repeated column is never built.
    Blocks of 128 deltas in 4 miniblocks, each miniblock's deltas less the block's least,
    bit-packed at its own width. Arithmetic wraps at 64 bits, as the format says, so any
    uint64 or int64 sequence round-trips."""
    period = cycle.shape[0]
    pos = put_varint(out, pos, DELTA_BLOCK)
    pos = put_varint(out, pos, MINIBLOCKS)
    pos = put_varint(out, pos, n)
    first = np.int64(cycle[0]) if n else np.int64(0)
    pos = put_varint(out, pos, zigzag64(first))
    # One block's deltas, padded with zeros to whole miniblocks: the format pads the last.
    adjusted = np.zeros(DELTA_BLOCK, dtype=np.uint64)
    previous = np.uint64(first)
    at = 1 % period if n else 0  # where in the cycle the next value is
    index = 1
    while index < n:
        size = min(DELTA_BLOCK, n - index)
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
        pos = put_varint(out, pos, zigzag64(least))
        for k in range(size):
            adjusted[k] -= np.uint64(least)
        for k in range(size, DELTA_BLOCK):
            adjusted[k] = 0
        widths_at = pos
        pos += MINIBLOCKS
        for block in range(MINIBLOCKS):
            begin = block * MINIBLOCK
            if begin >= size:
                out[widths_at + block] = 0
                continue
            largest = np.uint64(0)
            for k in range(begin, begin + MINIBLOCK):
                largest |= adjusted[k]
            width = bit_width(largest)
            out[widths_at + block] = width
            if width == 0:
                continue
            if width <= 32:
                pos = pack_words(adjusted, begin, MINIBLOCK, width, out, pos)
            else:
                pos = pack(adjusted, begin, begin + MINIBLOCK, width, out, pos)
        index += size
    return pos


@nb.njit(cache=True)
def run_at(values, index, n):
    """Whether eight equal values start at ``index``."""
    if index + 8 > n:
        return False
    first = values[index]
    for k in range(index + 1, index + 8):
        if values[k] != first:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def hybrid(values, width, out, pos):
    """The RLE / bit-packed hybrid: a run of 8 or more equal values is one (count, value) pair;
    anything else is bit-packed in groups of 8 (the last padded) up to the next such run."""
    n = values.shape[0]
    value_bytes = (width + 7) // 8
    index = 0
    while index < n:
        if run_at(values, index, n):
            end = index + 8
            while end < n and values[end] == values[index]:
                end += 1
            pos = put_varint(out, pos, (end - index) << 1)
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
                if index >= n or run_at(values, index, n):
                    break
            pos = put_varint(out, pos, (groups << 1) | 1)
            whole = min(8 * groups, (n - start) // 8 * 8)  # the groups not padded
            pos = pack_words(values, start, whole, width, out, pos)
            if whole < 8 * groups:
                pos = pack(values, start + whole, start + 8 * groups, width, out, pos)
    return pos


@nb.njit(cache=True, nogil=True)
def present(values, absent):
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
def compress(values, levels, count):
    kept = np.empty(count, dtype=values.dtype)
    at = 0
    for k in range(values.shape[0]):
        if levels[k]:
            kept[at] = values[k]
            at += 1
    return kept


@nb.njit(cache=True, nogil=True)
def fraction_codes(numerators, denominators, levels, count):
    """The fraction d/U of each present row as an index into a dictionary of the distinct values,
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
            raise ValueError("a fraction with a negative numerator or a denominator not positive")
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


# large as the encoding can ever be for the values it gets.


def hybrid_buffer(values: int, width: int) -> np.ndarray:
    """For `hybrid`: each 8 values cost at most ``width`` bytes and a header of at most 5
    (bit-packed), or a header of at most 5 and a value of ``ceil(width / 8)`` bytes (a run)."""
    return np.empty((values + 7) // 8 * (width + 8) + 64, dtype=np.uint8)


def delta_buffer(values: int) -> np.ndarray:
    """For `delta_binary_packed`: 4 varints of header; a block of 128 deltas, whole or not, at
    most a 10-byte varint, 4 widths and 4 miniblocks of 32 values at 64 bits."""
    block = 10 + MINIBLOCKS + DELTA_BLOCK * 8
    return np.empty((values + DELTA_BLOCK - 1) // DELTA_BLOCK * block + 64, dtype=np.uint8)


def runs_bytes(runs: list[tuple[int, int]], width: int) -> bytes:
    """(value, length) runs as the hybrid's run-length runs: a header, then the value."""
    size = (width + 7) // 8
    return b"".join(varint(length << 1) + value.to_bytes(size, "little") for value, length in runs)


def levels_bytes(levels: np.ndarray | list[tuple[int, int]]) -> bytes:
    """Definition levels (bit width 1) as a data page v1 holds them: their length, then the
    hybrid. Given as (level, length) runs, or as one level a row."""
    if isinstance(levels, list):
        body = runs_bytes(levels, 1)
    else:
        out = hybrid_buffer(levels.shape[0], 1)
        body = bytes(out[: hybrid(levels, 1, out, 0)])
    return len(body).to_bytes(4, "little") + body


def delta_values(cycle: np.ndarray, n: int | None = None) -> np.ndarray:
    """``n`` values (by default ``len(cycle)``) going through ``cycle``, delta-encoded."""
    n = cycle.shape[0] if n is None else n
    out = delta_buffer(n)
    return out[: delta_binary_packed(cycle, n, out, 0)]


def delta_header(n: int, first: int) -> bytes:
    """What `delta_binary_packed` writes before its blocks: the block size, the miniblocks,
    the count, and the first value (a uint64 as the int64 of its bits)."""
    signed = first - (1 << 64) if first >= 1 << 63 else first
    return varint(DELTA_BLOCK) + varint(MINIBLOCKS) + varint(n) + varint(zigzag(signed))


@functools.lru_cache(maxsize=16)
def counting_blocks(period: int, n: int) -> bytes:
    """The blocks of `delta_values` of ``n`` values going through first, first + 1, ...,
    first + period - 1 over and over (a seed: period 1; a batch's deal numbers, cell after
    cell): they hold the deltas alone, which are the same whatever first is."""
    encoded = delta_values(np.arange(period, dtype=np.uint64), n)
    return bytes(encoded[len(delta_header(n, 0)) :])


def counting_values(first: int, period: int, n: int) -> bytes:
    """`delta_values` of ``n`` values going through first, ..., first + period - 1 (at most
    2**64 - 1), without making them: ``first``'s header, then the blocks any first has."""
    return delta_header(n, first) + counting_blocks(period, n)
