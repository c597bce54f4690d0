"""The `clocksweep` command line: thin commands over the engine, the sweep and the report.

Heavy imports (numba, Ray, Polars) happen inside the commands that need them, so
`clocksweep --help` answers at once. Every error a user can cause ends as one line on
stderr and exit status 2, never a traceback; so does a failure of the storage the results
are on (a store that cannot be reached or stops answering, a lease lost, a full disk), with
exit status 1.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import sys

import click

from pipeline import ERROR_PREFIX, RULE_PAGES, cut
from pipeline.commands.inputs import (
    InputError,
    checked_strategy_name,
    make_cell,
    parse_range,
    parse_u64,
    played,
    read_counts_only,
    strategy_fields,
)
from pipeline.commands.layouts import deal_from_layout
from pipeline.engine import laws, layout_input, rules
from pipeline.engine import odds as exact  # light: fractions and the rules


class Failed(click.ClickException):
    """An error of the API (`api.ClocksweepError`): its one line, its exit status (1 for a
    failure of the results' storage or of shards, 2 for the input)."""

    def __init__(self, error: Exception):
        from pipeline.api import ClocksweepError, as_error

        if not isinstance(error, ClocksweepError):
            error = as_error(error)
        super().__init__(error.command_line)
        self.exit_code = error.status


def first_look(results_path: str, before_exit=None):
    """RESULTS's store asked once whether it is there, within the connect deadline
    (CLOCKSWEEP_CONNECT_SECONDS, as `run` has it): its client would wait minutes on a store
    that takes connections and never answers. Gives its `Location`. ``before_exit``: what to
    end before the process does, at the deadline."""
    from contextlib import nullcontext

    from pipeline.store import validate
    from pipeline.store.credentials import shown
    from pipeline.sweep.cluster import deadline

    named = shown(results_path)
    waiting = (
        deadline(f"{named}: the store did not answer within {{seconds}} s", before_exit, 1)
        if "://" in results_path
        else nullcontext()
    )
    with waiting:
        return validate.first_look(results_path)


def note_credentials(where: str) -> None:
    """Where a URI carries credentials: that they are never shown, and where else to give
    them (once a command, before anything else it says)."""
    from pipeline.store import credentials

    line = credentials.note(where)
    if line is not None:
        click.echo(f"clocksweep: {line}", err=True)


class CleanGroup(click.Group):
    """A click group whose usage errors are one line, not a usage block."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.Exit as done:
            sys.exit(done.exit_code)
        except click.exceptions.Abort as abort:
            if not isinstance(abort.__cause__, KeyboardInterrupt):  # end of input at a prompt
                click.echo("clocksweep: aborted", err=True)
                sys.exit(1)
            from pipeline.sweep.signals import HANDLER

            number = HANDLER.seen.number or signal.SIGINT  # else Python's own, for Ctrl-C
            exit_interrupted(f"clocksweep: interrupted by {signal.Signals(number).name}", number)
        except click.exceptions.NoArgsIsHelpError as error:
            click.echo(error.ctx.get_help())  # `clocksweep` alone: the help, as --help gives it
            sys.exit(0)
        except click.ClickException as error:
            message = cut(error.format_message().replace("\n", " "))  # what it echoes, too
            click.echo(f"{ERROR_PREFIX}{message}", err=True)
            sys.exit(2 if isinstance(error, click.UsageError) else error.exit_code)


def exit_interrupted(message: str, number: int) -> None:
    """Say ``message`` and exit with status 128 + ``number``, as a shell reports a process a
    signal ended. Everything is closed by then (files, Ray); the interpreter's own end is
    skipped, since threads of numba's or Ray's that a signal cut short can crash it."""
    from pipeline.sweep.signals import HANDLER

    click.echo(message, err=True)
    if not HANDLER.deadline:  # not the command's own process (`main`): a caller's, going on
        sys.exit(128 + number)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + number)


def choice_option(name: str, allowed: tuple[str, ...], default, help_text: str):
    """An option checked against the rules' names, with the rules' own error message."""

    def check(_ctx, _param, value):
        if value is not None:
            try:
                rules.check_choice(name, value, allowed)
            except rules.RuleError as error:
                raise InputError(str(error)) from None
        return value

    return click.option(
        f"--{name}",
        default=default,
        callback=check,
        show_default=True,
        help=f"{help_text} ({', '.join(allowed)})",
    )


@click.group(cls=CleanGroup)
@click.version_option(package_name="clocksweep")
def cli():
    """clocksweep: sweeps of Clock Patience deals, its rescue rules and their odds."""


def main(argv: list[str] | None = None, **options) -> None:
    """The `clocksweep` command, as installed (``options`` as click's ``main`` takes them)."""
    from pipeline.sweep.signals import end_by_deadline, end_if_threads_left

    # A process's exit collects the garbage of every module it imported (Ray's, numba's,
    # pyarrow's) before it frees them, and the user waits for it. Nothing left by then
    # needs a finalizer run (files are closed, Ray stopped), so all is frozen out of it.
    atexit.register(gc.freeze)
    end_by_deadline()  # a signal stops what the command does, and ends it within seconds
    try:
        cli.main(argv, prog_name="clocksweep", **options)
    except SystemExit as done:
        end_if_threads_left(done.code)
        raise
    end_if_threads_left(0)


@cli.command()
@click.option("--seed", "seed_text", help="The sweep seed (unsigned 64-bit).")
@click.argument("deal_range", metavar="RANGE", required=False)
@click.option(
    "--layout",
    "layout_path",
    metavar="FILE",
    help=(
        "Play a layout you hold instead: a `deal --json` line or 52 cards (- for stdin); "
        f"at most {layout_input.MAX_INPUT_TEXT}."
    ),
)
@choice_option("order", rules.ORDERS, "round-robin", "How the deck is dealt")
@click.option("--reverse", is_flag=True, help="--layout deck: its last card is dealt first.")
@choice_option("variant", rules.VARIANTS, None, "Replay the deal under this variant")
@click.option(
    "--strategy",
    callback=lambda _ctx, _param, value: checked_strategy_name(value),
    help=f"The rescue strategy of the replay ({', '.join(rules.STRATEGIES)}), or one of your "
    "own: FILE.py:FUNCTION or module:FUNCTION",
)
@choice_option("finale", rules.FINALES, "down", "Bottom cards face down or up")
@choice_option("depth", rules.DEPTHS, None, "exchange only: where the king goes")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per deal, for tools.")
def deal(
    seed_text, deal_range, layout_path, order, reverse, variant, strategy, finale, depth, as_json
):
    """Show deals by number: the layout, and with --variant a step-by-step replay.

    RANGE is one deal number (7) or an inclusive range (0-1999). With --json each deal is a
    line {seed, deal, scheme, order, piles}: 13 lists of cards, hours 1..12 then the centre,
    each top first.

    With --layout FILE, the deal is one you bring: the JSON line `deal --json` prints, or a
    deck of 52 cards (7H TD KS ..., the first dealt first, laid out by --order). It is checked,
    drawn and replayed under --variant (standard by default); --json then prints its result
    row. `random` draws its pick from the deal's seed and number: the JSON's, or --seed and
    RANGE.
    """
    if layout_path is not None:
        return deal_from_layout(
            layout_path,
            seed_text,
            deal_range,
            order,
            reverse,
            variant,
            strategy,
            finale,
            depth,
            as_json,
        )
    if seed_text is None or deal_range is None:
        raise InputError("deal: give --seed S and a RANGE of deal numbers, or --layout FILE")
    if reverse:
        raise InputError("--reverse: applies only to a deck given with --layout")
    seed = parse_u64("--seed", seed_text)
    numbers = parse_range(deal_range)
    cell = None
    if variant is not None or strategy is not None or depth is not None:
        cell = make_cell(
            variant=variant or "standard",
            finale=finale,
            order=order,
            depth=depth,
            **strategy_fields(strategy),
        )
    for number in numbers:
        show_deal(seed, number, order, finale, cell, as_json)


def show_deal(seed: int, number: int, order: str, finale: str, cell, as_json: bool) -> None:
    """One deal by number: its JSON line, or its clock face (and its replay under ``cell``)."""
    from pipeline.engine import deals, display, reference

    piles = reference.layout(seed, number, order)
    if as_json:
        record = {
            "seed": seed,
            "deal": number,
            "scheme": deals.SCHEME_VERSION,
            "order": order,
            "piles": [[rules.card_text(card) for card in pile] for pile in piles],
        }
        click.echo(json.dumps(record))
        return
    click.echo(f"seed {seed}, deal {number}, order {order} (deal scheme {deals.SCHEME_VERSION})")
    click.echo(display.clock_face(piles, finale_up=finale == "up"))
    if cell is not None:
        click.echo(played(display.replay, seed, number, cell))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON record per value.")
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    metavar="FILE.py:FUNCTION",
    help="A strategy of your own that reads only the counts (and rand): its exact values "
    "instead, for each rescue. Repeat for more.",
)
@click.option(
    "--law",
    type=click.Choice(laws.DISTRIBUTED),
    help="The exact law of a measure of a deal instead, on each cell (with --strategy, "
    "that strategy's): each value's chance.",
)
def odds(as_json, strategies, law):
    """Exact values the sweeps are checked against, as reduced fractions."""
    line = laws.record_line if law else exact.record_line
    for record in odds_records(law, tuple(read_counts_only(spec) for spec in strategies)):
        click.echo(json.dumps(record) if as_json else line(record))


def odds_records(law: str | None, customs: tuple) -> list[dict]:
    """What `odds` prints: the exact values (of ``customs``, strategies of the user's, if
    any), or the law of the measure ``law``; InputError, one line, for a strategy that
    cannot be played."""
    from pipeline.engine import custom

    try:
        if law:
            return laws.law_records(law, customs)
        if not customs:
            return exact.exact_values()
        return [record for strategy in customs for record in exact.custom_exact_values(strategy)]
    except (custom.CustomError, rules.RuleError) as error:
        raise InputError(str(error)) from None


def _finite(ctx, param, value):
    if value != value:  # nan passes FloatRange's comparisons
        raise click.BadParameter("nan is not a number of seconds; expected 0.1 to 600")
    return value


@cli.command()
@click.option(
    "--seconds",
    default=3.0,
    show_default=True,
    type=click.FloatRange(0.1, 600),
    callback=_finite,
    help="Time given to each measurement.",
)
@click.option("--json", "as_json", is_flag=True, help="The figures as one JSON object.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="cuda: the CUDA kernel on this machine's GPU (the cuda extra).",
)
def bench(seconds, as_json, device):
    """Deals per second on one core: the kernel and the reference engine, and their ratio;
    with --device cuda, the CUDA kernel's deals per second on the GPU."""
    from pipeline.engine import bench as benchmarks

    if device == "cuda":
        figures, text = gpu_bench(seconds)
    else:
        figures = benchmarks.engine_figures(seconds)
        text = benchmarks.describe(figures)
    click.echo(json.dumps(figures) if as_json else text)


def gpu_bench(seconds: float) -> tuple[dict, str]:
    """`bench --device cuda`'s figures and text; one line and exit 2 where it cannot run."""
    from pipeline.engine import bench as benchmarks

    try:
        from pipeline.engine import gpu
    except ImportError:
        raise Failed(
            ValueError("--device cuda needs numba-cuda, the cuda extra: pip install -e '.[cuda]'")
        ) from None
    try:
        figures = benchmarks.gpu_figures(seconds)
    except gpu.GpuUnavailable as error:
        raise Failed(ValueError(f"--device cuda: {error}")) from None
    return figures, benchmarks.describe_gpu(figures)


@cli.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key, e.g. deals=100000000 or grid.strategy=most,random.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the plan and its size; write nothing to the output."
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Replace the results of a different config in the output directory.",
)
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="An existing Ray cluster (default: RAY_ADDRESS, else a local instance).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Also print how the sweep is played (threads, pieces, Ray's messages): RESULTS/run.log.",
)
def run(config_path, overrides, dry_run, fresh, address, verbose):
    """Run a sweep: CONFIG (TOML) becomes sharded Ray tasks writing Parquet results (or,
    with `[run] executor = "threads"`, threads of this process: one machine, no Ray).

    Rerunning the same config resumes: committed shards that still verify are kept, the rest
    are played. On a cluster, run it where the cluster is reachable, or submit it as a job:
    `ray job submit --address http://HEAD:8265 --working-dir . -- clocksweep run CONFIG`
    (the output must then be storage every node can reach: a shared path or a URI).
    """
    from pipeline import api
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep import driver as sweep

    # A caller (a test) may give the task each shard runs, through click's obj.
    task = (click.get_current_context().find_root().obj or {}).get("task")
    try:
        config = sweep_config.load(config_path, overrides)
        note_credentials(config.output_given)
        if dry_run:
            click.echo(api.plan(config))
            return
        options = {"task": task} if task else {}
        results = api.run(config, fresh=fresh, address=address, verbose=verbose, **options)
    except sweep_config.ConfigError as error:
        raise Failed(error) from None
    except api.ShardsFailed as error:
        click.echo(f"clocksweep: {api.summary_line(config, error.results.outcome)}", err=True)
        click.echo(f"clocksweep: {error}", err=True)
        sys.exit(error.status)
    except api.ClocksweepError as error:
        raise Failed(error) from None
    except sweep.Interrupted as stop:
        exit_interrupted(f"clocksweep: {stop}", stop.signal_number)
    click.echo(f"clocksweep: {api.summary_line(config, results.outcome)}", err=True)
    click.echo(results.path)  # what `report` and `validate` take


@cli.command()
@click.argument("results_path", metavar="RESULTS")
def validate(results_path):
    """Check a results directory: every shard against the manifest, the deal ranges whole.

    Names each problem (missing, truncated or altered files, wrong schema or rows, a shard
    whose entry lacks a table's file or lists another's, gaps or overlaps in the deal ranges,
    files the manifest does not list, results of an older record schema). Exit status 0 if
    all is well, 1 if problems were found or its store failed (or the results changed while
    read), 2 if RESULTS is not a results directory.
    """
    from pipeline.store import validate

    problems, figures = read_results(lambda wheres: validate.validate(wheres[0]), [results_path])
    click.echo(validate.described(problems, figures))
    if problems:
        sys.exit(1)


@cli.command()
@click.argument("where", metavar="DIR", default="results")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, for tools.")
def runs(where, as_json):
    """List the runs in DIR (default results/; a path or a URI) and below it: name, state,
    deals committed of planned, cells, seed, record mode, size, when last written."""
    from pipeline.report import runs as listing

    click.echo(read_results(listing.printed, [where], as_json))


@cli.command()
@click.argument("results", metavar="A B [C ...]", nargs=-1, required=True)
@click.option("--out", "out_dir", metavar="DIR", help="Also write compare.html, .json, .csv here.")
def compare(results, out_dir):
    """Compare runs: the config keys that differ, then the cells they share side by side,
    A's rate minus each other's (paired where they share deals); the cells some lack."""
    from pipeline.report import compare_render

    click.echo(read_results(compare_render.printed, results, out_dir))


def read_results(read, wheres, *options):
    """``read(wheres, *options)``, each store first asked within the connect deadline."""
    from pipeline.api import user_errors

    try:
        for where in wheres:
            note_credentials(where)
            first_look(where)
        return read(wheres, *options)
    except user_errors() as error:
        raise Failed(error) from None


def build_report(
    results_path: str,
    replay: int,
    out_dir: str | None = None,
    plots_enabled: bool = True,
    claims_files: tuple[str, ...] = (),
):
    """The report as `clocksweep report` makes it (`document.build`); a RESULTS the report
    cannot read, a store that fails it, or a claims file that cannot be read (read before
    anything else) is `Failed`."""
    from pipeline.inference import claim_file

    note_credentials(results_path)
    try:
        claims = claim_file.read_all(claims_files) if claims_files else None
    except claim_file.ClaimFileError as error:
        raise Failed(error) from None
    from pipeline.report import plots

    # The plots' process is forked first, while this process is small and has imported
    # neither numpy nor Polars (so it runs no thread pools yet), so that it imports matplotlib
    # while the report imports Polars and reads the shards.
    with plots.Plotter((os.cpu_count() or 1) if plots_enabled else 1) as plotter:
        from pipeline.report import document as reporting
        from pipeline.report.reading import ReportError
        from pipeline.store import layout

        try:
            if "://" in results_path:  # the plots' process is ended first at the deadline
                first_look(results_path, plotter.close)
            return reporting.build(
                results_path,
                replay=replay,
                out=out_dir,
                plots_enabled=plots_enabled,
                plotter=plotter,
                claims=claims,
            )
        except (layout.ResultsError, ReportError) as error:
            raise Failed(error) from None


@cli.command()
@click.argument("results_path", metavar="RESULTS")
@click.option(
    "--replay",
    default=100_000,
    show_default=True,
    type=click.IntRange(0, 100_000_000),
    help="Without a standard cell the records hold no deal facts (kings at the bottom, "
    "hours unvisited at the third king): replay this many of the sweep's first "
    "deals for the two claims about them (0: none; they are then inconclusive).",
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    metavar="DIR",
    help="Write the report here instead of RESULTS/report/.",
)
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots (faster).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print report.json's claims and cells, not the table."
)
@click.option(
    "--claims",
    "claims_files",
    multiple=True,
    metavar="FILE",
    help="A claims file to check (docs/claims.md); give it again for more files "
    f"('{RULE_PAGES}': the rule pages' claims, the default).",
)
def report(results_path, replay, out_dir, no_plots, as_json, claims_files):
    """Report on a sweep: win rates with intervals, exact comparisons, paired strategy tests,
    distributions, the hint's calibration, a verdict on every claim checked (the rule pages',
    or those of --claims files), and plots.

    Writes RESULTS/report/: report.md, report.html (self-contained), report.json, PNG plots
    and CSV tables; prints the best strategy per variant and the claims' verdicts.
    """
    made = build_report(results_path, replay, out_dir, not no_plots, claims_files)
    from pipeline.report.render import terminal_summary

    if as_json:
        click.echo(
            json.dumps({key: made.document[key] for key in ("cells", "comparisons", "claims")})
        )
        return
    click.echo(terminal_summary(made.document, made.directory))


if __name__ == "__main__":  # python -m pipeline.cli
    main()
