"""Shard files: written whole by `ShardFileWriter` (the per-deal rows by `records.dealfile`,
the count tables by pyarrow), and checked by `file_problem` against their manifest record.

Files are named by shard index and deal range, never by a random id, and their bytes are a
function of the config alone (no timestamps, no host names), so a shard redone anywhere is
byte-identical. Each is staged, then committed or
discarded, by the commit protocol that `location` states: a reader scanning a local
``shards/<table>/`` sees only whole files, and only committed ones unless the driver died
between putting them in place and writing the manifest; on object stores readers use
`committed_files`.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.engine import rules
from pipeline.records import schema
from pipeline.store.entries import FileRecord
from pipeline.store.layout import (
    DEALS_TABLE,
    FACTS_TABLE,
    METADATA_KEY,
    WINS_TABLE,
)
from pipeline.store.location import Location
from pipeline.store.plan import Shard

# pyarrow's writer (the count tables): a table is cut into row groups of this many rows, large
# enough that the per-group cost vanishes, small enough that a reader can stream a shard. (The
# per-deal rows are a row group a batch, of at most half a million rows.)
ROWS_PER_GROUP = 4_000_000
WRITE_BATCH_VALUES = 65_536


# --- Parquet encoding ---------------------------------------------------------------------


def parquet_options(table_schema: pa.Schema) -> dict:
    """pyarrow's writer options for a table of counts (the summary tables, the deal facts):
    compact and cheap to write and read. The per-deal rows are written by `dealfile`, in
    these same encodings.

    Labels and floats are dictionary-encoded, so a constant run costs nothing and a value its
    index's bits; integers are delta-encoded (bit-packed deltas: a counter or a constant packs
    to almost nothing, a small integer to about its bit width). No compression: over these
    encodings it saves little and costs more CPU, writing and reading, than it saves. No
    column statistics: a shard's deal range is in its name and in the manifest, and they are
    a large part of the writer's cost. Large write batches, for the same reason. (The figures
    are in the commit log and `benchmarks/writer_bench.py`.)
    """
    dictionary, encodings = [], {}
    for field in table_schema:
        kind = field.type
        if pa.types.is_dictionary(kind) or pa.types.is_string(kind) or pa.types.is_floating(kind):
            dictionary.append(field.name)
        elif pa.types.is_integer(kind):
            encodings[field.name] = "DELTA_BINARY_PACKED"
    return {
        "compression": "none",
        "use_dictionary": dictionary,
        "column_encoding": encodings or None,
        "write_statistics": False,
        "write_batch_size": WRITE_BATCH_VALUES,
    }


def file_metadata(provenance: dict) -> dict[bytes, bytes]:
    """Parquet key-value metadata: the provenance as one JSON value under ``clocksweep``."""
    return {METADATA_KEY.encode(): json.dumps(provenance, sort_keys=True).encode()}


# --- Writing one shard file ---------------------------------------------------------------


class _HashingSink:
    """A file-like sink that hashes and counts the bytes on their way to the real one."""

    def __init__(self, raw):
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data) -> int:
        view = memoryview(data)
        self.digest.update(view)
        self.size += view.nbytes
        self.raw.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.raw.close()


def deal_encoder(sink, metadata: dict, cells):
    """The per-deal file encoder (`dealfile`) for ``sink`` and rows of ``cells`` (its label
    dictionaries the rules' names, and the user's strategies among them); None: one that
    only encodes."""
    from pipeline.records import dealfile  # numba: imported where rows are written, not by readers
    from pipeline.records.summary import strategy_names

    names = {**rules.AXES, "strategy": strategy_names(cells)}
    return dealfile.DealFileEncoder(sink, schema.DEAL_WRITE_SCHEMA, names, metadata)


def encode_deals(seed: int, first: int, results: dict, cells):
    """Kernel results as per-deal rows encoded for a file written later (`write_encoded`):
    kept in memory or sent to another process, a few bytes a row."""
    return deal_encoder(None, {}, cells).encode_batch(seed, first, results, cells, keep=True)


class ShardFileWriter:
    """Writes one Parquet file of a shard; `commit` closes it whole, `abort` removes it (on an
    object store, where closing its stream puts it at its key, by deleting the key).

    Its rows come either as Arrow tables (`write`: the summary tables and the deal facts, by
    pyarrow's writer) or as kernel results (`write_deals`: the per-deal rows, by `dealfile`).
    It is written where its location stages it (`Location.stage`), until the driver
    commits it (`Manifest.flush`).
    """

    def __init__(self, location: Location, relative: str, table: str):
        self.location, self.relative, self.table = location, relative, table
        self.rows = 0
        self.encoder = None  # made by the first write, which says what kind of file this is
        # Staged (step 1 of the commit protocol: `location`): ``staged`` is where it waits
        # for the driver to put it in place, or None where it is written at its path.
        self.staged, raw = location.stage(relative, table)
        self.sink = _HashingSink(raw)

    def write(self, table: pa.Table) -> None:
        if self.encoder is None:
            self.encoder = pq.ParquetWriter(
                self.sink, table.schema, **parquet_options(table.schema)
            )
        self.encoder.write_table(table, row_group_size=ROWS_PER_GROUP)
        self.rows += table.num_rows

    def write_deals(self, seed: int, first: int, results: dict, cells, metadata: dict) -> None:
        """Kernel results for ``cells`` x deals ``first``.. as per-deal rows (`schema.deal_table`)."""
        if self.encoder is None:
            self.encoder = deal_encoder(self.sink, metadata, cells)
        self.rows += self.encoder.write_batch(seed, first, results, cells)

    def write_encoded(self, group, metadata: dict) -> None:
        """Per-deal rows encoded elsewhere (`encode_deals`, each with its own dictionaries),
        as the next row group."""
        if self.encoder is None:
            self.encoder = deal_encoder(self.sink, metadata, ())
        if group.rows:
            self.encoder.write_row_group(group.chunks, group.rows)
        self.rows += group.rows

    def commit(self) -> FileRecord:
        """Close the file and give its manifest record (a local file then waits at
        ``staged`` until the driver puts it in place)."""
        if self.encoder is None:
            raise ValueError(f"{self.relative}: nothing was written")
        self.encoder.close()
        self.sink.close()
        return FileRecord(
            self.table, self.relative, self.rows, self.sink.size, self.sink.digest.hexdigest()
        )

    def abort(self) -> None:
        try:
            if self.encoder is not None:
                self.encoder.close()
        except Exception:  # the file is discarded whatever state the writer is in
            pass
        try:
            self.sink.close()
        except OSError:  # e.g. a full disk: the last bytes could not be flushed
            pass
        self.location.discard(self.staged, self.relative)


def file_problem(
    location: Location,
    record: FileRecord,
    config_hash: str,
    expected_schema: pa.Schema | None = None,
    shard: Shard | None = None,
) -> str | None:
    """What is wrong with a committed file (missing, truncated, altered, foreign, or written
    for another shard than ``shard``), or None."""
    path = record.path
    kind = location.kind(path)
    if kind != "file":
        return f"{path}: missing" if kind == "missing" else f"{path}: {kind}, not a file"
    info = location.info(path)
    if info.size != record.bytes:
        return f"{path}: {info.size} bytes, the manifest says {record.bytes} (truncated or altered)"
    try:
        with location.open_input_file(path) as file:
            metadata = pq.read_metadata(file)
        file_schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as error:
        return f"{path}: unreadable Parquet footer ({str(error).splitlines()[0]})"
    if metadata.num_rows != record.rows:
        return f"{path}: {metadata.num_rows} rows, the manifest says {record.rows}"
    if expected_schema is not None and not file_schema.equals(
        expected_schema, check_metadata=False
    ):
        difference = schema_difference(file_schema, expected_schema)
        return f"{path}: schema differs from the {record.table} schema ({difference})"
    # The provenance is stored twice (the footer's key-value pairs, and the Arrow schema
    # inside them): both must be the same clocksweep record.
    copies = [
        (metadata.metadata or {}).get(METADATA_KEY.encode()),
        (file_schema.metadata or {}).get(METADATA_KEY.encode()),
    ]
    try:
        provenance = [json.loads(copy) if copy is not None else None for copy in copies]
    except (ValueError, UnicodeDecodeError):
        provenance = None
    if not provenance or not isinstance(provenance[0], dict) or provenance[0] != provenance[1]:
        return f"{path}: its footer's provenance is damaged (not one clocksweep record)"
    written = provenance[0]
    if written.get("config_hash") != config_hash:
        return f"{path}: written by another config (hash {str(written.get('config_hash'))[:12]})"
    if shard is not None:
        own = {"index": shard.index, "first": shard.first, "last": shard.last}
        if written.get("shard") != own:
            other = written.get("shard") if isinstance(written.get("shard"), dict) else {}
            return (
                f"{path}: written for deals {other.get('first')}-{other.get('last')} "
                f"(it belongs to shard {other.get('index')}), not shard {shard.index}'s"
            )
    if location.sha256(path) != record.sha256:
        return f"{path}: sha256 differs from the manifest (altered)"
    return None


def read_wins(location: Location, record: FileRecord, cells, first: int, count: int):
    """The wins (cells x deals ``first`` .. ``first + count - 1``, bool) in a committed file
    of ``record.table`` (``deals`` or ``wins``: `records.wins`), the file checked against its
    record first; ValueError naming the file if it is not the file committed, or lacks a
    cell's deals."""
    from pipeline.records import wins

    data = location.read_bytes(record.path)
    if len(data) != record.bytes or hashlib.sha256(data).hexdigest() != record.sha256:
        raise ValueError(f"{record.path}: differs from the manifest (altered since committed)")
    if record.table == WINS_TABLE:
        return wins.packed_wins(data, record.path, cells, count)
    if record.table == DEALS_TABLE:
        return wins.deal_wins(data, record.path, cells, first, count)
    raise ValueError(f"{record.path}: a {record.table} file holds no wins")


def schema_difference(found: pa.Schema, expected: pa.Schema) -> str:
    """What differs between two schemas, briefly."""
    missing = [name for name in expected.names if name not in found.names]
    extra = [name for name in found.names if name not in expected.names]
    changed = [
        f"{field.name} is {field.type}{'' if field.nullable else ' not null'}"
        for field in found
        if field.name in expected.names and not field.equals(expected.field(field.name))
    ]
    parts = (
        ([f"missing {', '.join(missing)}"] if missing else [])
        + ([f"unexpected {', '.join(extra)}"] if extra else [])
        + changed[:3]
    )
    return "; ".join(parts) or "column order"


def expected_schemas(record_mode: str) -> dict[str, pa.Schema]:
    """The schemas shard files must have (as a Parquet reader gives them back), by table."""
    from pipeline.records import summary

    if record_mode == "deals":
        schemas = {DEALS_TABLE: schema.DEAL_WRITE_SCHEMA, FACTS_TABLE: summary.SCHEMAS[FACTS_TABLE]}
    else:
        from pipeline.records import wins

        schemas = {**summary.SCHEMAS, WINS_TABLE: wins.WINS_SCHEMA}
    return {table: as_stored(table_schema) for table, table_schema in schemas.items()}


def as_stored(table_schema: pa.Schema) -> pa.Schema:
    """A schema as it reads back from Parquet (large strings in dictionaries come back small)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table_schema.empty_table(), buffer)
    return pq.read_schema(pa.BufferReader(buffer.getvalue()))
