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
byte-identical. A local shard's file is written under ``shards/.partial/``, outside every
table's directory, and the driver renames it into place when it commits the shard (just before
the manifest that lists it is written), so a reader scanning ``shards/<table>/`` sees only whole
files, and only committed ones unless the driver died between the two. On object stores the
final key is written, then committed to the manifest; readers there use `committed_files`.

Clean-up is conservative: a run deletes only what it owns (files of its own naming in its own
directories, reached without following a link, and not listed in the manifest); anything else
it finds is named and left alone.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.engine import rules
from pipeline.records import schema

RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.json"
LOCK_FILE = ".lock"
SHARDS_DIR = "shards"
PARTIAL_DIR = f"{SHARDS_DIR}/.partial"  # files being written, or written and not yet committed
REPORT_DIR = "report"
DEALS_TABLE = "deals"
FACTS_TABLE = "facts"  # written beside the per-deal rows: see summary.FactCounts
METADATA_KEY = "clocksweep"
TEMP_SUFFIX = ".tmp"
# A committed shard file's name (see Shard.stem), and a temporary file of run.json or the
# manifest left by a process that died while writing it.
SHARD_FILE_NAME = re.compile(r"shard-(\d{6,})_deals-(\d+)-(\d+)\.parquet")
STALE_TEMP_NAME = re.compile(rf"\.({re.escape(RUN_FILE)}|{re.escape(MANIFEST_FILE)})\.\d+{re.escape(TEMP_SUFFIX)}")

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


@dataclass(frozen=True)
class ShardPlan:
    """The shards of a sweep: consecutive deal ranges of ``shard_size`` from deal ``first``,
    the last one shorter. A range, not a list: any shard, and the count, cost the same
    however many shards there are."""

    first: int
    deals: int
    shard_size: int

    @property
    def count(self) -> int:
        """The number of shards (no `len`: Python caps it at 2**63 - 1, and plans can be longer)."""
        return -(-self.deals // self.shard_size)

    def __getitem__(self, index: int) -> Shard:
        count = self.count
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"shard {index} is not in a plan of {count} shards")
        start = index * self.shard_size
        return Shard(index, self.first + start, min(self.shard_size, self.deals - start))

    def __iter__(self):
        return self.from_index(0)

    def from_index(self, index: int):
        """The shards from ``index`` on, made as they are asked for."""
        while index < self.count:
            yield self[index]
            index += 1

    def __contains__(self, index) -> bool:
        return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < self.count

    def missing(self, present) -> tuple[int, list[Shard]]:
        """How many shards of the plan are not in ``present`` (a set of indices), and the
        first five of them; costs the size of ``present``, not of the plan."""
        count, shown, expected = 0, [], 0
        for index in sorted(i for i in present if i in self) + [self.count]:
            gap = index - expected
            count += gap
            shown += [self[i] for i in range(expected, expected + min(gap, 5 - len(shown)))]
            expected = index + 1
        return count, shown


def plan_shards(first: int, deals: int, shard_size: int) -> ShardPlan:
    return ShardPlan(first, deals, shard_size)


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

    def lock(self) -> "Lock | None":
        """Hold this directory for one driver (local paths; the OS releases it if we die).

        Taken before anything in the directory is read, so that what is read stays true while
        the lock is held. Gives the `Lock`, to keep; ResultsError if another run holds it.
        Object stores have no such lock: one driver per output there is the user's affair.
        """
        if not self.is_local:
            return None
        import fcntl

        made_directory = not os.path.exists(self.root)
        made_file = made_directory or not os.path.lexists(self.full(LOCK_FILE))
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
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
        except OSError as error:  # a full disk
            handle.close()
            raise ResultsError(f"output: {self.where}: cannot write there "
                               f"({error.strerror or error})") from None
        return Lock(self, handle, made_directory, made_file)

    def relative(self, full: str) -> str:
        return full[len(self.root) + 1 :]

    def read_json(self, relative: str):
        """The JSON at ``relative``, or None if there is no such file."""
        if not self.exists(relative):
            return None
        with self.fs.open_input_stream(self.full(relative)) as stream:
            return json.loads(stream.read())

    def write_json(self, relative: str, value) -> None:
        """Replace a JSON file atomically: a temporary file renamed over it (locally).
        ResultsError, in one line, if it cannot be written (a full disk); the temporary file
        is removed."""
        data = (json.dumps(value, indent=1, sort_keys=False) + "\n").encode()
        try:
            if self.is_local:
                self._write_local(self.full(relative), data)
            else:  # an object store's PUT is atomic: the key appears whole or not at all
                with self.fs.open_output_stream(self.full(relative)) as stream:
                    stream.write(data)
        except OSError as error:
            raise ResultsError(f"output: {self.where}: cannot write {relative}: "
                               f"{_os_error_text(error)}") from None

    @staticmethod
    def _write_local(final: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(final), exist_ok=True)
        temp = f"{os.path.dirname(final)}/.{os.path.basename(final)}.{os.getpid()}{TEMP_SUFFIX}"
        try:
            with open(temp, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, final)
        except BaseException:
            try:
                os.remove(temp)
            except OSError:
                pass
            raise

    def delete(self, relative: str) -> None:
        """Remove a file or directory tree of ours. Locally a symbolic link is removed, never
        followed (nor is any link inside the tree)."""
        if self.is_local:
            path = self.full(relative)
            if os.path.islink(path) or os.path.isfile(path):
                os.remove(path)
            elif os.path.isdir(path):
                shutil.rmtree(path)
            return
        info = self.info(relative)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(info.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(info.path)

    def prune_partial(self) -> None:
        """Remove PARTIAL_DIR's directories once they hold nothing (locally)."""
        if not self.is_local or self.kind(PARTIAL_DIR) != "directory":
            return
        for folder, _, _ in sorted(os.walk(self.full(PARTIAL_DIR)), reverse=True):
            try:
                os.rmdir(folder)
            except OSError:
                pass

    def kind(self, relative: str) -> str:
        """'missing', 'file', 'directory', or (locally) 'link' or 'other', of a path not
        followed if it is a link."""
        if not self.is_local:
            found = self.info(relative).type
            return {pafs.FileType.File: "file", pafs.FileType.Directory: "directory"}.get(
                found, "missing")
        try:
            mode = os.lstat(self.full(relative)).st_mode
        except FileNotFoundError:
            return "missing"
        if stat.S_ISLNK(mode):
            return "link"
        return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"

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
    """Writes one Parquet file of a shard; `commit` closes it whole, `abort` removes it.

    Its rows come either as Arrow tables (`write`: the summary tables and the deal facts, by
    pyarrow's writer) or as kernel results (`write_deals`: the per-deal rows, by `dealfile`).
    A local file is written under PARTIAL_DIR and stays there until the driver commits it
    (`Manifest.flush` renames it into place); on an object store it is written at its key.
    """

    def __init__(self, location: Location, relative: str, table: str):
        self.location, self.relative, self.table = location, relative, table
        self.rows = 0
        self.encoder = None  # made by the first write, which says what kind of file this is
        final = location.full(relative)
        if location.is_local:
            # A name no other attempt at this shard can have, on this node or another.
            self.staged = (f"{PARTIAL_DIR}/{table}/{os.path.basename(relative)}."
                           f"{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}")
            os.makedirs(os.path.dirname(location.full(self.staged)), exist_ok=True)
            raw = open(location.full(self.staged), "wb")
        else:
            self.staged = None
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
            from pipeline.records import dealfile  # numba: imported where rows are written, not by readers

            self.encoder = dealfile.DealFileEncoder(self.sink, DEAL_WRITE_SCHEMA, LABEL_NAMES, metadata)
        self.rows += self.encoder.write_batch(seed, first, results, cells)

    def commit(self) -> dict:
        """Close the file and give its manifest record (with ``staged``, where it waits to be
        renamed into place, which `Manifest.commit` takes out)."""
        if self.encoder is None:
            raise ValueError(f"{self.relative}: nothing was written")
        self.encoder.close()
        self.sink.close()
        record = {
            "table": self.table,
            "path": self.relative,
            "rows": self.rows,
            "bytes": self.sink.size,
            "sha256": self.sink.digest.hexdigest(),
        }
        if self.staged is not None:
            record["staged"] = self.staged
        return record

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
        if self.staged is not None:
            try:
                os.remove(self.location.full(self.staged))
            except FileNotFoundError:
                pass


class Lock:
    """A results directory held for one driver (see `Location.lock`)."""

    def __init__(self, location: Location, handle, made_directory: bool, made_file: bool):
        self.location, self.handle = location, handle
        self.made_directory, self.made_file = made_directory, made_file

    def release(self, refused: bool = False) -> None:
        """Let the directory go. ``refused``: the run wrote nothing, so what taking the lock
        created (the lock file, the directory) is removed too."""
        try:
            self.handle.seek(0)
            self.handle.truncate()  # no pid of a run that has ended
            if refused and self.made_file:
                os.remove(self.location.full(LOCK_FILE))
                if self.made_directory:
                    os.rmdir(self.location.root)
        except OSError:
            pass
        self.handle.close()


def _os_error_text(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "the disk is full (No space left on device)"
    return error.strerror or (str(error).strip().splitlines() or [type(error).__name__])[0]


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


# --- What a results directory holds besides its committed files ---------------------------


@dataclass
class Survey:
    """What `survey` found under a results directory besides the committed files (paths
    relative to it): files of ours to remove, and things of others to name and leave."""

    uncommitted: list[str]  # shard files of our naming that the manifest does not list
    partial: list[str]  # files under PARTIAL_DIR: unfinished or uncommitted attempts
    stale: list[str]  # temporary files of run.json or the manifest
    foreign: list[tuple[str, str]]  # (path, what it is): not ours, left alone
    blocking: list[tuple[str, str]]  # (path, what it is): where a file of ours must go

    @property
    def removable(self) -> list[str]:
        return self.uncommitted + self.partial + self.stale


def table_names() -> tuple[str, ...]:
    """Every table a shard can have a directory of, in either record mode."""
    from pipeline.records import summary

    return tuple(dict.fromkeys([DEALS_TABLE, FACTS_TABLE, *summary.SCHEMAS]))


def survey(location: Location, committed: set[str]) -> Survey:
    """Everything under ``shards/`` (and stale temporary files at the top) that is not in
    ``committed``: never following a symbolic link, so that nothing outside the results
    directory, and no committed file under another name, is ever counted as ours."""
    found = Survey([], [], [], [], [])
    tables = table_names()
    if not location.is_local:
        for info in location.files(SHARDS_DIR):
            path = location.relative(info.path)
            parts = path.split("/")
            if path in committed:
                continue
            if len(parts) == 3 and parts[1] in tables and SHARD_FILE_NAME.fullmatch(parts[2]):
                found.uncommitted.append(path)
            elif path.startswith(PARTIAL_DIR + "/"):
                found.partial.append(path)
            else:
                found.foreign.append((path, "a file clocksweep does not write"))
        return found

    def entries(relative: str):
        try:
            with os.scandir(location.full(relative)) as listing:
                return sorted(listing, key=lambda entry: entry.name)
        except OSError:
            return []

    def what(relative: str) -> str:
        kind = location.kind(relative)
        return {"link": "a symbolic link", "directory": "a directory", "file": "a file",
                "other": "not a regular file"}.get(kind, kind)

    for entry in entries(""):
        if STALE_TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            found.stale.append(entry.name)
    top = location.kind(SHARDS_DIR)
    if top == "link":
        found.foreign.append((SHARDS_DIR, "a symbolic link: nothing is cleaned up through it"))
        return found
    if top not in ("directory", "missing"):
        found.blocking.append((SHARDS_DIR, what(SHARDS_DIR)))
        return found
    for entry in entries(SHARDS_DIR):
        path = f"{SHARDS_DIR}/{entry.name}"
        if path == PARTIAL_DIR and location.kind(path) == "directory":
            pending = [PARTIAL_DIR]
            while pending:
                folder = pending.pop()
                for inner in entries(folder):
                    inner_path = f"{folder}/{inner.name}"
                    kind = location.kind(inner_path)
                    if kind == "file":
                        found.partial.append(inner_path)
                    elif kind == "directory":
                        pending.append(inner_path)
                    else:
                        found.foreign.append((inner_path, what(inner_path)))
            continue
        if entry.name not in tables:
            found.foreign.append((path, what(path)))
            continue
        if location.kind(path) != "directory":
            found.blocking.append((path, what(path)))
            continue
        for inner in entries(path):
            inner_path = f"{path}/{inner.name}"
            ours = SHARD_FILE_NAME.fullmatch(inner.name) is not None
            kind = location.kind(inner_path)
            if kind == "file" and ours:
                if inner_path not in committed:
                    found.uncommitted.append(inner_path)
            elif ours:
                found.blocking.append((inner_path, what(inner_path)))
            else:
                found.foreign.append((inner_path, what(inner_path)))
    return found


# --- Checking shard files -----------------------------------------------------------------


def file_problem(location: Location, record: dict, config_hash: str,
                 expected_schema: pa.Schema | None = None, shard: Shard | None = None) -> str | None:
    """What is wrong with a committed file (missing, truncated, altered, foreign, or written
    for another shard than ``shard``), or None."""
    path = record["path"]
    kind = location.kind(path)
    if kind != "file":
        return f"{path}: missing" if kind == "missing" else f"{path}: {kind}, not a file"
    info = location.info(path)
    if info.size != record["bytes"]:
        return (f"{path}: {info.size} bytes, the manifest says {record['bytes']} "
                "(truncated or altered)")
    try:
        with location.fs.open_input_file(location.full(path)) as file:
            metadata = pq.read_metadata(file)
        file_schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as error:
        return f"{path}: unreadable Parquet footer ({str(error).splitlines()[0]})"
    if metadata.num_rows != record["rows"]:
        return f"{path}: {metadata.num_rows} rows, the manifest says {record['rows']}"
    if expected_schema is not None and not file_schema.equals(expected_schema,
                                                              check_metadata=False):
        difference = schema_difference(file_schema, expected_schema)
        return f"{path}: schema differs from the {record['table']} schema ({difference})"
    # The provenance is stored twice (the footer's key-value pairs, and the Arrow schema
    # inside them): both must be the same clocksweep record.
    copies = [(metadata.metadata or {}).get(METADATA_KEY.encode()),
              (file_schema.metadata or {}).get(METADATA_KEY.encode())]
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
            return (f"{path}: written for deals {other.get('first')}-{other.get('last')} "
                    f"(it belongs to shard {other.get('index')}), not shard {shard.index}'s")
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


def _is_count(value, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def entry_shape_problem(entry) -> str | None:
    """What keeps one manifest entry from being read as one, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    for key in ("index", "first", "last", "deals", "cells", "rows"):
        if not _is_count(entry.get(key)):
            return f"its {key} is {entry.get(key)!r}, not a count"
    if entry["last"] < entry["first"]:
        return "its range ends before it starts"
    files = entry.get("files")
    if not isinstance(files, list) or not files:
        return "it lists no files"
    for record in files:
        if not (isinstance(record, dict)
                and all(isinstance(record.get(key), str) for key in ("table", "path", "sha256"))
                and _is_count(record.get("rows")) and _is_count(record.get("bytes"))):
            return "one of its files is malformed"
    return None


def entry_problem(entry: dict, shard: Shard, n_cells: int, tables) -> str | None:
    """What is wrong with a well-formed manifest entry for ``shard`` of the plan: its range,
    deals, cells and rows as the plan makes them, and each of ``tables`` once, at the shard's
    own path (a file of another shard, or one listed twice, would be read as this one's)."""
    if (entry["first"], entry["last"]) != (shard.first, shard.last):
        return (f"{shard.stem}: manifest range {entry['first']}-{entry['last']} is not the "
                f"plan's {shard.first}-{shard.last}")
    if entry["deals"] != shard.count or entry["cells"] != n_cells:
        return (f"{shard.stem}: the manifest says {entry['deals']} deals x {entry['cells']} "
                f"cells, the plan {shard.count} x {n_cells}")
    listed = [record["table"] for record in entry["files"]]
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
    rows = sum(record["rows"] for record in entry["files"] if record["table"] == DEALS_TABLE)
    if entry["rows"] != rows or (DEALS_TABLE in tables and rows != shard.count * n_cells):
        return (f"{shard.stem}: the manifest says {entry['rows']} rows in {rows} of its files, "
                f"expected {shard.count * n_cells} ({shard.count} deals x {n_cells} cells)"
                if DEALS_TABLE in tables else
                f"{shard.stem}: the manifest says {entry['rows']} per-deal rows, expected 0")
    return None


def checked_entries(listed: list, plan: ShardPlan, n_cells: int,
                    tables) -> tuple[dict[int, dict], list[tuple[int | None, str]]]:
    """The manifest entries that describe a shard of ``plan`` as it is planned, once each,
    by index; and (index or None, problem) for the rest. A shard listed twice is kept once if
    its entries are identical (and named either way). Its files are not opened here."""
    entries: dict[int, dict] = {}
    problems: list[tuple[int | None, str]] = []
    seen: dict[int, list[dict]] = {}
    for entry in listed:
        shape = entry_shape_problem(entry)
        index = entry.get("index") if isinstance(entry, dict) else None
        index = index if _is_count(index) else None
        if shape:
            problems.append((index if index in plan else None,
                             f"{MANIFEST_FILE}: shard entry {index if index is not None else entry!r} "
                             f"is malformed ({shape})"))
            continue
        if index not in plan:
            problems.append((None, f"{MANIFEST_FILE}: shard {index} is not in the plan of "
                                   f"{plan.count} shards"))
            continue
        seen.setdefault(index, []).append(entry)
    malformed = {index for index, _ in problems if index is not None}
    for index, copies in seen.items():
        shard = plan[index]
        if len(copies) > 1:
            same = all(copy == copies[0] for copy in copies)
            times = "twice" if len(copies) == 2 else f"{len(copies)} times"
            problems.append((index, f"{shard.stem}: listed {times} in {MANIFEST_FILE}"
                                    + (" (identically; read once)" if same else
                                       ", with different files")))
            if not same:
                continue
        if index in malformed:
            continue
        problem = entry_problem(copies[0], shard, n_cells, tables)
        if problem:
            problems.append((index, problem))
        else:
            entries[index] = copies[0]
    return entries, problems


def shard_problem(location: Location, entry: dict, shard: Shard, config_hash: str,
                  schemas: dict[str, pa.Schema]) -> str | None:
    """The first problem of any file of a checked manifest entry (see `checked_entries`)."""
    for record in entry["files"]:
        problem = file_problem(location, record, config_hash, schemas.get(record["table"]), shard)
        if problem:
            return problem
    return None


def expected_schemas(record_mode: str) -> dict[str, pa.Schema]:
    """The schemas shard files must have (as a Parquet reader gives them back), by table."""
    from pipeline.records import summary

    if record_mode == "deals":
        schemas = {DEALS_TABLE: DEAL_WRITE_SCHEMA, FACTS_TABLE: summary.SCHEMAS[FACTS_TABLE]}
    else:
        schemas = dict(summary.SCHEMAS)
    return {table: as_stored(table_schema) for table, table_schema in schemas.items()}


def version_problem(run: dict) -> str | None:
    """Results written in another version of their record schema than this clocksweep reads."""
    from pipeline.sweep.config import result_schema_version

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


# --- Reading and validating a results directory -------------------------------------------


def run_record_problem(run) -> str | None:
    """What keeps a run.json's content from being read as a run record (the fields that
    `validate`, the report and a resumed run rely on), or None."""
    if not isinstance(run, dict):
        return f"it holds a JSON {type(run).__name__}, not an object"
    config = run.get("config")
    if not isinstance(config, dict):
        return "it has no config"
    for key, least in (("first", 0), ("deals", 1), ("shard_size", 1)):
        if not _is_count(config.get(key), least):
            return f"config.{key} is {config.get(key)!r}, not a count of at least {least}"
    if not isinstance(run.get("cells"), list) or not all(isinstance(c, dict) for c in run["cells"]):
        return "it has no list of cells"
    if not isinstance(run.get("config_hash"), str):
        return "it has no config_hash"
    runs = run.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(record, dict) for record in runs):
        return f"runs is {runs!r}, not a list of run records"
    shards = run.get("shards", {"count": 1, "size": 1})
    if not isinstance(shards, dict) or not all(_is_count(shards.get(k), 1) for k in ("count", "size")):
        return f"shards is {shards!r}, not an object with a count and a size"
    return None


def run_record_mismatch(run: dict) -> str | None:
    """Where a well-formed run record disagrees with itself: its config must give its
    config_hash, its cells, its shard plan and the deal scheme it names (an edited run.json
    would otherwise be read as the sweep it no longer describes)."""
    from pipeline.sweep import config as sweep_config

    try:
        config = sweep_config.from_dict(run["config"], check_output=False)
    except sweep_config.ConfigError as error:
        return f"{RUN_FILE}: its config is not a valid config ({error})"
    identity = config.identity()
    recorded_cells = [{key: value for key, value in cell.items() if key != "label"}
                      for cell in run["cells"]]
    for name, recorded, expected in (
        ("config_hash", run["config_hash"], config.hash),
        ("deal_scheme", run.get("deal_scheme"), identity["deal_scheme"]),
        ("record", run.get("record", config.record), config.record),
        ("cells", recorded_cells, identity["cells"]),
    ) + ((("shards", [run["shards"]["count"], run["shards"]["size"]],
            [config.n_shards, config.shard_size]),) if "shards" in run else ()):
        if recorded != expected:
            return (f"{RUN_FILE}: its {name} is not what its config gives "
                    "(edited, or written by another clocksweep)")
    return None


def _read_record(location: Location, name: str, what: str):
    """The JSON in ``name`` (None if there is none); ResultsError if it is not a file of JSON."""
    kind = location.kind(name)
    if kind == "missing":
        return None
    if kind != "file":
        raise ResultsError(f"{location.where}: {name} is {_article(kind)}, not {what}; it is "
                           "not clocksweep's to remove: move it away")
    try:
        return location.read_json(name)
    except (ValueError, UnicodeDecodeError):
        raise ResultsError(f"{location.where}: {name} is not valid JSON") from None
    except OSError as error:
        raise ResultsError(f"{location.where}: {name} cannot be read "
                           f"({_os_error_text(error)})") from None


def read_run(location: Location) -> dict | None:
    """run.json, checked as a run record; None if there is none; ResultsError naming the
    problem if it is not one."""
    run = _read_record(location, RUN_FILE, "a run record")
    problem = None if run is None else run_record_problem(run)
    if problem:
        raise ResultsError(f"{location.where}: {RUN_FILE} is not a clocksweep run record: {problem}")
    return run


def read_manifest(location: Location) -> dict | None:
    """manifest.json, checked as a manifest (its entries one by one are `checked_entries`'
    affair); None if there is none; ResultsError naming the problem if it is not one."""
    manifest = _read_record(location, MANIFEST_FILE, "a manifest")
    if manifest is not None and not (isinstance(manifest, dict)
                                     and isinstance(manifest.get("shards"), list)
                                     and isinstance(manifest.get("config_hash"), str)):
        raise ResultsError(f"{location.where}: {MANIFEST_FILE} is not a clocksweep manifest "
                           "(an object with a config_hash and a list of shards)")
    return manifest


def _article(kind: str) -> str:
    return {"directory": "a directory", "link": "a symbolic link"}.get(kind, "not a regular file")


@dataclass
class Results:
    """A results directory as read for `validate` and the report: its run record, its plan,
    the manifest entries that describe planned shards (files not yet opened), what is wrong
    with the rest (by shard index, or None), and what is wrong with the run record or the
    manifest as a whole (then no entry is read)."""

    location: Location
    run: dict
    plan: ShardPlan
    entries: dict[int, dict]
    problems: list[tuple[int | None, str]]
    unusable: str | None = None
    manifest_missing: bool = False
    listed_paths: frozenset[str] = frozenset()  # every file path the manifest lists


def open_results(where: str | Location) -> Results:
    """A results directory's run record and manifest, checked; ResultsError if it is not a
    results directory whose record can be read (an unreadable manifest is a problem of it)."""
    location = where if isinstance(where, Location) else Location(where)
    if not location.exists():
        raise ResultsError(f"{location.where}: no such directory")
    run = read_run(location)
    if run is None:
        raise ResultsError(f"{location.where}: not a clocksweep results directory (no {RUN_FILE})")
    config = run["config"]
    plan = plan_shards(config["first"], config["deals"], config["shard_size"])
    unusable = version_problem(run) or run_record_mismatch(run)
    try:
        manifest = read_manifest(location)
    except ResultsError as error:
        return Results(location, run, plan, {}, [],
                       unusable or str(error).removeprefix(f"{location.where}: "))
    if manifest is None:
        return Results(location, run, plan, {}, [], unusable, manifest_missing=True)
    if manifest["config_hash"] != run["config_hash"]:
        return Results(location, run, plan, {}, [], unusable or (
            f"{MANIFEST_FILE}: belongs to another config (hash {manifest['config_hash'][:12]}, "
            f"{RUN_FILE} has {run['config_hash'][:12]})"))
    mode = run.get("record") or config.get("record")
    entries, problems = checked_entries(manifest["shards"], plan, len(run["cells"]),
                                        expected_schemas(mode) if mode in ("deals", "summary") else {})
    listed = frozenset(record["path"] for entry in manifest["shards"]
                       if not entry_shape_problem(entry) for record in entry["files"])
    return Results(location, run, plan, entries, problems, unusable, listed_paths=listed)


def committed_files(where: str | Location, table: str = DEALS_TABLE) -> list[str]:
    """Paths (or URIs) of the committed files of ``table``, in deal order: exactly what
    readers should read (``pl.scan_parquet(committed_files("results/quick"))``). Files are
    not re-hashed here: `validate` checks them."""
    results = open_results(where)
    return [
        results.location.uri(record["path"])
        for index in sorted(results.entries)
        for record in results.entries[index]["files"]
        if record["table"] == table
    ]


def validate(where: str | Location) -> tuple[list[str], dict]:
    """Check every shard against the manifest: (problems found, figures of what is there)."""
    results = open_results(where)
    location, run, plan = results.location, results.run, results.plan
    problems = [results.unusable] if results.unusable else []
    problems += [problem for _, problem in results.problems]
    if results.manifest_missing:
        problems.append(f"{MANIFEST_FILE}: missing (no shard committed)")
    n_cells = len(run["cells"])
    listed = {index for index, _ in results.problems if index is not None} | set(results.entries)
    if version_problem(run):
        # Every file would differ from this version's schemas: the one line says it all.
        return problems, {"shards": plan.count, "committed": len(listed), "broken": len(listed),
                          "deals": 0, "cells": n_cells, "files": 0, "rows": 0, "bytes": 0,
                          "bytes_per_row": None}
    schemas = expected_schemas(run["config"]["record"])
    broken = {index for index, _ in results.problems if index is not None}
    good: set[int] = set()
    rows = size = row_bytes = files = 0
    for index in sorted(results.entries):
        entry = results.entries[index]
        problem = shard_problem(location, entry, plan[index], run["config_hash"], schemas)
        if problem:
            problems.append(problem)
            broken.add(index)
            continue
        good.add(index)
        for record in entry["files"]:
            if record["table"] == DEALS_TABLE:
                rows += record["rows"]
                row_bytes += record["bytes"]
            size += record["bytes"]
            files += 1
    missing, shown = plan.missing(listed)
    if missing:
        more = f" and {missing - len(shown)} more" if missing > len(shown) else ""
        problems.append(f"shards missing: {missing} of {plan.count}: "
                        + ", ".join(f"{s.index} ({s.first}-{s.last})" for s in shown) + more)
    found = survey(location, set(results.listed_paths))
    for path in found.uncommitted:
        problems.append(f"{path}: not committed in the manifest (readers of the directory "
                        "would see it; rerun to clean up)")
    for path in found.partial + found.stale:
        problems.append(f"{path}: left by an interrupted run (rerun to clean up)")
    for path, what in found.foreign + found.blocking:
        problems.append(f"{path}: {what}, not written by clocksweep (runs leave it alone)")
    figures = {
        "shards": plan.count,
        "committed": len(listed),
        "broken": len(broken - good),
        "deals": sum(results.entries[index]["deals"] for index in good),
        "cells": n_cells,
        "files": files,
        "rows": rows,
        "bytes": size,
        "bytes_per_row": row_bytes / rows if rows else None,  # of the per-deal files
    }
    return problems, figures


# --- The manifest (the driver's) ----------------------------------------------------------


class Manifest:
    """The committed shards of a sweep, by index; written by the driver, atomically.

    A shard is committed when the manifest that lists it is written; its local files are
    renamed into place from PARTIAL_DIR just before (and back, if that write fails), so that
    a table's directory holds committed files only but for the moment between the two.
    """

    def __init__(self, location: Location, config_hash: str):
        self.location, self.config_hash = location, config_hash
        self.entries: dict[int, dict] = {}
        self.staged: list[tuple[str, str]] = []  # (staged, final) of entries not yet written
        self.dirty = True
        self.last_write = 0.0

    def load_verified(self, listed: list, plan: ShardPlan, n_cells: int,
                      schemas: dict) -> list[tuple[int | None, str]]:
        """Keep the entries of ``listed`` (a manifest's shards) whose files still verify:
        (index or None, problem) for the rest, and for what was listed wrongly."""
        entries, problems = checked_entries(listed, plan, n_cells, schemas)
        for index, entry in sorted(entries.items()):
            problem = shard_problem(self.location, entry, plan[index], self.config_hash, schemas)
            if problem:
                problems.append((index, problem))
            else:
                self.entries[index] = entry
        return problems

    def commit(self, entry: dict) -> None:
        for record in entry["files"]:
            staged = record.pop("staged", None)
            if staged is not None:
                self.staged.append((staged, record["path"]))
        self.entries[entry["index"]] = entry
        self.dirty = True

    def as_dict(self) -> dict:
        return {
            "config_hash": self.config_hash,
            "shards": [self.entries[index] for index in sorted(self.entries)],
        }

    def committed_paths(self) -> set[str]:
        return {record["path"] for entry in self.entries.values() for record in entry["files"]}

    def flush(self, at_most_every: float = 0.0) -> None:
        """Put staged files in place and write the manifest, if it changed and not more often
        than ``at_most_every`` seconds. ResultsError if it cannot be written (a full disk)."""
        import time

        if not self.dirty or time.monotonic() - self.last_write < at_most_every:
            return
        moved = []
        try:
            for staged, final in self.staged:
                os.makedirs(os.path.dirname(self.location.full(final)), exist_ok=True)
                os.replace(self.location.full(staged), self.location.full(final))
                moved.append((staged, final))
            self.location.write_json(MANIFEST_FILE, self.as_dict())
        except BaseException:
            for staged, final in reversed(moved):  # not committed: not in place either
                try:
                    os.replace(self.location.full(final), self.location.full(staged))
                except OSError:
                    pass
            raise
        self.staged.clear()
        self.dirty = False
        self.last_write = time.monotonic()
