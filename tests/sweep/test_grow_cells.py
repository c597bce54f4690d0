"""Sweeps that grow by cells: a config with more cells plays only the new ones, over the
deals already done, in files of their own (`store.groups`); the results read as one sweep,
every comparison still paired, equal to a sweep that played every cell from the start."""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from faults import committed_while_running, driver
from processes import end_processes
from rows import kernel_rows, read_rows
from test_stopping import BASE as STOPS
from test_stopping import RULE

from pipeline.cli import cli
from pipeline.engine import kernel
from pipeline.engine.rules import Cell
from pipeline.store.entries import FileRecord
from pipeline.store.files import read_wins
from pipeline.store.location import Location
from pipeline.store.records import PAGE_ENV
from pipeline.sweep import driver as sweep_driver
from pipeline.sweep.config import load
from pipeline.sweep.task import write_shard

BASE = """
name = "grows"
seed = 41
deals = 3000
shard_size = 1000
record = "{record}"
output = "{out}"
[grid]
variant = ["standard", "one_swap"]
strategy = ["most", "random"]
"""
GROWN = ["--set", "grid.strategy=most,random,fewest"]  # one_swap under fewest: a new cell


def write(tmp_path: Path, record: str = "deals", body: str = BASE) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "res"
    path = tmp_path / "grows.toml"
    path.write_text(body.format(record=record, out=out))
    return path, out


def run(*args: str):
    # On the thread executor: cell groups, not Ray, are what is tested here.
    return CliRunner().invoke(cli, ["run", *map(str, args), "--set=run.executor=threads"])


def files_of(out: Path) -> dict[str, tuple[int, int]]:
    """Each committed shard file of the first cell group: (inode, mtime)."""
    return {
        str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in (out / "shards").rglob("*.parquet")
    }


def report_tables(out: Path) -> dict[str, pl.DataFrame]:
    """The report's summed tables, pairs turned to one orientation (a cell list's order
    decides which cell of a pair is a: a grown sweep's lists the new cells last)."""
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code == 0, result.output
    tables = {}
    labels = ["order", "variant", "strategy", "finale", "depth"]
    for path in (out / "report").glob("summary_*.parquet"):
        frame = pl.read_parquet(path)
        if path.stem == "summary_pairs":
            rows = []
            for row in frame.iter_rows(named=True):
                a = tuple(str(row[f"a_{n}"]) for n in labels)
                b = tuple(str(row[f"b_{n}"]) for n in labels)
                if a > b:
                    a, b, row["a_only"], row["b_only"] = b, a, row["b_only"], row["a_only"]
                rows.append((a, b, row["both"], row["a_only"], row["b_only"], row["neither"]))
            tables[path.stem] = sorted(rows)
        else:
            tables[path.stem] = frame.sort(frame.columns, nulls_last=True)
    comparisons = pl.read_csv(out / "report" / "comparisons.csv")
    tables["comparisons"] = comparisons.sort(comparisons.columns, nulls_last=True)
    return tables


def same_tables(one: dict, other: dict) -> None:
    assert one.keys() == other.keys()
    for name in one:
        if isinstance(one[name], list):
            assert one[name] == other[name], name
        else:
            assert one[name].equals(other[name]), name


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_a_new_cell_plays_only_itself_and_reads_as_one_sweep(tmp_path, record):
    path, out = write(tmp_path / "grown", record)
    assert run(path).exit_code == 0
    first_files = files_of(out)

    grown = run(path, *GROWN)
    assert grown.exit_code == 0, grown.output
    assert "3 of 6 shards x 2 cell groups to play (3 already committed)" in grown.stderr
    assert "4 cells x 3,000 deals committed in 3/3 shards" in grown.stderr, grown.stderr
    # The progress counts what this run plays, the new cell's shards: not 6,000 deals.
    assert "shards 3/3, deals 3,000/3,000," in grown.stderr, grown.stderr
    assert "(3 played, 3 already committed of 6 shards x 2 cell groups)" in grown.stderr
    assert files_of(out) == first_files  # the first group's files untouched
    recorded = json.loads((out / "run.json").read_text())
    assert [g["cells"] for g in recorded["cell_groups"]] == [3, 1]
    assert recorded["cells"][-1]["label"] == Cell("one_swap", "fewest").label
    new_files = sorted(p.name for p in (out / "cells-1" / "shards").rglob("*.parquet"))
    tables = 2 if record == "deals" else 7
    assert len(new_files) == 3 * tables
    group_entries = json.loads((out / "cells-1" / "manifest.json").read_text())["shards"]
    assert [entry["cells"] for entry in group_entries] == [1, 1, 1]

    again = run(path, *GROWN)
    assert again.exit_code == 0 and "0 played" in again.stderr, again.stderr
    valid = CliRunner().invoke(cli, ["validate", str(out)])
    assert valid.exit_code == 0 and "3,000 deals x 4 cells" in valid.output, valid.output

    fresh_path, fresh = write(tmp_path / "fresh", record)
    assert run(fresh_path, *GROWN).exit_code == 0
    same_tables(report_tables(out), report_tables(fresh))
    if record == "deals":
        # Any reader of the two groups' directories gets the fresh sweep's rows.
        union = [str(out / "shards" / "deals"), str(out / "cells-1" / "shards" / "deals")]
        rows = read_rows([f"{d}/*.parquet" for d in union])
        assert rows.equals(read_rows(str(fresh / "shards" / "deals")))
        text = BASE.format(record=record, out=out).replace(
            '"most", "random"]', '"most", "random", "fewest"]'
        )
        assert rows.equals(kernel_rows(text))
        ((counted, won),) = duckdb.sql(
            "select count(*), sum(won::int) from "
            f"read_parquet(['{union[0]}/*.parquet', '{union[1]}/*.parquet'])"
        ).fetchall()
        assert (counted, won) == (3000 * 4, rows["won"].sum())


def test_a_per_deal_sweep_past_2_63_grows_by_a_cell(tmp_path):
    """Deal numbers are unsigned 64-bit: the wins a new cell pairs with are read as such."""
    body = BASE.replace("deals = 3000", f"first = {2**64 - 3001}\ndeals = 3000")
    path, out = write(tmp_path, "deals", body)
    assert run(path).exit_code == 0
    grown = run(path, *GROWN)
    assert grown.exit_code == 0 and "failed" not in grown.stderr, grown.stderr
    union = [str(out / "shards" / "deals"), str(out / "cells-1" / "shards" / "deals")]
    text = body.format(record="deals", out=out).replace(
        '"most", "random"]', '"most", "random", "fewest"]'
    )
    assert read_rows([f"{d}/*.parquet" for d in union]).equals(kernel_rows(text))


def test_a_summary_shards_wins_are_the_kernels_deal_by_deal(tmp_path):
    path, out = write(tmp_path, "summary")
    assert run(path).exit_code == 0
    entry = json.loads((out / "manifest.json").read_text())["shards"][1]
    record = next(FileRecord.from_json(f) for f in entry["files"] if f["table"] == "wins")
    cells = [Cell("standard"), Cell("one_swap", "most"), Cell("one_swap", "random")]
    read = read_wins(Location(str(out)), record, cells, 1000, 1000)
    played = kernel.play(41, 1000, 1000, cells)["won"].astype(bool)
    assert np.array_equal(read, played) and read.sum() > 0
    table = pq.read_table(out / record.path)
    assert table.column("deals").to_pylist() == [1000] * 3

    # A file changed since it was committed is never read as wins.
    (out / record.path).write_bytes((out / record.path).read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match="differs from the manifest"):
        read_wins(Location(str(out)), record, cells, 1000, 1000)


def test_more_cells_and_more_deals_at_once(tmp_path):
    path, out = write(tmp_path / "grown")
    assert run(path).exit_code == 0
    grown = run(path, *GROWN, "--set", "deals=4500")
    assert grown.exit_code == 0, grown.output
    # Shard 2 is as long as before, shard 3 and 4 new: the old cells play 2 shards, the new 5.
    assert "7 of 10 shards x 2 cell groups to play (3 already committed)" in grown.stderr
    fresh_path, fresh = write(tmp_path / "fresh")
    assert run(fresh_path, *GROWN, "--set", "deals=4500").exit_code == 0
    same_tables(report_tables(out), report_tables(fresh))


def test_a_lost_cell_or_another_sweep_is_refused_and_nothing_changes(tmp_path):
    path, out = write(tmp_path)
    assert run(path).exit_code == 0 and run(path, *GROWN).exit_code == 0
    assert (out / "cells-1" / "manifest.json").is_file()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    lost = run(path, "--set", "grid.strategy=most,fewest")
    assert lost.exit_code == 2
    assert lost.stderr.strip() == (
        f"clocksweep: error: grid: the sweep in {out} has played "
        f"{Cell('one_swap', 'random').label}, which this config's grid does not have; a sweep "
        "grows by cells, it does not lose any: add it back, or use --fresh to start over"
    )
    other = run(path, *GROWN, "--set", "seed=42")
    assert other.exit_code == 2 and "holds results of another config" in other.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    fresh = run(path, "--fresh")
    assert fresh.exit_code == 0, fresh.output
    assert not (out / "cells-1").exists() and "left alone" not in fresh.stderr, fresh.stderr
    assert "cell_groups" not in json.loads((out / "run.json").read_text())


def test_a_damaged_file_of_a_new_cell_is_named_and_redone_alone(tmp_path):
    path, out = write(tmp_path)
    assert run(path).exit_code == 0
    assert run(path, *GROWN).exit_code == 0
    damaged = next((out / "cells-1" / "shards" / "deals").glob("shard-000001_*.parquet"))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))

    valid = CliRunner().invoke(cli, ["validate", str(out)])
    assert valid.exit_code == 1
    relative = damaged.relative_to(out)
    assert f"{relative}: sha256 differs from the manifest (altered)" in valid.output
    report = CliRunner().invoke(cli, ["report", str(out)])
    assert report.exit_code == 0 and "shard 1 not read" in report.output, report.output

    first_files = files_of(out)
    redone = run(path, *GROWN)
    assert redone.exit_code == 0, redone.output
    assert "1 of 6 shards x 2 cell groups to play (5 already committed)" in redone.stderr
    assert files_of(out) == first_files
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


def test_the_report_counts_the_shards_of_a_damaged_page_of_a_new_cell(tmp_path, monkeypatch):
    """A page of the new group that is altered keeps its 2 shards out of the report: 2 not
    read, named once by the page, not once more each as a shard the group lacks."""
    monkeypatch.setenv(PAGE_ENV, "2")
    path, out = write(tmp_path, "summary")
    assert run(path).exit_code == 0
    assert run(path, *GROWN).exit_code == 0
    page = out / "cells-1" / "manifest" / "shards-000000-000001.json"
    altered = json.loads(page.read_text())
    altered["shards"][0]["seconds"] += 1.0
    page.write_text(json.dumps(altered))

    report = CliRunner().invoke(cli, ["report", str(out), "--no-plots", "--replay", "0"])
    assert report.exit_code == 0, report.output
    assert "  2 shard(s) not read; 2 problem(s): cells-1/" in report.output, report.output
    provenance = json.loads((out / "report" / "report.json").read_text())["provenance"]
    assert provenance["shards_read"] == 1 and provenance["shards_not_read_count"] == 2
    valid = CliRunner().invoke(cli, ["validate", str(out)])
    assert valid.exit_code == 1
    assert "of its cells is not committed" not in valid.output, valid.output
    assert (
        "cells-1/manifest/shards-000000-000001.json: not the page the manifest lists (altered); "
        "its shards 0-1 are not read"
    ) in valid.output
    assert "shards missing: 2 of 3: 0 (0-999), 1 (1000-1999)" in valid.output


def test_a_new_cell_failing_once_is_retried(tmp_path):
    """A task of the new group that fails is retried, and waits for nothing else."""
    path, out = write(tmp_path)
    assert run(path).exit_code == 0

    def task(job, after_batch=None):  # as the thread executor calls the production task
        if job.earlier and job.shard.index == 1 and job.attempt == 1:
            raise RuntimeError("injected failure")
        return write_shard(job, after_batch)

    said = io.StringIO()
    # On the thread executor too, as the module's other runs: retries are the scheduler's.
    config = load(str(path), [GROWN[1], "run.executor=threads"])
    outcome = sweep_driver.run(config, task=task, stream=said)
    assert (
        "shard 1 (1000-1999) of cells-1 failed, attempt 1 of 4: RuntimeError: injected "
        "failure; retrying" in said.getvalue()
    )
    assert outcome.failed == [] and outcome.played == 3 and outcome.committed == 3
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


RULED = STOPS + RULE  # stops at a shard of its own (test_stopping)


def test_a_stopped_sweep_grown_by_a_cell_stops_where_a_fresh_one_does(tmp_path):
    """The rule reads every cell's tallies, the new group's pairing its cell with the old:
    the grown sweep stops at the fresh sweep's shard, with its rows."""
    added = ["--set", "grid.strategy=most,fewest,random"]
    path, out = write(tmp_path / "grown", body=RULED)
    assert run(path).exit_code == 0
    before = json.loads((out / "run.json").read_text())["stop"]
    grown = run(path, *added)
    assert grown.exit_code == 0, grown.output
    fresh_path, fresh = write(tmp_path / "fresh", body=RULED)
    assert run(fresh_path, *added).exit_code == 0
    stop = json.loads((out / "run.json").read_text())["stop"]
    fresh_stop = json.loads((fresh / "run.json").read_text())["stop"]
    assert stop["met"] and fresh_stop["met"]
    assert stop["stopped_at_shard"] == fresh_stop["stopped_at_shard"]
    assert stop["stopped_at_shard"] >= before["stopped_at_shard"]
    assert stop["deals"] == fresh_stop["deals"]
    union = [f"{out}/shards/deals/*.parquet", f"{out}/cells-1/shards/deals/*.parquet"]
    assert read_rows(union).equals(read_rows(str(fresh / "shards" / "deals")))
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0

    # A file of the first group lost below the stopping point, which the last group's
    # tallies still reach: the run plays that shard of the first group again, and only it.
    next((out / "shards" / "deals").glob("shard-000001_*.parquet")).unlink()
    again = run(path, *added)
    assert again.exit_code == 0, again.output
    assert "1 of " in again.stderr and "1 played" in again.stderr, again.stderr
    assert json.loads((out / "run.json").read_text())["stop"] == stop
    assert read_rows(union).equals(read_rows(str(fresh / "shards" / "deals")))
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


def test_a_growth_killed_by_sigkill_resumes_to_the_fresh_sweeps_rows(tmp_path):
    path, out = write(tmp_path / "grown")
    assert run(path).exit_code == 0
    first_files = files_of(out)
    pids, ray_tmp = tmp_path / "pids", f"/tmp/csgrow{os.getpid()}"
    pids.mkdir()
    grown = [f"grid.strategy={GROWN[1].split('=')[1]}", "ray.num_cpus=1", "run.executor=threads"]
    try:
        proc = driver(path, out, *grown, fault=f"pause=0.5:{pids}", env={"RAY_TMPDIR": ray_tmp})
        committed_while_running(
            proc,
            lambda: len(json.loads((out / "cells-1" / "manifest.json").read_text())["shards"]),
            1,
        )
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        end_processes(ray_tmp, remove=True)
    done = len(json.loads((out / "cells-1" / "manifest.json").read_text())["shards"])
    assert 1 <= done < 3

    resumed = run(path, *GROWN)
    assert resumed.exit_code == 0, resumed.output
    assert f"{3 - done} of 6 shards x 2 cell groups to play ({3 + done} already committed)" in (
        resumed.stderr
    )
    assert files_of(out) == first_files
    fresh_path, fresh = write(tmp_path / "fresh")
    assert run(fresh_path, *GROWN).exit_code == 0
    union = [f"{out}/shards/deals/*.parquet", f"{out}/cells-1/shards/deals/*.parquet"]
    assert read_rows(union).equals(read_rows(str(fresh / "shards" / "deals")))
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0
