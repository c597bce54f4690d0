"""A results directory on an object store reached by a `pyarrow.fs` URI (`ObjectStore`): files
written at their final keys (a PUT is atomic), held on S3 by a lease (`lease.Lease`)."""

from __future__ import annotations

import pyarrow.fs as pafs

from pipeline.store.layout import (
    PAGE_FILE_NAME,
    PAGES_DIR,
    PARTIAL_DIR,
    SHARD_FILE_NAME,
    SHARDS_DIR,
    ResultsError,
    StoreError,
    table_names,
)
from pipeline.store.location import Location, on_this_machine


class ObjectStore(Location):
    """A prefix of an object store (see `location` for the interface): no links, and nothing
    but files (keys) in it."""

    @classmethod
    def serves(cls, where: str, filesystem: pafs.FileSystem | None) -> bool:
        return not on_this_machine(where, filesystem)

    may_stall = True

    def _open(self, where: str, filesystem) -> tuple[pafs.FileSystem, str]:
        self.given_fs = filesystem is not None
        return super()._open(where, filesystem)

    def __reduce__(self):
        # Travels to Ray workers as the URI given, credentials and all (they open the store
        # with them), not a filesystem object.
        return (Location, (self.given,))

    @property
    def address(self) -> str:
        return self.where

    def child(self, name: str) -> Location:
        """A URI keeps its query: the store's endpoint and options."""
        if self.given_fs:
            inner = ObjectStore(f"{self.root}/{name}", self.fs)
        else:
            base, mark, query = self.given.partition("?")
            inner = ObjectStore(f"{base.rstrip('/')}/{name}{mark}{query}")
        inner.hold = self.hold
        return inner

    def uri(self, relative: str) -> str:
        scheme = self.where.split("://", 1)[0]
        return f"{scheme}://{self.full(relative)}"

    def scan_parquet(self, paths: list[str]):
        """Through the store's own filesystem, which knows its endpoint and credentials (a
        URI's query, the environment); Polars' reader would know neither."""
        import polars as pl
        import pyarrow.dataset as ds

        files = ds.dataset(
            [self.full(path) for path in paths], filesystem=self.fs, format="parquet"
        )
        return pl.scan_pyarrow_dataset(files)

    def lock(self, tries: int = 5, answer_within: float | None = None):
        """On S3 a lease (`lease.Lease`), checked before every look at the store and record
        written (a renewal unanswered for ``answer_within`` s loses it); other object stores
        have none (`Unheld`): one driver per output there is the user's affair."""
        if self.where.split("://", 1)[0] != "s3":
            self.hold = Unheld()
        else:
            from pipeline.store.lease import Lease

            self.hold = Lease(self, answer_within).acquire()
        return self.hold

    def held_by(self) -> str | None:
        """On S3, the run whose lease is renewed now ("P on HOST", read and never taken);
        None where none is, where the store cannot hold one (other object stores) or where
        it cannot be told (no boto3: the run could not have taken it from here either)."""
        if self.where.split("://", 1)[0] != "s3":
            return None
        from pipeline.store.lease import Lease

        try:
            return Lease(self).holder_now()
        except StoreError:
            raise
        except ResultsError:
            return None

    def _write(self, relative: str, data: bytes) -> None:
        # A PUT is atomic: the key appears whole or not at all.
        with self.fs.open_output_stream(self.full(relative)) as stream:
            stream.write(data)

    def stage(self, relative: str, table: str):
        final = self.full(relative)
        self.fs.create_dir(final.rsplit("/", 1)[0], recursive=True)
        return None, self.fs.open_output_stream(final)

    def discard(self, staged: str | None, relative: str) -> None:
        """Closing an object's stream puts it at its key, whole or not: taken away."""
        try:
            self.fs.delete_file(self.full(relative))
        except OSError:  # never put there (the store refused the upload)
            pass

    def kind(self, relative: str) -> str:
        found = self.info(relative).type
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "directory"}.get(
            found, "missing"
        )

    def delete(self, relative: str) -> None:
        self._check()
        info = self.info(relative)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(info.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(info.path)

    def survey(self, found, committed, partial_only: bool = False) -> None:
        if partial_only:
            found.partial += [self.relative(info.path) for info in self.files(PARTIAL_DIR)]
            return
        for info in self.files(PAGES_DIR):
            path = self.relative(info.path)
            if path in committed:
                continue
            if PAGE_FILE_NAME.fullmatch(path.removeprefix(PAGES_DIR + "/")):
                found.uncommitted.append(path)
            else:
                found.foreign.append((path, "a file clocksweep does not write"))
        tables = table_names()
        for info in self.files(SHARDS_DIR):
            path = self.relative(info.path)
            parts = path.split("/")
            if path in committed:
                continue
            if len(parts) == 3 and parts[1] in tables and SHARD_FILE_NAME.fullmatch(parts[2]):
                found.uncommitted.append(path)
            elif path.startswith(PARTIAL_DIR + "/"):
                found.partial.append(path)
            else:
                found.foreign.append((path, "a file clocksweep does not write"))


class Unheld:
    """What `lock` takes on an object store that has no lease: nothing to check or release."""

    on_lost = None

    def check(self) -> None:
        pass

    def claim(self) -> None:
        pass

    def release(self, refused: bool = False) -> None:
        pass
