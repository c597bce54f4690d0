"""An object store that fails under a command, with real parts: a moto S3 server in its own
process on loopback, reached directly or through a TCP proxy on loopback that the tests tell
to stop forwarding, to refuse every request for a moment, or to act as a given request
reaches the store (`proxy.Proxy`). A run that may hang is a driver in a process of its own,
watched from outside (and ended, if it hangs); the rest run in this process; validate and
report, where they may hang, in processes of their own. Every run plays on the thread
executor: the store's faults, not Ray, are what is tested.

- a store that stops answering mid-run: the run stops in one line (exit 1) soon after the
  lease is lost, not at a commit that never comes;
- a store that loses its state mid-run (the server reset, the bucket made anew): the lease is
  lost at its next renewal, and a plain rerun recovers the prefix;
- a prefix or directory whose run.json is gone but whose manifest is there: named by
  validate and the report, recovered by a plain rerun or --fresh, another config's refused;
  one whose records are both gone, its shard files left: taken up by a plain rerun;
- a store that refuses every request for two seconds: the shards in flight are retried
  after pauses, and none fails;
- validate and report on a store that refuses connections or never answers: one line, exit
  1, within the connect deadline;
- a file that vanishes while validate reads it: one line, not a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from faults import driver, driver_env, pausing
from helpers import clocksweep, free_port
from processes import end_processes
from proxy import Proxy
from rows import kernel_rows
from s3_store import HANG, Watched, last_error_line, rows_at, serving

from pipeline import ERROR_PREFIX
from pipeline.store import lease as store_lease
from pipeline.store.location import Location
from pipeline.sweep.cluster import CONNECT_SECONDS_ENV

BUCKET = "faults"
SHARD = 2000


def sweep_text(shards: int = 6) -> str:
    return f"""
name = "faults"
seed = 5151
deals = {shards * SHARD}
shard_size = {SHARD}
[grid]
variant = ["standard", "watch"]
strategy = ["most"]
[run]
executor = "threads"
"""


def sweep_config(tmp_path, shards: int = 6):
    """A config file of ``shards`` shards, and its rows as the kernel plays them."""
    path = tmp_path / f"faults-{shards}.toml"
    path.write_text(sweep_text(shards))
    return path, kernel_rows(sweep_text(shards))


# Renewed every 3 s, lost after 6 s unrenewed: long enough that a renewal slowed by a loaded
# machine does not lose it, short enough that a lost one shows within seconds.
LEASE = "9"
CONNECT = "4"  # seconds a store may take to answer (CLOCKSWEEP_CONNECT_SECONDS)


@pytest.fixture(scope="module")
def s3():
    with serving(BUCKET, **{store_lease.LEASE_ENV: LEASE}) as store:
        yield store


pytestmark = pytest.mark.usefixtures("s3")


@pytest.fixture
def proxy(s3):
    into = Proxy(("127.0.0.1", s3.port))
    yield into
    into.close()


def watched_driver(config_file, uri: str, ray_tmp: str, fault: str = "none", **env) -> Watched:
    environment = {"RAY_TMPDIR": ray_tmp, CONNECT_SECONDS_ENV: CONNECT, **env}
    return Watched(driver(config_file, uri, "ray.num_cpus=1", fault=fault, env=environment))


# --- A store that stops answering mid-run ----------------------------------------------


def test_a_store_that_stops_answering_stops_the_run(s3, proxy, tmp_path):
    """The proxy stops forwarding a second after the run says what it will play: no shard can
    be written, and no commit comes. The run stops in one line, exit 1, within seconds of
    the lease's loss (it hung, printing 0 shards done, for as long as it was let run)."""
    uri = s3.uri("silent", proxy.endpoint)
    ray_tmp = f"/tmp/csfs{os.getpid()}"
    config = tmp_path / "many.toml"  # 200 shards: far from done when the store goes silent
    config.write_text(sweep_text(200))
    run = watched_driver(config, uri, ray_tmp)
    try:
        assert run.wait_for("to play"), "".join(run.said)
        time.sleep(1)
        proxy.pause()
        paused = time.monotonic()
        code, stderr = run.end()
        took = time.monotonic() - paused
    finally:
        end_processes(ray_tmp, remove=True)
    assert code is not None, f"still running {HANG} s after the store stopped: {stderr[-800:]}"
    line = last_error_line(code, stderr)
    assert "lost its lease on the output" in line and "rerun the same command" in line, line
    # Lost within 6 s unrenewed (or 4 s unanswered, or a renewal later), then seconds to stop.
    assert took < 25, f"stopped {took:.0f} s after the store went silent"


def test_a_run_waiting_in_its_own_write_to_a_silent_store_is_ended(s3, proxy, tmp_path):
    """The proxy stops forwarding as the driver writes its manifest: the driver's own call
    waits on the store (pyarrow's client, on Linux, for minutes), so the run's loop never
    sees the lease lost. Once the renewals find it lost, the command ends anyway: one line,
    exit 1, within the connect deadline after."""
    uri = s3.uri("silent-write", proxy.endpoint)
    ray_tmp = f"/tmp/csfw{os.getpid()}"
    config = tmp_path / "many.toml"
    config.write_text(sweep_text(200))
    run = watched_driver(config, uri, ray_tmp)
    paused = []

    def at_the_manifest(request: bytes) -> None:
        if (
            not paused
            and request.split(b"\r\n", 1)[0].startswith(b"PUT ")
            and (b"/manifest.json" in request.split(b"\r\n", 1)[0])
        ):
            proxy.pause()
            paused.append(time.monotonic())

    try:
        assert run.wait_for("to play"), "".join(run.said)
        proxy.on_request = at_the_manifest
        code, stderr = run.end()
    finally:
        end_processes(ray_tmp, remove=True)
    assert paused, "the run wrote no manifest"
    took = time.monotonic() - paused[0]
    assert code is not None, f"still running {HANG} s after the store stopped: {stderr[-800:]}"
    line = last_error_line(code, stderr)
    assert "lost its lease on the output" in line and "rerun the same command" in line, line
    # Lost within 6 s unrenewed (a renewal later at most), then the 4 s deadline.
    assert took < 30, f"ended {took:.0f} s after the store went silent"


# --- A store that loses its state mid-run ----------------------------------------------


def test_a_store_that_loses_its_state_loses_the_lease_at_once(s3, tmp_path):
    """The server reset (and the bucket made anew) once the run has committed a shard: the
    next renewal is answered NoSuchKey, which loses the lease then, not two thirds of a lease
    later (the run went on committing meanwhile, with no lease). The run leaves a manifest
    listing shards whose files are gone, and no run.json: a plain rerun recovers it."""
    pids, prefix = tmp_path / "pids", "reset"
    pids.mkdir()
    uri = s3.uri(prefix)
    config, expected = sweep_config(tmp_path, 30)  # longer than a few renewals
    reset = []

    def reset_after_a_commit() -> None:
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            try:
                body = s3.client.get_object(Bucket=BUCKET, Key=f"{prefix}/manifest.json")["Body"]
                if json.loads(body.read())["shards"]:
                    break
            except Exception:  # noqa: BLE001 (not written yet)
                pass
            time.sleep(0.05)
        s3.reset()
        reset.append(time.monotonic())

    threading.Thread(target=reset_after_a_commit, daemon=True).start()
    result = clocksweep("run", config, f"--set=output={uri}", task=pausing(0.3, str(pids)))
    assert reset, result.output
    took = time.monotonic() - reset[0]
    line = last_error_line(result.exit_code, result.stderr, result.stdout)
    # The renewal meets the key gone, or the bucket itself if it comes between the reset and
    # the bucket made anew: either is the store's word that the lease is not there.
    gone = (f".lock is gone from the store ({code})" for code in ("NoSuchKey", "NoSuchBucket"))
    assert "lost its lease" in line and any(text in line for text in gone), line
    assert took < 3 + 12, f"stopped {took:.0f} s after the reset"  # a renewal, then the stop

    rerun = clocksweep("run", config, f"--set=output={uri}")
    assert rerun.exit_code == 0, rerun.output
    assert rows_at(uri).equals(expected)
    assert clocksweep("validate", uri).exit_code == 0


# --- A run record lost, its manifest or shard files left --------------------------------


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_manifest_without_its_run_record_is_recovered(s3, tmp_path, where):
    if where == "s3":
        out = s3.uri("norun")
        location = Location(out)
    else:
        out = str(tmp_path / "norun")
        location = Location(out)
    config_file, expected = sweep_config(tmp_path)
    assert clocksweep("run", config_file, f"--set=output={out}").exit_code == 0
    entries = json.loads(Location(out).fs.open_input_stream(location.full("manifest.json")).read())
    lost = entries["shards"][2]["files"][0]["path"]
    location.delete("run.json")
    location.delete(lost)

    for command in (["validate", out], ["report", out, "--out", tmp_path / "report"]):
        said = clocksweep(*command)
        assert said.exit_code == 2 and "Traceback" not in said.output, said.output
        (line,) = said.stderr.strip().splitlines()
        assert "manifest.json is there but not run.json" in line and "rerun" in line, line

    other = clocksweep("run", config_file, f"--set=output={out}", "--set=seed=1")
    assert other.exit_code == 2, other.output
    assert "another config's" in other.stderr and "--fresh" in other.stderr
    assert location.kind("run.json") == "missing"  # nothing written

    rerun = clocksweep("run", config_file, f"--set=output={out}")
    assert rerun.exit_code == 0, rerun.output
    assert "run.json is missing" in rerun.stderr and "1 played" in rerun.stderr, rerun.stderr
    assert rows_at(out).equals(expected)
    assert clocksweep("validate", out).exit_code == 0

    location.delete("run.json")
    fresh = clocksweep("run", config_file, f"--set=output={out}", "--set=seed=1", "--fresh")
    assert fresh.exit_code == 0, fresh.output
    assert rows_at(out).equals(kernel_rows(sweep_text(), seed=1))
    assert clocksweep("validate", out).exit_code == 0

    # Both records lost, the shard files left: taken up (and removed) by a plain rerun; but
    # not beside a file clocksweep does not write.
    location.delete("run.json")
    location.delete("manifest.json")
    with location.fs.open_output_stream(location.full("notes.txt")) as notes:
        notes.write(b"not clocksweep's")
    refused = clocksweep("run", config_file, f"--set=output={out}")
    assert refused.exit_code == 2 and "not a clocksweep results directory" in refused.stderr
    location.delete("notes.txt")
    taken_up = clocksweep("run", config_file, f"--set=output={out}")
    assert taken_up.exit_code == 0, taken_up.output
    assert "removed 12 file(s) of an earlier run" in taken_up.stderr, taken_up.stderr
    assert rows_at(out).equals(expected)


# --- A store that refuses every request for two seconds -------------------------------


def test_a_short_outage_does_not_fail_shards(s3, proxy, tmp_path):
    """Each shard pauses after its first batch; while the first two pause, the store refuses
    every request for two seconds. Their attempts fail at once as the outage goes on; the
    retries come after pauses (1, then 2 s), so none fails for good (before, all four
    attempts were spent within the outage)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    uri = s3.uri("outage", proxy.endpoint)
    config_file, expected = sweep_config(tmp_path)

    def outage() -> None:
        deadline = time.monotonic() + HANG
        while not (pids / "shard-0.attempt-1.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        proxy.fail()
        time.sleep(2)
        proxy.resume()

    threading.Thread(target=outage, daemon=True).start()
    result = clocksweep("run", config_file, f"--set=output={uri}", task=pausing(0.5, str(pids)))
    assert result.exit_code == 0, result.stderr[-2000:]
    assert "failed, attempt 1 of 4" in result.stderr and "retrying in 1 s" in result.stderr
    assert "giving up" not in result.stderr
    assert rows_at(uri).equals(expected)


# --- validate and report on a store that refuses or never answers ---------------------


def test_validate_and_report_on_a_store_down_or_silent(s3, proxy, tmp_path):
    proxy.pause()  # takes connections, answers nothing
    stores = {
        "refused": s3.uri("any", f"127.0.0.1:{free_port()}"),
        "silent": s3.uri("any", proxy.endpoint),
    }
    seconds = 3
    problems = []
    for kind, uri in stores.items():
        for command in (["validate", uri], ["report", uri, "--out", str(tmp_path / kind)]):
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-c", "from pipeline.cli import cli; cli()", *command],
                env=driver_env({CONNECT_SECONDS_ENV: str(seconds)}),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its group: the report's plots process with it
            )
            try:
                stdout, stderr = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # (or a process it started holds its output)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                problems.append(f"{kind} {command[0]}: still waiting after 60 s")
                continue
            took = time.monotonic() - started
            lines = stderr.strip().splitlines()
            if "Traceback" in stderr or proc.returncode != 1 or len(lines) != 1:
                problems.append(f"{kind} {command[0]}: exit {proc.returncode}: {stderr[-600:]!r}")
            elif not lines[0].startswith(ERROR_PREFIX) or "any" not in lines[0]:
                problems.append(f"{kind} {command[0]}: {lines[0]!r}")
            elif took > seconds + 15:  # the deadline, and the command's start
                problems.append(f"{kind} {command[0]}: {took:.0f} s")
    assert not problems, "\n".join(problems)


# --- A file that vanishes while validate reads it -------------------------------------


def test_a_file_that_vanishes_while_validate_reads_it(s3, proxy, tmp_path):
    """The object is deleted as validate comes back to it, having read its footer, to hash
    it (as a --fresh run's clean-up deletes it under a validate): one line, exit 1."""
    uri = s3.uri("vanish", proxy.endpoint)
    config_file, _ = sweep_config(tmp_path)
    assert clocksweep("run", config_file, f"--set=output={uri}").exit_code == 0
    location = Location(uri)
    manifest = json.loads(location.fs.open_input_stream(location.full("manifest.json")).read())
    key = f"vanish/{manifest['shards'][3]['files'][0]['path']}".encode()
    seen = []

    def on_request(data: bytes) -> None:
        method, _, rest = data.partition(b" ")
        if not rest.startswith(f"/{BUCKET}/".encode() + key):
            return
        if seen and b"range: bytes=0-" in data.lower():  # the hash's read, after the footer's
            s3.client.delete_object(Bucket=BUCKET, Key=key.decode())
            proxy.on_request = None
        elif method == b"GET":
            seen.append(data)

    proxy.on_request = on_request
    checked = clocksweep("validate", uri)
    assert checked.exception is None or isinstance(checked.exception, SystemExit), repr(
        checked.exception
    )
    line = last_error_line(checked.exit_code, checked.stderr, checked.stdout)
    assert "changed or failed while validate read them" in line, line
