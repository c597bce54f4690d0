"""Tests of `clocksweep report` (pipeline/report/) on real results.

Results directories are written here as the sweep writes them: `shard_task.write_shard` (the Ray
task's body) plays each shard with the kernel and writes real Parquet, `manifest.Manifest`
commits it and `sweep.start_run_record` gives run.json; only Ray is left out (the shards are
played in this process). Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.engine.rules import Cell
from pipeline.inference.claims import VERDICTS
from pipeline.records import summary
from pipeline.report import claims, figures
from pipeline.report import document as report
from pipeline.store import layout
from pipeline.store.location import Location
from pipeline.store.manifest import Manifest
from pipeline.sweep import config as sweep_config
from pipeline.sweep import driver as sweep
from pipeline.sweep import task as shard_task

CLAIM_IDS = [claim.id for claim in claims.rule_pages()]  # the shipped claims file's, in order

REPLAY = 1500


def write_results(
    where: Path,
    deals: int,
    shard_size: int,
    record: str,
    grid=sweep_config.FULL_GRID,
    seed: int = 31337,
) -> sweep_config.SweepConfig:
    """A results directory as `clocksweep run` writes it, the shards played in-process."""
    config = sweep_config.from_dict(
        {
            "name": "t",
            "seed": seed,
            "deals": deals,
            "shard_size": shard_size,
            "record": record,
            "output": str(where),
            "grid": grid,
        }
    )
    location = Location(config.output)
    shards = sweep.plan(config)
    run = sweep.start_run_record(config, None, None, shards.count, 0)
    location.write_json(layout.RUN_FILE, run.to_json())
    manifest = Manifest(location, config.hash)
    for shard in shards:
        job = shard_task.ShardJob(
            location=location,
            shard=shard,
            seed=config.seed,
            cells=tuple(config.cells),
            record=record,
            provenance=sweep.provenance(config),
            attempt=1,
        )
        manifest.commit(replace(shard_task.write_shard(job), node="test", attempts=1))
    manifest.flush()
    run.runs[-1].update(finished=sweep.now(), status="complete")
    location.write_json(layout.RUN_FILE, run.to_json())
    return config


@pytest.fixture(scope="module")
def both_modes(tmp_path_factory):
    """The same 3900 deals x 96 cells, as per-deal records and as summary records."""
    root = tmp_path_factory.mktemp("results")
    write_results(root / "deals", 3900, 1300, "deals")
    write_results(root / "summary", 3900, 1300, "summary")
    return root / "deals", root / "summary"


@pytest.fixture(scope="module")
def deals_report(both_modes):
    return report.build(str(both_modes[0]), replay=REPLAY)


@pytest.fixture(scope="module")
def summary_report(both_modes):
    return report.build(str(both_modes[1]), replay=REPLAY)


def test_summary_and_deals_records_give_identical_tables(deals_report, summary_report):
    for name in summary.TABLES:
        assert deals_report.loaded.tables[name].equals(summary_report.loaded.tables[name]), name


def test_summary_and_deals_records_give_identical_figures(deals_report, summary_report):
    a, b = deals_report.document, summary_report.document
    assert a["cells"] == b["cells"]
    assert a["comparisons"] == b["comparisons"]
    assert a["distributions"] == b["distributions"]
    assert a["hint_calibration"] == b["hint_calibration"]
    assert [(c["id"], c["verdict"], c["figure"]) for c in a["claims"]] == [
        (c["id"], c["verdict"], c["figure"]) for c in b["claims"]
    ]


def test_cells_hold_the_spec_fields(deals_report):
    document = json.loads(Path(deals_report.directory, "report.json").read_text())
    cells = document["cells"]
    assert len(cells) == 96
    for cell in cells:
        for key in ("n", "wins", "win_rate", "ci_low", "ci_high", "exact", "z"):
            assert key in cell
        assert cell["n"] == 3900 and 0 <= cell["ci_low"] <= cell["win_rate"] <= cell["ci_high"] <= 1
        exact = figures.exact_win_of(
            Cell(cell["variant"], cell["strategy"], cell["finale"], cell["order"], cell["depth"])
        )
        if exact is None:
            assert cell["exact"] is None and cell["z"] is None
        else:
            assert cell["exact"] == f"{exact.numerator}/{exact.denominator}"
            assert cell["z"] == pytest.approx(
                (cell["win_rate"] - float(exact))
                / (float(exact) * (1 - float(exact)) / 3900) ** 0.5
            )
            assert abs(cell["z"]) < 4.5  # the kernel agrees with the exact values


def test_comparisons_are_paired_and_consistent(deals_report):
    comparisons = deals_report.document["comparisons"]
    kinds = {c["kind"] for c in comparisons}
    assert {"strategy", "order", "finale", "foresight", "rescue_vs_standard"} <= kinds
    rates = {c["label"]: c["win_rate"] for c in deals_report.document["cells"]}
    for c in comparisons:
        assert c["a_rate"] == pytest.approx(rates[c["a"]]) and c["b_rate"] == pytest.approx(
            rates[c["b"]]
        )
        assert c["difference"] == pytest.approx(c["a_rate"] - c["b_rate"])
        assert c["ci_low"] <= c["difference"] <= c["ci_high"] and 0 <= c["mcnemar_p"] <= 1
    # A rescue never loses a deal that standard play wins.
    assert all(
        c["b_only" if c["a"].startswith("standard") else "a_only"] == 0 or True
        for c in comparisons
        if c["kind"] == "rescue_vs_standard"
    )
    rescue = [c for c in comparisons if c["kind"] == "rescue_vs_standard"]
    for c in rescue:
        standard_side = "a_only" if c["a"].startswith("standard") else "b_only"
        assert c[standard_side] == 0, c


def test_best_strategy_lines(deals_report):
    lines = [b["line"] for b in deals_report.document["best_strategies"]]
    watch = next(line for line in lines if line.startswith("watch (finale down, round-robin)"))
    assert "most is best" in watch and "over" in watch


def test_every_rule_page_claim_is_in_report_json(deals_report):
    document = json.loads(Path(deals_report.directory, "report.json").read_text())
    assert [c["id"] for c in document["claims"]] == CLAIM_IDS
    assert len(document["claims"]) == 11
    titles = set()
    for claim in document["claims"]:
        for key in ("source", "sources", "claim", "figure", "interval", "verdict", "rule", "basis"):
            assert key in claim, key
        assert claim["verdict"] in VERDICTS and claim["claim"] and claim["rule"]
        titles.update(source["title"] for source in claim["sources"])
        if claim["figure"] is not None and claim["interval"]:
            low, high = claim["interval"]
            assert low <= claim["figure"] <= high or claim["id"] == "near_misses_come_home"
    assert titles == {
        "Clock",
        "Clock rules",
        "Clock Patience",
        "Clock Solitaire Rules: How to Play Clock Patience",
    }


def test_claims_on_this_sweep(deals_report):
    verdicts = {c["id"]: c for c in deals_report.document["claims"]}
    # Clear-cut on 3900 deals: the rescue choice matters, informed beats the blind choice,
    # play-it-out deaths are never away from their pile, won deals turn 52 cards.
    assert verdicts["pick_makes_no_difference"]["verdict"] == "refuted"
    assert verdicts["foresight_no_agency"]["verdict"] == "refuted"
    assert verdicts["play_out_deaths"]["verdict"] == "refuted"
    assert verdicts["won_deal_52_flips"]["verdict"] == "confirmed"
    assert verdicts["thirteen_losses_ordinary"]["verdict"] == "confirmed"
    # Too few deals to pin 1/13 to half a point: said so, not guessed.
    assert verdicts["one_in_13"]["verdict"] == "inconclusive"
    # The deal facts come from the records of every deal, no replay needed.
    for claim_id in ("no_win_without_king_bottom", "unvisited_by_third_king"):
        assert "every deal" in verdicts[claim_id]["basis"], verdicts[claim_id]
    assert verdicts["no_win_without_king_bottom"]["verdict"] in ("confirmed", "inconclusive")
    assert verdicts["no_win_without_king_bottom"]["figure"] == 0.0


def test_replay_when_the_records_hold_no_deal_facts(tmp_path):
    # No standard cell, so no deal facts recorded: the claims replay the sweep's first deals,
    # checked against the outcomes play_out recorded for them (its restart-free deals are
    # exactly the standard wins).
    where = tmp_path / "nostandard"
    write_results(
        where, 2600, 1300, "deals", grid={"variant": ["watch", "play_out"], "strategy": ["most"]}
    )
    made = report.build(str(where), replay=2000, plots_enabled=False)
    verdicts = {c["id"]: c for c in made.document["claims"]}
    basis = verdicts["no_win_without_king_bottom"]["basis"]
    assert "replay of deals 0-1999" in basis
    assert "agree with the sweep's records on 2,000 of 2,000 deals" in basis
    assert verdicts["no_win_without_king_bottom"]["figure"] == 0.0
    assert "replay" in verdicts["unvisited_by_third_king"]["basis"]
    none = report.build(str(where), replay=0, plots_enabled=False)
    claim = next(c for c in none.document["claims"] if c["id"] == "unvisited_by_third_king")
    assert claim["verdict"] == "not measured" and "standard cell" in claim["needs"]


def test_claims_name_the_cells_they_need(tmp_path):
    where = tmp_path / "standard"
    write_results(where, 2600, 1300, "deals", grid={"variant": ["standard"]})
    made = report.build(str(where), replay=0, plots_enabled=False)
    verdicts = {c["id"]: c for c in made.document["claims"]}
    for claim_id in (
        "better_than_one_in_three",
        "pick_makes_no_difference",
        "near_misses_come_home",
        "foresight_no_agency",
        "deal_order_no_change",
        "play_out_deaths",
    ):
        assert verdicts[claim_id]["verdict"] == "not measured", claim_id
        assert verdicts[claim_id]["needs"], claim_id
    assert "one_swap" in verdicts["better_than_one_in_three"]["needs"]
    assert "packets" in verdicts["deal_order_no_change"]["needs"]


def test_standard_claims_settle_with_enough_deals(tmp_path):
    # 100,000 deals of standard play in both deal orders pin 1/13 and the order's effect to
    # within half a point at 99.9%.
    where = tmp_path / "big"
    write_results(
        where,
        100_000,
        50_000,
        "summary",
        grid={"variant": ["standard"], "order": ["round-robin", "packets"]},
    )
    made = report.build(str(where), replay=4000, plots_enabled=False)
    verdicts = {c["id"]: c["verdict"] for c in made.document["claims"]}
    assert verdicts["one_in_13"] == "confirmed"
    assert verdicts["deal_order_no_change"] == "confirmed"
    assert verdicts["won_deal_52_flips"] == "confirmed"
    assert verdicts["no_win_without_king_bottom"] == "confirmed"
    assert verdicts["unvisited_by_third_king"] == "refuted"


def test_distributions(deals_report):
    dist = deals_report.document["distributions"]
    standard = next(
        d for d in dist["cards_turned"] if d["cell"] == "standard finale=down order=round-robin"
    )
    assert standard["n"] == 3900 and standard["p_value"] > 1e-4
    assert sum(r["observed"] for r in standard["rows"]) == 3900
    assert {d["order"] for d in dist["down_at_stop"]} == {"round-robin", "packets"}
    restarts = dist["restarts"]
    assert len(restarts) == 4 and all(r["stray_deaths"] == 0 for r in restarts)
    rescue = [
        r
        for r in dist["rescue_by_down_at_stop"]
        if r["cell"] == "watch most finale=down order=round-robin"
    ]
    assert rescue and all(r["exact"] is not None for r in rescue)
    assert next(r for r in rescue if r["down_at_stop"] == 1)["win_rate"] == 1.0
    calibration = {h["cell"]: h for h in deals_report.document["hint_calibration"]}
    assert not any("oracle" in cell for cell in calibration)
    assert calibration["watch random finale=down order=round-robin"]["p_value"] > 1e-4


def test_outputs_written(deals_report):
    directory = Path(deals_report.directory)
    for name in (
        "report.md",
        "report.html",
        "report.json",
        "cells.csv",
        "comparisons.csv",
        "claims.csv",
        "cards_turned.csv",
        "hint_calibration.csv",
        "summary_counts.parquet",
    ):
        assert (directory / name).stat().st_size > 0, name
    for name in ("win_rates.png", "cards_turned.png", "hint_calibration.png", "restarts.png"):
        assert (directory / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    cells = pl.read_csv(directory / "cells.csv")
    assert cells.height == 96 and {"n", "wins", "win_rate", "ci_low", "ci_high"} <= set(
        cells.columns
    )
    markdown = (directory / "report.md").read_text()
    assert "## Claims" in markdown and "![" in markdown


def test_html_is_self_contained(deals_report):
    html = Path(deals_report.directory, "report.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]*)"', html)
    assert len(images) == 5 and all(src.startswith("data:image/png;base64,") for src in images)
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<(link|script|iframe)\b", html)
    assert not re.search(r'(src|href)="(?!data:)', html)
    for claim_id in CLAIM_IDS:
        assert claim_id in html


def test_cli_report(both_modes, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["report", str(both_modes[1]), "--replay", "300", "--out", str(out), "--no-plots"]
    )
    assert result.exit_code == 0, result.output
    assert "best strategy per variant:" in result.output and "claims:" in result.output
    for claim_id in CLAIM_IDS:
        assert claim_id in result.output
    assert (out / "report.json").exists() and not (out / "win_rates.png").exists()


def test_cli_report_draws_its_plots_in_its_own_process(both_modes, tmp_path):
    """`clocksweep report` as a user runs it, in a process of its own: the plots' process is
    forked before the report module is imported. Every plot is written, and the command
    exits with no process left behind (one would hold its output open past the timeout)."""
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipeline.cli import cli; cli()",
            "report",
            str(both_modes[1]),
            "--replay",
            "300",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in report.PLOT_TITLES:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "best strategy per variant:" in done.stdout


@pytest.mark.parametrize(
    "setup,expected",
    [
        ("missing", "no such directory"),
        ("a_file", "a file, not a results directory (a directory with run.json)"),
        ("empty", "not a clocksweep results directory"),
        ("bad_run", "run.json is not valid JSON"),
        ("no_manifest", "no manifest.json, so no committed shard to read"),
    ],
)
def test_cli_report_errors_are_one_line(tmp_path, setup, expected):
    where = tmp_path / "r"
    if setup == "a_file":
        where.write_text("not a directory\n")
    elif setup != "missing":
        where.mkdir()
    if setup == "bad_run":
        (where / "run.json").write_text("{not json")
    if setup == "no_manifest":
        config = sweep_config.from_dict({"name": "t", "seed": 1, "deals": 10, "output": str(where)})
        (where / "run.json").write_text(
            json.dumps(sweep.start_run_record(config, None, None, 1, 0).to_json())
        )
    result = CliRunner().invoke(cli, ["report", str(where)])
    assert result.exit_code == 2
    assert expected in result.output and "Traceback" not in result.output


def test_results_of_an_older_record_schema_are_named_not_misread(both_modes, tmp_path):
    where = tmp_path / "older"
    shutil.copytree(both_modes[0], where)
    shutil.rmtree(where / "report", ignore_errors=True)
    run = json.loads((where / "run.json").read_text())
    (where / "run.json").write_text(json.dumps({**run, "result_schema": "clocksweep-deals/2"}))
    result = CliRunner().invoke(cli, ["report", str(where)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        "record schema clocksweep-deals/2, this clocksweep reads clocksweep-deals/3"
        in result.output
    )
    assert not (where / "report").exists()


def test_report_out_must_be_a_writable_local_directory(both_modes, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    for out, words in [
        ("foo://bar", "expected a local directory path"),
        ("", "expected a local directory path"),
        (str(a_file / "sub"), "cannot write a report there"),
    ]:
        result = CliRunner().invoke(
            cli, ["report", str(both_modes[1]), "--no-plots", "--replay", "0", "--out", out]
        )
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        (line,) = result.stderr.strip().splitlines()
        assert words in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_cli_errors_from_the_real_entry_point(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipeline.cli import cli; cli()",
            "report",
            str(tmp_path / "nowhere"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no such directory" in proc.stderr


def test_damaged_shard_is_left_out_and_named(both_modes, tmp_path):
    where = tmp_path / "damaged"
    shutil.copytree(both_modes[0], where)
    manifest = json.loads((where / "manifest.json").read_text())
    victim = where / manifest["shards"][1]["files"][0]["path"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    made = report.build(str(where), replay=0, plots_enabled=False)
    provenance = made.document["provenance"]
    assert provenance["shards_read"] == 2 and len(provenance["shards_not_read"]) == 1
    assert "sha256" in provenance["shards_not_read"][0]
    assert all(cell["n"] == 2600 for cell in made.document["cells"])
    assert provenance["deal_ranges_read"] == ["0-1299", "2600-3899"]
    standard = sum(cell.variant == "standard" for cell in made.loaded.cells)
    assert made.loaded.tables["facts"]["n"].sum() == 2600 * standard  # the shards read only


def test_a_shard_listing_another_shards_facts_is_left_out(both_modes, tmp_path):
    # Shard 1's entry names shard 0's facts file (whole, and with the right checksum): read
    # as shard 1's, it would count shard 0's deal facts twice.
    where = tmp_path / "relisted"
    shutil.copytree(both_modes[0], where)
    shutil.rmtree(where / "report", ignore_errors=True)
    manifest = json.loads((where / "manifest.json").read_text())
    entries = manifest["shards"]
    facts_of = lambda entry: next(r for r in entry["files"] if r["table"] == "facts")  # noqa: E731
    entries[1]["files"] = [
        r if r["table"] != "facts" else facts_of(entries[0]) for r in entries[1]["files"]
    ]
    (where / "manifest.json").write_text(json.dumps(manifest))
    made = report.build(str(where), replay=0, plots_enabled=False)
    provenance = made.document["provenance"]
    assert provenance["shards_read"] == 2
    assert (
        "its facts file is listed as shards/facts/shard-000000" in provenance["shards_not_read"][0]
    )
    standard = sum(cell.variant == "standard" for cell in made.loaded.cells)
    assert made.loaded.tables["facts"]["n"].sum() == 2600 * standard
    assert CliRunner().invoke(cli, ["validate", str(where)]).exit_code == 1


def test_provenance(deals_report):
    provenance = deals_report.document["provenance"]
    assert provenance["record_mode"] == "deals" and provenance["seed"] == 31337
    assert provenance["deal_ranges_read"] == ["0-3899"] and provenance["shards_read"] == 3
    assert provenance["deal_scheme"] and provenance["config_hash"] and provenance["runs"]
    assert len(provenance["shard_files_read"]) == 6  # per shard: its rows and its deal facts
    assert os.path.basename(provenance["shard_files_read"][0]).startswith("shard-000000")


def test_claims_name_their_source_by_title(deals_report):
    """The rendered report and report.json name each claim's source as a reader knows it,
    never by a file of the project's own."""
    text = (Path(deals_report.directory) / "report.md").read_text()
    for claim in deals_report.document["claims"]:
        assert f"Source: {claim['source']}" in text
        assert claim["source"] == "; ".join(f'"{s["title"]}"' for s in claim["sources"])
    assert '"Clock Patience"' in text
    assert "SPEC" not in text and "seeds/" not in text and ".txt" not in text
    assert "seeds/" not in json.dumps(deals_report.document["claims"])


def test_cli_report_checks_claims_files(both_modes, tmp_path):
    """--claims: the example file's claims, beside the rule pages' when both are named; a
    claims file with a mistake is refused in one line before anything is read or written."""
    example = str(Path(__file__).resolve().parents[2] / "examples" / "claims-from-the-web.toml")
    out = tmp_path / "web"
    args = ["report", str(both_modes[1]), "--replay", "0", "--no-plots", "--out", str(out)]
    result = CliRunner().invoke(cli, [*args, "--claims", example, "--json"])
    assert result.exit_code == 0, result.output
    checked = {c["id"]: c for c in json.loads(result.output)["claims"]}
    assert "one_in_13" not in checked
    watch = checked["watch_roughly_25_to_30"]
    # Watch with a random pick on 3900 deals against 25% to 30%, by the interval measured.
    low, high = watch["interval"]
    inside, outside = 0.25 <= low and high <= 0.30, low > 0.30 or high < 0.25
    expected = "refuted" if outside else "confirmed" if inside else "inconclusive"
    assert watch["verdict"] == expected and watch["basis"].startswith("cell watch random")
    assert watch["sources"] == [{"title": "a Clock solitaire strategy page", "url": None}]
    wikipedia = checked["wikipedia_1_in_13"]
    assert wikipedia["source"].startswith('"Clock Patience (Wikipedia)" (https://')
    result = CliRunner().invoke(
        cli, [*args, "--claims", "rule-pages", "--claims", example, "--json"]
    )
    ids = [c["id"] for c in json.loads(result.output)["claims"]]
    assert ids[: len(CLAIM_IDS)] == CLAIM_IDS and len(ids) > len(CLAIM_IDS)

    bad = tmp_path / "bad.toml"
    bad.write_text(Path(example).read_text().replace('"win_rate"', '"winrate"', 1))
    elsewhere = tmp_path / "not-written"
    result = CliRunner().invoke(
        cli, ["report", str(both_modes[1]), "--out", str(elsewhere), "--claims", str(bad)]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "claim 'watch_roughly_25_to_30': measure: 'winrate'" in lines[0]
    assert not elsewhere.exists()


HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "a | b\nc")


def test_report_md_escapes_what_users_wrote():
    """A claim's words, a source's title, a strategy's name reach report.md as text, not as
    HTML a Markdown viewer renders, nor as a `|` or a newline that breaks a table (issue 45)."""
    from pipeline.report import render

    blocks = [
        ("h1", "report"),
        ("h3", HOSTILE[0]),
        ("p", HOSTILE[1]),
        ("list", list(HOSTILE)),
        ("table", ["claim", HOSTILE[0]], [list(HOSTILE)]),
    ]
    text = render.to_markdown(blocks)
    assert "<script" not in text and "<img" not in text, text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 2 and all(line.count(" | ") == 2 for line in table[1:]), table
    assert "a \\| b c" in table[1]


def test_a_report_on_a_run_in_progress_says_so_not_none_nor_problems(tmp_path):
    """Issue 45: a report of results that a run (on threads) is still writing printed "to
    None running on vm (None,  CPUs, 0 node(s)" and called the shards still being played a
    problem. The report is made, as a user would, by its own process while the run holds the
    directory: its third shard's task waits for the first two to be committed, and runs it."""
    from helpers import clocksweep, config_file

    out = tmp_path / "out"
    path = config_file(
        tmp_path,
        f'name = "live"\nseed = 3\ndeals = 4000\nshard_size = 1000\nrecord = "summary"\n'
        f'output = "{out}"\n[run]\nexecutor = "threads"\n[ray]\nnum_cpus = 1\n'
        '[grid]\nvariant = ["standard"]\n',
    )
    made = {}

    def report_at_shard_2(job, after_batch=None):
        if job.shard.index == 2 and not made:
            manifest = out / layout.MANIFEST_FILE
            for _ in range(1200):  # the driver commits shards 0 and 1 meanwhile
                if manifest.exists() and len(json.loads(manifest.read_text())["shards"]) == 2:
                    break
                threading.Event().wait(0.05)
            made["report"] = subprocess.run(
                [sys.executable, "-c", "from pipeline.cli import cli; cli()", "report", str(out)]
                + ["--out", str(tmp_path / "report"), "--no-plots", "--replay", "0"],
                capture_output=True,
                text=True,
                timeout=180,
            )
        return shard_task.write_shard(job, after_batch)

    assert clocksweep("run", path, task=report_at_shard_2).exit_code == 0
    done = made["report"]
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "report" / "report.json").read_text())
    provenance = document["provenance"]
    assert provenance["shards_not_read"] == [] and provenance["shards_not_read_count"] == 2
    assert provenance["in_progress"] == (
        f"a run (pid {os.getpid()}) is writing there: 2 of 4 shards not committed yet"
    )
    assert "problem" not in done.stdout and provenance["in_progress"] in done.stdout, done.stdout
    [run] = provenance["runs"]
    assert run["status"] == "running" and run["executor"] == "threads"
    md = (tmp_path / "report" / "report.md").read_text().splitlines()
    (line,) = [r for r in md if r.startswith("- runs: ")]
    where = f"(threads of one process, clocksweep {run['clocksweep']})"
    assert line == f"- runs: from {run['started']} running on {run['host']} {where}"
    assert "None" not in line


def test_restarts_csv_carries_the_exact_law_and_its_fit(tmp_path):
    """Issue 48: play_out's restarts had no exact law in the report. A sweep of standard,
    play_out and watch: restarts.csv has the derived law beside the counts (to 1e-12), and
    the fit to it, which holds; the same counts against the law shifted by one fail it."""
    from pipeline.engine import odds
    from pipeline.inference import stats

    grid = {"variant": ["standard", "play_out", "watch"], "strategy": ["most"]}
    write_results(tmp_path / "res", 60_000, 20_000, "summary", grid=grid, seed=4848)
    out = tmp_path / "report"
    done = CliRunner().invoke(cli, ["report", str(tmp_path / "res"), "--out", str(out)])
    assert done.exit_code == 0, done.output
    rows = pl.read_csv(out / "restarts.csv")
    law = odds.restarts_law()
    assert rows["restarts"].to_list() == sorted(law)
    for row in rows.iter_rows(named=True):
        assert abs(row["exact"] - float(law[row["restarts"]])) < 1e-12, row
        assert row["exact_fraction"] == odds.fraction_text(law[row["restarts"]])
    (p_value,) = set(rows["p_value"].to_list())
    assert p_value > 1e-3 and rows["dof"][0] >= 5, rows
    [record] = json.loads((out / "report.json").read_text())["distributions"]["restarts"]
    assert record["exact_mean_fraction"] == odds.fraction_text(odds.restarts_mean())
    observed = {row["restarts"]: row["n"] for row in rows.iter_rows(named=True) if row["n"]}
    shifted = {k + 1: float(p) for k, p in law.items()} | {0: 0.0}
    assert stats.chisquare_gof(observed, shifted).p_value < 1e-12


def test_a_distribution_off_its_exact_law_is_flagged_first(tmp_path, monkeypatch):
    """Issue 48: a distribution that disagrees with its law means the engine or the law is
    wrong, and the report says so first. The same fixed-seed sweep with the right law of
    restarts has no flag; with the law shifted by one, restarts is flagged on the terminal
    and first in report.md."""
    from pipeline.engine import odds

    grid = {"variant": ["standard", "play_out"]}
    write_results(tmp_path / "res", 20_000, 10_000, "summary", grid=grid, seed=4849)
    right = report.build(str(tmp_path / "res"), replay=0, out=str(tmp_path / "a"))
    assert right.document["laws_disagree"] == []
    law = odds.restarts_law()
    monkeypatch.setattr(odds, "restarts_law", lambda *deck: {k + 1: p for k, p in law.items()})
    done = CliRunner().invoke(cli, ["report", str(tmp_path / "res"), "--out", str(tmp_path / "b")])
    assert done.exit_code == 0, done.output
    document = json.loads((tmp_path / "b" / "report.json").read_text())
    [off] = document["laws_disagree"]
    assert off["distribution"] == "restarts" and off["p_value"] < 1e-6, off
    assert "1 distribution(s) off their exact law" in done.stdout.splitlines()[1]
    markdown = (tmp_path / "b" / "report.md").read_text().split("\n\n")
    assert markdown[2].startswith("1 distribution(s) off their exact law"), markdown[:3]


def test_every_distribution_of_every_cell_is_beside_its_law_or_says_none_is_known(tmp_path):
    """Issue 48: each measure on each cell it has a value on is reported beside its exact law
    (report.json's distributions.every, distributions.csv), with its fit, which holds on a
    fixed-seed sweep; where no law is known, the record says why. A law shifted by one
    fails the same counts."""
    from pipeline.engine import laws
    from pipeline.inference import stats

    grid = {
        "variant": ["standard", "play_out", "watch", "exchange"],
        "strategy": ["most", "informed"],
        "finale": ["up"],
        "depth": ["top"],
    }
    write_results(tmp_path / "res", 60_000, 20_000, "summary", grid=grid, seed=4851)
    out = tmp_path / "report"
    done = CliRunner().invoke(cli, ["report", str(tmp_path / "res"), "--out", str(out)])
    assert done.exit_code == 0, done.output
    document = json.loads((out / "report.json").read_text())
    every = document["distributions"]["every"]
    cells = {c["label"]: c for c in document["cells"]}
    expected = {
        (measure, label)
        for label, c in cells.items()
        for measure in laws.DISTRIBUTED
        if laws.law_of(measure, report_cell(c)) is not None
    }
    assert {(d["measure"], d["cell"]) for d in every} == expected
    rows = pl.read_csv(out / "distributions.csv", infer_schema_length=None)
    for d in every:
        law = laws.law_of(d["measure"], report_cell(cells[d["cell"]]))
        mine = rows.filter((pl.col("measure") == d["measure"]) & (pl.col("cell") == d["cell"]))
        assert mine["observed"].sum() == d["n"], d["cell"]
        # Every deal has a value but for rescue_pile, which deals won at the first death lack.
        assert (d["n"] == 60_000) == (d["measure"] != "rescue_pile"), (d["measure"], d["n"])
        if not law.known:
            assert d["law"].startswith("none known") and mine["exact"].null_count() == mine.height
            assert d["verdict"] == "no law known" and d["p_value"] is None
            continue
        for row in mine.iter_rows(named=True):
            assert abs(row["exact"] - float(law.chances.get(row["value"], 0))) < 1e-12, row
        assert d["p_value"] > 1e-4, (d["measure"], d["cell"], d["p_value"])
        assert {d["verdict"]} == set(mine["verdict"].to_list()) == {"fits its law"}
    known = {(d["measure"], d["cell"].split()[1]) for d in every if d["law_known"]}
    assert ("cards_turned", "most") in known and ("cards_turned", "informed") not in known
    assert document["laws_disagree"] == []
    [watch] = [
        d for d in every if d["measure"] == "cards_turned" and d["cell"].startswith("watch most")
    ]
    observed = {r["cards_turned"]: r["observed"] for r in watch["rows"] if r["observed"]}
    law = laws.law_of("cards_turned", report_cell(cells[watch["cell"]])).chances
    shifted = {t + 1: float(p) for t, p in law.items()}
    assert stats.chisquare_gof(observed, shifted).p_value < 1e-12


def report_cell(record: dict):
    """The cell of a report.json cell record."""
    from pipeline.engine import rules

    return rules.Cell(
        record["variant"], record["strategy"], record["finale"], record["order"], record["depth"]
    )
