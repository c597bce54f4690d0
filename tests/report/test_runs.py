"""`clocksweep runs [DIR]` and `api.runs`, on real sweeps played on threads into one directory:

- a run complete, one its stop rule stopped, one whose last shard failed (interrupted), one
  held by a driver's lock (running), one with a committed file gone and one whose run.json is
  not JSON (damaged): a line each, its state, its deals and size as the files say;
- `--json` and `api.runs` give the same records; listing changes nothing in the directory;
- a directory that does not exist, or holds no run: one line, exit status 2;
- results on S3 (moto on loopback) are listed from their URI.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import faults
import pytest
from helpers import clocksweep, config_file, sweep_cli
from s3_store import serving

import pipeline.api as api
from pipeline.store.location import Location

CONFIG = """
name = "{name}"
seed = 515
deals = 4000
shard_size = 1000
[grid]
variant = ["standard", "watch"]
strategy = ["most"]
[run]
executor = "threads"
[ray]
num_cpus = 1
max_retries = 0
"""
STOPPING = CONFIG.replace("deals = 4000", "deals = 12000") + "[stop]\nwin_rate = 0.08\n"


def made(tmp: Path, name: str, text: str = CONFIG, *sets: str, task=None) -> Path:
    out = tmp / "results" / name
    result = sweep_cli(
        config_file(tmp, text.format(name=name), f"{name}.toml"), out, *sets, task=task
    )
    assert result.exit_code in (0, 1), result.output
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("runs")
    made(tmp, "done")
    made(tmp, "stopped", STOPPING)
    made(tmp, "failed", CONFIG, task=faults.failing(2))
    for name in ("held", "lost_file", "bad_record"):
        shutil.copytree(tmp / "results" / "done", tmp / "results" / name)
    gone = json.loads((tmp / "results/lost_file/manifest.json").read_text())["shards"][1]
    os.remove(tmp / "results/lost_file" / gone["files"][0]["path"])
    (tmp / "results/bad_record/run.json").write_text("{not json")
    return tmp / "results"


def manifest_deals(directory: Path) -> int:
    return sum(
        entry["deals"] for entry in json.loads((directory / "manifest.json").read_text())["shards"]
    )


def size_of(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


def snapshot(directory: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


def test_each_run_is_a_line_with_its_state_deals_and_size(results):
    lock = Location(str(results / "held")).lock()  # a driver's hold, as `run` takes it
    lock.claim()
    try:
        before = snapshot(results)
        listed = clocksweep("runs", results)
        framed = {row["where"]: row for row in api.runs(results).to_dicts()}
        as_json = [
            json.loads(line) for line in clocksweep("runs", results, "--json").stdout.splitlines()
        ]
        assert snapshot(results) == before  # nothing written, nothing taken
        sizes = {path.name: size_of(path) for path in results.iterdir()}  # the lock's pid too
    finally:
        lock.release()
    assert listed.exit_code == 0, listed.output
    by_name = {Path(row["where"]).name: row for row in as_json}
    assert as_json == list(framed.values())
    stop = json.loads((results / "stopped/run.json").read_text())["stop"]
    assert stop["met"], stop  # the rule held before the config's deals: what is listed
    expected = {
        "done": "complete",
        "stopped": "stopped by its rule",
        "failed": "interrupted",
        "held": "running",
        "lost_file": "damaged",
        "bad_record": "damaged",
    }
    assert {name: row["state"] for name, row in by_name.items()} == expected
    for name in ("done", "stopped", "failed", "held"):
        row = by_name[name]
        assert row["deals"] == manifest_deals(results / name)
        assert row["bytes"] == sizes[name]
        line = next(line for line in listed.stdout.splitlines() if line.endswith(f"/{name}"))
        assert line.startswith(row["name"]) and row["state"] in line
        assert f"{row['deals']:,}/{row['planned']:,}" in line
    assert by_name["failed"]["deals"] < by_name["failed"]["planned"]
    assert by_name["failed"]["last_run"] == "failed"
    assert by_name["held"]["holder"] == f"pid {os.getpid()}"
    assert by_name["stopped"]["deals"] == stop["deals"] < by_name["stopped"]["planned"]
    assert "missing (shard 1 is committed)" in by_name["lost_file"]["problem"]
    assert "run.json is not valid JSON" in by_name["bad_record"]["problem"]
    assert f"  problem: {by_name['lost_file']['problem']}" in listed.stdout


@pytest.mark.parametrize("where", ["absent", "empty", "a_file"])
def test_a_directory_without_runs_is_one_line_and_status_2(tmp_path, where):
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("x")
    before = snapshot(tmp_path)
    result = clocksweep("runs", tmp_path / where)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("clocksweep: error: ") and str(tmp_path / where) in line
    assert snapshot(tmp_path) == before
    with pytest.raises(api.ClocksweepError) as raised:
        api.runs(tmp_path / where)
    assert raised.value.status == 2


@pytest.fixture(scope="module")
def s3():
    with serving("listed") as store:
        yield store


def test_runs_on_s3_are_listed_from_their_uri(s3, tmp_path):
    uri = s3.uri("sweeps/one")
    result = sweep_cli(config_file(tmp_path, CONFIG.format(name="one")), uri)
    assert result.exit_code == 0, result.output
    keys = s3.keys("sweeps/")
    listed = clocksweep("runs", s3.uri("sweeps"), "--json")
    assert listed.exit_code == 0, listed.output
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["state"] == "complete" and row["deals"] == 4000 and row["where"] == uri
    sizes = s3.client.list_objects_v2(Bucket=s3.bucket, Prefix="sweeps/one/")["Contents"]
    assert row["bytes"] == sum(item["Size"] for item in sizes)
    assert s3.keys("sweeps/") == keys  # no lease taken, nothing written
