"""Sweeps with strategies of your own, on this process's threads (the loopback cluster and
`ray job submit` play them in tests/sweep/test_cluster.py): their rows are the kernel's, the
report gives their exact values and the check against `most`, a sweep grows by one without
playing the rest again, a changed function is refused, and one that breaks the rules stops
the run with its line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from helpers import clocksweep, config_file, forge_exact_total
from rows import kernel_rows, read_rows
from test_grow_cells import report_tables, same_tables

import pipeline.api as clocksweep_api
from pipeline.engine import custom, exact_cache, odds
from pipeline.sweep.driver import TRIED_DEALS

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
    """On threads, and on Ray."""
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
    # Found on the deals each strategy is tried on before anything is written: nothing is
    # (a shard that breaks the rules later: tests/sweep/test_strategy_bound.py).
    assert deal < TRIED_DEALS and not out.exists()


HELPER = """
import numba

LAST = 11


@numba.njit
def first_nonempty(counts):
    for q in range(12):
        if counts[q] > 0:
            return q + 1
    return LAST + 1
"""
VIA_HELPER = """
from helper_mod import first_nonempty


def via_helper(counts):
    return first_nonempty(counts)
"""


def fresh_process(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`clocksweep ARGS` in a process of its own, the helper's directory on its path: a new
    process imports the helper's file as it is now."""
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    return subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        timeout=300,
    )


@pytest.mark.parametrize("change", ["body", "constant"])
def test_a_changed_helper_in_another_file_is_refused_like_a_changed_body(tmp_path, change):
    """A helper numba compiles into the strategy, from a file of its own, is part of the
    strategy's identity (issue 45: the old helper's rows and the new one's were mixed)."""
    (tmp_path / "helper_mod.py").write_text(HELPER)
    (tmp_path / "s2.py").write_text(VIA_HELPER)
    out = tmp_path / "res"
    config = config_file(
        tmp_path,
        f'name = "h"\nseed = 3\ndeals = 20_000\nshard_size = 10_000\noutput = "{out}"\n'
        '[grid]\nvariant = ["one_swap"]\nstrategy = ["most", "s2.py:via_helper"]\n'
        '[run]\nexecutor = "threads"\n',
    )
    first = fresh_process(tmp_path, "run", str(config))
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    edited = (
        HELPER.replace("range(12)", "range(11, -1, -1)")
        if change == "body"
        else HELPER.replace("LAST = 11", "LAST = 10")
    )
    (tmp_path / "helper_mod.py").write_text(edited)
    for args in (["--set", "deals=40000"], []):  # grown, and resumed
        again = fresh_process(tmp_path, "run", str(config), *args)
        assert again.returncode == 2, again.stderr
        (line,) = again.stderr.strip().splitlines()
        assert "is not the function the sweep" in line and "other files" in line, line
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_forged_exact_total_gives_the_report_the_true_value_and_a_note(tmp_path):
    """Issue 45: a kept file of exact totals edited and its checksum made again gave the
    report a wrong exact value and z, with no warning. Its totals are checked against what
    the enumeration makes them: enumerated again, the report has the true value, and says
    beside it that it was recomputed, and why."""
    path, out = write(tmp_path, "summary", '"most", "more_strategies.py:second_most"')
    assert clocksweep("run", path).exit_code == 0
    strategy = custom.read("more_strategies.py:second_most", str(tmp_path))
    totals = exact_cache.count_totals(strategy, odds.HOUR_RANKS, odds.SUITS)  # kept
    true = odds.fraction_text(odds.custom_rescue_win(strategy))  # one_swap's: at the bottom
    forge_exact_total(exact_cache.path_of(strategy, odds.HOUR_RANKS, odds.SUITS))
    report = fresh_process(tmp_path, "report", str(out), "--no-plots", "--replay", "0")
    assert report.returncode == 0, report.stderr
    document = json.loads((out / "report" / "report.json").read_text())
    cells = {(c["variant"], c["strategy"]): c for c in document["cells"]}
    mine = cells[("one_swap", "second_most")]
    assert mine["exact"] == true
    assert "(the copy kept there was damaged: " in report.stderr
    assert mine["exact_recomputed"] and mine["exact_recomputed"] in report.stderr
    assert cells[("one_swap", "most")]["exact_recomputed"] is None
    [own] = document["own_strategies"]
    assert "(recomputed)" in own["line"]
    [note] = [n for n in document["notes"] if "second_most" in n]
    assert mine["exact_recomputed"] in note
    for page in ("report.md", "report.html"):
        assert "(recomputed)" in (out / "report" / page).read_text()
    assert exact_cache.count_totals(strategy, odds.HOUR_RANKS, odds.SUITS) == totals  # replaced
