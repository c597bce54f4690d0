"""Rows of booleans packed to bits: the one home of the packing that the summary's pair
counts and a shard's ``wins`` table share.

Bytes as `np.packbits` makes them (the first value in the high bit of the first byte, zero
bits padding the last byte), as a file's ``bits`` column holds them; and those bytes viewed
as uint64 words, 64 values a word, for popcounts.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def packed_rows(bits: np.ndarray) -> np.ndarray:
    """Rows of booleans as rows of uint64 words (zero-padded)."""
    return as_words(np.packbits(bits, axis=1))


def as_words(packed: np.ndarray) -> np.ndarray:
    """Rows of packed bytes (`np.packbits`) as rows of uint64 words (zero-padded)."""
    rows, width = packed.shape
    if width % 8:  # (np.pad's own costs are most of a batch's)
        padded = np.zeros((rows, width + (-width) % 8), dtype=np.uint8)
        padded[:, :width] = packed
        packed = padded
    return np.ascontiguousarray(packed).view(np.uint64)


def popcount_rows(words: np.ndarray) -> np.ndarray:
    """The set bits of each row of words."""
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


def unpacked(data: bytes, count: int) -> np.ndarray:
    """``count`` booleans from their packed bytes (`np.packbits`)."""
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=count).astype(bool)


def bits_column(packed: np.ndarray) -> pa.Array:
    """Each row of ``packed`` as one binary value, over its memory (no copy: a shard's bits
    are megabytes, and a copy is fresh pages to fault in)."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    rows, width = packed.shape
    if packed.size >= 2**31:  # binary's offsets are int32
        raise ValueError(f"wins of {packed.size:,} bytes: a shard's must stay under 2 GiB")
    offsets = np.arange(rows + 1, dtype=np.int32) * np.int32(width)
    return pa.Array.from_buffers(
        pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(packed)]
    )
