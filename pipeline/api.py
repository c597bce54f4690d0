"""clocksweep from Python: load a config, run it, open its results and read them as Polars
frames (docs/api.md). The command line is a thin layer over these same functions.

    import pipeline.api as clocksweep

    config = clocksweep.load_config("configs/quick.toml", deals=200_000, output="results/nb")
    results = clocksweep.run(config)
    results.cells()        # n, wins, rate, interval, exact value, z: one row a cell
    results.claims()       # a verdict on every claim of the rule pages
    results.claims("my-claims.toml")  # ... or of claims files (docs/claims.md)
    results.rows().filter(pl.col("won")).collect()

Every error a user can cause is a `ClocksweepError` whose message is the command line's one
line (without its ``clocksweep: error:`` prefix) and whose ``status`` is its exit status.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the heavy modules load when a function needs them, as the CLI's do
    import polars as pl

    from pipeline.report.document import Report
    from pipeline.store.location import Location
    from pipeline.sweep.config import SweepConfig
    from pipeline.sweep.driver import Outcome

INPUT_STATUS = 2  # the input is wrong: a config, a path, results that are not a sweep's
FAILURE_STATUS = 1  # the input was fine and the work failed: a store, a shard that failed


class ClocksweepError(Exception):
    """What the command line reports as its one error line: ``str(error)`` is the line's
    text, ``status`` the exit status it ends with (2: the input; 1: a failure). Where the
    line names a flag of the command line's, ``str(error)`` names the API's keyword instead,
    and ``command_line`` is the line as the command line says it."""

    def __init__(self, message: str, status: int = INPUT_STATUS, command_line: str = ""):
        super().__init__(message)
        self.status = status
        self.command_line = command_line or message


class ShardsFailed(ClocksweepError):
    """Shards of a run failed every attempt; the rest are committed. ``results``: the
    results as they stand, with the run's ``outcome``."""

    def __init__(self, results: Results):
        failed = results.outcome.failed
        shown = ", ".join(str(index) for index in failed[:10])
        super().__init__(
            f"{len(failed)} shard(s) failed ({shown}); rerun the same command to retry them",
            FAILURE_STATUS,
        )
        self.results = results


def as_error(error: Exception) -> ClocksweepError:
    """A config's, the store's or the report's own error as the one the API raises: a
    failure of the store (met directly, or as what the report's reading met) has status 1."""
    from pipeline.store import layout

    failed = isinstance(error, layout.StoreError) or isinstance(
        error.__context__, layout.StoreError
    )
    line = str(error)
    return ClocksweepError(
        line.replace(layout.START_OVER, "run(config, fresh=True)"),
        FAILURE_STATUS if failed else INPUT_STATUS,
        command_line=line,
    )


def user_errors():
    """The exception types that are the user's input or the store failing, not a bug."""
    from pipeline.engine.rules import StrategyError
    from pipeline.inference.claim_file import ClaimFileError
    from pipeline.report.reading import ReportError
    from pipeline.store import layout
    from pipeline.sweep.config import ConfigError

    return (ConfigError, layout.ResultsError, ReportError, ClaimFileError, StrategyError)


# --- Configs ---------------------------------------------------------------------------


def load_config(source: str | os.PathLike | Mapping, **overrides: Any) -> SweepConfig:
    """A sweep config, checked: a TOML file's path, or a dict as TOML would read it.
    ``overrides`` replace its keys; a table's (``grid``, ``ray``, ``stop``, ``run``) is given
    as a dict and replaces only the keys it names:
    ``load_config("configs/quick.toml", deals=10**6, grid={"strategy": ["most"]})``."""
    from pipeline.sweep import config as sweep_config

    try:
        if isinstance(source, Mapping):
            raw, name = _copied(source), "a dict"
        else:
            name = os.fspath(source)
            raw = sweep_config.read_toml(name)
        for key, value in overrides.items():
            if key in sweep_config.TABLE_KEYS and isinstance(value, Mapping):
                table = raw.setdefault(key, {})
                if not isinstance(table, dict):
                    raise sweep_config.ConfigError(f"{key}: expected a table of keys")
                table.update(value)
            else:
                raw[key] = value
        return sweep_config.from_dict(raw, source=name if name != "a dict" else "")
    except user_errors() as error:
        raise as_error(error) from None


def _copied(table: Mapping) -> dict:
    return {key: _copied(v) if isinstance(v, Mapping) else v for key, v in table.items()}


def _config_of(config: SweepConfig | str | os.PathLike | Mapping) -> SweepConfig:
    from pipeline.sweep.config import SweepConfig

    return config if isinstance(config, SweepConfig) else load_config(config)


def plan(config: SweepConfig | str | os.PathLike | Mapping) -> str:
    """The cells, shards and total deals a run of ``config`` would play, and the bytes it
    would write, measured on a sample of its deals played now (``run --dry-run``)."""
    from pipeline.sweep import driver, estimate

    config = _config_of(config)
    return f"{driver.describe_plan(config)}\n{estimate.estimate_line(config)}"


# --- Running ---------------------------------------------------------------------------


def run(
    config: SweepConfig | str | os.PathLike | Mapping,
    *,
    fresh: bool = False,
    address: str | None = None,
    progress: IO[str] | None = None,
    verbose: bool = False,
    **options: Any,
) -> Results:
    """Run (or resume) a sweep as `clocksweep run` does and open its results: committed
    shards that still verify are kept, the rest played; a stop rule stops it. ``address``: a
    Ray cluster (default: the config's, RAY_ADDRESS, else a local instance). ``progress``: where
    progress goes (default stderr); ``verbose``: how the sweep is played (its log,
    RESULTS/run.log) there too. Shards that failed raise ShardsFailed (status 1) after the
    rest are committed; a signal stops the run as it stops the command (KeyboardInterrupt,
    saying what was kept). ``options``: what a test gives `driver.run` (the shard task)."""
    from pipeline.sweep import driver

    config = _config_of(config)
    try:
        outcome = driver.run(
            config,
            fresh=fresh,
            address=address,
            stream=progress or sys.stderr,
            verbose=verbose,
            **options,
        )
    except user_errors() as error:
        raise as_error(error) from None
    results = open_results(config.output_given)
    results.outcome = outcome
    if outcome.failed:
        raise ShardsFailed(results)
    return results


def summary_line(config: SweepConfig, outcome: Outcome) -> str:
    """The line `clocksweep run` ends with: what was played, skipped and committed."""
    from pipeline.sweep import driver

    return driver.summary_line(config, outcome)


# --- Results ---------------------------------------------------------------------------


def open_results(where: str | os.PathLike, replay: int | None = None) -> Results:
    """A sweep's results, a local directory or a URI (``s3://bucket/prefix?...``), checked to
    be one. ``replay``: as `report --replay` (how many deals to replay for the claims that
    need deal facts when the records hold none)."""
    from pipeline.report.document import DEFAULT_REPLAY
    from pipeline.store import validate

    where = os.fspath(where)
    try:
        opened = validate.open_results(where)
    except user_errors() as error:
        raise as_error(error) from None
    return Results(where, opened.location, DEFAULT_REPLAY if replay is None else replay)


class Results:
    """A sweep's results as Polars frames. The figures are computed once, on the first call
    that needs them, from the shards committed then (`refresh` reads them again)."""

    def __init__(self, where: str, location: Location, replay: int):
        self.where = where
        self.location = location
        self.replay = replay
        self.outcome: Outcome | None = None  # what the run that gave these results did

    def fields(self) -> list[tuple[str, object]]:
        """What a notebook shows of the results: as `clocksweep runs` lists them."""
        from pipeline.report import runs as listing

        try:
            record = listing.described(self.location, self.location.where)
        except user_errors() as error:
            return [("state", f"unreadable: {as_error(error)}")]
        return [
            (heading, text(record))
            for heading, text in listing.TEXT_COLUMNS
            if heading not in ("name", "where")
        ]

    def __repr__(self) -> str:
        lines = [f"Results({self.location.where!r})"]
        return "\n".join(lines + [f"  {name}: {value}" for name, value in self.fields()])

    def _repr_html_(self) -> str:
        from pipeline import html_fields

        fields = self.fields()
        view = html_fields(f"Results at {self.location.where}", fields)
        if self.outcome is not None:
            view += self.outcome._repr_html_()
        return view

    @property
    def path(self) -> str:
        """Where the results are, as `report` and `validate` take it: a local directory's
        absolute path, or the URI."""
        return self.location.address

    def rows(self, table: str = "deals") -> pl.LazyFrame:
        """The committed rows of ``table`` (``deals``: one row a deal and cell; ``facts``,
        ``wins``, or a summary table: docs/results.md), in deal order, as a LazyFrame."""
        from pipeline.store import layout, validate

        if table not in layout.table_names():
            raise ClocksweepError(
                f"table: {table!r} is not known; allowed: {', '.join(layout.table_names())}"
            )
        try:
            files = validate.committed_paths(self.location, table)
        except user_errors() as error:
            raise as_error(error) from None
        return _scanned(self.location, files, table)

    @cached_property
    def report(self) -> Report:
        """Every figure of the report, computed (nothing written)."""
        from pipeline.report import document

        try:
            return document.compose(self.where, replay=self.replay)
        except user_errors() as error:
            raise as_error(error) from None

    def refresh(self) -> Results:
        """Read the results again: shards committed since are counted."""
        self.__dict__.pop("report", None)
        return self

    def cells(self) -> pl.DataFrame:
        """One row a cell: its axes, n, wins, rate, its 95% interval, the exact value and z."""
        import polars as pl

        return pl.DataFrame(self.report.document["cells"])

    def comparisons(self) -> pl.DataFrame:
        """The paired comparisons: a's rate minus b's on the same deals, interval, McNemar."""
        import polars as pl

        return pl.DataFrame(self.report.document["comparisons"])

    def claims(self, *files: str | os.PathLike) -> pl.DataFrame:
        """A verdict on every claim, its figure and interval, as report.json has them: the
        rule pages' claims, or those of claims ``files`` (docs/claims.md; "rule-pages" names
        the rule pages' own), checked on these results."""
        import polars as pl

        from pipeline.inference import claim_file
        from pipeline.report import claims as claim_rules
        from pipeline.report.document import claim_rows

        if not files:
            return pl.DataFrame(claim_rows(self.report.document))
        try:
            claims = claim_file.read_all([os.fspath(file) for file in files])
        except user_errors() as error:
            raise as_error(error) from None
        checked = claim_rules.assess(self.report.figures, claims)
        return pl.DataFrame(claim_rows({"claims": [claim.record() for claim in checked]}))

    def stop_record(self) -> dict | None:
        """How a run with a stop rule stopped, each interval it read beside the fixed-n one
        (report.json's ``stopping``); None for a sweep without one."""
        return self.report.document["stopping"]

    def write_report(self, out: str | os.PathLike | None = None, plots: bool = True) -> str:
        """Write the report (report.md, report.html, report.json, CSV, plots) into ``out``
        (default RESULTS/report/) as `clocksweep report` does; gives its directory."""
        from pipeline.report import document

        try:
            made = document.build(
                self.where,
                replay=self.replay,
                out=None if out is None else os.fspath(out),
                plots_enabled=plots,
                out_named="write_report(out=...)",
            )
        except user_errors() as error:
            raise as_error(error) from None
        self.report = made
        return made.directory


# --- Runs side by side ------------------------------------------------------------------


def runs(where: str | os.PathLike = "results") -> pl.DataFrame:
    """Every run at ``where`` (a directory or a URI) or below it, a row each, as `clocksweep
    runs` lists them: name, state (complete, stopped by its rule, interrupted, running,
    damaged), deals committed and planned, cells, seed, record mode, bytes, when its records
    were last written, where it is. Only reads."""
    import polars as pl

    from pipeline.report import runs as listing

    try:
        found = listing.runs_under(os.fspath(where))
    except user_errors() as error:
        raise as_error(error) from None
    kinds = {name: pl.Int64 if kind is int else pl.String for name, kind in listing.COLUMNS.items()}
    return pl.DataFrame(found, schema=kinds)


def compare(a: str | os.PathLike, b: str | os.PathLike, *more: str | os.PathLike) -> pl.DataFrame:
    """Runs side by side, as `clocksweep compare A B [C ...]`: one row a cell every run has,
    each run's n, wins, win rate and 95% interval (``a_n``, ``b_win_rate``, ...), and A's
    rate minus each other run's (``a_minus_b``) with its interval (``a_minus_b_low``,
    ``a_minus_b_high``) and how it was measured (``a_minus_b_method``: ``paired`` on the deals
    both hold, counted in ``a_minus_b_deals``, where they share seed and deals; else
    ``independent``)."""
    import polars as pl

    from pipeline.report import compare as comparing

    try:
        made = comparing.compare([os.fspath(where) for where in (a, b, *more)])
    except user_errors() as error:
        raise as_error(error) from None
    return pl.DataFrame(made.rows, infer_schema_length=None)


def _scanned(location: Location, paths: list[str], table: str) -> pl.LazyFrame:
    """The files at ``paths`` as one LazyFrame; none: an empty frame of the table's schema."""
    import polars as pl

    from pipeline.records.schema import DEAL_SCHEMA

    if paths:
        return location.scan_cell_groups(paths)
    return pl.from_arrow(DEAL_SCHEMA.empty_table()).lazy() if table == "deals" else pl.LazyFrame()
