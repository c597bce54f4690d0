"""The shards a driver plays while the local Ray instance it starts comes up (`sweep.early`),
and shards played in pieces (the sweep's end, and the early player's last shard): the same
bytes as Ray's workers write for a shard played whole, committed by the driver like theirs,
and nothing of them left when the run is stopped before Ray is up."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import tomllib
from pathlib import Path

import pytest
from faults import driver
from processes import end_processes, processes_mentioning
from rows import kernel_rows, read_rows

from pipeline.store.location import Location
from pipeline.store.plan import plan_shards
from pipeline.sweep import config as sweep_config
from pipeline.sweep import driver as sweep_driver
from pipeline.sweep import early
from pipeline.sweep.early import EarlyPlayer, Partial
from pipeline.sweep.task import (
    ShardJob,
    assemble,
    batch_starts,
    piece_bounds,
    play_piece,
    write_shard,
)

SEED = 11
CONFIG = f"""
name = "early"
seed = {SEED}
deals = 40_000
shard_size = 1000
[grid]
variant = ["standard", "one_swap"]
strategy = ["random"]
finale = ["up"]
depth = ["top"]
"""
PLAYED = re.compile(r"(\d+) shard\(s\) played while Ray started")


def sha256s(out: Path) -> list[str]:
    shards = json.loads((out / "manifest.json").read_text())["shards"]
    return [f["sha256"] for entry in shards for f in entry["files"]]


def last_run(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())["runs"][-1]


def run_driver(config_file: Path, out: Path, marker: str, *sets: str, **env) -> str:
    try:
        proc = driver(config_file, out, *sets, env={"RAY_TMPDIR": marker, **env})
        _, stderr = proc.communicate(timeout=240)
    finally:
        end_processes(marker, remove=True)
    assert proc.returncode == 0, stderr
    return stderr


def test_shards_played_while_ray_starts_are_the_bytes_ray_writes(tmp_path):
    """A driver that starts its own instance plays its first shards itself; the files are
    byte for byte those of a run that leaves every shard to Ray, and the rows the kernel's."""
    config_file = tmp_path / "early.toml"
    config_file.write_text(CONFIG)
    marker = f"/tmp/csearly{os.getpid()}"
    said = run_driver(config_file, tmp_path / "on", marker)
    with_early = (tmp_path / "on" / "run.log").read_text()  # how it played: the run's log
    assert PLAYED.search(said) is None, said  # ... not the user's terminal
    # Ray's own messages too: its start (and, with token auth on, its warning) are logged.
    assert "Started a local Ray instance" not in said and "Token authentication" not in said
    assert "ray: info: Started a local Ray instance" in with_early, with_early
    # The terminal's first line, before Ray's seconds-long start, says what is happening.
    first = said.strip().splitlines()[0]
    assert first.startswith("clocksweep: starting a local Ray instance (5-15 s, the first "), said
    played = PLAYED.search(with_early)
    # On a busy machine the threads, at the lowest priority until Ray is up, may finish none
    # before Ray does; those they began they finish then (shards of one batch).
    begun = re.search(r", \d+ more begun", with_early)
    assert played and (int(played.group(1)) >= 1 or begun), with_early
    run_driver(config_file, tmp_path / "off", marker, **{early.ENABLED_ENV: "0"})
    without = (tmp_path / "off" / "run.log").read_text()
    assert PLAYED.search(without) is None, without
    assert sha256s(tmp_path / "on") == sha256s(tmp_path / "off")
    assert read_rows(tmp_path / "on" / "shards" / "deals").equals(kernel_rows(CONFIG))
    record = json.loads((tmp_path / "on" / "run.json").read_text())["runs"][-1]
    assert record["status"] == "complete" and record["shards_played"] == 40
    nodes = {
        entry["node_id"]
        for entry in json.loads((tmp_path / "on" / "manifest.json").read_text())["shards"]
    }
    assert len(nodes) == 1 and None not in nodes  # the early shards carry the local node too


def caught_while_ray_starts(config_file: Path, out: Path, marker: str):
    """A driver caught once its threads have written a batch and while Ray is not up yet;
    None (the driver killed, its processes ended) if Ray was up first."""
    proc = driver(config_file, out, env={"RAY_TMPDIR": marker})
    partial = out / "shards" / ".partial"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and any(p.is_file() for p in partial.rglob("*")):
            break
        time.sleep(0.02)
    if proc.poll() is None and last_run(out)["ray"] is None:
        return proc
    proc.kill()
    proc.communicate()
    end_processes(marker)
    return None


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_run_stopped_while_ray_starts_leaves_nothing_and_resumes(tmp_path, stop):
    """A signal while the driver plays and Ray is not up yet (SIGTERM then meets the handler
    Ray sets as it starts): exit 128 + its number, no shard file and no process of Ray's left
    (the early shards were never committed), the run recorded as interrupted, and a rerun
    plays every shard."""
    config_file = tmp_path / "early.toml"
    config_file.write_text(CONFIG.replace("deals = 40_000", "deals = 400_000"))
    marker = f"/tmp/csearlyint{os.getpid()}"
    try:
        # On a busy machine Ray can be up before the threads, at the lowest priority, write
        # their first batch: the moment is then tried again, in a new directory.
        for attempt in range(3):
            out = tmp_path / f"out-{attempt}"
            proc = caught_while_ray_starts(config_file, out, marker)
            if proc is not None:
                break
        assert proc is not None, "three times, Ray was up before the threads wrote a batch"
        proc.send_signal(stop)
        _, stderr = proc.communicate(timeout=120)
        gone_by = time.monotonic() + 15  # Ray's processes end as it stops them, not at once
        while (left := processes_mentioning(marker)) and time.monotonic() < gone_by:
            time.sleep(0.2)
    finally:
        end_processes(marker, remove=True)
    assert proc.returncode == 128 + stop, stderr
    assert f"interrupted by {stop.name}" in stderr and "Traceback" not in stderr
    assert left == [], left
    assert not [p for p in (out / "shards").rglob("*") if p.is_file()]
    assert json.loads((out / "manifest.json").read_text())["shards"] == []
    assert last_run(out)["status"] == "interrupted"
    # The rerun on the thread executor: what the stop left (nothing), not Ray, is what it
    # reads; a rerun on Ray would start a second instance for the same finding.
    stderr = run_driver(config_file, out, marker, "run.executor=threads")
    assert "400 of 400 shards to play (0 already committed)" in stderr
    assert read_rows(out / "shards" / "deals").equals(
        kernel_rows(CONFIG.replace("deals = 40_000", "deals = 400_000"))
    )


def job(location: Location, index: int, shard_size: int = 1000) -> ShardJob:
    cells = sweep_config.from_dict(tomllib.loads(CONFIG), source="test").cells
    return ShardJob(
        location=location,
        shard=plan_shards(0, (index + 1) * shard_size, shard_size)[index],
        seed=SEED,
        cells=tuple(cells)[:1],
        record="deals",
        provenance={"test": "early"},
        attempt=1,
    )


def finished(player: EarlyPlayer, count: int, seconds: float = 60) -> list:
    deadline, got = time.monotonic() + seconds, []
    while len(got) < count and time.monotonic() < deadline:
        got += player.take()
        time.sleep(0.01)
    return got


def numbered_units(location: Location, asked: list):
    """Units (shard index, 0) of small shards, made as they are asked for (noted in ``asked``)."""
    for index in range(1000):
        asked.append(index)
        yield (index, 0), job(location, index)


def test_the_player_plays_in_order_until_closed(tmp_path):
    """Entries as `write_shard` makes them, in order; after `close` no unit is asked for."""
    asked = []
    units = numbered_units(Location(str(tmp_path / "r")), asked)
    player = EarlyPlayer(units)
    got = finished(player, 2)
    # While Ray starts, the thread plays at the lowest priority: Ray's processes come first.
    (thread,) = player._threads
    assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == early.NICE_WHILE_RAY_STARTS
    player.close()
    player.wait(60)  # the unit being played when closed is finished
    # Its thread ended: nothing can ask for a unit after this, whatever the machine's load.
    assert not thread.is_alive()
    got += player.take()
    assert len(asked) < 1000 and player.take() == []
    assert [unit for unit, _ in got] == [(index, 0) for index in asked]
    assert all(not isinstance(result, BaseException) for _, result in got)
    alone = write_shard(job(Location(str(tmp_path / "alone")), 0))
    assert got[0][1].files == alone.files


def test_threads_take_each_unit_once_and_a_dropped_unit_ends_alone(tmp_path):
    """Two threads: every unit asked for is played once, as `write_shard` plays it; `drop`
    ends one unit at its next batch while the other thread's plays on to its end."""
    asked = []
    units = numbered_units(Location(str(tmp_path / "r")), asked)
    player = EarlyPlayer(units, threads=2)
    got = finished(player, 6)
    assert all(
        os.getpriority(os.PRIO_PROCESS, thread.native_id) == early.NICE_WHILE_RAY_STARTS
        for thread in player._threads
    )
    player.close()
    player.wait(60)
    got += player.take()
    assert sorted(unit for unit, _ in got) == [(index, 0) for index in asked]
    entries = dict(got)
    for index in (0, asked[-1]):
        alone = write_shard(job(Location(str(tmp_path / f"alone{index}")), index))
        assert entries[index, 0].files == alone.files

    big = [job(Location(str(tmp_path / "big")), index, shard_size=3_000_000) for index in (0, 1)]
    player = EarlyPlayer(iter([((index, 0), big[index]) for index in (0, 1)]), threads=2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and player.started < 2:
        time.sleep(0.005)
    player.drop((0, 0))
    results = dict(finished(player, 2, seconds=120))
    assert isinstance(results[0, 0], early.Stopped)
    whole = write_shard(job(Location(str(tmp_path / "whole")), 1, shard_size=3_000_000))
    assert results[1, 0].files == whole.files


def playing_one_big_unit(tmp_path) -> tuple[ShardJob, EarlyPlayer]:
    """A player given one shard of six batches, once it has begun it."""
    big = job(Location(str(tmp_path / "r")), 0, shard_size=3_000_000)
    player = EarlyPlayer(iter([((0, 0), big)]))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and player.started == 0:
        time.sleep(0.005)
    return big, player


def test_a_stopped_unit_leaves_no_file_and_a_failure_is_handed_back(tmp_path):
    """`stop` mid-shard: the unit ends in `Stopped` and leaves no file; a unit that cannot be
    written is handed back with its error, for the driver to retry."""
    big, player = playing_one_big_unit(tmp_path)
    player.stop()
    ((unit, result),) = player.take()
    assert unit == (0, 0) and isinstance(result, early.Stopped)
    assert not [p for p in (tmp_path / "r").rglob("*") if p.is_file()]

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    player = EarlyPlayer(iter([((0, 0), job(Location(str(blocked / "r")), 0))]))
    ((_, result),) = finished(player, 1)
    assert isinstance(result, OSError)


@pytest.mark.parametrize("value, on", [("0", False), ("1", True), (None, True)])
def test_the_switch(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(early.ENABLED_ENV, raising=False)
    else:
        monkeypatch.setenv(early.ENABLED_ENV, value)
    assert early.enabled() is on


def summary_job(location: Location, shard_size: int, pairs=((0, 1),)) -> ShardJob:
    cells = sweep_config.from_dict(tomllib.loads(CONFIG), source="test").cells
    return ShardJob(
        location=location,
        shard=plan_shards(0, 2 * shard_size, shard_size)[1],
        seed=SEED,
        cells=tuple(cells),
        record="summary",
        provenance={"test": "pieces"},
        attempt=1,
        tally_pairs=pairs,
    )


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_a_shard_assembled_from_pieces_is_the_shard_played_whole(tmp_path, record):
    """Pieces of whole batches, assembled in order: every file byte for byte, the rows
    counted and the tally as `write_shard` gives them; pieces that do not make up the shard
    are refused."""
    size = 1_200_000 if record == "deals" else 4_500_000  # three batches
    make = (
        (lambda at: job(at, 1, shard_size=size))
        if record == "deals"
        else (lambda at: summary_job(at, size))
    )
    whole = write_shard(make(Location(str(tmp_path / "whole"))))
    piece_job = make(Location(str(tmp_path / "pieces")))
    bounds = piece_bounds(piece_job, 3)
    assert len(bounds) == 3 and bounds[0][0] == 0 and bounds[-1][1] == len(batch_starts(piece_job))
    pieces = [play_piece(piece_job, batches) for batches in bounds]
    assembled = assemble(piece_job, pieces)
    assert assembled.files == whole.files and assembled.tally == whole.tally
    assert assembled.rows == whole.rows
    with pytest.raises(ValueError, match="do not make it up"):
        assemble(piece_job, [pieces[0], pieces[2]])


def test_the_unit_playing_when_ray_is_up_is_handed_over_after_its_batch(tmp_path):
    """`close` mid-shard: the player ends the unit at its next batch and gives what it played
    (`Partial`); that and the rest, played as a piece, make the shard's bytes played whole."""
    big, player = playing_one_big_unit(tmp_path)
    assert player.close() == [(0, 0)]
    player.wait(60)
    ((unit, result),) = player.take()
    assert unit == (0, 0) and isinstance(result, Partial)
    played_to = result.played.batches[1]
    assert result.played.batches[0] == 0 and 0 < played_to < len(batch_starts(big))
    assert not [p for p in (tmp_path / "r").rglob("*") if p.is_file()]  # nothing written yet
    (rest,) = piece_bounds(big, 1, after=played_to)
    entry = assemble(big, [result.played, play_piece(big, rest)])
    assert entry.files == write_shard(job(Location(str(tmp_path / "whole")), 0, 3_000_000)).files


def piece_worker(marker: str) -> int | None:
    """The pid of a worker of the Ray instance under ``marker`` playing a piece, if one is."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(
                b"ray::play_piece"
            ):
                pid = int(entry.name)
                if pid in processes_mentioning(marker):
                    return pid
        except OSError:
            continue
    return None


def test_the_sweeps_end_in_pieces_writes_the_bytes_of_whole_shards(tmp_path):
    """A sweep of four large shards: the first ones begun by the driver while Ray started (a
    thread for each CPU) and finished on Ray, the others, the sweep's end, played in pieces across the workers (both
    said in its progress); a piece's worker killed by pid fails its shard, which is played
    again; the files byte for byte those of a run playing every shard whole on Ray."""
    # 2 cells x 10,000,000 deals a shard: forty batches, seconds of play each, so that the
    # driver's threads, which play while Ray starts, cannot play every shard before it is up.
    text = CONFIG.replace("deals = 40_000", "deals = 40_000_000").replace(
        "shard_size = 1000", "shard_size = 10_000_000"
    )
    config_file = tmp_path / "pieces.toml"
    config_file.write_text(text)
    marker = f"/tmp/cspieces{os.getpid()}"
    try:
        proc = driver(config_file, tmp_path / "split", env={"RAY_TMPDIR": marker})
        killed, deadline = None, time.monotonic() + 120
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            killed = piece_worker(marker)
            time.sleep(0.01)
        assert killed is not None, "no piece was seen playing"
        os.kill(killed, signal.SIGKILL)
        # A bound on a hang, not on speed: its 80 million deal-cells beside two busy loops
        # and the suite's other processes on two cores took over 240 s.
        _, said = proc.communicate(timeout=600)
    finally:
        end_processes(marker, remove=True)
    assert proc.returncode == 0, said
    split = (tmp_path / "split" / "run.log").read_text()  # what it said, and how it played
    assert re.search(
        r", \d more begun\n.*shard \d+: (batch 1|batches 1-\d+) of 40 played here, the rest on Ray",
        split,
        re.S,
    ), split
    assert re.search(r"the sweep's end: shards from \d+ on are played in up to", split), split
    assert re.search(r"shard \d+ \(.*\) failed, attempt 1 of \d+: .*; retrying", split), split
    # Every shard whole: on the thread executor, which writes Ray's bytes (test_sweep).
    whole = run_driver(
        config_file,
        tmp_path / "whole",
        marker,
        "run.executor=threads",
        **{sweep_driver.SPLIT_TAIL_ENV: "0"},
    )
    assert "pieces" not in whole and "played here" not in whole, whole
    assert sha256s(tmp_path / "split") == sha256s(tmp_path / "whole")
    manifest = json.loads((tmp_path / "split" / "manifest.json").read_text())
    assert sum(entry["rows"] for entry in manifest["shards"]) == 2 * 40_000_000
