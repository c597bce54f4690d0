"""Results directories: shard files written whole or not at all, a manifest, and checks.

A results directory (a local path or any `pyarrow.fs` URI) holds:

- ``run.json``: the resolved config and its hash, the code, deal-scheme and result-schema
  versions, the cells, the shard plan, and one record per run (the Ray cluster it ran on).
- ``manifest.json``: the committed shards, each with its deal range, cells, rows, attempts
  and its files (path, rows, bytes, sha256). Only the driver writes it, after a task reports
  success; readers use only the files it lists.
- ``report/``: what `clocksweep report` wrote; a run removes it when it commits a shard, or
  starts over (``--fresh``), since it no longer describes the results.
- ``shards/``: one file per shard and table,
  ``shards/<table>/shard-000012_deals-120000-129999.parquet``, so that each directory holds
  one schema and any Parquet reader can scan it whole. Record mode ``deals`` writes the
  per-deal rows (``shards/deals/``) and the deal facts counted (``shards/facts/``, the
  summary table of that name); ``summary`` writes the six summary tables.

Files are named by shard index and deal range, never by a random id, and their bytes are a
function of the config alone (no timestamps, no host names), so a shard redone anywhere is
byte-identical. A local shard is written to a hidden temporary name in its directory and
renamed into place; on object stores the final key is written, then committed to the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline import rules, schema

RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.json"
LOCK_FILE = ".lock"
SHARDS_DIR = "shards"
REPORT_DIR = "report"
DEALS_TABLE = "deals"
FACTS_TABLE = "facts"  # written beside the per-deal rows: see summary.FactCounts
METADATA_KEY = "clocksweep"
TEMP_SUFFIX = ".tmp"

# Columns of the per-deal schema that every row has (SPEC section 8): written as required,
# they have no definition levels to write or read. Any other column, present or future, stays
# nullable.
REQUIRED_DEAL_COLUMNS = ("seed", "deal", "order", "variant", "finale", "won", "cards_turned",
                         "down_at_stop")
DEAL_WRITE_SCHEMA = pa.schema(
    [field.with_nullable(field.name not in REQUIRED_DEAL_COLUMNS) for field in schema.DEAL_SCHEMA]
)
LABEL_NAMES = {
    "order": rules.ORDERS,
    "variant": rules.VARIANTS,
    "strategy": rules.STRATEGIES,
    "finale": rules.FINALES,
    "depth": rules.DEPTHS,
}

# pyarrow's writer (the count tables): a table is cut into row groups of this many rows, large
# enough that the per-group cost vanishes, small enough that a reader can stream a shard. (The
# per-deal rows are a row group a batch, of at most half a million rows.)
ROWS_PER_GROUP = 4_000_000
WRITE_BATCH_VALUES = 65_536


class ResultsError(ValueError):
    """A path that is not a results directory, or one this run may not write into."""


# --- Parquet encoding ---------------------------------------------------------------------


def parquet_options(table_schema: pa.Schema) -> dict:
    """pyarrow's writer options for a table of counts (the summary tables, the deal facts):
    compact and cheap to write and read. The per-deal rows are written by `dealfile`, in
    these same encodings.

    Labels and floats are dictionary-encoded, so a constant run costs nothing and a value its
    index's bits; integers are delta-encoded (bit-packed deltas: a counter or a constant packs
    to almost nothing, a small integer to about its bit width). No compression: over these
    encodings zstd saved under a tenth of the bytes of per-deal rows, and cost more CPU than
    it saved in writing and reading (measured on sweep batches of 1e6 rows: against
    byte-stream-split integers with zstd, 2-8 ns a row less to write and 23-24 ns a row less to
    read, a third, for 2.8-3.4 bytes a row instead of 1.9-2.8).
    No column statistics: they cost up to a quarter of the writing, and a shard's deal range
    is in its name and in the manifest. Batches of 64k values rather than the default 1k
    take a fifth off the writer's per-row cost.
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


# --- Where results live -------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """A shard of a sweep: deals ``first`` .. ``first + count - 1``, shard number ``index``."""

    index: int
    first: int
    count: int

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    @property
    def stem(self) -> str:
        return f"shard-{self.index:06d}_deals-{self.first}-{self.last}"

    def path(self, table: str) -> str:
        """The shard's file of ``table``, relative to the results directory."""
        return f"{SHARDS_DIR}/{table}/{self.stem}.parquet"


def plan_shards(first: int, deals: int, shard_size: int) -> list[Shard]:
    """The shards of a sweep: consecutive deal ranges of ``shard_size``, the last one shorter."""
    return [
        Shard(index, first + start, min(shard_size, deals - start))
        for index, start in enumerate(range(0, deals, shard_size))
    ]


class Location:
    """A results directory on some filesystem: a local path or a `pyarrow.fs` URI."""

    def __init__(self, where: str, filesystem: pafs.FileSystem | None = None):
        self.where = where
        if filesystem is not None:  # a filesystem object given directly (tests: a mock store)
            self.fs, self.root = filesystem, where
        elif "://" in where:
            try:
                self.fs, self.root = pafs.FileSystem.from_uri(where)
            except (pa.ArrowException, OSError, ValueError) as error:
                raise ResultsError(f"{where}: cannot open: {error}") from None
        else:
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(where)
        self.root = self.root.rstrip("/") or "/"
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)

    def __reduce__(self):
        # Travels to Ray workers as an address, not a filesystem object; a local path as the
        # absolute path resolved here, since a worker's working directory may differ.
        return (Location, (self.root if self.is_local else self.where,))

    def full(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        """A path or URI that any reader (Polars, DuckDB) can open."""
        if self.is_local:
            return self.full(relative)
        scheme = self.where.split("://", 1)[0]
        return f"{scheme}://{self.full(relative)}"

    def info(self, relative: str) -> pafs.FileInfo:
        return self.fs.get_file_info(self.full(relative))

    def exists(self, relative: str = "") -> bool:
        path = self.full(relative) if relative else self.root
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def files(self, relative: str) -> list[pafs.FileInfo]:
        """Every file under a directory, recursively (none if it does not exist)."""
        selector = pafs.FileSelector(self.full(relative), recursive=True, allow_not_found=True)
        return [info for info in self.fs.get_file_info(selector) if info.is_file]

    def entries(self) -> list[str]:
        """Names directly in the results directory (the run lock aside)."""
        selector = pafs.FileSelector(self.root, allow_not_found=True)
        return [info.base_name for info in self.fs.get_file_info(selector)
                if info.base_name != LOCK_FILE]

    def lock(self):
        """Hold this directory for one driver (local paths; the OS releases it if we die).

        Gives the open lock file, to keep; ResultsError if another run holds it. Object
        stores have no such lock: one driver per output there is the user's affair.
        """
        if not self.is_local:
            return None
        import fcntl

        try:
            os.makedirs(self.root, exist_ok=True)
            handle = open(self.full(LOCK_FILE), "a+")
        except OSError as error:
            raise ResultsError(f"output: {self.where}: cannot write there "
                               f"({error.strerror or error})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise ResultsError(f"output: {self.where} is in use by another clocksweep run "
                               f"(pid {holder}); wait for it, or choose another output") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    def relative(self, full: str) -> str:
        return full[len(self.root) + 1 :]

    def read_json(self, relative: str):
        """The JSON at ``relative``, or None if there is no such file."""
        if not self.exists(relative):
            return None
        with self.fs.open_input_stream(self.full(relative)) as stream:
            return json.loads(stream.read())

    def write_json(self, relative: str, value) -> None:
        """Replace a JSON file atomically: a temporary file renamed over it (locally)."""
        data = (json.dumps(value, indent=1, sort_keys=False) + "\n").encode()
        if self.is_local:
            final = self.full(relative)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            temp = f"{os.path.dirname(final)}/.{os.path.basename(final)}.{os.getpid()}{TEMP_SUFFIX}"
            with open(temp, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, final)
            return
        # An object store's PUT is atomic: the key appears whole or not at all.
        with self.fs.open_output_stream(self.full(relative)) as stream:
            stream.write(data)

    def delete(self, relative: str) -> None:
        info = self.info(relative)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(info.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(info.path)

    def sha256(self, relative: str) -> str:
        digest = hashlib.sha256()
        with self.fs.open_input_stream(self.full(relative)) as stream:
            while chunk := stream.read(8 << 20):
                digest.update(chunk)
        return digest.hexdigest()


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


class ShardFileWriter:
    """Writes one Parquet file of a shard; `commit` makes it appear whole, `abort` removes it.

    Its rows come either as Arrow tables (`write`: the summary tables and the deal facts, by
    pyarrow's writer) or as kernel results (`write_deals`: the per-deal rows, by `dealfile`).
    """

    def __init__(self, location: Location, relative: str, table: str):
        self.location, self.relative, self.table = location, relative, table
        self.rows = 0
        self.encoder = None  # made by the first write, which says what kind of file this is
        final = location.full(relative)
        if location.is_local:
            directory = os.path.dirname(final)
            os.makedirs(directory, exist_ok=True)
            self.temp = f"{directory}/.{os.path.basename(final)}.{os.getpid()}{TEMP_SUFFIX}"
            raw = open(self.temp, "wb")
        else:
            self.temp = None
            location.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
            raw = location.fs.open_output_stream(final)
        self.sink = _HashingSink(raw)

    def write(self, table: pa.Table) -> None:
        if self.encoder is None:
            self.encoder = pq.ParquetWriter(self.sink, table.schema, **parquet_options(table.schema))
        self.encoder.write_table(table, row_group_size=ROWS_PER_GROUP)
        self.rows += table.num_rows

    def write_deals(self, seed: int, first: int, results: dict, cells, metadata: dict) -> None:
        """Kernel results for ``cells`` x deals ``first``.. as per-deal rows (`schema.deal_table`)."""
        if self.encoder is None:
            from pipeline import dealfile  # numba: imported where rows are written, not by readers

            self.encoder = dealfile.DealFileEncoder(self.sink, DEAL_WRITE_SCHEMA, LABEL_NAMES, metadata)
        self.rows += self.encoder.write_batch(seed, first, results, cells)

    def commit(self) -> dict:
        """Close the file, put it in place, and give its manifest record."""
        if self.encoder is None:
            raise ValueError(f"{self.relative}: nothing was written")
        self.encoder.close()
        self.sink.close()
        if self.temp is not None:
            os.replace(self.temp, self.location.full(self.relative))
        return {
            "table": self.table,
            "path": self.relative,
            "rows": self.rows,
            "bytes": self.sink.size,
            "sha256": self.sink.digest.hexdigest(),
        }

    def abort(self) -> None:
        try:
            if self.encoder is not None:
                self.encoder.close()
        except Exception:  # the file is discarded whatever state the writer is in
            pass
        self.sink.close()
        if self.temp is not None and os.path.exists(self.temp):
            os.remove(self.temp)


# --- Checking shard files -----------------------------------------------------------------


def file_problem(location: Location, record: dict, config_hash: str,
                 expected_schema: pa.Schema | None = None) -> str | None:
    """What is wrong with a committed file (missing, truncated, altered, foreign), or None."""
    path = record["path"]
    info = location.info(path)
    if info.type != pafs.FileType.File:
        return f"{path}: missing"
    if info.size != record["bytes"]:
        return (f"{path}: {info.size} bytes, the manifest says {record['bytes']} "
                "(truncated or altered)")
    try:
        with location.fs.open_input_file(location.full(path)) as file:
            metadata = pq.read_metadata(file)
    except (pa.ArrowException, OSError) as error:
        return f"{path}: unreadable Parquet footer ({str(error).splitlines()[0]})"
    if metadata.num_rows != record["rows"]:
        return f"{path}: {metadata.num_rows} rows, the manifest says {record['rows']}"
    file_schema = metadata.schema.to_arrow_schema()
    if expected_schema is not None and not file_schema.equals(expected_schema,
                                                              check_metadata=False):
        difference = schema_difference(file_schema, expected_schema)
        return f"{path}: schema differs from the {record['table']} schema ({difference})"
    provenance = json.loads((file_schema.metadata or {}).get(METADATA_KEY.encode(), b"{}"))
    if provenance.get("config_hash") != config_hash:
        return f"{path}: written by another config (hash {str(provenance.get('config_hash'))[:12]})"
    if location.sha256(path) != record["sha256"]:
        return f"{path}: sha256 differs from the manifest (altered)"
    return None


def schema_difference(found: pa.Schema, expected: pa.Schema) -> str:
    """What differs between two schemas, briefly."""
    missing = [name for name in expected.names if name not in found.names]
    extra = [name for name in found.names if name not in expected.names]
    changed = [
        f"{field.name} is {field.type}{'' if field.nullable else ' not null'}"
        for field in found
        if field.name in expected.names and not field.equals(expected.field(field.name))
    ]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"unexpected {', '.join(extra)}"] if extra else []) + changed[:3]
    return "; ".join(parts) or "column order"


def entry_problem(entry: dict, tables) -> str | None:
    """What is wrong with the files a manifest entry lists: each of ``tables`` once, at the
    shard's own path (a file of another shard, or one listed twice, would be read as this one's)."""
    shard = Shard(entry["index"], entry["first"], entry["last"] - entry["first"] + 1)
    listed = [record["table"] for record in entry["files"]]  # well-formed: see manifest_problem
    for table in sorted(set(tables) | set(listed)):
        if table not in tables:
            return f"{shard.stem}: a file of table {table}, which this record mode does not write"
        if listed.count(table) == 0:
            return f"{shard.stem}: no file of table {table} in the manifest"
        if listed.count(table) > 1:
            return f"{shard.stem}: {listed.count(table)} files of table {table} in the manifest"
    for record in entry["files"]:
        if record["path"] != shard.path(record["table"]):
            return f"{shard.stem}: its {record['table']} file is listed as {record['path']}"
    return None


def shard_problem(location: Location, entry: dict, config_hash: str,
                  schemas: dict[str, pa.Schema] | None = None) -> str | None:
    """The first problem of a committed shard's manifest entry (given ``schemas``: one file of
    each table, at its path) or of any of its files, or None."""
    if schemas is not None:
        problem = entry_problem(entry, schemas)
        if problem:
            return problem
    for record in entry["files"]:
        expected = (schemas or {}).get(record["table"])
        problem = file_problem(location, record, config_hash, expected)
        if problem:
            return problem
    return None


def expected_schemas(record_mode: str) -> dict[str, pa.Schema]:
    """The schemas shard files must have (as a Parquet reader gives them back), by table."""
    from pipeline import summary

    if record_mode == "deals":
        schemas = {DEALS_TABLE: DEAL_WRITE_SCHEMA, FACTS_TABLE: summary.SCHEMAS[FACTS_TABLE]}
    else:
        schemas = dict(summary.SCHEMAS)
    return {table: as_stored(table_schema) for table, table_schema in schemas.items()}


def version_problem(run: dict) -> str | None:
    """Results written in another version of their record schema than this clocksweep reads."""
    from pipeline.config import result_schema_version

    mode = run.get("record") or run.get("config", {}).get("record")
    written, read = run.get("result_schema"), result_schema_version(mode)
    if written == read:
        return None
    return (f"{RUN_FILE}: the results are in record schema {written}, this clocksweep reads "
            f"{read}; rerun the config with --fresh to write them again")


def as_stored(table_schema: pa.Schema) -> pa.Schema:
    """A schema as it reads back from Parquet (large strings in dictionaries come back small)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table_schema.empty_table(), buffer)
    return pq.read_schema(pa.BufferReader(buffer.getvalue()))


def uncommitted_files(location: Location, manifest: dict | None) -> list[str]:
    """Files under shards/ that the manifest does not list (leftovers of an interrupted run)."""
    committed = {
        record["path"] for entry in (manifest or {}).get("shards", []) for record in entry["files"]
    }
    return sorted(
        location.relative(info.path)
        for info in location.files(SHARDS_DIR)
        if location.relative(info.path) not in committed
    )


# --- Reading and validating a results directory -------------------------------------------


def _is_count(value, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def run_record_problem(run) -> str | None:
    """What keeps a run.json's content from being read as a run record (the fields that
    `validate` and the report rely on), or None."""
    if not isinstance(run, dict):
        return f"it holds a JSON {type(run).__name__}, not an object"
    config = run.get("config")
    if not isinstance(config, dict):
        return "it has no config"
    for key, least in (("first", 0), ("deals", 1), ("shard_size", 1)):
        if not _is_count(config.get(key), least):
            return f"config.{key} is {config.get(key)!r}, not a count of at least {least}"
    if not isinstance(run.get("cells"), list) or not isinstance(run.get("config_hash"), str):
        return "it has no list of cells or no config_hash"
    return None


def manifest_problem(manifest) -> str | None:
    """What keeps a manifest.json's content from being read as one, or None."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("shards"), list):
        return "it is not an object with a list of shards"
    for entry in manifest["shards"]:
        files = entry.get("files") if isinstance(entry, dict) else None
        if not (isinstance(files, list)
                and all(_is_count(entry.get(key)) for key in ("index", "first", "last", "deals"))
                and all(isinstance(record, dict)
                        and all(isinstance(record.get(key), str) for key in ("table", "path", "sha256"))
                        and _is_count(record.get("rows")) and _is_count(record.get("bytes"))
                        for record in files)):
            shown = entry.get("index") if isinstance(entry, dict) else entry
            return f"its shard entry {shown!r} is malformed"
    return None


def open_results(where: str | Location) -> tuple[Location, dict, dict | None]:
    """A results directory's location, run record and manifest; ResultsError if it is none.
    A manifest that cannot be read is given as ``{"invalid": True, "why": ...}``."""
    location = where if isinstance(where, Location) else Location(where)
    if not location.exists():
        raise ResultsError(f"{location.where}: no such directory")
    try:
        run = location.read_json(RUN_FILE)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ResultsError(f"{location.where}: {RUN_FILE} is not valid JSON") from None
    except OSError as error:
        raise ResultsError(f"{location.where}: {RUN_FILE} cannot be read "
                           f"({str(error).splitlines()[0]})") from None
    if run is None:
        raise ResultsError(f"{location.where}: not a clocksweep results directory (no {RUN_FILE})")
    problem = run_record_problem(run)
    if problem:
        raise ResultsError(f"{location.where}: {RUN_FILE} is not a clocksweep run record: {problem}")
    try:
        manifest = location.read_json(MANIFEST_FILE)
    except (json.JSONDecodeError, UnicodeDecodeError):
        manifest = {"invalid": True, "why": "not valid JSON"}
    except OSError as error:
        manifest = {"invalid": True, "why": f"cannot be read ({str(error).splitlines()[0]})"}
    unread = isinstance(manifest, dict) and manifest.get("invalid")
    problem = manifest_problem(manifest) if manifest is not None and not unread else None
    if problem:
        manifest = {"invalid": True, "why": f"not a clocksweep manifest: {problem}"}
    return location, run, manifest


def committed_files(where: str | Location, table: str = DEALS_TABLE) -> list[str]:
    """Paths (or URIs) of the committed files of ``table``, in deal order: what readers read."""
    location, _, manifest = open_results(where)
    entries = sorted((manifest or {}).get("shards", []), key=lambda entry: entry["index"])
    return [
        location.uri(record["path"])
        for entry in entries
        for record in entry["files"]
        if record["table"] == table
    ]


def validate(where: str | Location) -> tuple[list[str], dict]:
    """Check every shard against the manifest: (problems found, figures of what is there)."""
    location, run, manifest = open_results(where)
    problems = []
    config = run.get("config", {})
    config_hash = run.get("config_hash")
    plan = plan_shards(config["first"], config["deals"], config["shard_size"])
    if manifest is None:
        manifest = {"shards": []}
        problems.append(f"{MANIFEST_FILE}: missing (no shard committed)")
    elif manifest.get("invalid"):
        problems.append(f"{MANIFEST_FILE}: {manifest.get('why', 'not valid JSON')}")
        manifest = {"shards": []}
    elif manifest.get("config_hash") != config_hash:
        problems.append(f"{MANIFEST_FILE}: belongs to another config (hash "
                        f"{str(manifest.get('config_hash'))[:12]}, run.json has {config_hash[:12]})")

    version = version_problem(run)
    if version:
        # Every file would differ from this version's schemas: the one line says it all.
        committed = len(manifest.get("shards", []))
        return [version], {"shards": len(plan), "committed": committed, "broken": committed,
                           "deals": 0, "cells": len(run["cells"]), "files": 0, "rows": 0,
                           "bytes": 0, "bytes_per_row": None}
    schemas = expected_schemas(config["record"])
    seen_schemas: dict[str, pa.Schema] = {}
    by_index: dict[int, dict] = {}
    broken: set[int] = set()
    rows = size = row_bytes = files = 0
    for entry in manifest.get("shards", []):
        index = entry.get("index")
        if not isinstance(index, int) or not 0 <= index < len(plan):
            problems.append(f"manifest: shard {index!r} is not in the plan of {len(plan)} shards")
            continue
        shard = plan[index]
        if index in by_index:
            problems.append(f"{shard.stem}: committed twice (overlapping deal ranges)")
            continue
        by_index[index] = entry
        if (entry.get("first"), entry.get("last")) != (shard.first, shard.last):
            problems.append(f"{shard.stem}: manifest range {entry.get('first')}-{entry.get('last')} "
                            f"is not the plan's {shard.first}-{shard.last}")
        expected_rows = shard.count * len(run["cells"])
        listing = entry_problem(entry, schemas)
        if listing:
            problems.append(listing)
            broken.add(index)
        for record in entry["files"]:
            if record["table"] == DEALS_TABLE and record["rows"] != expected_rows:
                problems.append(f"{record['path']}: {record['rows']} rows, expected "
                                f"{expected_rows} ({shard.count} deals x {len(run['cells'])} cells)")
            known = schemas.get(record["table"]) or seen_schemas.get(record["table"])
            problem = file_problem(location, record, config_hash, known)
            if problem:
                problems.append(problem)
                broken.add(index)
                continue
            if record["table"] not in seen_schemas:
                with location.fs.open_input_file(location.full(record["path"])) as file:
                    seen_schemas[record["table"]] = pq.read_schema(file)
            if record["table"] == DEALS_TABLE:
                rows += record["rows"]
                row_bytes += record["bytes"]
            size += record["bytes"]
            files += 1

    missing = [shard for shard in plan if shard.index not in by_index]
    if missing:
        shown = ", ".join(f"{s.index} ({s.first}-{s.last})" for s in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        problems.append(f"shards missing: {len(missing)} of {len(plan)}: {shown}{more}")
    for path in uncommitted_files(location, manifest):
        problems.append(f"{path}: not committed in the manifest (readers of the directory "
                        "would see it; rerun to clean up)")
    figures = {
        "shards": len(plan),
        "committed": len(by_index),
        "broken": len(broken),
        "deals": sum(by_index[i]["deals"] for i in by_index if i not in broken),
        "cells": len(run["cells"]),
        "files": files,
        "rows": rows,
        "bytes": size,
        "bytes_per_row": row_bytes / rows if rows else None,  # of the per-deal files
    }
    return problems, figures


# --- The manifest (the driver's) ----------------------------------------------------------


class Manifest:
    """The committed shards of a sweep, by index; written by the driver, atomically."""

    def __init__(self, location: Location, config_hash: str):
        self.location, self.config_hash = location, config_hash
        self.entries: dict[int, dict] = {}
        self.dirty = True
        self.last_write = 0.0

    def load_verified(self, shards: list[Shard], schemas: dict) -> list[tuple[int, str]]:
        """Load the committed shards whose files still verify: (index, problem) for the rest."""
        try:
            raw = self.location.read_json(MANIFEST_FILE)
        except (ValueError, UnicodeDecodeError, OSError):
            raw = []
        if raw is not None and manifest_problem(raw):
            return [(-1, f"{MANIFEST_FILE} is unreadable, so every shard is redone")]
        if raw is None or raw.get("config_hash") != self.config_hash:
            return []
        problems = []
        for entry in raw.get("shards", []):
            index = entry.get("index")
            if not isinstance(index, int) or not 0 <= index < len(shards):
                continue
            shard = shards[index]
            if (entry.get("first"), entry.get("last")) != (shard.first, shard.last):
                problems.append((index, "manifest range differs from the plan"))
                continue
            problem = shard_problem(self.location, entry, self.config_hash, schemas)
            if problem:
                problems.append((index, problem))
            else:
                self.entries[index] = entry
        return problems

    def commit(self, entry: dict) -> None:
        self.entries[entry["index"]] = entry
        self.dirty = True

    def as_dict(self) -> dict:
        return {
            "config_hash": self.config_hash,
            "shards": [self.entries[index] for index in sorted(self.entries)],
        }

    def flush(self, at_most_every: float = 0.0) -> None:
        """Write the manifest if it changed, and not more often than ``at_most_every`` seconds."""
        import time

        if not self.dirty or time.monotonic() - self.last_write < at_most_every:
            return
        self.location.write_json(MANIFEST_FILE, self.as_dict())
        self.dirty = False
        self.last_write = time.monotonic()
