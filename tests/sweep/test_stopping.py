"""Sweeps with a stop rule (`[stop]`): bad rules refused in one line; the stopping point, and
the rows, the same with one worker or two and after a SIGKILL of the driver and a rerun;
shards past the point not part of the results; the report says how the run stopped."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from faults import committed_while_running, driver
from processes import end_processes
from rows import manifest_entries

from pipeline.cli import cli

BASE = """
name = "stops"
seed = 31
deals = 120000
shard_size = 1000
output = "{out}"
[grid]
variant = ["standard", "one_swap"]
strategy = ["most", "fewest"]
"""
RULE = """
[stop]
win_rate = 0.015
comparisons = "decided"
min_deals = 3000
"""


def write(tmp_path: Path, body: str, name: str = "stops.toml") -> tuple[Path, Path]:
    out = tmp_path / "res"
    path = tmp_path / name
    path.write_text(body.format(out=out))
    return path, out


def run(*args: str):
    return CliRunner().invoke(cli, ["run", *map(str, args)])


# --- Bad rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, words",
    [
        ("[stop]\nwinrate = 0.01\n", ["stop.winrate: unknown key", "stop.win_rate"]),
        ("[stop]\nwin_rate = 0.7\n", ["stop.win_rate: 0.7 is out of range", "(0, 0.5)"]),
        ("[stop]\nwin_rate = 0\n", ["stop.win_rate: 0 is out of range"]),
        ("[stop]\nwin_rate = 'tight'\n", ["stop.win_rate: 'tight' is a string"]),
        ("[stop]\ncomparisons = 'settled'\n", ["stop.comparisons: 'settled' is not known"]),
        ("[stop]\ncomparisons = -0.1\n", ["stop.comparisons: -0.1 is out of range"]),
        ("[stop]\nmin_deals = 1000\n", ["stop: no target", "stop.win_rate"]),
        (
            "[stop]\nwin_rate = 0.01\nmin_deals = 200000\n",
            ["stop.min_deals: 200,000 is above deals (120,000)"],
        ),
        ("[stop]\nwin_rate = 0.01\nconfidence = 1.5\n", ["stop.confidence: 1.5 is out of range"]),
        ("stop = 3\n", ["stop: expected a table [stop]"]),
    ],
)
def test_bad_rules_are_refused_in_one_line(tmp_path, rule, words):
    body = BASE + rule if rule.startswith("[") else rule + BASE
    path, out = write(tmp_path, body)
    result = run(path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clocksweep: error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not out.exists()


def test_a_comparison_needs_two_strategies(tmp_path):
    body = BASE.replace('strategy = ["most", "fewest"]', 'strategy = ["most"]')
    path, out = write(tmp_path, body + RULE)
    result = run(path)
    assert result.exit_code == 2
    assert "stop.comparisons: the grid has no two cells that differ in their strategy" in (
        result.stderr
    )
    assert not out.exists()


def test_a_bad_rule_by_set_is_refused(tmp_path):
    path, out = write(tmp_path, BASE + RULE)
    result = run(path, "--set", "stop.win_rate=half")
    assert result.exit_code == 2 and "stop.win_rate: 'half' is not a number" in result.stderr
    assert not out.exists()


# --- Where it stops -----------------------------------------------------------------------


def file_digests(out: Path) -> list[tuple[str, str]]:
    return [(f["path"], f["sha256"]) for e in manifest_entries(out) for f in e["files"]]


def on_disk(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in (out / "shards").rglob("*.parquet"))


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory, local_ray) -> tuple[Path, Path, dict]:
    """The rule run in this process, on the module's local Ray instance of two CPUs."""
    path, out = write(tmp_path_factory.mktemp("two"), BASE + RULE)
    result = run(path)
    assert result.exit_code == 0, result.output
    return path, out, json.loads((out / "run.json").read_text())["stop"]


def test_the_run_stops_where_the_rule_first_holds(two_workers):
    _, out, stop = two_workers
    at = stop["stopped_at_shard"]
    assert stop["met"] and stop["deals"] == (at + 1) * 1000 and 3 <= at < 119
    assert [e["index"] for e in manifest_entries(out)] == list(range(at + 1))
    assert on_disk(out) == sorted(f for f, _ in file_digests(out))  # nothing past the point
    assert all(t["met"] for t in stop["targets"])
    assert {t["kind"] for t in stop["targets"]} == {"cell", "comparison"}
    checked = CliRunner().invoke(cli, ["validate", str(out)])
    assert checked.exit_code == 0, checked.output
    assert f"{at + 1}/{at + 1} shards committed" in checked.output

    # The rule did not hold one shard earlier: replayed from the manifest's tallies.
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep.stopping import Stopping

    cfg = sweep_config.load(str(two_workers[0]))
    stopping = Stopping(cfg.stop, cfg.cells, cfg.deals)
    held = [
        stopping.add(e["deals"], e["tally"]["wins"], e["tally"]["pairs"])
        for e in manifest_entries(out)
    ]
    assert held[-1] and not any(held[:-1])
    assert stopping.record(at)["targets"] == stop["targets"]


def test_one_worker_and_a_killed_driver_stop_at_the_same_deal(two_workers, tmp_path):
    path, reference, stop = two_workers
    out, pids = tmp_path / "res", tmp_path / "pids"
    pids.mkdir()
    ray_tmp = f"/tmp/csstop{os.getpid()}"
    try:
        proc = driver(
            path,
            out,
            "ray.num_cpus=1",
            fault=f"pause=0.3:{pids}",
            env={"RAY_TMPDIR": ray_tmp},
        )
        committed_while_running(proc, lambda: len(manifest_entries(out)), 2)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        end_processes(ray_tmp, remove=True)
    assert len(manifest_entries(out)) <= stop["stopped_at_shard"]

    resumed = driver(path, out, "ray.num_cpus=1", env={"RAY_TMPDIR": ray_tmp})
    try:
        _, stderr = resumed.communicate(timeout=300)
    finally:
        end_processes(ray_tmp, remove=True)
    assert resumed.returncode == 0, stderr
    assert f"stopped after shard {stop['stopped_at_shard']}" in stderr
    assert json.loads((out / "run.json").read_text())["stop"] == stop
    assert file_digests(out) == file_digests(reference)
    assert on_disk(out) == on_disk(reference)

    again = run(path, "--set", f"output={out}")  # complete: nothing to play, the same stop
    assert again.exit_code == 0, again.output
    assert "0 played" in again.stderr and file_digests(out) == file_digests(reference)


def test_the_report_says_how_the_run_stopped(two_workers, tmp_path):
    _, out, stop = two_workers
    report = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    assert f"stop rule: met at {stop['deals']:,} deals" in report.output
    document = json.loads((tmp_path / "rep" / "report.json").read_text())
    stopping = document["stopping"]
    assert stopping["stopped_at_shard"] == stop["stopped_at_shard"]
    for target in stopping["targets"]:
        low, high = target["interval"]
        fixed_low, fixed_high = target["fixed_n_interval"]
        assert low <= target["estimate"] <= high
        assert high - low > fixed_high - fixed_low  # looking at every shard costs width
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## How the run stopped" in text and "anytime-valid 95%" in text


def test_an_unmet_rule_plays_every_deal_and_says_how_far_it_was(tmp_path, local_ray):
    body = BASE.replace("deals = 120000", "deals = 4000") + RULE.replace("0.015", "0.002")
    path, out = write(tmp_path, body)
    result = run(path)
    assert result.exit_code == 0, result.output
    stop = json.loads((out / "run.json").read_text())["stop"]
    assert not stop["met"] and stop["stopped_at_shard"] is None and stop["deals"] == 4000
    assert stop["deals_still_needed"] > 4000
    assert "was not met in 4,000 deals" in result.stderr
    report = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert "was not met in 4,000 deals" in (tmp_path / "rep" / "report.md").read_text()
    assert report.exit_code == 0


def test_a_tally_is_each_cells_wins(two_workers):
    """The tally the rule reads is the shard's own rows: wins per cell from its deals file."""
    import polars as pl

    _, out, _ = two_workers
    entry = manifest_entries(out)[0]
    rows = pl.read_parquet(out / entry["files"][0]["path"])
    from pipeline.sweep import config as sweep_config

    cfg = sweep_config.load(str(two_workers[0]))
    wins = [
        rows.filter(
            (pl.col("variant").cast(pl.String) == c.variant)
            & (pl.col("strategy").cast(pl.String).eq_missing(c.strategy))
        )["won"].sum()
        for c in cfg.cells
    ]
    assert entry["tally"]["wins"] == wins
