"""An S3 server for tests that need one apart from their own process: moto's standalone server
in a process of its own on loopback (no signatures checked), a boto3 client on it, and what
those tests read from it: the committed rows, and a driver's stderr line by line as it comes.

(test_object_store.py serves moto in its own process instead, to check signatures: wrong
credentials refused.)
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import polars as pl
import pyarrow.dataset as ds
import pytest
from helpers import free_port
from rows import sorted_rows

from pipeline import ERROR_PREFIX
from pipeline.store.location import Location
from pipeline.store.validate import committed_files

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# A process watched from outside that has not ended by then is ended: the test then fails
# instead of hanging.
HANG = 120


class Store:
    """A moto S3 server in a process of its own, a client on it, and its bucket."""

    def __init__(self, bucket: str):
        import boto3

        self.bucket, self.port = bucket, free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.create_bucket(Bucket=bucket)
                break
            except Exception:  # noqa: BLE001 (not listening yet)
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.2)

    def uri(self, prefix: str, endpoint: str | None = None) -> str:
        endpoint = endpoint or f"127.0.0.1:{self.port}"
        return f"s3://{self.bucket}/{prefix}?endpoint_override={endpoint}&scheme=http"

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def write(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def reset(self) -> None:
        """The server loses everything (moto's own reset), and the bucket is made anew."""
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/moto-api/reset", method="POST"
        )
        urllib.request.urlopen(request, timeout=10).close()
        self.client.create_bucket(Bucket=self.bucket)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


@contextmanager
def serving(bucket: str, **settings: str):
    """A `Store`, with its credentials and ``settings`` in the environment while it serves
    (set before a module's Ray instance starts, so that its workers see them)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {**CREDENTIALS, **settings}.items():
            patch.setenv(key, value)
        store = Store(bucket)
        try:
            yield store
        finally:
            store.stop()


def rows_at(where: str) -> pl.DataFrame:
    """The committed per-deal rows, read through the store's own filesystem (or locally)."""
    location = Location(where)
    paths = [path.split("://", 1)[-1] for path in committed_files(where)]
    return sorted_rows(pl.from_arrow(ds.dataset(paths, filesystem=location.fs).to_table()))


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ERROR_PREFIX)]


def last_error_line(code: int, stderr: str, stdout: str = "", status: int = 1) -> str:
    """The one error line of a command that ended with ``status`` (1: a failure; 2: the
    input), its last line, with no traceback."""
    assert "Traceback" not in stderr + stdout, stderr[-2000:]
    assert code == status, f"exit {code}: {stderr[-2000:]}"
    (line,) = error_lines(stderr)
    assert stderr.strip().splitlines()[-1] == line, stderr[-2000:]
    return line


class Watched:
    """A driver process whose stderr is read as it comes, line by line, with the time."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = HANG) -> bool:
        """Whether a line with ``text`` came before the process ended (or the timeout)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return False
            self.said.append(line)
            if text in line:
                return True
        return False

    def end(self, timeout: float = HANG) -> tuple[int | None, str]:
        """The exit status (None if it did not end in ``timeout``: then it is killed) and
        all of stderr."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            code = None
        while self.wait_for("\0", timeout=5):
            pass
        return code, "".join(self.said)
