"""Tests of `clocksweep run` and `clocksweep validate` with the real Ray and real Parquet.

One local Ray instance (two CPUs) serves the in-process runs of this module; runs that need
their own driver process (one worker, SIGKILL of the driver) start it as a subprocess. Every
run's content is compared, row by row, with the kernel's results for the same deals
converted by `schema.deal_table`, so "identical content" always means "the kernel's".
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import tomllib
from collections import Counter
from dataclasses import replace
from pathlib import Path

import duckdb
import faults
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from faults import committed_while_running, driver
from processes import end_processes, processes_mentioning
from rows import SORT_KEY, as_strings, kernel_rows, manifest_entries, read_rows

import pipeline
from pipeline.cli import cli
from pipeline.engine import deals, kernel
from pipeline.records import schema, summary
from pipeline.store import records, validate
from pipeline.store.files import expected_schemas, file_problem
from pipeline.store.location import Location
from pipeline.store.manifest import Manifest
from pipeline.store.plan import Shard
from pipeline.sweep import config as sweep_config
from pipeline.sweep import driver as sweep
from pipeline.sweep import task as shard_task

SEED = 424242
N_DEALS = 20_000
CONFIG = f"""
name = "t"
seed = {SEED}
deals = {N_DEALS}
shard_size = 4000
[grid]
variant = ["standard", "watch", "one_swap", "exchange", "play_out"]
strategy = ["random", "informed"]
finale = ["up"]
depth = ["top"]
"""
# The per-deal columns of SPEC section 8, with the types the schema gives them.
SPEC_COLUMNS = {
    "seed": pl.UInt64,
    "deal": pl.UInt64,
    "won": pl.Boolean,
    "cards_turned": pl.Int8,
    "down_at_stop": pl.Int8,
    "rescue_pile": pl.Int8,
    "hint": pl.Float32,
    "restarts": pl.Int8,
    "order": pl.String,
    "variant": pl.String,
    "strategy": pl.String,
    "finale": pl.String,
    "depth": pl.String,
}


pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance


@pytest.fixture
def config_file(tmp_path) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(CONFIG)
    return path


def run_cli(*args: str, task=None):
    """`clocksweep run ARGS`, in this process; ``task``: what each shard runs (faults.py)."""
    return CliRunner().invoke(cli, ["run", *map(str, args)], obj={"task": task} if task else None)


def validate_cli(results: Path):
    return CliRunner().invoke(cli, ["validate", str(results)])


def run_ok(config_file: Path, out: Path, *sets: str, task=None):
    overrides = [f"--set=output={out}", *(f"--set={item}" for item in sets)]
    result = run_cli(config_file, *overrides, task=task)
    assert result.exit_code == 0, result.output
    return result


def content(out: Path) -> pl.DataFrame:
    """Every per-deal row of a results directory, read by Polars over shards/deals, sorted."""
    return read_rows(out / "shards" / "deals")


@pytest.fixture(scope="module")
def expected() -> pl.DataFrame:
    """The kernel's results for the test config, converted by the schema's own function."""
    return kernel_rows(CONFIG)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def fact_counts(out: Path) -> dict:
    """The deal facts a per-deal run counted, summed over its shards' facts files."""
    frame = as_strings(pl.scan_parquet(out / "shards" / "facts").collect())
    keys = [*schema.LABEL_COLUMNS, "won", "kings_at_bottom", "unvisited_at_third_king"]
    return {tuple(row[:-1]): row[-1] for row in frame.group_by(keys).agg(pl.col("n").sum()).rows()}


@pytest.fixture(scope="module")
def expected_facts() -> dict:
    """The deal facts of the test config's standard cell, counted from the kernel's results."""
    cfg = sweep_config.from_dict(tomllib.loads(CONFIG), source="test")
    cells = list(cfg.cells)
    results = kernel.play(SEED, 0, N_DEALS, cells)
    (standard,) = [c for c, cell in enumerate(cells) if cell.variant == "standard"]
    counts = Counter(
        zip(
            results["won"][standard].astype(bool).tolist(),
            results["kings_at_bottom"][standard].tolist(),
            results["unvisited_at_third_king"][standard].tolist(),
        )
    )
    labels = tuple(getattr(cells[standard], name) for name in schema.LABEL_COLUMNS)
    return {(*labels, *key): n for key, n in counts.items()}


# --- A run, read back -------------------------------------------------------------------


def test_run_read_back(config_file, tmp_path, expected, expected_facts):
    out = tmp_path / "res"
    result = run_ok(config_file, out)
    assert "shards 5/5" in result.stderr and "failures 0" in result.stderr
    assert "bytes/row" in result.stderr

    frame = content(out)
    assert frame.height == N_DEALS * 8
    assert frame.equals(expected)
    for column, dtype in SPEC_COLUMNS.items():
        assert frame.schema[column] == dtype, column
    # Nulls where the spec says: no strategy without a rescue, depth for exchange only...
    no_rescue = frame.filter(pl.col("variant").is_in(["standard", "play_out"]))
    assert no_rescue["strategy"].null_count() == no_rescue.height
    assert (
        frame.filter(pl.col("variant") != "exchange")["depth"].null_count()
        == frame.height - N_DEALS * 2
    )
    assert (
        frame.filter(pl.col("variant") != "play_out")["restarts"].null_count()
        == frame.height - N_DEALS
    )
    assert (frame["rescue_pile"].is_null() == frame["hint"].is_null()).all()
    # ... and each (cell, deal) once.
    assert frame.select(SORT_KEY).is_unique().all()

    # DuckDB reads the same files.
    rows = duckdb.sql(
        f"select variant, count(*) as n, count(distinct deal) as d, min(deal), max(deal) "
        f"from read_parquet('{out}/shards/deals/*.parquet') group by variant order by variant"
    ).fetchall()
    per_variant = {"exchange": 2, "one_swap": 2, "play_out": 1, "standard": 1, "watch": 2}
    assert rows == [
        (v, n * N_DEALS, N_DEALS, 0, N_DEALS - 1) for v, n in sorted(per_variant.items())
    ]

    # The results directory says what it is.
    run = json.loads((out / "run.json").read_text())
    cfg = sweep_config.load(str(config_file), [f"output={out}"])
    assert run["config_hash"] == cfg.hash
    assert run["deal_scheme"] == deals.SCHEME_VERSION
    assert run["result_schema"] == schema.RESULT_SCHEMA_VERSION
    assert run["clocksweep"] == pipeline.__version__
    assert len(run["cells"]) == 8 and run["config"]["seed"] == SEED
    assert run["runs"][-1]["status"] == "complete"
    assert run["runs"][-1]["ray"]["cpus"] == 2 and run["runs"][-1]["ray"]["nodes"]
    entries = manifest(out)["shards"]
    assert [(e["index"], e["first"], e["last"], e["attempts"]) for e in entries] == [
        (i, 4000 * i, 4000 * i + 3999, 1) for i in range(5)
    ]
    for entry in entries:
        record, facts_record = entry["files"]
        assert (record["table"], facts_record["table"]) == ("deals", "facts")
        path = out / record["path"]
        stem = f"shard-{entry['index']:06d}_deals-{entry['first']}-{entry['last']}"
        assert record["path"] == f"shards/deals/{stem}.parquet"
        assert facts_record["path"] == f"shards/facts/{stem}.parquet"
        metadata = pq.read_metadata(path)
        assert metadata.num_rows == record["rows"] == 8 * 4000
        provenance = json.loads(metadata.metadata[b"clocksweep"])
        assert provenance["config_hash"] == cfg.hash
        assert provenance["sweep"]["deal_scheme"] == deals.SCHEME_VERSION
        assert provenance["shard"] == {
            "index": entry["index"],
            "first": entry["first"],
            "last": entry["last"],
        }
        assert record["bytes"] / record["rows"] <= 4.0
        column = metadata.row_group(0).column(1)
        assert column.path_in_schema == "deal" and "DELTA_BINARY_PACKED" in column.encodings
    assert validate.committed_files(str(out)) == [str(out / e["files"][0]["path"]) for e in entries]
    # The deal facts: counted per shard on the standard cell, as the kernel gives them.
    assert fact_counts(out) == expected_facts

    checked = validate_cli(out)
    assert checked.exit_code == 0, checked.output
    assert "5/5 shards committed" in checked.output and "valid" in checked.output

    # A rerun finds everything committed and plays nothing.
    before = {p: p.stat().st_mtime_ns for p in (out / "shards").rglob("*.parquet")}
    assert len(before) == 10
    again = run_ok(config_file, out)
    assert "5 already committed" in again.stderr and "0 played" in again.stderr
    assert before == {p: p.stat().st_mtime_ns for p in (out / "shards").rglob("*.parquet")}


def test_shard_sizes_agree(config_file, tmp_path, expected, expected_facts):
    out = tmp_path / "res"
    run_ok(config_file, out, "shard_size=3000")
    assert len(manifest(out)["shards"]) == 7  # 6 x 3000 + 2000
    assert content(out).equals(expected)
    assert fact_counts(out) == expected_facts


# --- Nothing lost, nothing mixed ----------------------------------------------------------


def test_corrupt_shards_detected_and_redone(config_file, tmp_path, expected, expected_facts):
    out = tmp_path / "res"
    run_ok(config_file, out)
    from pipeline.report import document as report

    report.build(str(out), replay=0, plots_enabled=False)
    assert "0 played" in run_ok(config_file, out).stderr
    assert (out / "report" / "report.json").exists()  # nothing changed: the report stands
    files = sorted((out / "shards" / "deals").iterdir())
    truncated, altered, deleted = files[1], files[2], files[3]
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    data = bytearray(altered.read_bytes())
    data[len(data) // 3] ^= 0xFF
    altered.write_bytes(bytes(data))
    deleted.unlink()
    facts_deleted = (
        out / "shards" / "facts" / files[4].name
    )  # a shard's rows intact, its facts gone
    facts_deleted.unlink()
    stray = out / "shards" / "deals" / "shard-000099_deals-0-1.parquet"
    stray.write_bytes(files[0].read_bytes())

    checked = validate_cli(out)
    assert checked.exit_code == 1
    problems = [line for line in checked.output.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 5, checked.output
    text = checked.output
    assert f"{truncated.name}: " in text and "truncated" in text
    assert f"{altered.name}: sha256 differs" in text
    assert f"deals/{deleted.name}: missing" in text
    assert f"facts/{facts_deleted.name}: missing" in text
    assert "shards missing" not in text  # the manifest still lists it; the file is what is gone
    assert f"{stray.name}: not committed" in text
    assert "5/5 shards committed, 4 with problems" in text

    redo = run_ok(config_file, out)
    for name in (truncated.name, altered.name, deleted.name, facts_deleted.name):
        assert name in redo.stderr and "redoing" in redo.stderr
    assert "1 already committed" in redo.stderr and "4 played" in redo.stderr
    assert not stray.exists()
    assert not (out / "report").exists()  # shards were redone: the report is gone
    assert validate_cli(out).exit_code == 0
    assert content(out).equals(expected)
    assert fact_counts(out) == expected_facts


def assert_refused(config_file: Path, out: Path, reason: str) -> None:
    """A run of seed 7 into ``out`` is refused in one line naming ``reason`` and --fresh, and
    changes nothing there."""
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = run_cli(config_file, f"--set=output={out}", "--set=seed=7")
    assert refused.exit_code == 2
    (line,) = refused.stderr.strip().splitlines()
    assert reason in line and "--fresh" in line
    assert before == {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_other_config_refused_unless_fresh(config_file, tmp_path):
    out = tmp_path / "res"
    run_ok(config_file, out)
    from pipeline.report import document as report

    report.build(str(out), replay=0, plots_enabled=False)  # a report of the first config
    assert (out / "report" / "report.json").exists()
    assert_refused(config_file, out, "another config")

    fresh = run_cli(config_file, f"--set=output={out}", "--set=seed=7", "--fresh")
    assert fresh.exit_code == 0, fresh.output
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["seed"] == 7
    assert content(out)["seed"].unique().to_list() == [7]
    assert not (out / "report").exists()  # it described the results replaced
    assert validate_cli(out).exit_code == 0

    # Results of an older record schema: named as such, never mixed with new shards.
    run["result_schema"] = "clocksweep-deals/2"
    (out / "run.json").write_text(json.dumps(run))
    assert_refused(config_file, out, "record schema clocksweep-deals/2")
    checked = validate_cli(out)
    assert checked.exit_code == 1 and checked.output.count("problem: ") == 1

    # A run record that is not one: named, and only --fresh starts over there.
    (out / "run.json").write_text("[]")
    assert_refused(
        config_file,
        out,
        "run.json is not a clocksweep run record: it holds a JSON list, not an object",
    )


def test_output_that_cannot_be_created(config_file):
    # /proc takes no new directory, even from root: the run says so in one line.
    refused = run_cli(config_file, "--set=output=/proc/clocksweep-test/out")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    (line,) = refused.stderr.strip().splitlines()
    assert "output: /proc/clocksweep-test/out: cannot write there" in line


def test_worker_killed_mid_shard(config_file, tmp_path, expected, monkeypatch):
    """SIGKILL of a Ray worker mid-shard: the shard is retried, the sweep completes."""
    out, pids = tmp_path / "res", tmp_path / "pids"
    pids.mkdir()
    killed = []

    def kill_first_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = sorted(pids.glob("shard-*.attempt-1.pid"))
            if found:
                pid = int(found[0].read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(found[0].name.split(".")[0])
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    result = run_ok(config_file, out, task=faults.pausing(1.0, str(pids)))
    killer.join()
    assert killed, "no worker was seen to kill"
    index = int(killed[0].removeprefix("shard-"))
    assert f"shard {index} (" in result.stderr and "attempt 1 of 4" in result.stderr
    assert "retrying" in result.stderr
    attempts = {e["index"]: e["attempts"] for e in manifest(out)["shards"]}
    assert attempts[index] == 2 and sorted(attempts) == list(range(5))
    assert not list((out / "shards").rglob(".*"))  # no temporary file left behind
    assert validate_cli(out).exit_code == 0
    assert content(out).equals(expected)


def test_a_report_made_while_the_run_plays_is_gone_when_it_ends(config_file, tmp_path, expected):
    """A report of the shards committed so far tells of fewer than the run leaves: the run's
    end removes it, as its first commit removes one made before it."""
    out, pids = tmp_path / "res", tmp_path / "pids"
    pids.mkdir()
    seen = []

    def report_midway():
        from pipeline.report import document as report

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                committed = len(manifest(out)["shards"])
            except (OSError, ValueError, KeyError):  # not written yet, or mid-replace
                committed = 0
            if committed:
                built = report.build(str(out), replay=0, plots_enabled=False)
                read = len(built.loaded.shards_read)
                seen.append((read, (out / "report" / "report.json").exists()))
                return
            time.sleep(0.05)

    reporter = threading.Thread(target=report_midway)
    reporter.start()
    run_ok(config_file, out, task=faults.pausing(1.0, str(pids)))
    reporter.join()
    assert seen and seen[0][1] and seen[0][0] < 5, seen  # written, of fewer than all 5 shards
    assert not (out / "report").exists()
    assert content(out).equals(expected)


# --- Runs in their own driver process -------------------------------------------------------


def test_one_worker_same_bytes(config_file, tmp_path, expected):
    """One worker in its own driver process: the same content, and byte-identical shards."""
    out, two = tmp_path / "one", tmp_path / "two"
    ray_tmp = f"/tmp/cs1w{os.getpid()}"
    try:
        proc = driver(config_file, out, "ray.num_cpus=1", env={"RAY_TMPDIR": ray_tmp})
        _, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr
    finally:
        end_processes(ray_tmp, remove=True)
    run = json.loads((out / "run.json").read_text())
    assert run["runs"][-1]["ray"]["cpus"] == 1
    assert content(out).equals(expected)
    run_ok(config_file, two)
    assert [f["sha256"] for e in manifest(out)["shards"] for f in e["files"]] == [
        f["sha256"] for e in manifest(two)["shards"] for f in e["files"]
    ]


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_threads_write_the_bytes_ray_writes(config_file, tmp_path, expected, record):
    """`[run] executor = "threads"`: every shard file byte for byte what Ray's workers write,
    the run recorded with no Ray and the executor in its config; Ray's run records as ever."""
    on_ray, on_threads = tmp_path / "ray", tmp_path / "threads"
    run_ok(config_file, on_ray, f"record={record}")
    said = run_ok(config_file, on_threads, f"record={record}", "run.executor=threads").output
    assert "threads of this process" in said
    assert [f["sha256"] for e in manifest(on_ray)["shards"] for f in e["files"]] == [
        f["sha256"] for e in manifest(on_threads)["shards"] for f in e["files"]
    ]
    if record == "deals":
        assert content(on_threads).equals(expected)
    threads_run = json.loads((on_threads / "run.json").read_text())
    assert threads_run["runs"][-1]["ray"] is None
    assert threads_run["config"]["run"] == {"executor": "threads"}
    ray_run = json.loads((on_ray / "run.json").read_text())
    assert "run" not in ray_run["config"] and ray_run["runs"][-1]["ray"]["cpus"] == 2


def test_driver_sigkill_then_resume(config_file, tmp_path, expected, monkeypatch):
    """SIGKILL of the driver mid-sweep, then a rerun: exactly the rows of an uninterrupted run.
    The manifest's pages hold three shards, so that one is sealed before the kill."""
    out, pids = tmp_path / "res", tmp_path / "pids"
    pids.mkdir()
    ray_tmp = f"/tmp/cskill{os.getpid()}"
    try:
        proc = driver(
            config_file,
            out,
            "ray.num_cpus=1",
            "run.executor=threads",  # a driver's death, not Ray's, is what is tested
            "shard_size=2000",
            fault=f"pause=0.7:{pids}",
            env={"RAY_TMPDIR": ray_tmp, records.PAGE_ENV: "3"},
        )
        committed_while_running(proc, lambda: len(manifest_entries(out)), 4)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        end_processes(ray_tmp, remove=True)
    committed = len(manifest_entries(out))
    assert 4 <= committed < 10
    assert manifest(out)["pages"][0]["path"] == "manifest/shards-000000-000002.json"

    monkeypatch.setenv(records.PAGE_ENV, "3")
    resumed = run_ok(config_file, out, "shard_size=2000")
    assert [(p["first"], p["last"]) for p in manifest(out)["pages"]] == [(0, 2), (3, 5), (6, 8)]
    statuses = [run["status"] for run in json.loads((out / "run.json").read_text())["runs"]]
    assert statuses == ["died", "complete"]  # the killed run is named as such, not "running"
    assert f"{committed} already committed" in resumed.stderr
    assert f"{10 - committed} played" in resumed.stderr
    assert validate_cli(out).exit_code == 0
    frame = content(out)
    assert frame.height == N_DEALS * 8
    assert frame.equals(expected)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_sigterm_and_sigint_stop_the_run_and_it_resumes(config_file, tmp_path, expected, stop):
    """What a scheduler (SIGTERM) or a user (SIGINT, Ctrl-C) sends mid-sweep: the run stops
    within seconds, ends the Ray it started, frees the directory, says how to resume; the
    rerun ends with the rows of an uninterrupted run."""
    out, pids = tmp_path / "res", tmp_path / "pids"
    pids.mkdir()
    ray_tmp = f"/tmp/cssig{os.getpid()}{stop.name}"
    try:
        # Each shard pauses 3 s on one CPU: ignoring the signal would take 20 s and more.
        proc = driver(
            config_file,
            out,
            "ray.num_cpus=1",
            "shard_size=2000",
            # Ctrl-C on the thread executor; its end of Ray's processes is test_signals'.
            *(["run.executor=threads"] if stop == signal.SIGINT else []),
            fault=f"pause=3:{pids}",
            env={"RAY_TMPDIR": ray_tmp},
        )
        committed_while_running(proc, lambda: len(manifest(out)["shards"]), 1)
        assert proc.poll() is None, proc.communicate()[1]
        sent = time.monotonic()
        proc.send_signal(stop)
        _, stderr = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
        left = processes_mentioning(ray_tmp)
    finally:
        end_processes(ray_tmp, remove=True)
    assert proc.returncode == 128 + stop, stderr
    assert stopped_after < 15, f"stopped {stopped_after:.1f} s after {stop.name}"
    assert left == [], f"Ray processes left running: {left}"
    committed = len(manifest(out)["shards"])
    assert 1 <= committed < 10
    last = stderr.strip().splitlines()[-1]
    assert last == (
        f"clocksweep: interrupted by {stop.name}: {committed} of 10 shards committed, and kept; "
        "rerun the same command to resume"
    )
    assert Location(str(out)).held_by() is None  # the directory is free
    assert not list((out / "shards" / ".partial").rglob("*.parquet*"))
    runs = json.loads((out / "run.json").read_text())["runs"]
    assert runs[-1]["status"] == "interrupted"

    resumed = run_ok(config_file, out, "shard_size=2000")
    assert f"{committed} already committed" in resumed.stderr
    assert validate_cli(out).exit_code == 0
    assert content(out).equals(expected)


def test_summary_mode(config_file, tmp_path, expected):
    """Record mode summary: one file per summary table and shard, counts that add up."""
    out = tmp_path / "sum"
    run_ok(config_file, out, "record=summary")
    entries = manifest(out)["shards"]
    assert len(entries) == 5
    for entry in entries:
        assert sorted(f["table"] for f in entry["files"]) == sorted([*summary.TABLES, "wins"])
        for record in entry["files"]:
            assert record["path"] == (
                f"shards/{record['table']}/shard-{entry['index']:06d}_"
                f"deals-{entry['first']}-{entry['last']}.parquet"
            )
    assert validate_cli(out).exit_code == 0
    counts = as_strings(pl.scan_parquet(out / "shards" / "counts").collect())
    cell_key = ["order", "variant", "strategy", "finale", "depth"]
    by_cell = (
        counts.group_by(cell_key)
        .agg(
            pl.col("n").sum().alias("deals"),
            pl.col("n").filter(pl.col("won")).sum().alias("wins"),
        )
        .sort(cell_key, nulls_last=True)
    )
    want = (
        expected.group_by(cell_key)
        .agg(
            pl.len().cast(pl.Int64).alias("deals"), pl.col("won").sum().cast(pl.Int64).alias("wins")
        )
        .sort(cell_key, nulls_last=True)
    )
    assert by_cell.equals(want)


def test_object_store_writes_final_keys():
    """On an object store (here pyarrow's in-memory mock) a shard is written at its final key,
    committed by the manifest, and checked like a local one."""
    from pyarrow.fs import _MockFileSystem

    location = Location("bucket/results", filesystem=_MockFileSystem())
    cfg = sweep_config.from_dict({**tomllib.loads(CONFIG), "deals": 600, "shard_size": 600})
    cells = list(cfg.cells)
    shard = sweep.plan(cfg)[0]
    job = shard_task.ShardJob(
        location=location,
        shard=shard,
        seed=SEED,
        cells=tuple(cells),
        record="deals",
        provenance=sweep.provenance(cfg),
        attempt=1,
    )
    entry = replace(shard_task.write_shard(job), attempts=1)
    record, facts_record = sorted(entry.files, key=lambda r: r.table != "deals")
    assert entry.staged == ()  # written at its final key, not renamed into place
    assert record.path == "shards/deals/shard-000000_deals-0-599.parquet"
    assert location.info(record.path).size == record.bytes
    schemas = expected_schemas("deals")
    assert file_problem(location, record, cfg.hash, schemas["deals"], shard) is None
    assert "another config" in file_problem(location, record, "other")
    other_shard = Shard(1, 600, 600)
    assert "it belongs to shard 0" in file_problem(location, record, cfg.hash, None, other_shard)

    run = sweep.start_run_record(cfg, None, None, 1, 0).to_json()
    location.write_json("run.json", run)
    manifest = Manifest(location, cfg.hash)
    manifest.commit(replace(entry, files=(record,)))
    manifest.flush()
    problems, _ = validate.validate(location)
    assert problems == [
        "shard-000000_deals-0-599: no file of table facts in the manifest",
        "shards/facts/shard-000000_deals-0-599.parquet: not committed in the "
        "manifest (readers of the directory would see it; rerun to clean up)",
    ]
    manifest.commit(replace(entry, files=(record, facts_record)))
    manifest.flush()
    problems, figures = validate.validate(location)
    assert problems == [] and figures["committed"] == 1
    # Results of an earlier version of the per-deal schema are named as such.
    location.write_json("run.json", {**run, "result_schema": "clocksweep-deals/2"})
    problems, _ = validate.validate(location)
    assert problems == [
        "run.json: the results are in record schema clocksweep-deals/2, this "
        "clocksweep reads clocksweep-deals/3; rerun the config with --fresh to "
        "write them again"
    ]
    location.write_json("run.json", run)
    with location.fs.open_output_stream(location.full(record.path)) as stream:
        stream.write(b"PAR1 not what was committed")
    problems, _ = validate.validate(location)
    assert len(problems) == 1 and "truncated or altered" in problems[0]


def test_one_driver_per_directory(config_file, tmp_path):
    """A second driver on a directory in use is refused; the first driver's death frees it."""
    import fcntl

    out = tmp_path / "res"
    out.mkdir()
    with open(out / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("12345")
        held.flush()
        refused = run_cli(config_file, f"--set=output={out}")
        assert refused.exit_code == 2
        (line,) = refused.stderr.strip().splitlines()
        assert "in use by another clocksweep run (pid 12345)" in line
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
    run_ok(config_file, out)


def test_failing_shard(config_file, tmp_path, expected, monkeypatch):
    """A shard that fails every attempt: reported as it happens, exit 1, the rest committed;
    a rerun plays only that shard."""
    out = tmp_path / "res"
    failed = run_cli(
        config_file, f"--set=output={out}", "--set=ray.max_retries=1", task=faults.failing(2)
    )
    assert failed.exit_code == 1, failed.output
    assert "shard 2 (8000-11999) failed, attempt 1 of 2: RuntimeError: test hook" in failed.stderr
    assert "attempt 2 of 2" in failed.stderr and "giving up" in failed.stderr
    assert "1 shard(s) failed (2); rerun the same command" in failed.stderr
    assert sorted(e["index"] for e in manifest(out)["shards"]) == [0, 1, 3, 4]
    run = json.loads((out / "run.json").read_text())
    assert run["runs"][-1]["status"] == "failed" and run["runs"][-1]["shards_failed"] == [2]
    checked = validate_cli(out)
    assert checked.exit_code == 1 and "shards missing: 1 of 5: 2 (8000-11999)" in checked.output

    rerun = run_ok(config_file, out)
    assert "4 already committed" in rerun.stderr and "1 played" in rerun.stderr
    assert content(out).equals(expected)
