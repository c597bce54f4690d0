"""One driver per results prefix on S3: a lease made of conditional writes.

An object store has no file lock. S3 (and the servers that follow its API) can refuse a write
on a condition: ``If-None-Match: *`` creates an object only if none is there, ``If-Match:
ETAG`` replaces or deletes it only if it is still the one read. The lease is the object
``PREFIX/.lock``, holding the driver's pid, host and a random token:

- taken by creating it only if absent; if it is there and was renewed less than the lease's
  time ago, the run is refused (`LeaseHeld`: the holder named, whether it is a process
  running on this host, and when its lease lapses unrenewed, which the caller may wait out);
- renewed by the driver (a thread) every third of that time, each renewal conditional on
  the ETag it last wrote, so a driver whose lease was taken over learns it at once; so does
  one whose lease is gone (the store lost its state: reset, or the bucket made anew), since
  the renewal is then answered NoSuchKey;
- taken over, when its holder stopped renewing it (a driver killed, a host lost), by
  replacing it only if it is still the stale one read; and at once, renewed or not, when its
  holder is a process of this host that is no longer running (`holder_here`: a driver killed
  and its command run again here), as a local path's lock is;
- deleted, conditionally, when the run ends.

Age is judged on the server's clock alone: its ``Date`` header against the object's
``LastModified``, so hosts whose clocks disagree still agree on a lease's age. A lease not
renewed for two thirds of its time counts as lost (`check`), which leaves the last third for
a write under way to end before a takeover; so does one whose renewal the store has not
answered within the connect deadline the driver gives. The driver asks `check` before every
record it writes and while it waits for its tasks, so it stops as soon as the lease is lost,
not at its next commit (which a store that stopped answering never lets come).
The lease's time is ``CLOCKSWEEP_LEASE_SECONDS`` (default 30): a driver killed without
ending its run holds the prefix that long.

Stores without conditional writes, and object stores other than S3, have no lease: one driver
per output there is the user's affair (docs/results.md).
"""

from __future__ import annotations

import email.utils
import json
import os
import secrets
import socket
import threading
import time
from urllib.parse import parse_qs, urlsplit

from pipeline.store import credentials
from pipeline.store.entries import is_count
from pipeline.store.layout import LOCK_FILE, ResultsError, StoreError

LEASE_ENV = "CLOCKSWEEP_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 30.0
# What this host knows of a lease's holder (`holder_here`).
ENDED, RUNNING, UNKNOWN = "ended", "running", "unknown"


def lease_seconds() -> float:
    text = os.environ.get(LEASE_ENV)
    if text is None:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1.0 <= value <= 3600.0:  # also refuses nan
        raise ResultsError(f"{LEASE_ENV}: {text!r}; expected seconds from 1 to 3600")
    return value


def s3_client(location):
    """A boto3 client for the S3 location, from its URI's query (``endpoint_override``,
    ``scheme``, ``region``) and userinfo (an access key and its secret), and otherwise the
    environment, as pyarrow reads them."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ResultsError(
            f"output: {location.where}: one driver per S3 prefix is held by a lease, which "
            "needs boto3 (install the extra: pip install -e '.[s3]' in clocksweep's checkout)"
        ) from None
    query = {key: values[-1] for key, values in parse_qs(urlsplit(location.given).query).items()}
    key_id, secret = credentials.userinfo(location.given)
    renewal = lease_seconds() / 3
    endpoint = query.get("endpoint_override")
    if endpoint and "://" not in endpoint:
        endpoint = f"{query.get('scheme', 'https')}://{endpoint}"
    options = {
        "endpoint_url": endpoint,
        "region_name": query.get("region") or None,
        "aws_access_key_id": key_id or None,
        "aws_secret_access_key": secret or None,
        # A renewal slower than a third of the lease is overtaken by the next one: no call
        # waits longer, so that one the store never answers ends in time for the next.
        "config": Config(
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=min(10.0, renewal),
            read_timeout=min(30.0, renewal),
        ),
    }
    # A session of its own reads the environment now (boto3's default session keeps the
    # credentials it first read).
    session = boto3.session.Session()
    return session.client("s3", **{k: v for k, v in options.items() if v is not None})


def _response(error) -> dict:
    """The store's answer an error carries ({} for one without: a timeout, a lost connection)."""
    return getattr(error, "response", None) or {}


def _error_code(error) -> str:
    return str(_response(error).get("Error", {}).get("Code", ""))


_REFUSED_CREDENTIALS = (
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationHeaderMalformed",
)


def _cause(error, bucket: str) -> str:
    """Why the store did not do what was asked, in a few words."""
    code = _error_code(error)
    if code == "NoSuchBucket":
        return f"the bucket {bucket} does not exist"
    if code in _REFUSED_CREDENTIALS:
        return f"the store refused the credentials ({code})"
    if code:
        return code
    return f"cannot reach the store ({error})"


# What a store answers about a key it does not hold (the bucket's own absence included).
_GONE = ("NoSuchKey", "404", "NoSuchBucket")


def _refused(error) -> bool:
    """A conditional write refused: the condition did not hold."""
    status = _response(error).get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = _error_code(error)
    return status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")


def process_start(pid: int) -> str | None:
    """Which process ``pid`` is, as this process sees it: this host's boot, this pid
    namespace, and the process's start time (clock ticks since boot), which no later process
    of that pid shares ("ended" for a zombie: killed, not yet reaped); None if there is no
    such process, or no /proc to ask."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            boot = file.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        with open(f"/proc/{pid}/stat") as file:
            # The fields after the command name, which may hold spaces and parentheses.
            fields = file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    started = "ended" if fields[0] in ("Z", "X") else fields[19]  # state; starttime
    return f"{boot} {namespace} {started}"


def holder_here(body: dict) -> str:
    """What this host knows of the driver a lease names: "ended" (a process of this host
    that is not running, or whose pid a later process has taken: its start differs from the
    one the lease records), "running" (that very process, running here), or "unknown" (a
    holder on another host, or of another boot or pid namespace: its lease is waited out).
    A lease that records no start (written by an earlier clocksweep) is judged by its pid
    alone, and only its end is known: a pid running may be another process's."""
    pid = body.get("pid")
    if body.get("host") != socket.gethostname() or not is_count(pid, 1):
        return UNKNOWN
    recorded, mine = body.get("started"), process_start(os.getpid())
    if isinstance(recorded, str) and mine is not None:
        if recorded.split(" ")[:2] != mine.split(" ")[:2]:
            return UNKNOWN
        found = process_start(pid)
        if found is not None:
            return RUNNING if found == recorded else ENDED
    return UNKNOWN if running(pid) else ENDED


def running(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie too), whoever runs it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # there, another user's
        return True
    return True


class LeaseHeld(ResultsError):
    """Another run holds the lease: who it is, whether it is a process running on this host
    (``running_here``: refused at once), and in how long its lease lapses unless renewed
    (`lapses_in`, by the store's clock), which a rerun may wait out."""

    def __init__(self, where: str, body: dict, age: float, seconds: float, running_here: bool):
        self.where, self.age, self.seconds = where, max(age, 0.0), seconds
        self.running_here = running_here
        self.pid, self.host = body.get("pid", "?"), body.get("host", "?")
        super().__init__(self.refusal())

    @property
    def lapses_in(self) -> float:
        """Seconds until the lease lapses unless its holder renews it first."""
        return max(self.seconds - self.age, 0.0)

    def refusal(self, why: str = "") -> str:
        """The one line that refuses the run (``why``: what came of waiting, if it waited)."""
        return (
            f"output: {self.where} is in use by another clocksweep run (pid {self.pid} on "
            f"{self.host}, its lease renewed {self.age:.0f} s ago, held while renewed within "
            f"{self.seconds:.0f} s){'; ' + why if why else ''}; wait for it, or choose another "
            "output"
        )

    def countdown(self, lapses_in: float) -> str:
        """What a rerun that waits says, in the user's terms."""
        return (
            f"output {self.where} was in use by a run on {self.host} (pid {self.pid}); its "
            f"lease lapses in {max(lapses_in, 0):.0f} s, waiting; Ctrl-C to stop"
        )


class Lease:
    """The lease on one S3 prefix (see the module's docstring); the `Lock` of object stores."""

    def __init__(self, location, answer_within: float | None = None):
        self.location = location
        self.where = location.where
        self.bucket, _, prefix = location.root.partition("/")
        self.key = f"{prefix}/{LOCK_FILE}" if prefix else LOCK_FILE
        self.seconds = lease_seconds()
        self.client = s3_client(location)
        self.token = secrets.token_hex(8)
        self.etag: str | None = None
        self.renewed = 0.0  # time.monotonic() of the last write of ours that held
        # The longest a renewal may wait for the store's answer before the lease counts as
        # lost (the driver's connect deadline); time.monotonic() of the renewal waiting.
        self.answer_within = answer_within
        self.asking: float | None = None
        self.lost: str | None = None
        # Told the one-line message once the renewals find the lease lost (the driver: a
        # call of its own may be waiting on a store that stopped answering).
        self.on_lost = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def _body(self) -> bytes:
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "token": self.token}
        started = process_start(os.getpid())
        if started is not None:
            holder["started"] = started
        return json.dumps(holder).encode()

    def _ask(self, verb: str, call, expected):
        """``call()``'s answer, or None where the store answered with an error that
        ``expected(error)`` accepts; for any other error, ResultsError naming the cause (a
        StoreError unless it is the user's to fix)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except ClientError as error:
            if expected(error):
                return None
            cause = error
        except BotoCoreError as error:
            cause = error
        code = _error_code(cause)
        input_error = code == "NoSuchBucket" or code in _REFUSED_CREDENTIALS
        said = credentials.scrubbed(_cause(cause, self.bucket), self.location.given)
        raise (ResultsError if input_error else StoreError)(
            f"output: {self.where}: cannot {verb} {LOCK_FILE}: {said}"
        )

    def _put(self, expected=_refused, **condition) -> bool:
        """Write the lease on ``condition``; False if the store refused it with an error
        ``expected`` accepts (by default: the condition did not hold)."""
        started = time.monotonic()
        answer = self._ask(
            "write",
            lambda: self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=self._body(), **condition
            ),
            expected,
        )
        if answer is None:
            return False
        self.etag, self.renewed = answer["ETag"], started
        return True

    def _holder(self) -> tuple[str, dict, float] | None:
        """(ETag, body, age in seconds by the server's clock) of the lease there, or None."""
        answer = self._ask(
            "read",
            lambda: self.client.get_object(Bucket=self.bucket, Key=self.key),
            lambda error: _error_code(error) in ("NoSuchKey", "404"),
        )
        if answer is None:
            return None
        try:
            body = json.loads(answer["Body"].read())
        except ValueError:
            body = {}
        served = answer["ResponseMetadata"].get("HTTPHeaders", {}).get("date")
        now = email.utils.parsedate_to_datetime(served) if served else None
        age = (now - answer["LastModified"]).total_seconds() if now else 0.0
        return answer["ETag"], body if isinstance(body, dict) else {}, age

    def holder_now(self) -> str | None:
        """Who holds the lease now, read and never taken or written: "P on HOST" (its pid), or
        None where there is none, it has lapsed (unrenewed for the lease's time, by the
        store's clock) or its driver is known to have ended on this host."""
        held = self._holder()
        if held is None:
            return None
        _, body, age = held
        if age > self.seconds or holder_here(body) == ENDED:
            return None
        return f"{body.get('pid', '?')} on {body.get('host', '?')}"

    def acquire(self) -> Lease:
        """Take the lease, or raise `LeaseHeld` naming the run that holds it."""
        if self._put(IfNoneMatch="*"):
            return self._start()
        held = self._holder()
        if held is None:  # ended between our write and our read: try once more
            if self._put(IfNoneMatch="*"):
                return self._start()
            held = self._holder()
        if held is not None:
            etag, body, age = held
            holder = holder_here(body)
            if (age > self.seconds or holder == ENDED) and self._put(IfMatch=etag):
                return self._start()
            raise LeaseHeld(self.where, body, age, self.seconds, holder == RUNNING)
        raise ResultsError(f"output: {self.where}: cannot take {LOCK_FILE}; try again")

    def _start(self) -> Lease:
        self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True)
        self._thread.start()
        return self

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            with self._guard:
                if not self.lost:
                    self._renew()
            why = self.problem()
            if why is not None:
                if self.on_lost is not None:
                    self.on_lost(self.lost_message(why))
                return

    def _renew(self) -> None:
        """Write the lease again on the ETag we last wrote. An answer that shows it is not
        ours any more loses it at once; no answer is tried again (`check` counts the time)."""
        why = []

        def not_ours(error) -> bool:
            if _refused(error):
                why.append("another run took the lease over")
            elif _error_code(error) in _GONE:
                why.append(
                    f"its {LOCK_FILE} is gone from the store ({_error_code(error)}): the store "
                    "lost what this run wrote there"
                )
            return bool(why)

        self.asking = time.monotonic()
        try:
            if not self._put(not_ours, IfMatch=self.etag):
                self.lost = why[0]
        except ResultsError:
            pass  # no answer, or an error the next renewal may not meet
        finally:
            self.asking = None

    def problem(self) -> str | None:
        """Why the lease is no longer ours, or None. One not renewed for two thirds of its
        time counts as lost already, so that the write that follows ends before any other
        driver may take the lease over."""
        now, asking = time.monotonic(), self.asking
        if self.lost:
            return self.lost
        if self.answer_within is not None and asking is not None:
            if now - asking > self.answer_within:
                return f"the store did not answer within {self.answer_within:g} s"
        age = now - self.renewed
        if age > self.seconds * 2 / 3:
            return f"not renewed for {age:.0f} s"
        return None

    def check(self) -> None:
        """Raise StoreError unless the lease is still ours: called before every record is
        written, and by the driver while it waits. Once lost, it stays lost (the renewals
        stop, and every later check says the same)."""
        why = self.problem()
        if why is not None:
            self.lost = why
            raise StoreError(self.lost_message(why))

    def lost_message(self, why: str) -> str:
        return (
            f"output: {self.where}: this run lost its lease on the output ({why}), so it "
            "stops before committing more; rerun the same command to resume"
        )

    # The `Lock` interface the driver uses.
    def claim(self) -> None:
        """The lease names its holder from the start; nothing more to write."""

    def release(self, refused: bool = False) -> None:
        """Stop renewing and delete the lease if it is still ours. A renewal the store has
        not answered is not waited for: the lease is then left to expire."""
        from botocore.exceptions import BotoCoreError, ClientError

        self._stop.set()
        if self._thread is not None and self.lost is None:
            self._thread.join(timeout=self.seconds / 3)
        if not self._guard.acquire(blocking=False):
            return  # a renewal still waits on the store
        try:
            if self.lost or self.etag is None:
                return
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)
            except (ClientError, BotoCoreError):
                pass  # taken over, or the store is gone: the lease then simply expires
        finally:
            self._guard.release()
