"""The `clocksweep` command line (pipeline/cli.py): deal, odds, bench, and every bad input.

Driven with click's CliRunner, as the click docs recommend. The group runs its commands with
standalone_mode=False and turns every error into one line and `sys.exit(2)`; CliRunner
captures that SystemExit as `result.exit_code`. The interfaces checked here are those of
SPEC section 8.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.engine import deals, odds, reference, rules

REPO = Path(__file__).resolve().parents[2]


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


# --- Help ---------------------------------------------------------------------------------


def test_help_lists_the_commands():
    result = run("--help")
    assert result.exit_code == 0, result.output
    for command in ("deal", "odds", "bench"):
        assert command in result.output


@pytest.mark.parametrize("command", ["deal", "odds", "bench"])
def test_command_help(command):
    result = run(command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_help_loads_no_heavy_module():
    executable = shutil.which("clocksweep")
    assert executable, "the clocksweep console script is not installed"
    done = subprocess.run([executable, "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "deal" in done.stdout

    probe = (
        "import pipeline.cli, sys; "
        "print(sorted(m for m in ('numba', 'ray', 'polars') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_installed_command_leaves_its_objects_out_of_the_exit_collection():
    # An exit handler registered before the command's own runs after it: by then every
    # object is in the permanent generation, which the collections at exit skip.
    probe = (
        "import atexit, gc, sys; "
        "atexit.register(lambda: print(gc.get_freeze_count() > 0)); "
        "sys.argv = ['clocksweep', '--version']; "
        "from pipeline.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "True"


# --- deal ---------------------------------------------------------------------------------


def reference_piles(seed: int, deal: int, order: str) -> list[list[str]]:
    return [[rules.card_text(c) for c in pile] for pile in reference.layout(seed, deal, order)]


@pytest.mark.parametrize("order", rules.ORDERS)
def test_deal_json_fields(order):
    result = run("deal", "--seed", "1", "7", "--order", order, "--json")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert list(record) == ["seed", "deal", "scheme", "order", "piles"]
    assert record["seed"] == 1 and record["deal"] == 7 and record["order"] == order
    assert record["scheme"] == deals.SCHEME_VERSION
    piles = record["piles"]
    assert len(piles) == 13 and all(len(pile) == 4 for pile in piles)
    assert sorted(rules.parse_card(c) for pile in piles for c in pile) == list(range(52))
    assert piles == reference_piles(1, 7, order)


def test_deal_default_order_is_round_robin():
    record = json.loads(run("deal", "--seed", "1", "7", "--json").stdout)
    assert record["order"] == "round-robin"


def test_deal_range_gives_one_line_per_deal():
    result = run("deal", "--seed", "3", "0-3", "--json")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert [json.loads(line)["deal"] for line in lines] == [0, 1, 2, 3]
    assert all(json.loads(line)["seed"] == 3 for line in lines)


def test_deal_at_the_top_of_the_range():
    top = 2**64 - 1
    result = run("deal", "--seed", str(top), f"{top - 1}-{top}", "--json")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["deal"] for line in result.stdout.splitlines()] == [top - 1, top]


def test_deal_draws_the_clock_face():
    result = run("deal", "--seed", "1", "0-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.count(f"deal scheme {deals.SCHEME_VERSION}") == 2
    for deal in (0, 1):
        assert f"seed 1, deal {deal}, order round-robin" in result.stdout
    # Every card of the deal is drawn.
    for pile in reference_piles(1, 0, "round-robin"):
        assert " ".join(pile) in result.stdout


@pytest.mark.parametrize(
    "options, cell",
    [
        (["--variant", "standard"], rules.Cell()),
        (["--variant", "watch", "--strategy", "most"], rules.Cell("watch", "most")),
        (
            ["--variant", "one_swap", "--strategy", "random", "--order", "packets"],
            rules.Cell("one_swap", "random", order="packets"),
        ),
        (
            ["--variant", "exchange", "--strategy", "oracle", "--depth", "top", "--finale", "up"],
            rules.Cell("exchange", "oracle", "up", depth="top"),
        ),
        (["--variant", "play_out"], rules.Cell("play_out")),
    ],
)
def test_deal_replay_prints_the_steps_and_the_result(options, cell):
    seed, deal = 5, 11
    result = run("deal", "--seed", str(seed), str(deal), *options)
    assert result.exit_code == 0, result.output
    table = reference.Table(down=reference.layout(seed, deal, cell.order))
    played = reference.play(seed, deal, cell, table)
    output = result.stdout
    assert f"replay under {cell.label}:" in output
    numbered = [line for line in output.splitlines() if re.match(r"^\s*\d+\. ", line)]
    assert [line.split(". ", 1)[1] for line in numbered] == [s.describe() for s in table.steps]
    summary = output.splitlines()[-1]
    assert summary.startswith("won" if played.won else "lost")
    assert f"{played.cards_turned} cards turned" in summary
    if played.rescue_pile is not None:
        assert f"rescue at hour {played.rescue_pile}" in summary
    if cell.variant == "play_out":
        assert f"{played.restarts} restarts" in summary


MORE = REPO / "tests" / "engine" / "more_strategies.py"


@pytest.mark.parametrize(
    "spec, finale",
    [
        ("tests/engine/more_strategies.py:coin_among_most", "down"),
        ("more_strategies:least_seen", "down"),  # a module on the path
        ("tests/engine/more_strategies.py:no_king_below", "up"),
    ],
)
def test_deal_replays_a_strategy_of_your_own(spec, finale, monkeypatch):
    """`deal --strategy FILE.py:FUNCTION` (or module:FUNCTION) replays as the reference
    engine plays that function, as a sweep does."""
    from pipeline.engine import custom

    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(MORE.parent))
    seed, deal = 5, 11
    options = ["--variant", "one_swap", "--strategy", spec, "--finale", finale]
    result = run("deal", "--seed", str(seed), str(deal), *options)
    assert result.exit_code == 0, result.output
    mine = custom.read(spec, str(REPO))
    cell = rules.Cell("one_swap", mine.name, finale, custom=mine)
    table = reference.Table(down=reference.layout(seed, deal, cell.order))
    played = reference.play(seed, deal, cell, table)
    assert f"replay under {cell.label}:" in result.stdout
    assert played.rescue_pile is not None
    assert f"rescue at hour {played.rescue_pile}" in result.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    "spec, extra, says",
    [
        ("tests/engine/nowhere.py:f", [], "--strategy: 'tests/engine/nowhere.py:f': no file"),
        ("tests/engine/more_strategies.py:nowhere", [], "no function 'nowhere'"),
        ("tests/engine/more_strategies.py:not_compilable", [], "numba cannot compile"),
        ("tests/engine/more_strategies.py:no_king_below", [], "needs finale = 'up'"),
        ("tests/engine/more_strategies.py:past_twelve", [], "returned hour 13 on deal 11"),
        ("tests/engine/more_strategies.py:raises_on_three", ["0-200"], "raised ValueError"),
        ("nowhere_module:f", [], "no module 'nowhere_module'"),
        ("most_of_all", [], "or FILE.py:FUNCTION for one of your own"),
    ],
)
def test_deal_refuses_a_strategy_of_your_own_it_cannot_play_in_one_line(
    spec, extra, says, monkeypatch
):
    monkeypatch.chdir(REPO)
    deals_ = extra or ["11"]
    result = run("deal", "--seed", "5", *deals_, "--variant", "watch", "--strategy", spec)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_deal_of_a_layout_needs_the_deal_named_for_a_strategy_that_reads_rand(monkeypatch):
    monkeypatch.chdir(REPO)
    deck = " ".join(rules.card_text(card) for card in range(52))
    spec = "tests/engine/more_strategies.py:coin_among_most"
    options = ["--variant", "watch", "--strategy", spec]
    result = CliRunner().invoke(cli, ["deal", "--layout", "-", *options], input=deck)
    assert result.exit_code == 2, result.output
    assert "--strategy coin_among_most: its rand is drawn from the deal's seed" in result.stderr
    named = CliRunner().invoke(
        cli, ["deal", "--layout", "-", "--seed", "5", "11", *options], input=deck
    )
    assert named.exit_code == 0, named.output
    assert "replay under watch coin_among_most" in named.stdout


# --- odds ---------------------------------------------------------------------------------


def test_odds_json_records():
    result = run("odds", "--json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records
    for record in records:
        assert set(record) == {"variant", "strategy", "depth", "quantity", "exact"}
        assert record["variant"] in rules.VARIANTS
        assert record["strategy"] is None or record["strategy"] in rules.STRATEGIES
        assert record["depth"] is None or (
            record["variant"] == "exchange" and record["depth"] in rules.DEPTHS
        )
        numerator, denominator = map(int, re.fullmatch(r"(\d+)/(\d+)", record["exact"]).groups())
        assert denominator > 0 and math.gcd(numerator, denominator) == 1
    one_in_13 = {
        "variant": "standard",
        "strategy": None,
        "depth": None,
        "quantity": "P(win)",
        "exact": "1/13",
    }
    assert one_in_13 in records
    law = [r for r in records if r["quantity"].startswith("P(cards_turned=")]
    assert len(law) == 49
    assert sum(Fraction(r["exact"]) for r in law) == 1
    # Every rescue cell has its P(win), once: the cells of a sweep, less the finale (which
    # changes no odds) and the deal order (which only renames deals).
    rescue_cells = {
        (cell.variant, cell.strategy, cell.depth) for cell in rules.all_cells() if cell.has_rescue
    }
    for variant, strategy, depth in rescue_cells:
        matching = [
            r
            for r in records
            if (r["variant"], r["strategy"], r["depth"], r["quantity"])
            == (variant, strategy, depth, "P(win)")
        ]
        assert len(matching) == 1, (variant, strategy, depth)
        cell = rules.Cell(
            variant, strategy, "up" if strategy == "informed" else "down", depth=depth
        )
        assert Fraction(matching[0]["exact"]) == odds.exact_win_of(cell)


def test_odds_table():
    result = run("odds")
    assert result.exit_code == 0, result.output
    assert "1/13" in result.stdout


@pytest.mark.parametrize("measure", ["cards_turned", "down_at_stop", "restarts", "rescue_pile"])
def test_odds_prints_the_law_of_a_measure(measure):
    """Issue 48: `odds --law` prints a measure's exact law on each cell it has a value on, a
    value a line, as fractions; a cell with none known, one line saying why."""
    from pipeline.engine import laws

    records = [
        json.loads(line) for line in run("odds", "--law", measure, "--json").stdout.splitlines()
    ]
    by_cell = {}
    for record in records:
        by_cell.setdefault(record["cell"], {})[record["value"]] = record["exact"]
    expected = {}
    for cell in rules.all_cells(finales=("down",), orders=("round-robin",)):
        law = laws.law_of(measure, cell)
        if law is not None:
            who = cell.label.removesuffix(" finale=down order=round-robin")
            expected[who] = {v: str(p) for v, p in law.chances.items()} if law.known else None
    assert set(by_cell) == set(expected)
    for who, chances in expected.items():
        if chances is None:
            assert by_cell[who] == {None: None}, who
        else:
            assert {v: Fraction(p) for v, p in by_cell[who].items()} == {
                v: Fraction(p) for v, p in chances.items() if Fraction(p)
            }, who
    lines = run("odds", "--law", measure).stdout.splitlines()
    assert len(lines) == len(records)
    wrong = run("odds", "--law", "hint")
    assert wrong.exit_code == 2 and "cards_turned" in wrong.stderr


def test_the_law_of_cards_turned_under_a_rescue_is_a_fraction_that_sums_to_one():
    from pipeline.engine import laws

    records = [
        json.loads(line)
        for line in run("odds", "--law", "cards_turned", "--json").stdout.splitlines()
    ]
    watch = [r for r in records if r["cell"] == "watch most"]
    assert sum(Fraction(r["exact"]) for r in watch) == 1
    (won,) = [r for r in watch if r["value"] == 52]
    assert Fraction(won["exact"]) == odds.exact_win("watch", "most")  # its win: every card
    # The one swap turns the king again: its rescues won turn 53, its standard wins 52.
    one_swap = laws.law_of("cards_turned", rules.Cell("one_swap", "most")).chances
    assert one_swap[53] == Fraction(won["exact"]) - odds.standard_win()


FUNCTIONS = REPO / "tests" / "engine" / "builtins_as_functions.py"


def test_odds_of_a_strategy_of_your_own_are_the_builtins_when_it_is_one(monkeypatch):
    """`most` written as a function: its exact value for each rescue is `most`'s."""
    monkeypatch.chdir(FUNCTIONS.parent)
    result = run("odds", "--json", "--strategy", f"{FUNCTIONS.name}:most_mine")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    builtin = {
        (r["variant"], r["depth"]): r["exact"]
        for r in map(json.loads, run("odds", "--json").stdout.splitlines())
        if r["strategy"] == "most"
    }
    assert {(r["variant"], r["depth"]): r["exact"] for r in records} == builtin
    assert {r["strategy"] for r in records} == {"most_mine"}


def test_the_law_of_a_strategy_of_your_own_is_the_builtins_when_it_is_one(monkeypatch):
    """`most` written as a function: its law of cards_turned under each rescue is `most`'s,
    from its own enumeration."""
    monkeypatch.chdir(FUNCTIONS.parent)
    spec = f"{FUNCTIONS.name}:most_mine"
    result = run("odds", "--json", "--law", "cards_turned", "--strategy", spec)
    assert result.exit_code == 0, result.output
    mine = [json.loads(line) for line in result.stdout.splitlines()]
    builtin = [
        r
        for r in map(json.loads, run("odds", "--json", "--law", "cards_turned").stdout.splitlines())
        if r["cell"].split()[:2] in (["watch", "most"], ["one_swap", "most"], ["exchange", "most"])
    ]
    strip = lambda r: (r["cell"].replace("most_mine", "most"), r["value"], r["exact"])  # noqa: E731
    assert sorted(map(strip, mine)) == sorted(map(strip, builtin)) and len(mine) > 100


@pytest.mark.parametrize(
    "spec, says",
    [
        ("tests/engine/nowhere.py:most_mine", "no file"),
        ("tests/engine/builtins_as_functions.py:least", "no function 'least'"),
        ("tests/engine/more_strategies.py:least_seen", "only a strategy that reads the counts"),
    ],
)
def test_odds_of_a_strategy_that_has_none_is_one_line(spec, says, monkeypatch):
    monkeypatch.chdir(REPO)
    result = run("odds", "--strategy", spec)
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


# --- bench --------------------------------------------------------------------------------

BENCH_KEYS = {
    "kernel_standard",
    "kernel_one_swap_all",
    "kernel_all_cells",
    "reference_standard",
    "reference_all_cells",
    "kernel_vs_reference_standard",
    "kernel_vs_reference_all_cells",
    "one_swap_all_cost",
}


def test_bench_json_keys():
    result = run("bench", "--seconds", "0.2", "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert BENCH_KEYS <= set(figures)
    # Figures, not speeds: only that each is a positive finite number.
    assert all(math.isfinite(figures[key]) and figures[key] > 0 for key in BENCH_KEYS)


# --- Bad input: one line, exit status 2, no traceback ---------------------------------------

BAD_INPUTS = [
    (["deal", "--seed", "1", "7", "--variant", "patience"], "variant"),
    (["deal", "--seed", "1", "7", "--variant", "watch", "--strategy", "greedy"], "strategy"),
    (["deal", "--seed", "1", "7", "--finale", "sideways"], "finale"),
    (["deal", "--seed", "1", "7", "--order", "spiral"], "order"),
    (
        [
            "deal",
            "--seed",
            "1",
            "7",
            "--variant",
            "exchange",
            "--strategy",
            "most",
            "--depth",
            "middle",
        ],
        "depth",
    ),
    (
        ["deal", "--seed", "1", "7", "--variant", "watch", "--strategy", "most", "--depth", "top"],
        "depth",
    ),
    (["deal", "--seed", "1", "7", "--variant", "watch", "--strategy", "informed"], "informed"),
    (
        [
            "deal",
            "--seed",
            "1",
            "7",
            "--variant",
            "exchange",
            "--strategy",
            "informed",
            "--finale",
            "down",
        ],
        "informed",
    ),
    (["deal", "--seed", "1", "7", "--strategy", "most"], "strategy"),
    (["deal", "--seed", "1", "7", "--variant", "standard", "--strategy", "most"], "strategy"),
    (["deal", "--seed", "1", "7", "--variant", "play_out", "--strategy", "clockwise"], "strategy"),
    (["deal", "--seed", "1", "7", "--variant", "watch"], "strategy"),
    (["deal", "--seed", "-1", "7"], "--seed"),
    (["deal", "--seed", "x", "7"], "--seed"),
    (["deal", "--seed", "1.5", "7"], "--seed"),
    (["deal", "--seed", str(2**64), "7"], "--seed"),
    (["deal", "--seed", "\u00b2", "7"], "--seed"),  # a superscript two: isdigit() but not int()
    (["deal", "--seed", "1", "-5"], "-5"),
    (["deal", "--seed", "1", "--", "-5"], "RANGE"),
    (["deal", "--seed", "1", "abc"], "RANGE"),
    (["deal", "--seed", "1", "5-3"], "RANGE"),
    (["deal", "--seed", "1", "a-b"], "RANGE"),
    (["deal", "--seed", "1", "1-2-3"], "RANGE"),
    (["deal", "--seed", "1", "7-"], "RANGE"),
    (["deal", "--seed", "1", ""], "RANGE"),
    (["deal", "--seed", "1", "1-\u00b2"], "RANGE"),
    (["deal", "--seed", "1", str(2**64)], "RANGE"),
    (["deal", "--seed", "1", f"{2**64 - 1}-{2**64}"], "RANGE"),
    (["deal", "7"], "--seed"),
    (["deal", "--seed", "1"], "RANGE"),
    (["deal", "--seed", "1", "7", "--bogus"], "--bogus"),
    (["shuffle"], "shuffle"),
    (["bench", "--seconds", "0"], "--seconds"),
]


@pytest.mark.parametrize("args, names", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_status_2(args, names):
    result = run(*args)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    assert names in lines[0], lines[0]
    assert result.stdout == ""  # the message goes to stderr


def test_bare_command_prints_the_help():
    """`clocksweep` alone gives the help as --help does (not squashed onto one error line)."""
    bare = CliRunner().invoke(cli, [])
    assert bare.exit_code == 0
    assert bare.output == CliRunner().invoke(cli, ["--help"]).output
    assert bare.output.startswith("Usage: ") and "\nCommands:\n" in bare.output
