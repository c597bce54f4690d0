"""A results directory on some filesystem: reading and writing whole, deleting what is ours
(never through a link), and the lock that holds it for one driver."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import stat

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.store.layout import (
    LOCK_FILE,
    PARTIAL_DIR,
    TEMP_SUFFIX,
    ResultsError,
    StoreError,
    article,
)


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
        # A lease's check, called before every look at an object store and every record
        # written: once the lease is lost, nothing more is read, written or deleted (and no
        # call waits on a store that stopped answering).
        self.guard = None
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)
        self.given_fs = filesystem is not None

    def __reduce__(self):
        # Travels to Ray workers as an address, not a filesystem object; a local path as the
        # absolute path resolved here, since a worker's working directory may differ.
        return (Location, (self.root if self.is_local else self.where,))

    def child(self, name: str) -> Location:
        """The directory ``name`` inside this one, as a location of its own (a URI keeps its
        query: the store's endpoint and options), under the same lease check."""
        if self.given_fs:
            inner = Location(f"{self.root}/{name}", self.fs)
        elif self.is_local:
            inner = Location(f"{self.root}/{name}")
        else:
            base, mark, query = self.where.partition("?")
            inner = Location(f"{base.rstrip('/')}/{name}{mark}{query}")
        inner.guard = self.guard  # its records are written under this directory's lease
        return inner

    def full(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def uri(self, relative: str) -> str:
        """A path or URI that any reader (Polars, DuckDB) can open."""
        if self.is_local:
            return self.full(relative)
        scheme = self.where.split("://", 1)[0]
        return f"{scheme}://{self.full(relative)}"

    def _check(self) -> None:
        if self.guard is not None:
            self.guard()

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

    def lock(self, tries: int = 5, answer_within: float | None = None) -> Lock | None:
        """Hold this directory for one driver (local paths; the OS releases it if we die).

        Taken before anything in the directory is read, so that what is read stays true while
        the lock is held; the driver writes its pid into it (`Lock.claim`) only once the
        directory is known to be one it may use. Gives the `Lock`, to keep; ResultsError if
        another run holds it, or if ``.lock`` is not a lock file of ours (a link, a directory,
        a file with other names). On S3 it is a lease (`lease.Lease`), checked before every look
        at the store and record written (a renewal unanswered for ``answer_within`` s loses it);
        other object stores have none: one driver per output there is the user's affair.
        """
        if not self.is_local:
            if self.where.split("://", 1)[0] != "s3":
                return None
            from pipeline.store.lease import Lease

            lease = Lease(self, answer_within).acquire()
            self.guard = lease.check
            return lease
        import fcntl

        path = self.full(LOCK_FILE)
        made_directory = not os.path.lexists(self.root)
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            found = None
        except OSError as error:  # e.g. the output is under a file
            raise ResultsError(
                f"output: {self.where}: cannot write there ({os_error_text(error)})"
            ) from None
        if found is not None and (not stat.S_ISREG(found.st_mode) or found.st_nlink > 1):
            what = (
                "a file with other names (a hard link)"
                if stat.S_ISREG(found.st_mode)
                else article(kind_of(found.st_mode))
            )
            raise ResultsError(
                f"output: {self.where}: {LOCK_FILE} is {what}, not a clocksweep "
                "lock file; move it away"
            )
        try:
            os.makedirs(self.root, exist_ok=True)
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            if made_directory:
                _remove_quietly(self.root, directory=True)
            raise ResultsError(
                f"output: {self.where}: cannot write there ({os_error_text(error)})"
            ) from None
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
        return lock

    def held_by(self) -> str | None:
        """The pid (as written, or '?') of a run that holds this directory now, or None."""
        import fcntl

        if not self.is_local:
            return None
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

    def relative(self, full: str) -> str:
        return full[len(self.root) + 1 :]

    def read_json(self, relative: str):
        """The JSON at ``relative``, or None if there is no such file."""
        if not self.exists(relative):
            return None
        with self.fs.open_input_stream(self.full(relative)) as stream:
            return json.loads(stream.read())

    def write_json(self, relative: str, value) -> bytes:
        """Replace a JSON file atomically: a temporary file renamed over it (locally); gives
        the bytes written. StoreError, in one line, if it cannot be written (a full disk, a
        store that failed); the temporary file is removed."""
        data = (json.dumps(value, indent=1, sort_keys=False) + "\n").encode()
        self._check()
        try:
            if self.is_local:
                self._write_local(self.full(relative), data)
            else:  # an object store's PUT is atomic: the key appears whole or not at all
                with self.fs.open_output_stream(self.full(relative)) as stream:
                    stream.write(data)
        except OSError as error:
            raise StoreError(
                f"output: {self.where}: cannot write {relative}: {os_error_text(error)}"
            ) from None
        return data

    @staticmethod
    def _write_local(final: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(final), exist_ok=True)
        # A new name of our own (O_EXCL, no link followed): nothing planted there is written.
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

    def delete(self, relative: str) -> None:
        """Remove a file or directory tree of ours. Locally a symbolic link is removed, never
        followed (nor is any link inside the tree)."""
        self._check()
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
                found, "missing"
            )
        try:
            return kind_of(os.lstat(self.full(relative)).st_mode)
        except FileNotFoundError:
            return "missing"

    def sha256(self, relative: str) -> str:
        digest = hashlib.sha256()
        with self.fs.open_input_stream(self.full(relative)) as stream:
            while chunk := stream.read(8 << 20):
                digest.update(chunk)
        return digest.hexdigest()


class Lock:
    """A results directory held for one driver (see `Location.lock`)."""

    def __init__(self, location: Location, descriptor: int, made_directory: bool, made_file: bool):
        self.location, self.descriptor = location, descriptor
        self.made_directory, self.made_file = made_directory, made_file
        self.claimed = False

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


def os_error_text(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "the disk is full (No space left on device)"
    return error.strerror or (str(error).strip().splitlines() or [type(error).__name__])[0]


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
