"""A results directory's storage: one interface (`Location`), two implementations: a
directory on this machine's filesystem (`local.LocalStore`) and an object store reached by a
`pyarrow.fs` URI (`object_store.ObjectStore`). ``Location(where)`` gives the one ``where``
names. Nothing outside these modules asks which one it has: it asks what it needs.

The commit protocol, which every writer of a results directory follows:

1. **stage**: a task writes each file of a shard through `stage`. Locally the file is written
   under ``shards/.partial/``, at a name no other attempt has, outside every table's
   directory; on an object store at its final key (a PUT is atomic: the object is whole or
   absent). Its bytes are a function of the config alone, so any attempt writes the same.
2. **abort**: an attempt that fails removes what it staged (`discard`).
3. **commit**: the driver alone commits a shard, by writing the manifest that lists it
   (`write_json`: a temporary file renamed over it locally, a PUT on a store). Just before,
   `put_in_place` moves its staged local files to their final names; if the manifest
   cannot be written they are moved back (`take_back`). A shard whose files cannot be put
   in place is not committed.
4. **read**: readers read only what the manifest lists; what lies elsewhere in the
   directory is a failed or interrupted attempt's, which the next run removes (`survey`
   finds it; `delete` removes it, never through a link).
5. **hold**: one driver writes at a time: `lock` takes the directory (a file lock locally, a
   lease on S3), before anything in it is read; every later look at the store is checked
   against what was taken (a lease lost stops the run before it writes more).
"""

from __future__ import annotations

import errno
import hashlib
import json

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.store import credentials
from pipeline.store.layout import LOCK_FILE, ResultsError, StoreError, group_of


def on_this_machine(where: str, filesystem: pafs.FileSystem | None = None) -> bool:
    """Whether ``where`` (or ``filesystem``, given directly) is this machine's filesystem: a
    path or a ``file://`` URI."""
    if filesystem is not None:
        return isinstance(filesystem, pafs.LocalFileSystem)
    return "://" not in where or where.split("://", 1)[0] == "file"


# The implementations, in the order they are asked whether they serve a location: each is
# registered as its class is made (`Location.__init_subclass__`), by its own module, which
# the package imports (`pipeline.store`); so this module imports none of them.
KINDS: list[type[Location]] = []


class Location:
    """A results directory (see the module's docstring). ``Location(where)`` is a
    `LocalStore` for a path or a ``file://`` URI, an `ObjectStore` for any other URI or a
    filesystem given directly (but this machine's own): the first of `KINDS` that
    `serves` it."""

    # Whether a call to it may wait on a network that stops answering (a caller then bounds
    # the wait, and keeps its own threads off it).
    may_stall = False

    def __init_subclass__(cls, **options):
        super().__init_subclass__(**options)
        if "serves" in cls.__dict__:  # an implementation, not a refinement of one
            KINDS.append(cls)

    @classmethod
    def serves(cls, where: str, filesystem: pafs.FileSystem | None) -> bool:
        """Whether this implementation is the one for ``where`` (or ``filesystem``)."""
        return False

    def __new__(cls, where: str, filesystem: pafs.FileSystem | None = None):
        if cls is Location:
            cls = next(kind for kind in KINDS if kind.serves(where, filesystem))
        return super().__new__(cls)

    def __init__(self, where: str, filesystem: pafs.FileSystem | None = None):
        # What every line, log and record names it by: a URI's credentials shown as ***
        # (`credentials.shown`). ``given``, credentials and all, is read only to open the
        # store (here, the lease's client, a Ray worker's copy), never shown.
        self.where = credentials.shown(where)
        self.given = where
        self.fs, self.root = self._open(where, filesystem)
        self.root = self.root.rstrip("/") or "/"
        # What `lock` took (None before it is called), asked before every look
        # at the store and every record written: once a lease is lost, nothing more is read,
        # written or deleted (and no call waits on a store that stopped answering).
        self.hold = None

    # --- What each implementation provides --------------------------------------------

    def _open(self, where: str, filesystem) -> tuple[pafs.FileSystem, str]:
        """The filesystem and the root path ``where`` names (``filesystem``: given)."""
        if filesystem is not None:  # a filesystem object given directly (tests: a mock store)
            return filesystem, where
        if credentials.redacted_given(where):
            raise ResultsError(
                f"{self.where}: its credentials are {credentials.REDACTED}, as clocksweep shows "
                f"them, not the real ones; give them in {credentials.environment_of(where)}, "
                "or in the URI"
            )
        try:
            return pafs.FileSystem.from_uri(where)
        except (pa.ArrowException, OSError, ValueError) as error:
            said = credentials.scrubbed(str(error), where)  # pyarrow quotes the URI
            raise ResultsError(f"{self.where}: cannot open: {said}") from None

    @property
    def address(self) -> str:
        """What `validate` and `report` take to find this directory again (a URI's
        credentials shown as ***: given again, or in the environment)."""
        raise NotImplementedError

    def child(self, name: str) -> Location:
        """The directory ``name`` inside this one, as a location of its own, under the same
        hold (its records are written under this directory's lock or lease)."""
        raise NotImplementedError

    def uri(self, relative: str) -> str:
        """A path or URI that any reader (Polars, DuckDB) can open."""
        raise NotImplementedError

    def local_path(self, relative: str) -> str | None:
        """The path of ``relative`` on this machine's filesystem; None on an object store."""
        return None

    def lock(self, tries: int = 5, answer_within: float | None = None):
        """Hold this directory for one driver (see the module's docstring); gives what was
        taken, to release at the end: a `Lock`, a `Lease`, or `Unheld` where the store has no
        way to hold it (each with ``check``, ``claim``, ``release`` and ``on_lost``), and keeps
        it as ``hold``; ResultsError if another run holds it."""
        raise NotImplementedError

    def held_by(self) -> str | None:
        """The pid (as written, or '?') of a run that holds this directory now, if this
        store can tell; else None."""
        return None

    def stage(self, relative: str, table: str):
        """Open a file of a shard for writing (step 1): (its staged path, relative to the
        directory, or None where it is written at ``relative`` itself; a binary stream)."""
        raise NotImplementedError

    def discard(self, staged: str | None, relative: str) -> None:
        """Remove what `stage` wrote of a file that is not committed (step 2)."""
        raise NotImplementedError

    def put_in_place(self, pairs) -> None:
        """Move staged files, (staged, final) pairs, to their final paths (step 3); OSError
        if one cannot be moved, those moved before it moved back."""

    def take_back(self, pairs) -> None:
        """Undo `put_in_place` of ``pairs`` (their manifest could not be written)."""

    def prune_partial(self) -> None:
        """Remove the directories of staged files once they hold nothing."""

    def kind(self, relative: str) -> str:
        """'missing', 'file', 'directory', or (locally) 'link' or 'other', of a path not
        followed if it is a link."""
        raise NotImplementedError

    def delete(self, relative: str) -> None:
        """Remove a file or directory tree of ours (locally never following a link)."""
        raise NotImplementedError

    def survey(self, found, committed, partial_only: bool = False) -> None:
        """Add to ``found`` (a `validate.Survey`) what lies in the directory besides the
        files in ``committed`` (``partial_only``: the staged files alone)."""
        raise NotImplementedError

    def scan_parquet(self, paths: list[str]):
        """The Parquet files at ``paths`` as one Polars LazyFrame."""
        raise NotImplementedError

    def _write(self, relative: str, data: bytes) -> None:
        raise NotImplementedError

    # --- The same on every store ------------------------------------------------------

    def scan_cell_groups(self, paths: list[str]):
        """The Parquet files at ``paths`` (of one table) as one Polars LazyFrame, across the
        cell groups of a grown sweep (`groups`): a group's files name as strategies those of
        its cells and of the groups' before it, so where a later group added a strategy of
        the user's, each group's labels are read as one Enum of them all, the first group's
        names first (`summary.strategy_names` of the sweep's cells)."""
        import polars as pl

        by_group: dict[int, list[str]] = {}
        for path in paths:
            by_group.setdefault(group_of(path), []).append(path)
        if len(by_group) == 1:
            return self.scan_parquet(paths)
        frames = [self.scan_parquet(group) for group in by_group.values()]
        schemas = [frame.collect_schema() for frame in frames]
        if all(schema == schemas[0] for schema in schemas):
            return self.scan_parquet(paths)
        for column in ("strategy", "a_strategy", "b_strategy"):
            kinds = [schema.get(column) for schema in schemas]
            if all(isinstance(kind, pl.Enum) for kind in kinds):
                names = list(dict.fromkeys(name for kind in kinds for name in kind.categories))
                frames = [
                    frame.with_columns(pl.col(column).cast(pl.Enum(names))) for frame in frames
                ]
        return pl.concat(frames)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r})"

    def scrubbed(self, text: str) -> str:
        """A message of the store's or pyarrow's about this directory, its credentials out."""
        return credentials.scrubbed(text, self.given)

    def full(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def relative(self, full: str) -> str:
        return full[len(self.root) + 1 :]

    def _check(self) -> None:
        if self.hold is not None:
            self.hold.check()

    def info(self, relative: str) -> pafs.FileInfo:
        self._check()
        return self.fs.get_file_info(self.full(relative))

    def exists(self, relative: str = "") -> bool:
        self._check()
        path = self.full(relative) if relative else self.root
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_directory(self) -> bool:
        self._check()
        return self.fs.get_file_info(self.root).type == pafs.FileType.Directory

    def files(self, relative: str) -> list[pafs.FileInfo]:
        """Every file under a directory, recursively (none if it does not exist)."""
        self._check()
        selector = pafs.FileSelector(self.full(relative), recursive=True, allow_not_found=True)
        return [info for info in self.fs.get_file_info(selector) if info.is_file]

    def entries(self) -> list[str]:
        """Names directly in the results directory (the run lock aside)."""
        self._check()
        selector = pafs.FileSelector(self.root, allow_not_found=True)
        return [
            info.base_name
            for info in self.fs.get_file_info(selector)
            if info.base_name != LOCK_FILE
        ]

    def open_input_file(self, relative: str):
        """A file of the directory, open for random access (a Parquet reader's)."""
        return self.fs.open_input_file(self.full(relative))

    def read_bytes(self, relative: str) -> bytes:
        with self.fs.open_input_stream(self.full(relative)) as stream:
            return stream.read()

    def read_json(self, relative: str):
        """The JSON at ``relative``, or None if there is no such file."""
        if not self.exists(relative):
            return None
        return json.loads(self.read_bytes(relative))

    def write_json(self, relative: str, value) -> bytes:
        """Replace a JSON file atomically (its readers see the old or the new, whole); gives
        the bytes written. StoreError, in one line, if it cannot be written (a full disk, a
        store that failed)."""
        data = (json.dumps(value, indent=1, sort_keys=False) + "\n").encode()
        self._check()
        try:
            self._write(relative, data)
        except OSError as error:
            raise StoreError(
                f"output: {self.where}: cannot write {relative}: {os_error_text(error)}"
            ) from None
        return data

    def sha256(self, relative: str) -> str:
        digest = hashlib.sha256()
        with self.fs.open_input_stream(self.full(relative)) as stream:
            while chunk := stream.read(8 << 20):
                digest.update(chunk)
        return digest.hexdigest()


def os_error_text(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "the disk is full (No space left on device)"
    return error.strerror or (str(error).strip().splitlines() or [type(error).__name__])[0]


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
