"""Sweeps with strategies of your own, on this process's threads (the loopback cluster and
`ray job submit` play them in tests/sweep/test_cluster.py): their rows are the kernel's, the
report gives their exact values and the check against `most`, a sweep grows by one without
playing the rest again, a changed function is refused, and one that breaks the rules stops
the run with its line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers import clocksweep, config_file
from rows import kernel_rows, read_rows
from test_grow_cells import report_tables, same_tables

import pipeline.api as clocksweep_api

ENGINE_TESTS = Path(__file__).resolve().parents[1] / "engine"

BASE = """
name = "mine"
seed = 8
deals = 3000
shard_size = 1000
record = "{record}"
output = "{out}"
[grid]
variant = ["standard", "one_swap"]
strategy = [{strategies}]
[run]
executor = "threads"
"""
MINE = '"most", "random", "more_strategies.py:second_most", "more_strategies.py:least_seen"'


def write(tmp_path: Path, record: str = "deals", strategies: str = MINE) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ENGINE_TESTS / "more_strategies.py", tmp_path / "more_strategies.py")
    out = tmp_path / "res"
    text = BASE.format(record=record, out=out, strategies=strategies)
    return config_file(tmp_path, text, "mine.toml"), out


def absolute(path: Path) -> str:
    """The config's text with its strategies named by absolute path (as `kernel_rows` reads
    a config from no file)."""
    return path.read_text().replace("more_strategies.py:", f"{path.parent}/more_strategies.py:")


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_a_strategy_of_your_own_plays_as_the_kernel_does_and_is_reported(tmp_path, record):
    path, out = write(tmp_path, record)
    done = clocksweep("run", path)
    assert done.exit_code == 0, done.output
    if record == "deals":
        assert read_rows(str(out / "shards" / "deals")).equals(kernel_rows(absolute(path)))
    else:
        counts = pl.scan_parquet(str(out / "shards" / "counts")).collect()
        # The built-ins, then the user's by name (the config's order does not count).
        assert counts.schema["strategy"] == pl.Enum(
            ["clockwise", "random", "most", "fewest", "informed", "oracle", "least_seen",
             "second_most"]
        )  # fmt: skip
        assert set(counts["strategy"].drop_nulls()) == {
            "most",
            "random",
            "second_most",
            "least_seen",
        }
    report = clocksweep("report", out, "--no-plots", "--replay", "0")
    assert report.exit_code == 0, report.output
    document = json.loads((out / "report" / "report.json").read_text())
    cells = {c["strategy"]: c for c in document["cells"] if c["variant"] == "one_swap"}
    assert cells["second_most"]["exact"] is not None and cells["second_most"]["z"] is not None
    assert cells["least_seen"]["exact"] is None  # it reads the cards turned
    own = {r["strategy"]: r for r in document["own_strategies"]}
    assert own.keys() == {"second_most", "least_seen"}
    assert {r["bound"] for r in own.values()} == {"most"}
    assert own["second_most"]["verdict"] == "below"  # a worse pick than most's, by far
    assert own["least_seen"]["verdict"] in ("below", "level")
    assert "no such strategy beats most" in report.output
    assert (out / "report" / "own_strategies.csv").is_file()
    # The other strategies' figures are as a sweep of them alone gives them.
    alone_path, alone = write(tmp_path / "alone", record, '"most", "random"')
    assert clocksweep("run", alone_path).exit_code == 0
    assert clocksweep("report", alone, "--no-plots", "--replay", "0").exit_code == 0
    theirs = json.loads((alone / "report" / "report.json").read_text())["cells"]
    assert [c for c in document["cells"] if c["strategy"] not in own] == theirs


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_a_strategy_of_your_own_added_to_a_finished_sweep_plays_only_its_cells(tmp_path, record):
    path, out = write(tmp_path / "grown", record, '"most", "random"')
    assert clocksweep("run", path).exit_code == 0
    first = sorted(p.relative_to(out) for p in (out / "shards").rglob("*.parquet"))
    grown = clocksweep("run", path, "--set", f"grid.strategy={MINE.replace(chr(34), '')}")
    assert grown.exit_code == 0, grown.output
    assert "3 of 6 shards x 2 cell groups to play (3 already committed)" in grown.stderr
    assert sorted(p.relative_to(out) for p in (out / "shards").rglob("*.parquet")) == first
    fresh_path, fresh = write(tmp_path / "fresh", record)
    assert clocksweep("run", fresh_path).exit_code == 0
    same_tables(report_tables(out), report_tables(fresh))  # paired with the rest as if fresh
    assert clocksweep("validate", out).exit_code == 0
    # The API reads the two groups' rows as one table (their strategy labels made one).
    table = "deals" if record == "deals" else "counts"
    rows = clocksweep_api.open_results(out).rows(table).collect()
    mine = rows.filter(pl.col("strategy").cast(pl.String) == "second_most")
    assert mine["n" if record == "summary" else "won"].len() > 0


def test_a_changed_function_is_refused_and_nothing_changes(tmp_path):
    path, out = write(tmp_path)
    assert clocksweep("run", path).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    source = tmp_path / "more_strategies.py"
    source.write_text(source.read_text().replace("second-most cards", "second most cards"))
    again = clocksweep("run", path, "--set", "deals=4000")
    assert again.exit_code == 2
    (line,) = again.stderr.strip().splitlines()
    assert "is not the function the sweep" in line and "played as 'least_seen'" in line, line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("executor", ["threads", "ray"])
def test_a_strategy_that_breaks_the_rules_stops_the_run_with_its_line(tmp_path, executor, request):
    """On threads, and on Ray, where the task's error comes back wrapped (its cause)."""
    if executor == "ray":
        request.getfixturevalue("local_ray")
    path, out = write(tmp_path, "deals", '"most", "more_strategies.py:raises_on_three"')
    sets = ["deals=30000", "shard_size=10000", f"run.executor={executor}"]
    done = clocksweep("run", path, *(f"--set={item}" for item in sets))
    assert done.exit_code == 2, done.output
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("clocksweep: error: strategy 'raises_on_three' raised ValueError: ")
    deal = int(last.rsplit(" on deal ", 1)[1])
    assert "retrying" not in done.stderr  # it would fail on every attempt
    run = json.loads((out / "run.json").read_text())["runs"][-1]
    assert run["status"] == "failed"
    # No shard holding that deal is committed, and nothing is left half written.
    manifest = (
        json.loads((out / "manifest.json").read_text())
        if (out / "manifest.json").exists()
        else {"shards": []}
    )
    assert all(not e["first"] <= deal <= e["last"] for e in manifest["shards"])
    assert not list((out / "shards").rglob(".partial/*")) if (out / "shards").exists() else True
