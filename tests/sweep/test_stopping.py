"""Sweeps with a stop rule (`[stop]`): bad rules refused in one line; the stopping point, and
the rows, the same with one worker or two and after a SIGKILL of the driver and a rerun;
shards past the point not part of the results; the report says how the run stopped."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from faults import committed_while_running, driver
from processes import end_processes
from rows import manifest_entries

from pipeline.cli import cli
from pipeline.report.claims import rule_pages
from pipeline.store.records import PAGE_ENV
from pipeline.sweep import driver as sweep_driver

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
    tmp_path.mkdir(parents=True, exist_ok=True)
    path.write_text(body.format(out=out))
    return path, out


def run(*args: str, executor: str = "threads"):
    """`clocksweep run ARGS` in this process: on the thread executor (stop rules, not Ray,
    are what is tested), or on the module's local Ray instance (``executor="ray"``)."""
    return CliRunner().invoke(cli, ["run", *map(str, args), f"--set=run.executor={executor}"])


# --- Bad rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, words",
    [
        ("[stop]\nwinrate = 0.01\n", ["stop.winrate: unknown key", "stop.win_rate"]),
        ("[stop]\nwin_rate = 0.7\n", ["stop.win_rate: 0.7 is out of range", "(1e-12, 0.5)"]),
        ("[stop]\nwin_rate = 0\n", ["stop.win_rate: 0 is out of range"]),
        ("[stop]\nwin_rate = 1e-200\n", ["stop.win_rate: 1e-200 is out of range", "(1e-12, 0.5)"]),
        ("[stop]\nwin_rate = 'tight'\n", ["stop.win_rate: 'tight' is a string"]),
        ("[stop]\ncomparisons = 'settled'\n", ["stop.comparisons: 'settled' is not known"]),
        ("[stop]\ncomparisons = -0.1\n", ["stop.comparisons: -0.1 is out of range"]),
        (
            "[stop]\ncomparisons = 1e-300\n",
            ["stop.comparisons: 1e-300 is out of range", "(1e-12, 0.5)"],
        ),
        ("[stop]\nmin_deals = 1000\n", ["stop: no target", "stop.claims"]),
        (
            "[stop]\nwin_rate = 0.01\nmin_deals = 200000\n",
            ["stop.min_deals: 200,000 is above deals (120,000)"],
        ),
        ("[stop]\nwin_rate = 0.01\nconfidence = 1.5\n", ["stop.confidence: 1.5 is out of range"]),
        ("stop = 3\n", ["stop: expected a table [stop]"]),
        (
            "[stop]\nwin_rate = 0.01\nclaims_file = 'mine.toml'\n",
            ["stop.claims_file: the rule reads it only for stop.claims = 'decided'"],
        ),
        (
            "[stop]\nclaims = 'decided'\nclaims_file = 'nowhere.toml'\n",
            ["stop.claims_file: nowhere.toml: cannot read"],
        ),
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


def test_claims_need_a_claim_the_cells_answer(tmp_path):
    body = BASE.replace('["standard", "one_swap"]', '["exchange"]')
    path, out = write(tmp_path, body + '[stop]\nclaims = "decided"\n')
    result = run(path)
    assert result.exit_code == 2
    assert "stop.claims: no claim the rule decides is answered by this grid's cells" in (
        result.stderr
    )
    path, out = write(tmp_path, BASE + '[stop]\nclaims = "all"\n')
    result = run(path)
    assert result.exit_code == 2 and "stop.claims: 'all' is not known" in result.stderr
    assert not out.exists()


def test_a_bad_rule_by_set_is_refused(tmp_path):
    path, out = write(tmp_path, BASE + RULE)
    result = run(path, "--set", "stop.win_rate=half")
    assert result.exit_code == 2 and "stop.win_rate: 'half' is not a number" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("key, value", [("win_rate", "1e-200"), ("comparisons", "1e-300")])
def test_a_half_width_too_narrow_for_any_sweep_is_refused_by_set(tmp_path, key, value):
    path, out = write(tmp_path, BASE + RULE)
    result = run(path, "--set", f"stop.{key}={value}")
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clocksweep: error: "), result.stderr
    assert f"stop.{key}: {value} is out of range" in lines[0] and "(1e-12, 0.5)" in lines[0]
    assert not out.exists()


# --- Where it stops -----------------------------------------------------------------------


def file_digests(out: Path) -> list[tuple[str, str]]:
    return [(f["path"], f["sha256"]) for e in manifest_entries(out) for f in e["files"]]


def on_disk(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in (out / "shards").rglob("*.parquet"))


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory, local_ray) -> tuple[Path, Path, dict]:
    """The rule run in this process, on the module's local Ray instance of two CPUs (asked
    for here: else the run started an instance of its own, and a test asking for the
    module's instance later started a second)."""
    path, out = write(tmp_path_factory.mktemp("two"), BASE + RULE)
    result = run(path, executor="ray")
    assert result.exit_code == 0, result.output
    (out.parent / "stderr.txt").write_text(result.stderr)
    return path, out, json.loads((out / "run.json").read_text())["stop"]


def test_the_run_stops_where_the_rule_first_holds(two_workers):
    _, out, stop = two_workers
    at = stop["stopped_at_shard"]
    assert stop["met"] and stop["deals"] == (at + 1) * 1000 and 3 <= at < 119
    assert [e["index"] for e in manifest_entries(out)] == list(range(at + 1))
    # Shards past the point were started at most STOP_AHEAD x in flight (4 here) ahead.
    said = (out.parent / "stderr.txt").read_text()
    past = re.search(r"(\d+) shard\(s\) past the stopping point \(shard \d+\) were removed", said)
    assert past is None or int(past[1]) <= sweep_driver.STOP_AHEAD * 4, said
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
            "run.executor=threads",  # the stop rule, not Ray, is what is tested
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

    resumed = driver(path, out, "ray.num_cpus=1", "run.executor=threads")
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


def test_an_unmet_rule_plays_every_deal_and_says_how_far_it_was(tmp_path):
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


# --- Sweeps that grow ---------------------------------------------------------------------


def inodes(out: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in (out / "shards").rglob("*.parquet")
    }


def test_more_deals_play_only_the_new_shards(tmp_path):
    body = BASE.replace("deals = 120000", "deals = 2500")
    path, out = write(tmp_path, body)
    assert run(path).exit_code == 0
    kept = {k: v for k, v in inodes(out).items() if "deals-2000-2499" not in k}

    grown = run(path, "--set", "deals=5000")
    assert grown.exit_code == 0, grown.output
    # Shard 2 held 500 deals and now holds 1,000: it alone of the old ones is played again.
    assert "2 already committed" in grown.stderr and "3 played" in grown.stderr, grown.stderr
    assert (
        "holds deals 2000-2499, and the sweep now runs to 2999: a run plays it again"
        in grown.stderr
    )
    assert "redone" not in grown.stderr  # nothing failed: the sweep grew
    assert {k: v for k, v in inodes(out).items() if k in kept} == kept  # untouched

    fresh_path, fresh = write(tmp_path / "fresh", BASE.replace("deals = 120000", "deals = 5000"))
    assert run(fresh_path).exit_code == 0
    assert file_digests(out) == file_digests(fresh)

    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    shrunk = run(path, "--set", "deals=1500")
    assert shrunk.exit_code == 2
    assert shrunk.stderr.strip() == (
        "clocksweep: error: deals: 1,500 is fewer than the 5,000 deals already committed in "
        f"{out}; raise deals to grow the sweep, or use --fresh to start over"
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_tighter_rule_grows_a_stopped_sweep_and_a_looser_one_cuts_it(
    two_workers, tmp_path, local_ray
):
    path, reference, stop = two_workers
    loose_path, out = write(tmp_path, BASE + RULE.replace("0.015", "0.03"))
    assert run(loose_path).exit_code == 0
    loose = json.loads((out / "run.json").read_text())["stop"]
    assert loose["met"] and loose["stopped_at_shard"] < stop["stopped_at_shard"]
    loose_files = file_digests(out)

    tighter = run(path, "--set", f"output={out}")
    assert tighter.exit_code == 0, tighter.output
    assert f"{loose['stopped_at_shard'] + 1} already committed" in tighter.stderr
    assert json.loads((out / "run.json").read_text())["stop"] == stop
    assert file_digests(out) == file_digests(reference)

    report = CliRunner().invoke(cli, ["report", str(out), "--no-plots", "--replay", "0"])
    assert report.exit_code == 0 and (out / "report").is_dir(), report.output
    looser = run(loose_path)
    assert looser.exit_code == 0, looser.output
    kept, cut = loose["stopped_at_shard"] + 1, stop["stopped_at_shard"] - loose["stopped_at_shard"]
    assert (
        f"{cut} shard(s) past the stopping point (shard {kept - 1}) were removed "
        f"({cut} committed before)"
    ) in looser.stderr, looser.stderr
    assert f"(0 played, {kept} already committed)" in looser.stderr, looser.stderr
    assert not (out / "report").exists()  # it told of the shards removed
    assert (
        json.loads((out / "run.json").read_text())["runs"][-1]["shards_already_committed"] == kept
    )
    assert file_digests(out) == loose_files and on_disk(out) == sorted(f for f, _ in loose_files)


def test_a_rule_added_to_a_sweep_played_without_one_reads_its_tallies(
    two_workers, tmp_path, monkeypatch
):
    """Five shards past the point, with the manifest in pages of 4: pages past the point, and
    (but when the point ends a page) one it falls inside, are opened and cut."""
    _, reference, stop = two_workers
    monkeypatch.setenv(PAGE_ENV, "4")
    played = (stop["stopped_at_shard"] + 1) * 1000 + 5000
    path, out = write(tmp_path, BASE.replace("deals = 120000", f"deals = {played}"))
    assert run(path).exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["pages"]
    ruled, _ = write(tmp_path, BASE + RULE, name="ruled.toml")
    added = run(ruled, "--set", f"output={out}")
    assert added.exit_code == 0, added.output
    assert "0 played" in added.stderr and f"stopped after shard {stop['stopped_at_shard']}" in (
        added.stderr
    )
    assert "5 shard(s) past the stopping point" in added.stderr
    assert "were removed (5 committed before)" in added.stderr
    assert file_digests(out) == file_digests(reference)
    assert on_disk(out) == on_disk(reference)
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


CLAIMS = """
name = "claims"
seed = 5
deals = 2000000
shard_size = 10000
record = "summary"
output = "{out}"
[grid]
variant = ["standard", "one_swap"]
strategy = ["most", "fewest"]
order = ["round-robin", "packets"]
[stop]
claims = "decided"
"""


def test_claims_decided_stop_the_run_where_the_report_decides_them_too(tmp_path):
    path, out = write(tmp_path, CLAIMS)
    result = run(path)
    assert result.exit_code == 0, result.output
    stop = json.loads((out / "run.json").read_text())["stop"]
    assert stop["met"], stop
    verdicts = {t["claim"]: t["verdict"] for t in stop["targets"] if t["kind"] == "claim"}
    # standard in two orders, one_swap most/fewest: three claims these cells answer.
    assert set(verdicts) == {"one_in_13", "better_than_one_in_three", "deal_order_no_change"}
    assert "inconclusive" not in verdicts.values()

    # The rule did not hold a shard earlier (replayed from the manifest's tallies).
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep.stopping import Stopping

    cfg = sweep_config.load(str(path))
    stopping = Stopping(cfg.stop, cfg.cells, cfg.deals)
    held = [
        stopping.add(e["deals"], e["tally"]["wins"], e["tally"]["pairs"])
        for e in manifest_entries(out)
    ]
    assert held[-1] and not any(held[:-1])

    report = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    document = json.loads((tmp_path / "rep" / "report.json").read_text())
    fixed = {c["id"]: c["verdict"] for c in document["claims"]}
    for claim, verdict in verdicts.items():  # the fixed-n verdict, narrower, agrees
        assert fixed[claim] == verdict, (claim, verdict, fixed[claim])


# A user's claims: two a stop rule decides on the cells below (a win rate refuted, one
# confirmed), one it leaves to the report (deal facts), one no cell answers (no watch cell).
USERS_CLAIMS = """
[[claim]]
id = "one_swap_25_to_30"
says = "With one swap, win rates climb to roughly 25-30%"
source = { title = "a page" }
measure = "win_rate"
cells = { variant = "one_swap", strategy = "most" }
asserts = { between = [0.25, 0.30] }

[[claim]]
id = "about_one_in_13"
says = "About one deal in 13"
source = { title = "a page", url = "https://example.org/clock" }
measure = "win_rate"
cells = { variant = "standard" }
asserts = { equals = "1/13", tolerance = 0.02 }

[[claim]]
id = "no_king_no_win"
says = "No king at an hour pile's bottom, no win"
source = { title = "a page" }
measure = "win_rate_where"
cells = { variant = "standard" }
fact = "kings_at_bottom"
range = [0, 0]
asserts = { never = true, chances = 100 }

[[claim]]
id = "watch_a_third"
says = "Watch wins a third of its deals"
source = { title = "a page" }
measure = "win_rate"
cells = { variant = "watch", strategy = "random" }
asserts = { equals = "1/3" }
"""


def test_a_stop_rule_decides_a_users_claims_file(tmp_path):
    """The rule decides the claims of the user's file that the cells' tallies answer, and
    the report, reading the same file, gives the same verdicts on fixed-n intervals."""
    (tmp_path / "mine.toml").write_text(USERS_CLAIMS)
    rule = f'[stop]\nclaims = "decided"\nclaims_file = "{tmp_path / "mine.toml"}"\n'
    path, out = write(tmp_path, BASE + '[run]\nexecutor = "threads"\n' + rule)
    result = run(path)
    assert result.exit_code == 0, result.output
    stop = json.loads((out / "run.json").read_text())["stop"]
    assert stop["met"] and stop["deals"] < 120_000, stop
    assert stop["rule"]["claims_file"] == str(tmp_path / "mine.toml")
    verdicts = {t["claim"]: t["verdict"] for t in stop["targets"] if t["kind"] == "claim"}
    assert verdicts == {"one_swap_25_to_30": "refuted", "about_one_in_13": "confirmed"}

    mine = str(tmp_path / "mine.toml")
    report = CliRunner().invoke(
        cli, ["report", str(out), "--out", str(tmp_path / "rep"), "--no-plots", "--claims", mine]
    )
    assert report.exit_code == 0, report.output
    document = json.loads((tmp_path / "rep" / "report.json").read_text())
    fixed = {c["id"]: c for c in document["claims"]}
    for claim, verdict in verdicts.items():  # the fixed-n verdict, narrower, agrees
        assert fixed[claim]["verdict"] == verdict, (claim, verdict, fixed[claim])
    assert fixed["no_king_no_win"]["verdict"] == "confirmed"  # on every deal's facts
    assert fixed["watch_a_third"]["verdict"] == "not measured"
    assert fixed["watch_a_third"]["needs"] == "a cell of watch random"
    targets = {t["claim"]: t for t in document["stopping"]["targets"] if t["kind"] == "claim"}
    assert targets["about_one_in_13"]["fixed_n_interval"] == fixed["about_one_in_13"]["interval"]


def test_a_shard_tally_counts_wins_and_lone_wins_deal_by_deal():
    """The tally counted batch by batch against the plain count, on every cell and pair of
    quick.toml's grid, over two batches of odd sizes, one of int8 results, one of booleans."""
    import numpy as np

    from pipeline.engine import kernel
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep import task
    from pipeline.sweep.stopping import tally_pairs

    cells = list(sweep_config.load(str(Path(__file__).parents[2] / "configs/quick.toml")).cells)
    pairs = tally_pairs(cells)
    won = kernel.play(3, 0, 3001, cells)["won"]
    first, second = task.StopTally.empty(len(cells), pairs), task.StopTally.empty(len(cells), pairs)
    first.add(won[:, :1001])
    second.add(won[:, 1001:].astype(bool))  # the wins of earlier groups come as booleans
    tally = (first + second).entry()
    wins, lone = tally["wins"], tally["pairs"]
    plain = won.astype(bool)
    assert wins == plain.sum(axis=1).tolist()
    assert lone == [
        [int((plain[a] & ~plain[b]).sum()), int((plain[b] & ~plain[a]).sum())] for a, b in pairs
    ]
    assert np.asarray(lone).sum() > 0


def test_a_claim_over_some_strategies_is_decided_only_as_they_can_decide_it():
    """The stop rule's verdicts are the report's: no difference between two Watch picks is not
    none between every pick, nor one one_swap strategy below 1/3 every one below it."""
    from pipeline.engine import rules
    from pipeline.engine.rules import Cell
    from pipeline.sweep.stopping import claim_checks

    class Fixed:  # evidence that gives every read one interval, the rates as listed
        def __init__(self, interval):
            self.fixed = interval

        def rate(self, cell):
            return -rules.COUNT_STRATEGIES.index(cell.strategy)

        def interval(self, read):
            return self.fixed

    def check_of(cells, claim):
        (check,) = [check for check in claim_checks(cells, rule_pages()) if check.id == claim]
        return lambda interval: check.claim.decide_among(check.candidates, Fixed(interval)).verdict

    two = check_of(
        [Cell("watch", "clockwise"), Cell("watch", "random")], "pick_makes_no_difference"
    )
    assert two((-0.001, 0.001)) == "inconclusive"
    assert two((0.01, 0.02)) == "refuted"
    every = check_of([Cell("watch", s) for s in rules.COUNT_STRATEGIES], "pick_makes_no_difference")
    assert every((-0.001, 0.001)) == "confirmed"

    one = check_of([Cell("one_swap", "most")], "better_than_one_in_three")
    assert one((0.2, 0.25)) == "inconclusive"
    assert one((0.35, 0.4)) == "confirmed"
    every = check_of(
        [Cell("one_swap", s) for s in rules.COUNT_STRATEGIES], "better_than_one_in_three"
    )
    assert every((0.2, 0.25)) == "refuted"


def test_the_rule_decides_the_claims_on_the_cells_the_report_reads():
    """No standard cell: the report reads play_out for standard play, and so does the rule
    (the old rule read the standard cell alone, and decided neither claim here)."""
    from pipeline.engine.rules import Cell
    from pipeline.sweep.stopping import claim_checks

    cells = [Cell("play_out", order="round-robin"), Cell("play_out", order="packets")]
    checks = {check.id: check for check in claim_checks(cells, rule_pages())}
    assert set(checks) == {"one_in_13", "deal_order_no_change"}
    assert list(checks["one_in_13"].rates) == [cells[0]]
    assert list(checks["deal_order_no_change"].pairs) == [tuple(cells)]


def test_no_difference_between_picks_is_read_on_the_best_and_the_worst():
    """As in the report: the pick claim reads the Watch strategies with the most and the
    fewest wins so far, not every pair; the target shows that pair's interval."""
    from pipeline.engine import rules
    from pipeline.engine.rules import Cell
    from pipeline.sweep.stopping import Stopping, StopRule, tally_pairs

    cells = [Cell("watch", s) for s in rules.COUNT_STRATEGIES]
    # Made-up wins of 100,000 deals: far apart, so the difference is decided at once.
    wins = {"most": 37_300, "fewest": 28_700, "random": 31_600, "clockwise": 31_000}
    won = [wins[cell.strategy] for cell in cells]
    lone = []
    for a, b in tally_pairs(cells):
        gap = won[a] - won[b]
        lone.append([max(gap, 0) + 1_000, max(-gap, 0) + 1_000])
    stopping = Stopping(StopRule(claims="decided", claim_set=rule_pages()), cells, 10**6)
    assert stopping.add(100_000, won, lone)
    (target,) = [t for t in stopping.targets() if t.claim == "pick_makes_no_difference"]
    best, worst = Cell("watch", "most").label, Cell("watch", "fewest").label
    assert set(target.cells) == {best, worst} and target.verdict == "refuted"
    assert abs(target.estimate) == pytest.approx((wins["most"] - wins["fewest"]) / 100_000)


def test_the_deals_a_rule_still_needs_stay_a_count_however_narrow_its_half_width():
    """A half-width far past what any sweep reaches (here past the config's bounds, which
    refuse it) needs every deal there is, not an OverflowError: in the progress line, in
    run.json's record, and after every shard."""
    import io

    from pipeline.engine.rules import Cell
    from pipeline.sweep.progress import Progress
    from pipeline.sweep.stopping import Stopping, StopRule

    cells = [Cell("standard", None), Cell("one_swap", "most"), Cell("one_swap", "fewest")]
    for rule in (
        StopRule(win_rate=1e-300),
        StopRule(comparisons=1e-300),
        StopRule(win_rate=2e-12, comparisons="decided"),  # the narrowest the config allows
    ):
        stopping = Stopping(rule, cells, 10**6)
        progress = Progress(io.StringIO(), 100, 10**6, 0, 0)
        progress.target, progress.still_needed = stopping.status, stopping.deals_still_needed
        for _ in range(3):
            stopping.add(1000, [80, 370, 330], [[60, 20]])
            needed = stopping.deals_still_needed()  # None: no difference to decide yet
            assert needed is None or 0 < needed <= 2**64 - stopping.deals, needed
            status = progress.status()
            assert needed is None or f"about {needed:,} more deals needed" in status, status
        assert isinstance(needed, int)
        record = stopping.record(None)
        assert json.loads(json.dumps(record))["deals_still_needed"] == needed


def test_a_looser_rule_that_cuts_a_page_says_so(tmp_path, monkeypatch):
    """Ten shards, in pages of four (0-3, 4-7; 8 and 9 in the manifest): a rule that holds at
    shard 5 cuts page 4-7. Its file goes with the shards past the stop, and the run says so;
    it is no file of an earlier run that no committed shard lists."""
    monkeypatch.setenv(PAGE_ENV, "4")
    body = BASE.replace("deals = 120000", "deals = 10000")
    path, out = write(tmp_path, body)
    assert run(path).exit_code == 0
    pages = json.loads((out / "manifest.json").read_text())["pages"]
    assert [(p["first"], p["last"]) for p in pages] == [(0, 3), (4, 7)]

    ruled, _ = write(tmp_path, body + "[stop]\nwin_rate = 0.45\nmin_deals = 6000\n", "cut.toml")
    cut = run(ruled)
    assert cut.exit_code == 0, cut.output
    assert "no committed shard lists" not in cut.stderr, cut.stderr
    assert (
        "manifest/shards-000004-000007.json: cut at the stopping point (shard 5): its shards "
        "past it are removed, and this page with them; shards 4-5 are listed in manifest.json "
        "instead"
    ) in cut.stderr, cut.stderr
    assert "4 shard(s) past the stopping point (shard 5) were removed (4 committed before)" in (
        cut.stderr
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(p["first"], p["last"]) for p in manifest["pages"]] == [(0, 3)]
    assert [e["index"] for e in manifest["shards"]] == [4, 5]
    assert sorted(p.name for p in (out / "manifest").iterdir()) == ["shards-000000-000003.json"]
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


def test_the_time_left_is_that_of_the_deals_the_rule_still_needs():
    """Under a stop rule the run ends when it holds: the progress line's time left is for the
    deals it still needs, when fewer than the config's, at the rate since play began."""
    import io
    import time

    from pipeline.sweep.progress import Progress

    progress = Progress(io.StringIO(), 100, 1_000_000, 0, 0)
    progress.started = time.monotonic() - 10.0
    progress.done_deals = 100_000  # 10,000 deals/s: 90 s for the 900,000 left
    assert "ETA 0:01:30" in progress.status()
    progress.still_needed = lambda: 50_000
    assert "ETA 0:00:05" in progress.status()
    progress.still_needed = lambda: None  # not known yet: the config's deals
    assert "ETA 0:01:30" in progress.status()


def test_claims_sharing_a_cell_are_decided_as_soon_as_the_narrowest_aim_allows():
    """Two claims read the standard cell: one pinned to a tenth of a point's band, one to
    half a point. Its sequence bets for the narrower (and its first shard, before any
    estimate, for no more than the tolerance, not for the prior's distance to the band), so
    the band's claim is decided near where a sequence aimed at it gets there: about
    2 log(2/alpha) sigma^2 / h^2 deals for the half-width h it needs."""
    import math

    from pipeline.engine.rules import Cell
    from pipeline.inference import claim_file, stats
    from pipeline.sweep.stopping import Stopping, StopRule

    text = USERS_CLAIMS.split("[[claim]]")[2].replace('"about_one_in_13"', '"loose"')
    band = text.replace('"loose"', '"band"').replace(
        'asserts = { equals = "1/13", tolerance = 0.02 }',
        "asserts = { between = [0.0755, 0.0765] }",
    )
    claim_set = claim_file.parse("[[claim]]" + text + "[[claim]]" + band, "mine.toml")
    cells = [Cell()]
    stopping = Stopping(StopRule(claims="decided", claim_set=claim_set), cells, 10**9)
    shard, wins = 260_000, 20_000  # exactly 1/13 of every shard won
    while not stopping.add(shard, [wins], []):
        assert stopping.deals < 10**8, stopping.status()
    p = 1 / 13
    needed = 2 * math.log(2 / (1 - stats.CLAIM_CONFIDENCE)) * p * (1 - p) / (p - 0.0765) ** 2
    assert stopping.deals <= 2 * needed, (stopping.deals, needed)
    assert {t.claim: t.verdict for t in stopping.targets()} == {
        "loose": "confirmed",
        "band": "refuted",
    }
