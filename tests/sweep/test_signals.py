"""A run stopped by signals ends, whatever its threads are doing: at many moments, with
repeated signals, it exits 128 + the first signal's number within seconds, with Ray's
processes ended and its lock released; a cleanup that can never finish is cut short by the
deadline; a driver killed outright has its Ray instance ended by the watchdog; and while
Ray starts, the driver's threads play no further past a stop rule's prefix than Ray's
workers would."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib

import pytest
from faults import driver_env
from processes import end_processes, processes_mentioning

from pipeline.store.location import Location
from pipeline.store.plan import plan_shards
from pipeline.sweep import config as sweep_config
from pipeline.sweep import driver as sweep_driver
from pipeline.sweep.early import EarlyPlayer
from pipeline.sweep.processes import command_line
from pipeline.sweep.task import ShardJob

SEED = 5
CONFIG = f"""
name = "signals"
seed = {SEED}
deals = 1_600_000
shard_size = 50_000
[grid]
variant = ["standard", "one_swap"]
strategy = ["random"]
finale = ["up"]
depth = ["top"]
"""
# The `clocksweep` command as installed runs it (its entry point, with nothing before it).
COMMAND = [sys.executable, "-c", "from pipeline.cli import main; main()"]


def clocksweep(*args: str, marker: str, **env) -> subprocess.Popen:
    return subprocess.Popen(
        [*COMMAND, *args],
        env=driver_env({"RAY_TMPDIR": marker, **env}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def gone_within(marker: str, seconds: float) -> list[int]:
    """The processes still mentioning ``marker`` after waiting up to ``seconds`` for none."""
    until = time.monotonic() + seconds
    while (left := processes_mentioning(marker)) and time.monotonic() < until:
        time.sleep(0.2)
    return left


def test_a_run_stopped_at_many_moments_by_repeated_signals_ends(tmp_path):
    """SIGINT, SIGINT again, then SIGTERM, at moments from the command's start (its imports)
    through Ray's start (the driver's threads playing) to its shards on Ray: each time the
    command exits 130 within seconds, in one line, and Ray's processes end; the next run
    into the same directory is not refused (the lock is free) and resumes."""
    config_file = tmp_path / "signals.toml"
    # Far more than 5 s of play, so that the last moment still finds the run playing.
    config_file.write_text(CONFIG.replace("1_600_000", "16_000_000"))
    out, marker = tmp_path / "out", f"/tmp/cssig{os.getpid()}"
    try:
        for first in (0.5, 1.5, 3.0, 5.0):
            proc = clocksweep("run", str(config_file), f"--set=output={out}", marker=marker)
            time.sleep(first)
            for number in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
                if proc.poll() is None:
                    proc.send_signal(number)
                time.sleep(0.3)
            _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 130, (first, stderr)
            assert stderr.splitlines()[-1].startswith("clocksweep: interrupted by SIGINT"), stderr
            assert "Traceback" not in stderr and "in use" not in stderr, stderr
            assert gone_within(marker, 20) == [], first
    finally:
        end_processes(marker, remove=True)


STUCK_CLEANUP = """
import threading, time
from pipeline.sweep.signals import end_by_deadline, stopped_by_signals
end_by_deadline()
with stopped_by_signals():
    try:
        print("ready", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        print("cleaning up", flush=True)  # the first signal handled: the test sends more
        threading.Event().wait()  # a cleanup that never finishes
"""


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_cleanup_that_never_finishes_is_ended_by_the_deadline(first):
    """The first signal sets the deadline; later ones, even SIGTERM, are ignored (they cut
    no cleanup short); at the deadline the process exits 128 + the first's number, in one
    line."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_CLEANUP],
        env=driver_env({"CLOCKSWEEP_STOP_SECONDS": "2"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n"
    began = time.monotonic()
    proc.send_signal(first)
    # Only once the first is handled: signals pending together are handled in the order of
    # their numbers, so a SIGINT sent before the process got to a first SIGTERM came first.
    assert proc.stdout.readline() == "cleaning up\n"
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    took = time.monotonic() - began
    assert proc.returncode == 128 + first, stderr
    assert 1.8 < took < 15, took
    assert stderr.strip().splitlines() == [
        f"clocksweep: error: interrupted by {first.name}, and ended: its cleanup did not "
        "finish within 2 s; the committed shards are kept: rerun the same command to resume"
    ]


STUCK = threading.Event()  # set once a thread is stuck in `StuckCells`


class StuckCells(tuple):
    """Cells whose count is never given: a job of them waits for ever as it begins (as a
    thread caught on a lock no one will release)."""

    def __len__(self):
        STUCK.set()
        threading.Event().wait()


def test_the_early_player_stops_within_its_wait_when_a_thread_is_stuck(tmp_path):
    cells = sweep_config.from_dict(tomllib.loads(CONFIG), source="test").cells
    job = ShardJob(
        location=Location(str(tmp_path)),
        shard=plan_shards(0, 1000, 1000)[0],
        seed=SEED,
        cells=StuckCells(cells[:1]),
        record="deals",
        provenance={"test": "stuck"},
        attempt=1,
    )
    player = EarlyPlayer(iter([((0, 0), job)]), threads=1)
    assert STUCK.wait(60), "the player's thread never began the unit"
    ended = []
    stopper = threading.Thread(target=lambda: ended.append(player.stop(seconds=2)), daemon=True)
    began = time.monotonic()
    stopper.start()
    stopper.join(60)
    assert ended == [False], "stop() did not return"
    assert time.monotonic() - began < 20


def test_a_driver_killed_outright_has_its_ray_instance_ended(tmp_path):
    """SIGKILL of the driver while Ray starts, and once its shards are on Ray: the watchdog
    ends every process of the instance at once (Ray's agents outlived the driver by a
    minute)."""
    config_file = tmp_path / "signals.toml"
    config_file.write_text(CONFIG.replace("1_600_000", "16_000_000"))
    marker = f"/tmp/cskill{os.getpid()}"
    try:
        for moment in ("starting", "up"):
            proc = clocksweep(
                "run", str(config_file), f"--set=output={tmp_path / moment}", marker=marker
            )
            until = time.monotonic() + 120
            while time.monotonic() < until and proc.poll() is None:
                if moment == "starting" and processes_mentioning(marker):
                    break
                if moment == "up" and any(
                    b"ray::" in command_line(pid) for pid in processes_mentioning(marker)
                ):
                    break
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()[1]
            proc.kill()
            proc.communicate()
            assert gone_within(marker, 10) == [], moment
    finally:
        end_processes(marker, remove=True)


def test_the_driver_plays_no_further_past_a_stop_rules_prefix_while_ray_starts(tmp_path):
    """A stop rule that holds after a few shards: the driver's threads, while Ray starts,
    begin no shard past the bound the driver keeps to once Ray is up (two in flight per CPU,
    twice over), where they played every shard of the sweep."""
    config_file = tmp_path / "stop.toml"
    config_file.write_text(
        CONFIG.replace("deals = 1_600_000", "deals = 400_000").replace("50_000", "2_000")
        + "[ray]\nnum_cpus = 2\n[stop]\nwin_rate = 0.03\n"
    )
    marker = f"/tmp/csstop{os.getpid()}"
    try:
        proc = clocksweep(
            "run", str(config_file), f"--set=output={tmp_path / 'out'}", marker=marker
        )
        _, stderr = proc.communicate(timeout=240)
    finally:
        end_processes(marker, remove=True)
    assert proc.returncode == 0, stderr
    logged = (tmp_path / "out" / "run.log").read_text()  # how it played: the run's log
    played = re.search(r"(\d+) shard\(s\) played while Ray started(?:, (\d+) more begun)?", logged)
    bound = sweep_driver.STOP_AHEAD * sweep_driver.in_flight_for(2)
    began = int(played.group(1)) + int(played.group(2) or 0) if played else 0
    assert began <= bound, stderr
    stopped = re.search(r"stopped after shard (\d+)", stderr)
    assert stopped is not None and int(stopped.group(1)) < 200 - bound, stderr


def test_a_signal_in_a_hook_the_parent_runs_after_a_child_is_made_waits():
    """A fork's hooks (os.register_at_fork: filelock's `_resume_parent_after_fork`, in Ray's
    start) run in the parent, where an exception is "ignored" with its traceback printed: a
    signal found in one waits. Hooks are known by name, as the libraries name them."""
    import sys

    from pipeline.sweep.signals import in_unsafe_code

    seen = []

    def resume_parent_after_fork() -> None:
        seen.append(in_unsafe_code(sys._getframe()))

    os.register_at_fork(after_in_parent=resume_parent_after_fork)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert seen == [True], seen
    assert not in_unsafe_code(sys._getframe())  # a test's own frame is not
