"""A rerun on an S3 output another run's lease holds (pipeline/sweep/hold.py), on a moto S3
server on loopback, the shards played on threads (what is tested is the driver, not Ray):

- a driver killed on another host (its lease left behind, naming that host): the rerun waits
  for the lease to lapse, with a countdown, takes it over and ends with an uninterrupted
  run's rows;
- a lease another host keeps renewing: refused in one line, exit 2, at once with
  ``run.lease_wait = 0`` and within a small bound otherwise; nothing written;
- a live driver on this host: refused at once, in one line, with no wait;
- Ctrl-C while the rerun waits: it ends as a signal ends a run, nothing written.

A driver killed on this host and rerun at once is test_object_store.py's (the lease taken
over at once).
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import pytest
from faults import committed_while_running, driver, held_driver
from helpers import sweep_cli
from rows import kernel_rows
from s3_store import Watched, last_error_line, rows_at, serving

from pipeline.store import lease as store_lease
from pipeline.sweep import hold

BUCKET = "waits"
LEASE = "3"  # the rerun's lease time: a lease unrenewed for 3 s has lapsed
DRIVER_LEASE = "9"  # a driver's: renewed every 3 s, so a loaded machine does not lose it
THREADS = "run.executor=threads"
CONFIG = """
name = "waits"
seed = 3131
deals = 6000
shard_size = 1000
[grid]
variant = ["standard", "watch"]
strategy = ["most"]
"""


@pytest.fixture(scope="module")
def s3():
    with serving(BUCKET) as store:
        yield store


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "waits.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def lease_time(monkeypatch):
    monkeypatch.setenv(store_lease.LEASE_ENV, LEASE)


def committed(s3, prefix: str) -> int:
    return len(json.loads(s3.read(f"{prefix}/manifest.json"))["shards"])


def statuses(s3, prefix: str) -> list[str]:
    return [run["status"] for run in json.loads(s3.read(f"{prefix}/run.json"))["runs"]]


def countdown_of(uri: str, host: str, pid) -> str:
    return f"output {uri} was in use by a run on {host} (pid {pid}); its lease lapses in "


def killed_mid_sweep(s3, config, prefix: str, tmp_path) -> int:
    """A driver killed by SIGKILL once two shards are committed (it holds the third until
    then); gives its pid."""
    pids = tmp_path / "pids"
    pids.mkdir()
    first = held_driver(config, s3.uri(prefix), pids, 2, {store_lease.LEASE_ENV: DRIVER_LEASE})
    try:
        committed_while_running(first, lambda: committed(s3, prefix), 2)
        assert first.poll() is None, first.communicate()[1]
    finally:
        first.kill()
        first.wait(timeout=30)
    return first.pid


class Renewing:
    """A lease of another host's run on ``prefix``, renewed every quarter second until
    stopped, as a live driver there renews it."""

    def __init__(self, s3, prefix: str):
        self.s3, self.key = s3, f"{prefix}/.lock"
        self.body = json.dumps({"pid": 4242, "host": "elsewhere", "token": "theirs"}).encode()
        self.stopped = threading.Event()
        s3.write(self.key, self.body)
        self.thread = threading.Thread(target=self.renew, daemon=True)
        self.thread.start()

    def renew(self) -> None:
        while not self.stopped.wait(0.25):
            self.s3.write(self.key, self.body)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


# --- A driver killed on another host --------------------------------------------------------


def test_a_rerun_waits_out_the_lease_of_a_driver_killed_on_another_host(
    s3, config, tmp_path, lease_time
):
    prefix = "elsewhere"
    uri = s3.uri(prefix)
    pid = killed_mid_sweep(s3, config, prefix, tmp_path)
    done = committed(s3, prefix)
    assert 2 <= done < 6
    # Its lease as a driver of another host leaves it: that host's pid says nothing here.
    held = json.loads(s3.read(f"{prefix}/.lock"))
    s3.write(f"{prefix}/.lock", json.dumps({**held, "host": "elsewhere"}).encode())

    resumed = sweep_cli(config, uri, THREADS)
    assert resumed.exit_code == 0, resumed.output
    assert countdown_of(uri, "elsewhere", pid) in resumed.stderr, resumed.stderr
    assert "waiting; Ctrl-C to stop" in resumed.stderr
    assert f"the lease of the run on elsewhere (pid {pid}) lapsed" in resumed.stderr
    assert f"{done} already committed" in resumed.stderr
    assert statuses(s3, prefix) == ["died", "complete"]
    assert f"{prefix}/.lock" not in s3.keys(f"{prefix}/")
    assert rows_at(uri).equals(kernel_rows(CONFIG))


# --- A lease another host keeps renewing ----------------------------------------------------


@pytest.mark.parametrize("bound", [0, 2])
def test_a_lease_kept_renewed_elsewhere_is_refused_within_the_bound(s3, config, lease_time, bound):
    prefix = f"renewed-{bound}"
    uri = s3.uri(prefix)
    holder = Renewing(s3, prefix)
    try:
        began = time.monotonic()
        refused = sweep_cli(config, uri, THREADS, f"run.lease_wait={bound}")
        took = time.monotonic() - began
    finally:
        holder.stop()
    line = last_error_line(refused.exit_code, refused.stderr, refused.stdout, status=2)
    assert f"{uri} is in use by another clocksweep run (pid 4242 on elsewhere" in line
    assert "wait for it, or choose another output" in line
    if bound == 0:  # today's refusal, at once
        assert refused.stderr.strip().splitlines() == [line]
    else:
        assert countdown_of(uri, "elsewhere", 4242) in refused.stderr
        assert "still renewed after this run waited" in line and "run.lease_wait: 2 s" in line
        assert took < bound + hold.CLOCK_SLACK + hold.LOOK_SECONDS + 3, took
    assert s3.keys(f"{prefix}/") == [f"{prefix}/.lock"]  # nothing written
    assert s3.read(f"{prefix}/.lock") == holder.body


def test_ctrl_c_ends_the_wait_nothing_written(s3, config, lease_time):
    prefix = "interrupted"
    uri = s3.uri(prefix)
    holder = Renewing(s3, prefix)
    try:
        rerun = Watched(
            driver(
                config,
                uri,
                THREADS,
                "run.lease_wait=60",
                env={store_lease.LEASE_ENV: LEASE},
            )
        )
        assert rerun.wait_for("waiting; Ctrl-C to stop"), "".join(rerun.said)
        rerun.proc.send_signal(signal.SIGINT)
        code, stderr = rerun.end()
    finally:
        holder.stop()
    assert code == 128 + signal.SIGINT, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"clocksweep: interrupted by SIGINT while waiting for output {uri} to be free; "
        "nothing was written"
    )
    assert s3.keys(f"{prefix}/") == [f"{prefix}/.lock"]
    assert s3.read(f"{prefix}/.lock") == holder.body


# --- A live driver on this host -------------------------------------------------------------


def test_a_live_driver_on_this_host_is_refused_at_once(s3, config, tmp_path, monkeypatch):
    prefix = "live"
    uri = s3.uri(prefix)
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {store_lease.LEASE_ENV: DRIVER_LEASE}
    first = held_driver(config, uri, pids, 1, env)  # shard 1 held until it is killed
    try:
        committed_while_running(first, lambda: committed(s3, prefix), 1)
        assert first.poll() is None, first.communicate()[1]
        monkeypatch.setenv(store_lease.LEASE_ENV, DRIVER_LEASE)  # the lease as it holds it
        refused = sweep_cli(config, uri, THREADS)
        assert first.poll() is None, first.communicate()[1]
    finally:
        first.kill()
        first.wait(timeout=30)
    line = last_error_line(refused.exit_code, refused.stderr, refused.stdout, status=2)
    assert f"in use by another clocksweep run (pid {first.pid} on {socket.gethostname()}" in line
    assert refused.stderr.strip().splitlines() == [line]  # no countdown: no wait
