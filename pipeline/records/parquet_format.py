"""What a Parquet file says about its pages, in Thrift's compact protocol: the footer's and
the page headers' few types (parquet.thrift, github.com/apache/parquet-format), Parquet's
enums, a schema leaf for an Arrow field, and a page's header. For `dealfile`, which writes
the per-deal files straight from the kernel's arrays.
"""

from __future__ import annotations

import pyarrow as pa

# --- Thrift compact protocol (only what Parquet's headers use) -----------------------------

T_BOOL, T_I8, T_I32, T_I64, T_BINARY, T_LIST, T_STRUCT = (
    "bool",
    "i8",
    "i32",
    "i64",
    "binary",
    "list",
    "struct",
)
_TYPE_CODE = {T_I8: 3, T_I32: 5, T_I64: 6, T_BINARY: 8, T_LIST: 9, T_STRUCT: 12}


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _thrift_value(kind: str, value) -> bytes:
    if kind == T_I8:
        return bytes([value & 0xFF])
    if kind in (T_I32, T_I64):
        return varint(zigzag(value))
    if kind == T_BINARY:
        data = value.encode() if isinstance(value, str) else bytes(value)
        return varint(len(data)) + data
    if kind == T_STRUCT:
        return value  # already encoded by `struct`
    raise ValueError(kind)


def struct(*fields: tuple) -> bytes:
    """A Thrift struct in the compact protocol: ``fields`` are (id, kind, value) by rising id;
    a value of None is left out (an optional field not set). A list is (element kind, items)."""
    out = bytearray()
    last = 0
    for field_id, kind, value in fields:
        if value is None:
            continue
        code = (1 if value else 2) if kind == T_BOOL else _TYPE_CODE[kind]
        if 0 < field_id - last <= 15:
            out.append((field_id - last) << 4 | code)
        else:
            out.append(code)
            out += varint(zigzag(field_id))
        last = field_id
        if kind == T_LIST:
            element, items = value
            size = len(items)
            out.append((size << 4 if size < 15 else 0xF0) | _TYPE_CODE[element])
            if size >= 15:
                out += varint(size)
            for item in items:
                out += _thrift_value(element, item)
        elif kind != T_BOOL:
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
_STRING = struct((1, T_STRUCT, struct()))
_UTF8 = 0
_CONVERTED_INT = {(8, True): 15, (64, False): 14, (64, True): 18}  # INT_8, UINT_64, INT_64


def _integer_type(bits: int, signed: bool) -> bytes:
    return struct((10, T_STRUCT, struct((1, T_I8, bits), (2, T_BOOL, signed))))


def schema_element(field: pa.Field) -> bytes:
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
    return struct(
        (1, T_I32, physical),
        (3, T_I32, OPTIONAL if field.nullable else REQUIRED),
        (4, T_BINARY, field.name),
        (6, T_I32, converted),
        (10, T_STRUCT, logical),
    )


def page_header(page_type: int, size: int, num_values: int, encoding: int) -> bytes:
    if page_type == DICTIONARY_PAGE:
        detail = (7, T_STRUCT, struct((1, T_I32, num_values), (2, T_I32, encoding)))
    else:
        detail = (
            5,
            T_STRUCT,
            struct((1, T_I32, num_values), (2, T_I32, encoding), (3, T_I32, RLE), (4, T_I32, RLE)),
        )
    return struct((1, T_I32, page_type), (2, T_I32, size), (3, T_I32, size), detail)
