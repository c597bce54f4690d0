"""A results directory on this machine's filesystem (`LocalStore`), and the lock that holds it
for one driver (`Lock`): staged files renamed into place, deletes that never follow a link."""

from __future__ import annotations

import os
import secrets
import shutil
import stat

import pyarrow.fs as pafs

from pipeline.store.layout import (
    LOCK_FILE,
    LOG_FILE,
    MANIFEST_FILE,
    PAGE_FILE_NAME,
    PAGES_DIR,
    PARTIAL_DIR,
    REPORT_DIR,
    RUN_FILE,
    SHARD_FILE_NAME,
    SHARDS_DIR,
    STALE_TEMP_NAME,
    TEMP_SUFFIX,
    ResultsError,
    article,
    group_directory,
    table_names,
)
from pipeline.store.location import Location, on_this_machine, os_error_text

# The names clocksweep keeps at the top of a results directory (cell groups' aside).
TOP_NAMES = (RUN_FILE, MANIFEST_FILE, PAGES_DIR, LOCK_FILE, SHARDS_DIR, REPORT_DIR, LOG_FILE)


class LocalStore(Location):
    """A directory on this machine's filesystem (see `location` for the interface)."""

    @classmethod
    def serves(cls, where: str, filesystem: pafs.FileSystem | None) -> bool:
        return on_this_machine(where, filesystem)

    def _open(self, where: str, filesystem) -> tuple[pafs.FileSystem, str]:
        if filesystem is not None or "://" in where:  # a file:// URI
            return super()._open(where, filesystem)
        return pafs.LocalFileSystem(), os.path.abspath(where)

    def __reduce__(self):
        # Travels to Ray workers as the absolute path resolved here, since a worker's working
        # directory may differ.
        return (Location, (self.root,))

    @property
    def address(self) -> str:
        return self.root

    def child(self, name: str) -> Location:
        inner = LocalStore(f"{self.root}/{name}")
        inner.hold = self.hold
        return inner

    def uri(self, relative: str) -> str:
        return self.full(relative)

    def local_path(self, relative: str) -> str:
        return self.full(relative)

    def scan_parquet(self, paths: list[str]):
        import polars as pl

        return pl.scan_parquet([self.full(path) for path in paths])

    # --- The lock -----------------------------------------------------------------------

    def lock(self, tries: int = 5, answer_within: float | None = None) -> Lock:
        """The directory's lock file, locked (the OS releases it if we die). Taken before
        anything in the directory is read, so that what is read stays true while it is held;
        the driver writes its pid into it (`Lock.claim`) only once the directory is known to
        be one it may use. ResultsError if another run holds it, or if ``.lock`` is not a
        lock file of ours (a link, a directory, a file with other names)."""
        import fcntl

        path = self.full(LOCK_FILE)
        made_directory = not os.path.lexists(self.root)
        found = self._lock_file_found(path)
        try:
            os.makedirs(self.root, exist_ok=True)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            if made_directory:
                _remove_quietly(self.root, directory=True)
            raise self._cannot_write(error) from None
        lock = Lock(self, descriptor, made_directory, found is None)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 64, 0).decode(errors="replace").strip() or "?"
            os.close(descriptor)
            raise ResultsError(
                f"output: {self.where} is in use by another clocksweep run "
                f"(pid {holder}); wait for it, or choose another output"
            ) from None
        if tries > 1 and not _names(path, descriptor):
            # A run refused there removed the lock file between our open and our lock (and
            # perhaps another made a new one): what we hold locks no file; take it again.
            os.close(descriptor)
            return self.lock(tries - 1)
        self.hold = lock
        return lock

    def _lock_file_found(self, path: str) -> os.stat_result | None:
        """The lock file there (None: none yet); ResultsError if it is not one of ours."""
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as error:  # e.g. the output is under a file
            raise self._cannot_write(error) from None
        if not stat.S_ISREG(found.st_mode) or found.st_nlink > 1:
            what = (
                "a file with other names (a hard link)"
                if stat.S_ISREG(found.st_mode)
                else article(kind_of(found.st_mode))
            )
            raise ResultsError(
                f"output: {self.where}: {LOCK_FILE} is {what}, not a clocksweep "
                "lock file; move it away"
            )
        return found

    def _cannot_write(self, error: OSError) -> ResultsError:
        return ResultsError(f"output: {self.where}: cannot write there ({os_error_text(error)})")

    def held_by(self) -> str | None:
        import fcntl

        try:
            descriptor = os.open(self.full(LOCK_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            return os.pread(descriptor, 64, 0).decode(errors="replace").strip() or "?"
        finally:
            os.close(descriptor)

    # --- Writing, staging, committing ---------------------------------------------------

    def _write(self, relative: str, data: bytes) -> None:
        """A temporary file of a new name of our own (O_EXCL, no link followed: nothing
        planted there is written), synced, then renamed over ``relative``."""
        final = self.full(relative)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        temp = (
            f"{os.path.dirname(final)}/.{os.path.basename(final)}.{os.getpid()}-"
            f"{secrets.token_hex(4)}{TEMP_SUFFIX}"
        )
        try:
            with open(exclusive(temp), "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, final)
        except BaseException:
            _remove_quietly(temp)
            raise

    def stage(self, relative: str, table: str):
        # A name no other attempt at this shard can have, on this node or another.
        staged = (
            f"{PARTIAL_DIR}/{table}/{os.path.basename(relative)}."
            f"{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"
        )
        os.makedirs(os.path.dirname(self.full(staged)), exist_ok=True)
        return staged, open(exclusive(self.full(staged)), "wb")

    def discard(self, staged: str | None, relative: str) -> None:
        try:
            os.remove(self.full(staged))
        except FileNotFoundError:
            pass

    def put_in_place(self, pairs) -> None:
        try:
            self._move(pairs)
        except OSError:
            try:  # those moved already go back
                self.take_back(
                    [
                        (staged, final)
                        for staged, final in pairs
                        if os.path.lexists(self.full(final))
                        and not os.path.lexists(self.full(staged))
                    ]
                )
            except OSError:
                pass
            raise

    def take_back(self, pairs) -> None:
        self._move([(final, staged) for staged, final in reversed(pairs)])

    def _move(self, pairs) -> None:
        for source, target in pairs:
            os.makedirs(os.path.dirname(self.full(target)), exist_ok=True)
            os.replace(self.full(source), self.full(target))

    # --- Looking, deleting --------------------------------------------------------------

    def kind(self, relative: str) -> str:
        try:
            return kind_of(os.lstat(self.full(relative)).st_mode)
        except FileNotFoundError:
            return "missing"

    def delete(self, relative: str) -> None:
        """A symbolic link is removed, never followed (nor is any link inside the tree)."""
        self._check()
        path = self.full(relative)
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)

    def prune_partial(self) -> None:
        if self.kind(PARTIAL_DIR) != "directory":
            return
        for folder, _, _ in sorted(os.walk(self.full(PARTIAL_DIR)), reverse=True):
            try:
                os.rmdir(folder)
            except OSError:
                pass

    def survey(self, found, committed, partial_only: bool = False) -> None:
        """Never following a symbolic link: nothing outside the directory, and no committed
        file under another name, is ever counted as ours."""
        if partial_only:
            if self.kind(PARTIAL_DIR) == "directory":
                self._survey_partial(found)
            return
        group_dirs = {group_directory(index) for index in range(1, found.groups)}
        for entry in self._listing(""):
            if STALE_TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                found.stale.append(entry.name)
            elif entry.name in group_dirs and self.kind(entry.name) != "directory":
                found.blocking.append((entry.name, self._what(entry.name)))
            elif entry.name not in TOP_NAMES and entry.name not in group_dirs:
                found.foreign.append((entry.name, self._what(entry.name)))
        # Shard files are kept inside the results directory, where clean-up may reach them: a
        # link (to another disk, say) would leave what lies behind it neither cleaned nor
        # checked.
        for path in (SHARDS_DIR, PARTIAL_DIR, PAGES_DIR):
            if self.kind(path) not in ("directory", "missing"):
                found.blocking.append((path, self._what(path)))
        if found.blocking:
            return
        self._survey_pages(found, committed)
        self._survey_shards(found, committed)

    def _what(self, relative: str) -> str:
        return article(self.kind(relative))

    def _listing(self, relative: str) -> list:
        try:
            with os.scandir(self.full(relative)) as listing:
                return sorted(listing, key=lambda entry: entry.name)
        except OSError:
            return []

    def _survey_partial(self, found) -> None:
        """PARTIAL_DIR: every file under it is an attempt's; anything else is not ours."""
        pending = [PARTIAL_DIR]
        while pending:
            folder = pending.pop()
            for inner in self._listing(folder):
                inner_path = f"{folder}/{inner.name}"
                kind = self.kind(inner_path)
                if kind == "file":
                    found.partial.append(inner_path)
                elif kind == "directory":
                    pending.append(inner_path)
                else:
                    found.foreign.append((inner_path, article(kind)))

    def _survey_pages(self, found, committed) -> None:
        for entry in self._listing(PAGES_DIR):
            path = f"{PAGES_DIR}/{entry.name}"
            kind = self.kind(path)
            if STALE_TEMP_NAME.fullmatch(entry.name) and kind == "file":
                found.stale.append(path)
            elif PAGE_FILE_NAME.fullmatch(entry.name) and kind == "file":
                if path not in committed:
                    found.uncommitted.append(path)
            elif PAGE_FILE_NAME.fullmatch(entry.name):
                found.blocking.append((path, self._what(path)))
            else:
                found.foreign.append((path, self._what(path)))

    def _survey_shards(self, found, committed) -> None:
        for entry in self._listing(SHARDS_DIR):
            path = f"{SHARDS_DIR}/{entry.name}"
            if path == PARTIAL_DIR:
                self._survey_partial(found)
            elif entry.name not in table_names():
                found.foreign.append((path, self._what(path)))
            elif self.kind(path) != "directory":
                found.blocking.append((path, self._what(path)))
            else:
                for inner in self._listing(path):
                    inner_path = f"{path}/{inner.name}"
                    ours = SHARD_FILE_NAME.fullmatch(inner.name) is not None
                    kind = self.kind(inner_path)
                    if kind == "file" and ours:
                        if inner_path not in committed:
                            found.uncommitted.append(inner_path)
                    elif ours:
                        found.blocking.append((inner_path, self._what(inner_path)))
                    else:
                        found.foreign.append((inner_path, self._what(inner_path)))


class Lock:
    """A local results directory held for one driver (see `LocalStore.lock`)."""

    def __init__(
        self, location: LocalStore, descriptor: int, made_directory: bool, made_file: bool
    ):
        self.location, self.descriptor = location, descriptor
        self.made_directory, self.made_file = made_directory, made_file
        self.claimed = False
        self.on_lost = None  # never told: a lock is not lost while its process lives

    def check(self) -> None:
        """Held until released: the OS lets it go only with the process."""

    def claim(self) -> None:
        """Write this driver's pid into the lock file, for a second driver's refusal to name."""
        pid = str(os.getpid()).encode()
        try:
            os.ftruncate(self.descriptor, 0)
            os.pwrite(self.descriptor, pid, 0)
        except OSError as error:
            raise ResultsError(
                f"output: {self.location.where}: cannot write {LOCK_FILE} ({os_error_text(error)})"
            ) from None
        self.claimed = True

    def release(self, refused: bool = False) -> None:
        """Let the directory go. ``refused``: the run wrote nothing, so what taking the lock
        created (the lock file, the directory) is removed too."""
        try:
            if self.claimed:
                os.ftruncate(self.descriptor, 0)  # no pid of a run that has ended
            if refused and self.made_file:
                os.remove(self.location.full(LOCK_FILE))
                if self.made_directory:
                    os.rmdir(self.location.root)
        except OSError:
            pass
        os.close(self.descriptor)


def _names(path: str, descriptor: int) -> bool:
    """Whether ``path`` is still the file open at ``descriptor``."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def kind_of(mode: int) -> str:
    """'link', 'file', 'directory' or 'other', of an lstat mode."""
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"


def _remove_quietly(path: str, directory: bool = False) -> None:
    try:
        os.rmdir(path) if directory else os.remove(path)
    except OSError:
        pass


def exclusive(path: str) -> int:
    """A new file at ``path``, opened for writing: never one already there, nor through a link."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
