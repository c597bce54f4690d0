"""Results on a real S3 API server on loopback (moto's standalone server, started here), reached
only as a user reaches it: ``s3://bucket/prefix?endpoint_override=127.0.0.1:PORT&scheme=http``
with credentials in the environment.

moto rather than MinIO: it installs from PyPI with the test extra, starts in this process on a
free port and implements the conditional writes (``If-None-Match: *``, ``If-Match``) that
the lease (pipeline/store/lease.py) is made of.

- a sweep on Ray, `validate` and `report` (to a local --out) from the URI; the rows read back by
  pyarrow through the store's filesystem and by Polars with storage options;
- objects truncated, altered and deleted between runs: named by `validate` and by `run`, redone;
- another config into the prefix refused, nothing written; `--fresh` replaces it;
- two drivers on one prefix: the second refused while the first holds the lease; the first
  killed by SIGKILL, its lease left to expire, and the rerun ends with an uninterrupted run's rows;
- a driver killed by SIGKILL and its command run again at once on the same host: the rerun
  takes the dead driver's lease over without waiting, and ends with an uninterrupted run's rows;
- the lease itself: taken, refused, taken over once stale, lost by its holder, released; taken
  at once from a process of this host that has ended (or whose pid a later process has), and
  not from a live one or one of another host;
- bad input: a bucket that does not exist, wrong credentials, an endpoint that refuses.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from urllib.parse import quote

import faults
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner
from faults import committed_while_running
from processes import end_processes
from rows import kernel_rows, sorted_rows

from pipeline.cli import cli
from pipeline.store import lease as store_lease
from pipeline.store.files import ShardFileWriter
from pipeline.store.layout import ResultsError
from pipeline.store.location import Location
from pipeline.store.records import PAGE_ENV

LEASE_SECONDS = 3.0
# A driver process's lease, where it runs beside the other test module: renewed every 3 s,
# counted lost after 6 s unrenewed. With 3 s, one renewal that waited a second for the store
# (served by this process, on a loaded machine) stopped the run before the test's fault.
DRIVER_LEASE = {store_lease.LEASE_ENV: "9"}
BUCKET = "sweeps"
SEED = 7171
N_DEALS = 12_000
CONFIG = f"""
name = "s3"
seed = {SEED}
deals = {N_DEALS}
shard_size = 2000
[grid]
variant = ["standard", "watch", "exchange"]
strategy = ["most", "oracle"]
depth = ["top"]
"""
REGION = "us-east-1"
# The server checks signatures once its first requests (the IAM user, its policy and key)
# are made: wrong credentials are then refused, as a real store refuses them.
SETUP_REQUESTS = 3


class Store:
    """The server, a boto3 client on it, and URIs into its bucket."""

    def __init__(self, host: str, port: int):
        import boto3

        self.endpoint = f"{host}:{port}"
        url = f"http://{self.endpoint}"
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="sweeper")
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="sweeper", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="sweeper")["AccessKey"]
        self.credentials = {
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            "AWS_DEFAULT_REGION": REGION,
        }
        as_sweeper = {
            "endpoint_url": url,
            "region_name": REGION,
            "aws_access_key_id": key["AccessKeyId"],
            "aws_secret_access_key": key["SecretAccessKey"],
        }
        self.client = boto3.client("s3", **as_sweeper)
        self.iam = boto3.client("iam", **as_sweeper)  # to make more keys of the user

    def new_key(self) -> tuple[str, str]:
        """Another access key of the user (its id, its secret), unlike any other."""
        key = self.iam.create_access_key(UserName="sweeper")["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def uri(self, prefix: str, bucket: str = BUCKET) -> str:
        return f"s3://{bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http"

    def keys(self, prefix: str) -> dict[str, str]:
        """Every key under ``prefix``, with its ETag."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return {item["Key"]: item["ETag"] for page in pages for item in page.get("Contents", [])}

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def write(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)

    def manifest(self, prefix: str) -> dict:
        return json.loads(self.read(f"{prefix}/manifest.json"))

    def committed(self, prefix: str) -> int:
        """The shards the manifest commits, its own and its pages'."""
        manifest = self.manifest(prefix)
        pages = manifest.get("pages", [])
        return len(manifest["shards"]) + sum(p["last"] - p["first"] + 1 for p in pages)

    def entries(self, prefix: str) -> list[dict]:
        """The manifest's entries, its own and its pages'."""
        manifest = self.manifest(prefix)
        pages = [json.loads(self.read(f"{prefix}/{p['path']}")) for p in manifest.get("pages", [])]
        return manifest["shards"] + [entry for page in pages for entry in page["shards"]]


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on a free loopback port, with credentials and a short lease in the
    environment (set before the module's Ray instance starts, so its workers see them)."""
    names = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"]
    saved = {key: os.environ.get(key) for key in [*names, store_lease.LEASE_ENV]}
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(SETUP_REQUESTS)  # read as moto is imported
    from moto.server import ThreadedMotoServer

    os.environ.pop("INITIAL_NO_AUTH_ACTION_COUNT")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        store = Store(*server.get_host_and_port())
        os.environ.update(store.credentials)
        os.environ[store_lease.LEASE_ENV] = str(LEASE_SECONDS)
        store.client.create_bucket(Bucket=BUCKET)
        yield store
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


pytestmark = pytest.mark.usefixtures("s3", "local_ray")  # the server first, then Ray
FRESH_RAY = True  # its workers must see the server's credentials


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("s3-config") / "s3.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def expected():
    return kernel_rows(CONFIG)


def run(*args: str):
    return CliRunner().invoke(cli, [*map(str, args)])


def sweep(config_file, uri: str, *extra: str):
    return run("run", config_file, f"--set=output={uri}", *extra)


def rows_of(store: Store, prefix: str) -> pl.DataFrame:
    """The committed per-deal rows, read by pyarrow through the store's own filesystem."""
    location = Location(store.uri(prefix))
    paths = [
        location.full(record["path"])
        for entry in store.entries(prefix)
        for record in entry["files"]
        if record["table"] == "deals"
    ]
    return sorted_rows(pl.from_arrow(ds.dataset(paths, filesystem=location.fs).to_table()))


def one_error_line(result, status: int = 2) -> str:
    """The one error line of a command that ended with ``status`` (2: bad input; 1: the
    store failed it)."""
    assert result.exit_code == status, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clocksweep: error: "), result.stderr
    return lines[0]


# --- A sweep, validate and report on the store ----------------------------------------------


def test_sweep_validate_and_report_from_the_uri(s3, config_file, expected, tmp_path):
    uri = s3.uri("plain")
    result = sweep(config_file, uri)
    assert result.exit_code == 0, result.output
    assert "6/6 shards" in result.stderr
    assert result.stdout.strip() == uri  # what validate and report take, as given
    keys = s3.keys("plain/")
    assert "plain/run.json" in keys and "plain/manifest.json" in keys
    assert "plain/.lock" not in keys  # the lease is gone with the run
    assert rows_of(s3, "plain").equals(expected)

    # A user's own reader: Polars with the endpoint and credentials as storage options.
    storage = {
        "aws_endpoint_url": f"http://{s3.endpoint}",
        "aws_allow_http": "true",
        "aws_access_key_id": s3.credentials["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": s3.credentials["AWS_SECRET_ACCESS_KEY"],
        "aws_region": REGION,
    }
    polars_rows = pl.scan_parquet(
        f"s3://{BUCKET}/plain/shards/deals/*.parquet", storage_options=storage
    ).collect()
    assert sorted_rows(polars_rows).equals(expected)

    checked = run("validate", uri)
    assert checked.exit_code == 0, checked.output
    assert "6/6 shards committed" in checked.stdout and "valid" in checked.stdout

    report_dir = tmp_path / "report"
    reported = run("report", uri, "--out", report_dir, "--no-plots")
    assert reported.exit_code == 0, reported.output
    document = json.loads((report_dir / "report.json").read_text())
    assert sum(cell["n"] for cell in document["cells"]) == N_DEALS * len(document["cells"])
    assert all(cell["exact"] for cell in document["cells"])
    # The report is written locally: an object store's RESULTS needs --out.
    assert "pass an output directory" in one_error_line(run("report", uri, "--no-plots"))


def test_a_sweep_grows_by_a_cell_on_the_store(s3, config_file, expected, tmp_path):
    """The new cell's group at its own prefix, its shards reading the old cells' wins from
    the store: the rows of both are the whole config's, and validate and the report read
    them as one sweep."""
    uri = s3.uri("grows")
    assert sweep(config_file, uri, "--set=grid.strategy=most").exit_code == 0
    before = s3.keys("grows/shards/")
    grown = sweep(config_file, uri)
    assert grown.exit_code == 0, grown.output
    assert "6 of 12 shards x 2 cell groups to play (6 already committed)" in grown.stderr
    assert s3.keys("grows/shards/") == before  # the first group's objects as they were
    rows = pl.concat([rows_of(s3, "grows"), rows_of(s3, "grows/cells-1")])
    assert sorted_rows(rows).equals(expected)
    checked = run("validate", uri)
    assert checked.exit_code == 0 and "x 5 cells" in checked.stdout, checked.output
    reported = run("report", uri, "--out", tmp_path / "report", "--no-plots")
    assert reported.exit_code == 0, reported.output
    document = json.loads((tmp_path / "report" / "report.json").read_text())
    assert sum(cell["n"] for cell in document["cells"]) == N_DEALS * 5


# --- Damage between runs ------------------------------------------------------------------


def test_damaged_objects_are_named_and_redone(s3, config_file, expected):
    uri = s3.uri("damaged")
    assert sweep(config_file, uri).exit_code == 0
    entries = s3.manifest("damaged")["shards"]
    deal_files = [
        f"damaged/{record['path']}"
        for entry in entries
        for record in entry["files"]
        if record["table"] == "deals"
    ]
    truncated, altered, deleted = deal_files[1], deal_files[3], deal_files[4]
    data = s3.read(truncated)
    s3.write(truncated, data[: len(data) // 2])
    data = bytearray(s3.read(altered))
    data[len(data) // 2] ^= 0xFF
    s3.write(altered, bytes(data))
    s3.client.delete_object(Bucket=BUCKET, Key=deleted)

    checked = run("validate", uri)
    assert checked.exit_code != 0
    for key in (truncated, altered, deleted):
        assert key.split("/")[-1] in checked.stdout, checked.stdout

    rerun = sweep(config_file, uri)
    assert rerun.exit_code == 0, rerun.output
    assert "3 played" in rerun.stderr and "3 already committed" in rerun.stderr
    assert run("validate", uri).exit_code == 0
    assert rows_of(s3, "damaged").equals(expected)


# --- Another experiment in the prefix -----------------------------------------------------


def test_another_config_is_refused_and_fresh_replaces_it(s3, config_file, tmp_path):
    uri = s3.uri("mixed")
    assert sweep(config_file, uri).exit_code == 0
    before = s3.keys("mixed/")
    line = one_error_line(sweep(config_file, uri, "--set=seed=1"))
    assert "mixed" in line and "--fresh" in line
    assert s3.keys("mixed/") == before  # nothing written, nothing deleted

    replaced = sweep(config_file, uri, "--set=seed=1", "--fresh")
    assert replaced.exit_code == 0, replaced.output
    assert rows_of(s3, "mixed").equals(kernel_rows(CONFIG, seed=1))
    assert run("validate", uri).exit_code == 0


# --- Two drivers, a SIGKILL, the lease left to expire -------------------------------------


def paused_driver(config_file, uri: str, tmp_path, pause: float, ray_tmp: str, env=None):
    """`faults.paused_driver` with the driver's lease (and ``ray_tmp``, where a Ray instance
    would be)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    return faults.paused_driver(config_file, uri, pids, pause, driver_environment(ray_tmp, env))


def held_driver(config_file, uri: str, tmp_path, first: int, ray_tmp: str, env=None):
    """`faults.held_driver` (its shards from ``first`` on held until it is killed) with the
    driver's lease (and ``ray_tmp``)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    return faults.held_driver(config_file, uri, pids, first, driver_environment(ray_tmp, env))


def driver_environment(ray_tmp: str, env=None) -> dict:
    return {"RAY_TMPDIR": ray_tmp, **(env or {}), **DRIVER_LEASE}


def test_second_driver_refused_then_sigkill_and_rerun(
    s3, config_file, expected, tmp_path, monkeypatch
):
    """With pages of two shards, so that a page is written to the store before the kill.
    The first driver holds shard 3 until it is killed: the second runs while it holds."""
    prefix = "killed"
    uri = s3.uri(prefix)
    ray_tmp = f"/tmp/cs3kill{os.getpid()}"
    first = held_driver(config_file, uri, tmp_path, 3, ray_tmp, {PAGE_ENV: "2"})
    try:
        committed_while_running(first, lambda: s3.committed(prefix), 3)
        assert first.poll() is None, first.communicate()[1]

        # Read with the first driver's lease: renewed within it, so held.
        monkeypatch.setenv(store_lease.LEASE_ENV, DRIVER_LEASE[store_lease.LEASE_ENV])
        line = one_error_line(sweep(config_file, uri))
        # validate sees the run by its lease, as it sees a local run by its lock: what that
        # run has not committed yet is its work in flight, not damage.
        checked = run("validate", uri)
        monkeypatch.setenv(store_lease.LEASE_ENV, str(LEASE_SECONDS))
        holder = f"pid {first.pid} on {socket.gethostname()}"
        assert f"in use by another clocksweep run ({holder}" in line
        assert f"a clocksweep run ({holder}) is writing here" in checked.output, checked.output

        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()  # held until killed, whatever failed
        end_processes(ray_tmp, remove=True)
    committed = s3.committed(prefix)
    assert committed == 3
    assert f"{prefix}/.lock" in s3.keys(f"{prefix}/")  # the killed driver's lease, left behind
    assert f"{prefix}/manifest/shards-000000-000001.json" in s3.keys(f"{prefix}/")

    # Within the lease's time the prefix is still held; once it has expired, the rerun takes
    # the stale lease over and finishes. (A wait of at least the lease: load only makes it
    # longer.) The rerun holds its own lease as a driver does: with 3 s, this process (the
    # store's server, Ray's driver) beside two busy loops once left it unrenewed for 2 s,
    # and the rerun stopped as one whose lease was lost.
    time.sleep(LEASE_SECONDS + 1)
    monkeypatch.setenv(store_lease.LEASE_ENV, DRIVER_LEASE[store_lease.LEASE_ENV])
    monkeypatch.setenv(PAGE_ENV, "2")
    resumed = sweep(config_file, uri)
    assert resumed.exit_code == 0, resumed.output
    assert f"{committed} already committed" in resumed.stderr
    assert len(s3.manifest(prefix)["pages"]) == 3
    statuses = [r["status"] for r in json.loads(s3.read(f"{prefix}/run.json"))["runs"]]
    assert statuses == ["died", "complete"]
    assert run("validate", uri).exit_code == 0
    assert rows_of(s3, prefix).equals(expected)


def test_a_driver_whose_lease_is_taken_over_stops_before_committing_more(
    s3, config_file, expected, tmp_path
):
    prefix = "taken"
    uri = s3.uri(prefix)
    ray_tmp = f"/tmp/cs3take{os.getpid()}"
    # A shard takes longer than a renewal, so the one after the takeover finds it lost.
    first = paused_driver(config_file, uri, tmp_path, 5, ray_tmp)
    try:
        committed_while_running(first, lambda: len(s3.manifest(prefix)["shards"]), 1)
        assert first.poll() is None, first.communicate()[1]
        # Another driver's lease, written over this one's as a takeover writes it.
        s3.write(
            f"{prefix}/.lock", json.dumps({"pid": 1, "host": "elsewhere", "token": "x"}).encode()
        )
        taken_over = len(s3.manifest(prefix)["shards"])
        _, stderr = first.communicate(timeout=120)
    finally:
        end_processes(ray_tmp, remove=True)
    assert first.returncode != 0
    assert "lost its lease on the output (another run took the lease over)" in stderr, stderr
    # At most the flush already under way when the renewal found out; never the rest.
    assert len(s3.manifest(prefix)["shards"]) <= taken_over + 1 < 6
    assert json.loads(s3.read(f"{prefix}/.lock"))["host"] == "elsewhere"  # left to its owner

    time.sleep(LEASE_SECONDS + 1)  # that owner never renews: its lease goes stale
    resumed = sweep(config_file, uri)
    assert resumed.exit_code == 0, resumed.output
    assert rows_of(s3, prefix).equals(expected)


def test_a_rerun_at_once_takes_the_lease_of_a_driver_killed_on_this_host(
    s3, config_file, expected, tmp_path, monkeypatch
):
    """SIGKILL by pid, then the same command at once: the lease, renewed moments ago and
    held for a minute, names a process of this host that has ended, so the rerun takes it
    over and resumes, as a local path's lock lets it."""
    prefix = "crashed"
    uri = s3.uri(prefix)
    ray_tmp = f"/tmp/cs3crash{os.getpid()}"
    first = held_driver(config_file, uri, tmp_path, 2, ray_tmp)  # shard 2 held until killed
    try:
        committed_while_running(first, lambda: s3.committed(prefix), 2)
        assert first.poll() is None, first.communicate()[1]
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
        end_processes(ray_tmp, remove=True)
    committed = s3.committed(prefix)
    assert committed == 2
    held = json.loads(s3.read(f"{prefix}/.lock"))  # the killed driver's lease, left behind
    assert (held["pid"], held["host"]) == (first.pid, socket.gethostname())

    monkeypatch.setenv(store_lease.LEASE_ENV, "60")  # far from stale: only its holder's end
    resumed = sweep(config_file, uri, "--set=run.lease_wait=0")  # no wait: taken at once
    assert resumed.exit_code == 0, resumed.output
    assert f"{committed} already committed" in resumed.stderr
    statuses = [r["status"] for r in json.loads(s3.read(f"{prefix}/run.json"))["runs"]]
    assert statuses == ["died", "complete"]
    assert f"{prefix}/.lock" not in s3.keys(f"{prefix}/")
    assert run("validate", uri).exit_code == 0
    assert rows_of(s3, prefix).equals(expected)


# --- The lease on its own -----------------------------------------------------------------


def test_the_lease_is_taken_refused_taken_over_and_released(s3):
    location = Location(s3.uri("leased"))
    first = store_lease.Lease(location).acquire()
    key = "leased/.lock"
    body = json.loads(s3.read(key))
    assert body["pid"] == os.getpid() and body["token"] == first.token
    with pytest.raises(ResultsError, match="in use by another clocksweep run"):
        store_lease.Lease(location).acquire()
    first.check()  # renewed by its thread: still ours after more than the lease's time
    time.sleep(LEASE_SECONDS * 1.5)
    first.check()
    assert json.loads(s3.read(key))["token"] == first.token

    # A holder that stops renewing (its thread stopped, as a killed driver's) is taken over.
    first._stop.set()
    first._thread.join()
    time.sleep(LEASE_SECONDS + 1.5)
    second = store_lease.Lease(location).acquire()
    assert json.loads(s3.read(key))["token"] == second.token
    with pytest.raises(ResultsError, match="lost its lease"):
        first.check()
    first.release()  # not ours any more: the other's lease stays
    assert json.loads(s3.read(key))["token"] == second.token
    second.release()
    assert key not in s3.keys("leased/")


def ended_process() -> tuple[int, str]:
    """The pid and recorded start of a process of this host that has ended (and been reaped)."""
    import subprocess

    child = subprocess.Popen(["sleep", "60"])
    started = store_lease.process_start(child.pid)
    child.kill()
    child.wait()
    return child.pid, started


@pytest.mark.parametrize(
    "holder, taken",
    [
        ("ended", True),  # its process gone
        ("reused", True),  # its pid now another process's: this one, started later
        ("no start", True),  # a lease of an earlier clocksweep, its pid gone
        ("alive", False),  # this process, which is running
        ("elsewhere", False),  # another host's: its pid says nothing here
    ],
)
def test_a_fresh_lease_is_taken_at_once_only_from_a_process_that_ended(
    s3, monkeypatch, holder, taken
):
    monkeypatch.setenv(store_lease.LEASE_ENV, "60")  # renewed just now: far from stale
    pid, started = ended_process()
    host, me = socket.gethostname(), store_lease.process_start(os.getpid())
    assert started is not None and me is not None
    body = {
        "ended": {"pid": pid, "host": host, "started": started},
        "reused": {"pid": os.getpid(), "host": host, "started": started},
        "no start": {"pid": pid, "host": host},
        "alive": {"pid": os.getpid(), "host": host, "started": me},
        "elsewhere": {"pid": pid, "host": "elsewhere", "started": started},
    }[holder]
    prefix = f"fresh-{holder.replace(' ', '-')}"
    s3.write(f"{prefix}/.lock", json.dumps({**body, "token": "theirs"}).encode())
    location = Location(s3.uri(prefix))
    if not taken:
        with pytest.raises(
            ResultsError, match=f"in use by another clocksweep run .pid {body['pid']}"
        ):
            store_lease.Lease(location).acquire()
        assert json.loads(s3.read(f"{prefix}/.lock"))["token"] == "theirs"
        return
    lease = store_lease.Lease(location).acquire()
    try:
        assert json.loads(s3.read(f"{prefix}/.lock"))["token"] == lease.token
    finally:
        lease.release()


def test_a_file_given_up_is_not_left_at_its_key(s3):
    """Closing an object's stream puts it at its key: a writer that aborts (its task failed)
    takes it away, so no reader of the shard files' keys finds a file of a failed attempt."""
    location = Location(s3.uri("aborted"))
    path = "shards/facts/shard-000000_deals-0-9.parquet"
    writer = ShardFileWriter(location, path, "facts")
    writer.write(pa.table({"n": pa.array(range(1000), pa.int64())}))
    writer.abort()
    assert f"aborted/{path}" not in s3.keys("aborted/")


# --- Bad input ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_bucket_that_does_not_exist(s3, config_file):
    uri = s3.uri("p", bucket="no-such-bucket")
    line = one_error_line(sweep(config_file, uri))
    assert uri in line and "bucket no-such-bucket does not exist" in line
    assert "no-such-bucket" not in {b["Name"] for b in s3.client.list_buckets()["Buckets"]}


@pytest.mark.parametrize("wrong", ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"])
def test_wrong_credentials(s3, config_file, monkeypatch, wrong):
    monkeypatch.setenv(wrong, "AKIAWRONGWRONGWRONG0")
    uri = s3.uri("creds")
    line = one_error_line(sweep(config_file, uri))
    assert uri in line and "credentials" in line
    assert not s3.keys("creds/")


def test_an_endpoint_that_refuses(config_file, monkeypatch):
    monkeypatch.setenv("CLOCKSWEEP_CONNECT_SECONDS", "5")
    uri = f"s3://{BUCKET}/p?endpoint_override=127.0.0.1:{free_port()}&scheme=http"
    line = one_error_line(sweep(config_file, uri), status=1)  # the store's failure, not input
    assert uri in line and "cannot reach" in line


# --- Credentials in the URI ----------------------------------------------------------------

# Small, and on threads: what is looked at is every line and file, not how the sweep is played.
CREDENTIALS_CONFIG = """
name = "creds"
seed = 7
deals = 2000
shard_size = 1000
[grid]
variant = ["standard"]
strategy = ["most"]
[run]
executor = "threads"
"""


def test_credentials_in_the_uri_are_used_and_never_shown_or_stored(s3, tmp_path, monkeypatch):
    """A key of the store's user in the URI's userinfo, with none in the environment, so that
    the run, validate and report connect with the URI's own; and a token in its query. Neither
    is in any line of a dry run, a run, a validate (also with an unexpected query parameter,
    and against a dead endpoint) or a report, nor in any file they write, on the store or here;
    the URI shown in their place (its credentials ***) is refused in one line, not tried."""
    key_id, secret = s3.new_key()
    token = "PLANTEDSESSIONTOKEN0123456789"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("CLOCKSWEEP_CONNECT_SECONDS", "5")
    userinfo = f"{quote(key_id, safe='')}:{quote(secret, safe='')}@"
    uri = s3.uri("creds").replace("s3://", f"s3://{userinfo}", 1)
    dead = uri.replace(s3.endpoint, f"127.0.0.1:{free_port()}")
    config = tmp_path / "creds.toml"
    config.write_text(CREDENTIALS_CONFIG)
    said = []

    def command(*args, status: int = 0, own_process: bool = False):
        # A store that never answers ends the process at its deadline: that one runs apart.
        if own_process:
            done = subprocess.run(
                faults.driver_command("none", *map(str, args)),
                env=faults.driver_env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        else:
            result = run(*args)
            stdout, stderr, code = result.stdout, result.stderr, result.exit_code
        said.append(stdout + stderr)
        assert code == status, stdout + stderr
        assert "Traceback" not in stdout + stderr, stderr
        return stdout, stderr

    command("run", config, f"--set=output={uri}", "--dry-run")
    shown = command("run", config, f"--set=output={uri}", "--verbose")[0].strip()
    assert "2/2 shards" in said[-1] and shown.startswith("s3://***:***@sweeps/creds?")
    assert "6/6" not in command("validate", uri)[0]
    command("report", uri, "--out", tmp_path / "report", "--no-plots")
    command("report", uri, "--out", tmp_path / "again", "--no-plots", "--json")
    command("validate", f"{uri}&session_token={token}", status=2)
    command("validate", dead, status=1, own_process=True)
    command("run", config, f"--set=output={dead}", status=1, own_process=True)
    refused = command("validate", shown, status=2)[1]
    assert "***" in refused and "AWS_ACCESS_KEY_ID" in refused

    written = [s3.read(key) for key in s3.keys("creds/")]
    written += [path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()]
    assert len(written) > 10 and (tmp_path / "report" / "report.html").exists()
    texts = said + [data.decode("utf-8", "replace") for data in written]
    for planted in {key_id, secret, quote(secret, safe=""), token}:
        assert not [text for text in texts if planted in text], planted


# --- A stop rule on the store -------------------------------------------------------------


def test_a_stop_rule_stops_at_the_same_deal_on_the_store(s3, tmp_path):
    """The same rule, on a local path and on the S3 prefix: the same stopping point and rows;
    on the store too, no object of a shard past the point is left."""
    text = CONFIG + '[stop]\nwin_rate = 0.03\ncomparisons = "decided"\n'
    config = tmp_path / "stop.toml"
    config.write_text(text)
    local = tmp_path / "local"
    assert sweep(config, str(local)).exit_code == 0
    stop = json.loads((local / "run.json").read_text())["stop"]
    assert stop["met"] and stop["stopped_at_shard"] < N_DEALS // 2000 - 1

    stored = sweep(config, s3.uri("stopped"))
    assert stored.exit_code == 0, stored.output
    assert json.loads(s3.read("stopped/run.json"))["stop"] == stop
    checked = run("validate", s3.uri("stopped"))
    assert checked.exit_code == 0, checked.output
    kept = stop["deals"]
    assert rows_of(s3, "stopped").equals(kernel_rows(text.replace(f"{N_DEALS}", f"{kept}", 1)))
    listed = {f"stopped/{f['path']}" for e in s3.entries("stopped") for f in e["files"]}
    on_store = {key for key in s3.keys("stopped/shards/") if key.endswith(".parquet")}
    assert on_store == listed
