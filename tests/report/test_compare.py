"""`clocksweep compare A B [C ...]` and `api.compare`, on real sweeps played on threads:

- the config keys listed as differing are exactly those changed between the runs;
- runs of another seed are independent samples; runs of one seed are paired on the deals both
  hold, in either record mode (a summary sweep's wins table pairs it): the 2 x 2 table of
  their wins, rebuilt from the rows, gives compare's difference and interval, and on the same
  deals the paired interval is narrower than the independent one;
- each run's n, wins and rate are the report's; the cells only some runs have are listed;
- ``--out`` writes compare.html (its plot inline), compare.json and compare.csv of the same
  rows as `api.compare`;
- a path that is not a run: one line, exit status 2, nothing written.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
from helpers import clocksweep, config_file, sweep_cli

import pipeline.api as api
from pipeline.inference import stats

CONFIG = """
name = "base"
seed = 77
deals = 3000
shard_size = 1000
[grid]
variant = ["standard", "watch"]
strategy = ["most", {strategy}]
[run]
executor = "threads"
[ray]
num_cpus = 1
"""
# Two strategies of the user's of one name, in two files: the same cell's label in two runs
# that play it differently on the same deals.
PICKS = {
    "larger": "counts[hour] > counts[best - 1]",
    "smaller": "counts[hour] < counts[best - 1]",
}
PICK = """
def pick(counts):
    best = 0
    for hour in range(12):
        if counts[hour] > 0 and (best == 0 or {better}):
            best = hour + 1
    return best
"""


def swept(tmp: Path, name: str, strategy: str = '"fewest"', *sets: str) -> str:
    directory = tmp / name
    directory.mkdir()
    out = tmp / "results" / name
    config = config_file(directory, CONFIG.format(strategy=strategy))
    result = sweep_cli(config, out, *sets)
    assert result.exit_code == 0, result.output
    return str(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("compare")
    made = {
        "a": swept(tmp, "a"),
        "other_seed": swept(tmp, "other_seed", '"fewest"', "seed=78", "record=summary"),
        "fewer": swept(
            tmp, "fewer", '"fewest"', "deals=2000", "record=summary", "grid.strategy=most"
        ),
    }
    for name, better in PICKS.items():
        (tmp / name).mkdir()
        (tmp / name / "pick.py").write_text(PICK.format(better=better))
        made[name] = str(tmp / "results" / name)
        config = config_file(tmp / name, CONFIG.format(strategy='"pick.py:pick"'))
        result = sweep_cli(config, made[name])
        assert result.exit_code == 0, result.output
    return made


def wins_by_deal(where: str, label: str) -> pl.DataFrame:
    cell = api.open_results(where).cells().filter(pl.col("label") == label).row(0, named=True)
    rows = (
        api.open_results(where)
        .rows()
        .filter(
            *(
                pl.col(axis).is_null() if cell[axis] is None else pl.col(axis) == cell[axis]
                for axis in ("variant", "strategy", "finale", "order", "depth")
            )
        )
    )
    return rows.select("deal", "won").collect()


def test_the_keys_listed_are_exactly_those_changed(runs):
    result = clocksweep("compare", runs["a"], runs["other_seed"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    listed = text.split("config keys that differ:\n", 1)[1].split("\nA - B:", 1)[0]
    keys = [line.split()[0] for line in listed.splitlines()[1:]]
    assert sorted(keys) == sorted(["seed", "record", "output"])
    assert "A - B: independent: seeds differ (77, 78)" in text
    frame = api.compare(runs["a"], runs["other_seed"])
    assert set(frame["a_minus_b_method"]) == {"independent"}
    for row in frame.iter_rows(named=True):
        expected = stats.independent_difference(
            row["a_wins"], row["a_n"], row["b_wins"], row["b_n"]
        )
        assert (row["a_minus_b"], row["a_minus_b_low"], row["a_minus_b_high"]) == expected


def test_one_seed_is_paired_on_the_deals_both_hold_in_summary_records_too(runs):
    frame = api.compare(runs["a"], runs["fewer"])
    assert set(frame["a_minus_b_method"]) == {"paired"}
    fewer_deals = api.open_results(runs["fewer"]).cells()["n"][0]
    for row in frame.iter_rows(named=True):
        won = wins_by_deal(runs["a"], row["label"])
        common = won.filter(pl.col("deal") < fewer_deals)["won"].sum()
        # The same cell on the same deals wins the same: B's wins are A's on B's deals.
        assert row["b_wins"] == common and row["a_wins"] == won["won"].sum()
        assert row["a_minus_b_deals"] == fewer_deals and row["a_minus_b"] == 0
    result = clocksweep("compare", runs["a"], runs["fewer"])
    assert f"paired on the {fewer_deals:,} deals both hold" in result.stdout
    only_a = set(api.open_results(runs["a"]).cells()["label"]) - set(frame["label"])
    assert only_a and all(f"{label}: only in A" in result.stdout for label in only_a)


def test_the_paired_interval_is_the_rows_and_narrower_than_the_independent(runs):
    frame = api.compare(runs["larger"], runs["smaller"])
    mine = frame.filter(pl.col("strategy") == "pick").row(0, named=True)
    a = wins_by_deal(runs["larger"], mine["label"])
    b = wins_by_deal(runs["smaller"], mine["label"])
    both = a.join(b, on="deal", suffix="_b")
    table = [
        int((both["won"] & both["won_b"]).sum()),
        int((both["won"] & ~both["won_b"]).sum()),
        int((~both["won"] & both["won_b"]).sum()),
        int((~both["won"] & ~both["won_b"]).sum()),
    ]
    assert table[1] + table[2] > 0  # the two picks differ on some deals
    paired = stats.paired_difference(*table)
    assert mine["a_minus_b_method"] == "paired" and mine["a_minus_b_deals"] == len(both)
    assert (mine["a_minus_b"], mine["a_minus_b_low"], mine["a_minus_b_high"]) == (
        paired.difference,
        paired.low,
        paired.high,
    )
    assert mine["a_minus_b_mcnemar_p"] == paired.p_value
    _, low, high = stats.independent_difference(
        mine["a_wins"], mine["a_n"], mine["b_wins"], mine["b_n"]
    )
    assert paired.high - paired.low < high - low
    keys = clocksweep("compare", runs["larger"], runs["smaller"]).stdout
    assert "custom.pick.digest" in keys


def test_each_runs_rates_are_the_reports(runs):
    frame = api.compare(runs["a"], runs["other_seed"])
    for letter, where in (("a", runs["a"]), ("b", runs["other_seed"])):
        cells = api.open_results(where).cells()
        for row in frame.iter_rows(named=True):
            cell = cells.filter(pl.col("label") == row["label"]).row(0, named=True)
            assert (row[f"{letter}_n"], row[f"{letter}_wins"]) == (cell["n"], cell["wins"])
            assert (row[f"{letter}_ci_low"], row[f"{letter}_ci_high"]) == (
                cell["ci_low"],
                cell["ci_high"],
            )


def test_out_writes_html_json_and_csv_of_the_rows(runs, tmp_path):
    out = tmp_path / "compared"
    result = clocksweep("compare", runs["a"], runs["other_seed"], runs["fewer"], "--out", out)
    assert result.exit_code == 0, result.output
    frame = api.compare(runs["a"], runs["other_seed"], runs["fewer"])
    document = json.loads((out / "compare.json").read_text())
    assert pl.DataFrame(document["cells"], infer_schema_length=None).equals(frame)
    assert [p["method"] for p in document["pairing"]] == ["independent", "paired"]
    with open(out / "compare.csv") as file:
        assert [row["label"] for row in csv.DictReader(file)] == frame["label"].to_list()
    page = (out / "compare.html").read_text()
    assert "data:image/png;base64," in page and (out / "differences.png").stat().st_size


def test_a_path_that_is_not_a_run_is_one_line_and_nothing_is_written(runs, tmp_path):
    (tmp_path / "not_a_run").mkdir()
    for other in (tmp_path / "not_a_run", tmp_path / "absent"):
        result = clocksweep("compare", runs["a"], other, "--out", tmp_path / "out")
        assert result.exit_code == 2, result.output
        (line,) = result.output.strip().splitlines()
        assert line.startswith("clocksweep: error: ") and str(other) in line
    one = clocksweep("compare", runs["a"])
    assert one.exit_code == 2 and one.output.count("\n") == 1
    assert not (tmp_path / "out").exists()
