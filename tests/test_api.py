"""The Python API (`pipeline.api`), tested as the CLI is: a real sweep on a local Ray instance,
its rows against the kernel's, its figures against the report the CLI writes, its errors
against the CLI's one lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers import config_file
from rows import kernel_rows, sorted_rows

import pipeline.api as clocksweep
from pipeline import ERROR_PREFIX
from pipeline.cli import cli
from pipeline.sweep import config as sweep_config

CONFIG = """
name = "api"
seed = 97
deals = 6000
shard_size = 2000
[grid]
variant = ["standard", "watch", "exchange"]
strategy = ["most", "random"]
depth = ["bottom"]
"""

pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    return config_file(tmp_path_factory.mktemp("api-config"), CONFIG, "api.toml")


@pytest.fixture(scope="module")
def results(config_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("api-results") / "r"
    return clocksweep.run(
        clocksweep.load_config(config_path, output=str(out)), progress=io.StringIO()
    )


def cli_error(*args: str) -> str:
    """The one error line the CLI gives for ``args``, without its prefix."""
    result = CliRunner().invoke(cli, [*map(str, args)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    return line.removeprefix(ERROR_PREFIX)


def test_a_config_from_a_file_takes_overrides_and_tables_replace_only_their_keys(config_path):
    config = clocksweep.load_config(config_path, deals=4000, grid={"strategy": ["most"]})
    assert config.deals == 4000 and config.shard_size == 2000
    assert config.grid["strategy"] == ("most",) and config.grid["variant"][0] == "standard"
    assert config.source == str(config_path)


def test_a_config_from_a_dict_is_checked_as_a_file_is(config_path):
    import tomllib

    raw = tomllib.loads(CONFIG)
    assert clocksweep.load_config(raw).hash == clocksweep.load_config(config_path).hash
    assert raw["grid"]["strategy"] == ["most", "random"]  # the caller's dict is not changed
    clocksweep.load_config(raw, grid={"strategy": ["most"]})
    assert raw["grid"]["strategy"] == ["most", "random"]


@pytest.mark.parametrize(
    ("override", "cli_set"),
    [
        ({"dealz": 3}, "dealz=3"),
        ({"deals": 0}, "deals=0"),
        ({"grid": {"strategy": ["best"]}}, "grid.strategy=best"),
    ],
)
def test_a_bad_config_raises_the_line_the_cli_prints(config_path, tmp_path, override, cli_set):
    with pytest.raises(clocksweep.ClocksweepError) as raised:
        clocksweep.load_config(config_path, output=str(tmp_path / "r"), **override)
    assert raised.value.status == 2
    expected = cli_error("run", config_path, f"--set=output={tmp_path / 'r'}", f"--set={cli_set}")
    assert str(raised.value) == expected
    assert not (tmp_path / "r").exists()


def test_the_rows_are_the_kernels_for_every_cell(results):
    frame = results.rows().collect()
    assert frame.height == 6000 * 5  # standard alone has no strategy: 1 + 2 + 2 cells
    assert sorted_rows(frame).equals(kernel_rows(CONFIG))


def test_the_cells_count_the_rows(results):
    cells = results.cells()
    counted = (
        results.rows()
        .group_by("variant", "strategy")
        .agg(n=pl.len(), wins=pl.col("won").sum())
        .collect()
    )
    assert cells.height == counted.height == 5
    for row in cells.iter_rows(named=True):
        match = counted.filter(
            (pl.col("variant") == row["variant"])
            & (pl.col("strategy").cast(pl.String).eq_missing(row["strategy"]))
        )
        assert (match["n"].item(), match["wins"].item()) == (row["n"], row["wins"])
        assert row["ci_low"] <= row["win_rate"] <= row["ci_high"]
    assert {"exact", "z"} <= set(cells.columns)


def test_the_figures_are_the_reports_the_cli_writes(results, tmp_path):
    out = tmp_path / "report"
    done = CliRunner().invoke(
        cli, ["report", results.where, "--out", str(out), "--no-plots", "--replay", "0"]
    )
    assert done.exit_code == 0, done.output
    written = json.loads((out / "report.json").read_text())
    opened = clocksweep.open_results(results.where, replay=0)
    assert opened.cells().to_dicts() == written["cells"]
    assert opened.comparisons().to_dicts() == written["comparisons"]
    claims = opened.claims()
    assert claims["id"].to_list() == [claim["id"] for claim in written["claims"]]
    assert claims["verdict"].to_list() == [claim["verdict"] for claim in written["claims"]]
    # A claims file of one's own, checked on the same figures; one that cannot be read is the
    # input's error (status 2).
    example = Path(__file__).resolve().parents[1] / "examples" / "claims-from-the-web.toml"
    web = opened.claims(example)
    assert "watch_roughly_25_to_30" in web["id"].to_list() and "one_in_13" not in web["id"]
    with pytest.raises(clocksweep.ClocksweepError) as refused:
        opened.claims(tmp_path / "nowhere.toml")
    assert refused.value.status == 2 and "nowhere.toml: cannot read" in str(refused.value)
    assert opened.stop_record() is None  # no stop rule
    assert opened.write_report(tmp_path / "again", plots=False) == str(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again["claims"] == written["claims"]


def test_a_stop_record_is_the_reports(config_path, tmp_path):
    config = clocksweep.load_config(
        config_path, output=str(tmp_path / "r"), stop={"win_rate": 0.2, "min_deals": 2000}
    )
    stopped = clocksweep.run(config, progress=io.StringIO())
    record = stopped.stop_record()
    assert record is not None and record["met"] is True
    assert record["deals"] == 2000 < config.deals
    assert stopped.outcome.stop["met"] is True


def test_results_that_are_not_there_raise_the_line_the_cli_prints(tmp_path):
    with pytest.raises(clocksweep.ClocksweepError) as raised:
        clocksweep.open_results(tmp_path / "nothing")
    assert raised.value.status == 2
    assert str(raised.value) == cli_error("validate", tmp_path / "nothing")


def test_an_unknown_table_names_the_tables(results):
    with pytest.raises(
        clocksweep.ClocksweepError, match="table: 'dealz' is not known; allowed: deals, facts"
    ):
        results.rows("dealz")


def test_write_report_names_its_own_parameter_in_an_error(results, tmp_path):
    """An out the report cannot be written to is named as the API's parameter, not as the
    CLI's --out option (issue 45)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    opened = clocksweep.open_results(results.where, replay=0)
    for out in ("s3://bucket/report", blocker / "report"):
        with pytest.raises(clocksweep.ClocksweepError) as refused:
            opened.write_report(out, plots=False)
        assert str(refused.value).startswith("write_report(out=...): "), str(refused.value)
        assert "--out" not in str(refused.value)


def on_threads(output: Path, seed: int, deals: int) -> dict:
    """A config, as a dict, of shards of 1,000 deals played on threads into ``output``."""
    return {
        "name": "nb",
        "seed": seed,
        "deals": deals,
        "shard_size": 1000,
        "output": str(output),
        "run": {"executor": "threads"},
    }


def test_a_notebook_shows_a_config_a_run_and_its_results_in_a_few_lines(tmp_path):
    """Issue 47: the reprs were dumps (every cell of a config, every shard a run committed).
    Each is now a few lines of what a user reads, and its HTML view escapes what it shows."""
    grid = {key: list(values) for key, values in sweep_config.FULL_GRID.items()}
    config = clocksweep.load_config(on_threads(tmp_path / "nb<&>", 5, 3000) | {"grid": grid})
    shown = repr(config)
    assert len(config.cells) == 96 and len(shown.splitlines()) == 9 and len(shown) < 600, shown
    assert "seed: 5" in shown and "cells: 96: standard" in shown and "and 92 more" in shown
    assert "<&>" not in config._repr_html_() and "nb&lt;&amp;&gt;" in config._repr_html_()
    results = clocksweep.run(config, progress=io.StringIO())  # 96 cells x 3,000 deals: 1 s
    outcome = repr(results.outcome)
    assert "committed_here" not in outcome and "shards: 3 of 3 committed" in outcome, outcome
    lines = repr(results).splitlines()
    assert lines[0] == f"Results({str(tmp_path / 'nb<&>')!r})", lines
    assert "  state: complete" in lines and "  deals: 3,000/3,000" in lines, lines
    assert "Outcome of the run" in results._repr_html_()
    assert "state" in clocksweep.open_results(tmp_path / "nb<&>")._repr_html_()


def test_an_error_raised_through_the_api_names_its_keyword_not_the_flag(tmp_path):
    """Issue 47: after the README's main command, its Python snippet met "... use --fresh to
    start over", the command line's flag. Through the API the line names `fresh=True`; the
    command line, on the same results, still names --fresh."""
    table = on_threads(tmp_path / "nb", 6, 2000)
    clocksweep.run(clocksweep.load_config(table), progress=io.StringIO())
    fewer = clocksweep.load_config(table, deals=1000)
    with pytest.raises(clocksweep.ClocksweepError) as raised:
        clocksweep.run(fewer, progress=io.StringIO())
    assert "use run(config, fresh=True) to start over" in str(raised.value), raised.value
    assert "--fresh" not in str(raised.value) and raised.value.status == 2
    text = (
        f'name = "nb"\nseed = 6\ndeals = 2000\nshard_size = 1000\noutput = "{tmp_path / "nb"}"\n'
        '[run]\nexecutor = "threads"\n'
    )
    path = config_file(tmp_path, text, "nb.toml")
    said = CliRunner().invoke(cli, ["run", str(path), "--set", "deals=1000"])
    assert said.exit_code == 2 and "use --fresh to start over" in said.stderr, said.output
    assert clocksweep.run(fewer, fresh=True, progress=io.StringIO()).outcome.deals == 1000
