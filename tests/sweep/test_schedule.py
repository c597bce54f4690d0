"""The scheduler (`sweep.schedule`) on the thread executor, without Ray: whole runs in this
process (`driver.run` with an executor given), some on a wrapper of the thread executor that
injects faults (a unit that fails once, twice, always; a lost worker and node; a result
held back past the stopping point; a stop signal at an event). Retries, give-ups, the stop
rule, the sweep's end in pieces and resuming, each checked against the kernel's rows or a
clean run's bytes."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from rows import kernel_rows, read_rows

from pipeline.store.location import Location
from pipeline.store.validate import validate
from pipeline.sweep import config as sweep_config
from pipeline.sweep import driver, schedule, task
from pipeline.sweep.executors import ThreadExecutor

CONFIG = """
name = "sched"
seed = 99
deals = 6000
shard_size = 1000
[grid]
variant = ["standard", "watch"]
strategy = ["random"]
finale = ["up"]
depth = ["top"]
"""
STOP = "\n[stop]\nwin_rate = 0.04\nmin_deals = 1000\n"
ALWAYS = 1 << 30
LOST_NODE = {"node_id": "f00d" * 10, "address": "10.0.0.9", "lost": "2026-01-01T00:00:00+00:00"}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """Retries after a hundredth of a second: only when an attempt runs changes."""
    monkeypatch.setattr(schedule, "RETRY_BACKOFF", 0.01)


class Faulty:
    """A thread executor whose units meet faults: ``fails`` {shard: attempts that raise}
    (ALWAYS: every one); ``lost``: shards whose first attempt's worker dies with its node
    (reported once by `lost_nodes`); ``late``: shards whose results are held back until the
    scheduler lets go of them; ``signal_at``: the event ("submit", "done", "failed",
    "cancel") at whose first occurrence this process gets SIGINT."""

    def __init__(self, threads=2, fails=None, lost=(), late=(), signal_at=None, pieces=False):
        self.inner = ThreadExecutor(threads)
        self.cpus, self.node, self.pieces = threads, self.inner.node, pieces
        self.fails, self.lost, self.late = dict(fails or {}), set(lost), set(late)
        self.signal_at, self.alive_count = signal_at, 1
        self.ready, self.held, self.nodes_lost, self.submitted = [], [], [], []

    def event(self, name: str) -> None:
        if name == self.signal_at:
            self.signal_at = None
            os.kill(os.getpid(), signal.SIGINT)

    def submit(self, unit, job, bounds=None, played=None) -> None:
        self.submitted.append((unit.key, bounds))
        self.event("submit")
        index = unit.shard.index
        if self.fails.get(index):
            self.fails[index] -= 1
            self.ready.append((unit, RuntimeError(f"test: shard {index} fails")))
        elif index in self.lost:
            self.lost.discard(index)
            self.nodes_lost.append(LOST_NODE)
            self.ready.append((unit, ChildProcessError("the worker died with its node")))
        else:
            self.inner.submit(unit, job, bounds, played)

    def results(self, seconds: float = 0.0) -> list:
        came = self.ready + self.inner.results(0 if self.ready else seconds)
        self.ready = []
        self.held += [(unit, result) for unit, result in came if unit.shard.index in self.late]
        came = [(unit, result) for unit, result in came if unit.shard.index not in self.late]
        for _, result in came:
            self.event("failed" if isinstance(result, BaseException) else "done")
        return came

    def cancel(self, unit) -> None:
        self.event("cancel")
        self.inner.cancel(unit)
        self.late.discard(unit.shard.index)  # its result may come now: after the stop
        self.ready += [(u, result) for u, result in self.held if u == unit]

    def lost_nodes(self) -> list[dict]:
        lost, self.nodes_lost = self.nodes_lost, []
        return lost

    def stop(self) -> bool:
        return self.inner.stop()


def load(tmp_path: Path, text: str = CONFIG, *sets: str, out: str = "out"):
    path = tmp_path / "sched.toml"
    path.write_text(text)
    return sweep_config.load(str(path), [f"output={tmp_path / out}", *sets])


def play(config, executor=None) -> tuple[driver.Outcome, str]:
    said = io.StringIO()
    outcome = driver.run(config, stream=said, executor=executor or ThreadExecutor(2))
    return outcome, said.getvalue()


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def last_run(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())["runs"][-1]


def files(out: Path) -> dict[str, str]:
    return {f["path"]: f["sha256"] for e in manifest(out)["shards"] for f in e["files"]}


def left_files(out: Path) -> list[str]:
    """Every file under shards/, committed or not."""
    return sorted(str(p.relative_to(out)) for p in (out / "shards").rglob("*") if p.is_file())


def test_threads_play_every_unit_as_the_kernel_does(tmp_path):
    config = load(tmp_path)
    outcome, said = play(config)
    out = tmp_path / "out"
    assert outcome.played == 6 and outcome.failed == [] and outcome.committed == 6
    assert "6 of 6 shards to play (0 already committed) on 2 threads of this process" in said
    assert read_rows(out / "shards" / "deals").equals(kernel_rows(CONFIG))
    run = last_run(out)
    assert run["status"] == "complete" and run["ray"] is None and run["shards_played"] == 6
    assert {entry["attempts"] for entry in manifest(out)["shards"]} == {1}
    assert validate(Location(str(out)))[0] == []
    again, said = play(config)
    assert again.played == 0 and again.skipped == 6 and "to play" not in said


@pytest.mark.parametrize(
    "fails, retries, attempts",
    [(1, 3, 2), (2, 1, None), (ALWAYS, 2, None)],
    ids=["once", "twice-given-up", "always"],
)
def test_a_failing_unit_is_retried_until_its_attempts_are_used_up(
    tmp_path, fails, retries, attempts
):
    """A unit that fails is said, retried after its pause and committed with its attempts
    counted; out of attempts, it is given up (the run fails), and a rerun plays it alone."""
    config = load(tmp_path, CONFIG, f"ray.max_retries={retries}")
    outcome, said = play(config, Faulty(fails={2: fails}))
    out = tmp_path / "out"
    allowed = retries + 1
    assert (
        f"shard 2 (2000-2999) failed, attempt 1 of {allowed}: RuntimeError: test: shard 2 " in said
    )
    if attempts is not None:
        assert "retrying in 0.01 s" in said and outcome.failed == []
        entry = next(e for e in manifest(out)["shards"] if e["index"] == 2)
        assert entry["attempts"] == attempts and last_run(out)["status"] == "complete"
        return
    assert f"attempt {allowed} of {allowed}: RuntimeError: test: shard 2 fails; giving up" in said
    assert said.count("shard 2 (2000-2999) failed") == allowed
    assert outcome.failed == [2] and outcome.played == 5
    run = last_run(out)
    assert run["status"] == "failed" and run["shards_failed"] == [2]
    assert left_files(out) == sorted(p for p in files(out))  # nothing of shard 2 left
    again, _ = play(config)
    assert again.played == 1 and again.skipped == 5 and again.failed == []
    assert read_rows(out / "shards" / "deals").equals(kernel_rows(CONFIG))


def test_a_lost_worker_and_node_are_said_recorded_and_its_unit_played_again(tmp_path):
    config = load(tmp_path)
    outcome, said = play(config, Faulty(lost={3}))
    out = tmp_path / "out"
    assert "shard 3 (3000-3999) failed, attempt 1 of 4: ChildProcessError: the worker died" in said
    assert (
        f"node {LOST_NODE['node_id'][:12]} at 10.0.0.9 was lost; its shards are played again"
        in said
    )
    assert last_run(out)["nodes_lost"] == [LOST_NODE]
    assert outcome.failed == [] and outcome.played == 6
    assert next(e for e in manifest(out)["shards"] if e["index"] == 3)["attempts"] == 2
    assert read_rows(out / "shards" / "deals").equals(kernel_rows(CONFIG))


def test_a_result_arriving_after_the_stopping_point_is_not_kept(tmp_path):
    """Under a stop rule, units past the stopping point are let go of, and a result of one
    arriving after it is not part of the results: the stopping point and the bytes are those
    of a run in which nothing came late, and a rerun has nothing to play."""
    text = CONFIG.replace("deals = 6000", "deals = 400_000") + STOP
    clean, _ = play(load(tmp_path, text, out="clean"))
    at = clean.stop["stopped_at_shard"]
    assert at is not None and at < 10
    late = set(range(at + 1, at + 8))
    outcome, said = play(load(tmp_path, text), Faulty(late=late))
    out = tmp_path / "out"
    assert outcome.stop == clean.stop and outcome.committed == at + 1
    assert files(out) == files(tmp_path / "clean")
    assert left_files(out) == sorted(files(out))
    assert validate(Location(str(out)))[0] == []
    again, said = play(load(tmp_path, text))
    assert again.played == 0 and "to play" not in said


@pytest.mark.parametrize("event", ["submit", "done", "failed", "cancel"])
def test_a_stop_signal_at_an_event_stops_the_run_and_a_rerun_resumes(tmp_path, event):
    """SIGINT at an event of the loop: the run is interrupted (run.json says so), keeps what
    it committed and nothing else; a rerun plays the rest, to the bytes of a clean run."""
    text = CONFIG + (STOP.replace("6000", "400_000") if event == "cancel" else "")
    if event == "cancel":
        text = text.replace("deals = 6000", "deals = 400_000")
    clean, _ = play(load(tmp_path, text, out="clean"))
    # A cancel comes only of a unit still in flight at the stopping point: the results of
    # those past it are held back, or both threads could end theirs before the rule holds.
    at = clean.stop["stopped_at_shard"] if event == "cancel" else None
    late = range(at + 1, at + 8) if event == "cancel" else ()
    faulty = Faulty(fails={1: 1} if event == "failed" else {}, late=late, signal_at=event)
    with pytest.raises(driver.Interrupted, match="interrupted by SIGINT") as stopped:
        play(load(tmp_path, text), faulty)
    assert stopped.value.signal_number == signal.SIGINT
    out = tmp_path / "out"
    assert last_run(out)["status"] == "interrupted"
    assert left_files(out) == sorted(files(out))
    problems = validate(Location(str(out)))[0]  # what is committed verifies: the rest is to come
    assert all(problem.startswith("shards missing") for problem in problems), problems
    again, _ = play(load(tmp_path, text))
    assert again.failed == [] and again.stop == clean.stop
    assert files(out) == files(tmp_path / "clean")


def test_the_sweeps_end_in_pieces_is_the_bytes_of_whole_units(tmp_path, monkeypatch):
    """An executor that takes pieces: the last units are cut in up to TAIL_PIECES runs of
    their batches (and said to be), their files the bytes of units played whole."""
    monkeypatch.setitem(task.ROWS_PER_BATCH, "deals", 400)  # 200 deals a batch: five a shard
    whole, _ = play(load(tmp_path, out="whole"))
    pieces = Faulty(pieces=True)
    outcome, said = play(load(tmp_path), pieces)
    split = [key for key, bounds in pieces.submitted if bounds is not None]
    assert split and all(len(b) == schedule.TAIL_PIECES for k, b in pieces.submitted if b), said
    logged = (tmp_path / "out" / "run.log").read_text()  # how it played: the run's log
    assert f"the sweep's end: shards from {split[0][0]} on are played in up to" in logged
    assert "the sweep's end" not in said
    assert files(tmp_path / "out") == files(tmp_path / "whole")
    assert outcome.played == whole.played == 6


def test_the_threads_option_plays_without_ray(tmp_path):
    """`[run] executor = "threads"` from the command line: Ray is never imported, and a
    wrong value is one line naming the allowed ones, exit 2."""
    path = tmp_path / "t.toml"
    path.write_text(CONFIG + '\n[run]\nexecutor = "threads"\n')
    code = (
        "import sys; from pipeline.cli import cli\n"
        "try:\n    cli(sys.argv[1:])\nfinally:\n    print('ray' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, "-c", code, "run", str(path), f"--set=output={tmp_path / 'o'}"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False", done.stdout
    assert read_rows(tmp_path / "o" / "shards" / "deals").equals(kernel_rows(CONFIG))
    bad = subprocess.run(
        [*args[:5], "--set=run.executor=dask"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and bad.stderr == (
        "clocksweep: error: run.executor: 'dask' is not known; allowed: ray, threads\n"
    )
    assert tomllib.loads(path.read_text())["run"]["executor"] == "threads"


def test_both_executors_keep_the_executor_contract():
    """The scheduler's one interface to what plays its units (`executors.Executor`), which
    the thread and Ray executors implement: every method and attribute it names."""
    from pipeline.sweep.executors import Executor, RayExecutor, executor_for

    threads = executor_for(False, 2)
    try:
        assert isinstance(threads, ThreadExecutor) and isinstance(threads, Executor)
        assert threads.cpus == 2 and threads.alive_count == 1
        assert threads.here() == threads.node and threads.lost_nodes() == []
    finally:
        assert threads.stop()
    members = [name for name in vars(Executor) if not name.startswith("_")]
    assert {"submit", "results", "cancel", "lost_nodes", "stop", "here"} <= set(members)
    for name in members:
        assert callable(getattr(RayExecutor, name, None)) or isinstance(
            getattr(RayExecutor, name, None), property
        ), name
    assert {"cpus", "pieces", "node"} <= set(Executor.__annotations__)
