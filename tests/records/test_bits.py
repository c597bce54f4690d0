"""Rows of booleans packed to bits (pipeline/records/bits.py), against numpy's own packing
and counting, at widths that fill whole words and widths that do not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipeline.records import bits


@pytest.mark.parametrize("deals", [1, 7, 8, 63, 64, 65, 1000])
def test_packed_rows_count_and_unpack_as_the_booleans_say(deals):
    rows = np.random.default_rng(deals).random((5, deals)) < 0.3
    words = bits.packed_rows(rows)
    assert words.dtype == np.uint64 and words.shape == (5, -(-deals // 64))
    assert bits.popcount_rows(words).tolist() == rows.sum(axis=1).tolist()
    packed = np.packbits(rows, axis=1)
    for row, data in zip(rows, packed):
        assert (bits.unpacked(data.tobytes(), deals) == row).all()


def test_bits_column_holds_each_row_as_one_binary_value():
    packed = np.packbits(np.eye(3, 20, dtype=bool), axis=1)
    column = bits.bits_column(packed)
    assert column.type == pa.binary()
    assert column.to_pylist() == [row.tobytes() for row in packed]
