"""`clocksweep deal --layout`: a deal a user brings (pipeline/engine/layout_input.py).

- Round trip: layouts printed by `deal --json` and played back with `--layout` give exactly
  the rows a real sweep (on a local Ray instance, per-deal Parquet read back by Polars)
  recorded for those deals, for every cell of the grid.
- Decks: 52 card texts laid out by each deal order, and `--reverse`.
- Every malformed input is refused with one line naming the problem (quoting a bad token
  short), exit 2, nothing on standard output; so is standard input closed, and an input over
  the size limit, endless ones included, which is never read whole.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from pipeline import ERROR_PREFIX
from pipeline.cli import cli
from pipeline.engine import layout_input, reference, rules
from pipeline.records import schema

SEED = 515151
# Deals of the every-cell round trip: 96 cells replayed by the reference engine, about 10
# wins a cell (400 cost 17 CPU-seconds); the engines' deal-by-deal agreement is test_engines'.
ROUND_TRIP_DEALS = 130


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin)


def layout_lines(seed: int, deals: str, order: str = "round-robin") -> str:
    result = run("deal", "--seed", str(seed), deals, "--json", "--order", order)
    assert result.exit_code == 0, result.output
    return result.stdout


# --- Round trip against a real sweep -------------------------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep of every cell (96) over ROUND_TRIP_DEALS deals, and its rows."""
    out = tmp_path_factory.mktemp("layout-sweep")
    config = out / "every-cell.toml"
    config.write_text(
        f"""
name = "every-cell"
seed = {SEED}
deals = {ROUND_TRIP_DEALS}
shard_size = 1000
output = "{out / "results"}"
[grid]
variant = {list(rules.VARIANTS)}
strategy = {list(rules.STRATEGIES)}
finale = {list(rules.FINALES)}
order = {list(rules.ORDERS)}
depth = {list(rules.DEPTHS)}
[run]
executor = "threads"
""".replace("'", '"')
    )
    result = run("run", str(config))
    assert result.exit_code == 0, result.output
    rows = pl.scan_parquet(out / "results" / "shards" / "deals").collect()
    return out, rows


def test_a_layout_from_deal_json_plays_as_the_sweep_recorded_it(swept):
    out, rows = swept
    cells = rules.all_cells()
    assert len(cells) == 96
    assert rows.height == 96 * ROUND_TRIP_DEALS
    for order in rules.ORDERS:
        layouts = out / f"layouts-{order}.jsonl"
        layouts.write_text(layout_lines(SEED, f"0-{ROUND_TRIP_DEALS - 1}", order))
        for cell in (c for c in cells if c.order == order):
            args = ["deal", "--layout", str(layouts), "--json", "--variant", cell.variant]
            args += ["--finale", cell.finale]
            if cell.strategy:
                args += ["--strategy", cell.strategy]
            if cell.depth:
                args += ["--depth", cell.depth]
            result = run(*args)
            assert result.exit_code == 0, (cell.label, result.output)
            played = [json.loads(line) for line in result.stdout.splitlines()]
            assert [row["deal"] for row in played] == list(range(ROUND_TRIP_DEALS))
            recorded = rows.filter(
                *(
                    pl.col(axis).cast(pl.String).eq_missing(getattr(cell, axis))
                    for axis in rules.AXES
                )
            ).sort("deal")
            assert recorded.height == ROUND_TRIP_DEALS, cell.label
            for row, want in zip(played, recorded.iter_rows(named=True)):
                assert list(row) == schema.DEAL_SCHEMA.names  # the per-deal columns, in order
                hint = row.pop("hint")
                expected_hint = want.pop("hint")
                assert (hint is None) == (expected_hint is None), (cell.label, row)
                if hint is not None:  # the sweep stores the hint as float32
                    assert np.float32(hint) == np.float32(expected_hint), (cell.label, row)
                assert row == {k: v for k, v in want.items() if k != "hint"}, cell.label


def test_the_clock_face_and_replay_of_a_layout_match_the_numbered_deal():
    layout = layout_lines(SEED, "7")
    by_layout = run(
        "deal", "--layout", "-", "--variant", "watch", "--strategy", "most", stdin=layout
    )
    by_number = run("deal", "--seed", str(SEED), "7", "--variant", "watch", "--strategy", "most")
    assert by_layout.exit_code == 0 and by_number.exit_code == 0, by_layout.output
    first, *rest = by_layout.stdout.splitlines()
    assert first == f"seed {SEED}, deal 7 from standard input, order round-robin"
    assert rest == by_number.stdout.splitlines()[1:]  # same face, same steps, same result


# --- Decks -----------------------------------------------------------------------------------


def deck_of(seed: int, deal: int, order: str) -> list[str]:
    """The deal's deck in the order it is dealt: each deck position's card, from the layout."""
    piles = reference.layout(seed, deal, order)
    deck = [None] * rules.N_CARDS
    for pile, cards in enumerate(piles):
        for k, card in enumerate(cards):
            deck[rules.deal_position(order, pile, k)] = rules.card_text(card)
    return deck


@pytest.mark.parametrize("order", rules.ORDERS)
def test_a_deck_is_laid_out_by_the_deal_order(order, tmp_path):
    deck = deck_of(SEED, 11, order)
    path = tmp_path / "deck.txt"
    path.write_text(" ".join(deck[:26]) + "\n" + ",".join(deck[26:]) + "\n")
    variant = ["--variant", "one_swap", "--strategy", "fewest"]
    given = run("deal", "--layout", str(path), "--order", order, "--json", *variant)
    numbered = run(
        "deal", "--layout", "-", "--json", *variant, stdin=layout_lines(SEED, "11", order)
    )
    assert given.exit_code == 0 and numbered.exit_code == 0, given.output
    from_deck, from_json = json.loads(given.stdout), json.loads(numbered.stdout)
    assert from_deck["seed"] is None and from_deck["deal"] is None
    assert {**from_deck, "seed": SEED, "deal": 11} == from_json
    # The same deck written top card last, read with --reverse; lower case and "10" accepted.
    written = [text.lower().replace("t", "10") for text in reversed(deck)]
    reversed_run = run(
        "deal",
        "--layout",
        "-",
        "--order",
        order,
        "--reverse",
        "--json",
        *variant,
        stdin="\n".join(written),
    )
    assert reversed_run.exit_code == 0, reversed_run.output
    assert json.loads(reversed_run.stdout) == from_deck
    # A JSON array of the 52 texts is the same deck.
    as_array = run(
        "deal", "--layout", "-", "--order", order, "--json", *variant, stdin=json.dumps(deck)
    )
    assert json.loads(as_array.stdout) == from_deck


def test_random_draws_from_the_named_deal(tmp_path):
    deck = deck_of(SEED, 3, "round-robin")
    path = tmp_path / "deck.txt"
    path.write_text(" ".join(deck))
    named = run(
        "deal",
        "--layout",
        str(path),
        "--seed",
        str(SEED),
        "3",
        "--json",
        "--variant",
        "watch",
        "--strategy",
        "random",
    )
    numbered = run(
        "deal",
        "--layout",
        "-",
        "--json",
        "--variant",
        "watch",
        "--strategy",
        "random",
        stdin=layout_lines(SEED, "3"),
    )
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout) == json.loads(numbered.stdout)


# --- Malformed input -------------------------------------------------------------------------


def good_layout() -> dict:
    return json.loads(layout_lines(SEED, "5"))


def swapped(record: dict, pile: int, k: int, card: str) -> str:
    record["piles"][pile][k] = card
    return json.dumps(record)


# An integer longer than Python converts from text (4,300 digits), and a token far longer than
# an error line should quote.
HUGE = "9" * 5000
LONG = 100_000
# The longest error line a malformed layout may give: a deck of one card names the 51 missing.
LONGEST_ERROR = 300


def with_seed(record: dict, digits: str) -> str:
    return json.dumps({**record, "seed": 0}).replace('"seed": 0', f'"seed": {digits}', 1)


def with_key_twice(record: dict, key: str) -> str:
    """The layout's JSON on one line, ``key`` given twice (its own value both times)."""
    text = json.dumps(record)
    return text[:-1] + f", {json.dumps(key)}: {json.dumps(record[key])}}}"


def malformed_cases() -> list[tuple[str, list[str], str, str]]:
    """(case, extra arguments, input, a text the error line must hold)."""
    record = good_layout()
    deck = deck_of(SEED, 5, "round-robin")
    first_card = record["piles"][0][0]
    # One layout printed over many lines, its third card's comma dropped: named at its line.
    pretty, mistake = json.dumps(record, indent=2), record["piles"][0][2]
    mistake_line = 1 + next(i for i, line in enumerate(pretty.splitlines()) if mistake in line)
    cases = [
        ("empty input", [], "  \n", "layout: empty"),
        ("not JSON", [], '{"piles": [', "not valid JSON"),
        ("a JSON number", [], "[[1, 2]]", "neither a layout object"),
        ("unknown key", [], json.dumps({**record, "extra": 1}), "unknown key 'extra'"),
        ("no piles", [], json.dumps({"seed": 1}), "no 'piles'"),
        (
            "12 piles",
            [],
            json.dumps({**record, "piles": record["piles"][:12]}),
            "piles is 12 piles",
        ),
        ("piles not a list", [], json.dumps({**record, "piles": "7H"}), "piles is"),
        (
            "a pile of 5",
            [],
            json.dumps({**record, "piles": [record["piles"][0] + ["AS"]] + record["piles"][1:]}),
            "hour 1 holds 5 cards",
        ),
        (
            "a pile of 3",
            [],
            json.dumps({**record, "piles": record["piles"][:12] + [record["piles"][12][:3]]}),
            "the centre holds 3 cards",
        ),
        (
            "a pile not a list",
            [],
            json.dumps({**record, "piles": record["piles"][:3] + ["7H"] + record["piles"][4:]}),
            "hour 4 holds",
        ),
        ("a card not text", [], swapped(good_layout(), 2, 1, 7), "hour 3, card 2 from the top"),
        ("not a card", [], swapped(good_layout(), 4, 0, "1H"), "'1H' is not a card"),
        ("a bad suit", [], swapped(good_layout(), 4, 0, "7X"), "'7X' is not a card"),
        (
            "a repeated card",
            [],
            swapped(good_layout(), 12, 3, first_card),
            f"{first_card} appears twice",
        ),
        ("a bad seed", [], json.dumps({**record, "seed": -1}), "seed is -1"),
        ("a bad order", [], json.dumps({**record, "order": "spiral"}), "order 'spiral'"),
        (
            "51 cards",
            [],
            " ".join(deck[:51]),
            f"deck: 51 cards; a deck is 52 (missing: {deck[51]})",
        ),
        ("53 cards", [], " ".join(deck + [deck[0]]), f"{deck[0]} appears twice"),
        ("52 with a repeat", [], " ".join(deck[:51] + [deck[0]]), f"missing: {deck[51]}"),
        (
            "a deck text not a card",
            [],
            " ".join(deck[:10] + ["Q"] + deck[11:]),
            "deck: card 11: 'Q' is not a card",
        ),
        (
            "a bad line of several",
            [],
            layout_lines(SEED, "0-1") + swapped(good_layout(), 0, 0, "ZZ") + "\n",
            "layout line 3",
        ),
        ("not UTF-8 (UTF-16)", [], json.dumps(record).encode("utf-16"), "not UTF-8 text"),
        (
            "a mistake in one layout over many lines",
            [],
            pretty.replace(f'"{mistake}",', f'"{mistake}"', 1),
            f"Expecting ',' delimiter: line {mistake_line + 1} column",  # where the next card is
        ),
        ("nested too deeply", [], "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        # Integers Python will not convert (over 4,300 digits), wherever they stand.
        ("a seed of 5,000 digits", [], with_seed(record, HUGE), "an integer of 5000 digits"),
        ("a deck number of 5,000 digits", [], f"[{HUGE}]", "an integer of 5000 digits"),
        (
            "an integer of 5,000 digits on a line of several",
            [],
            layout_lines(SEED, "0-1") + with_seed(record, HUGE) + "\n",
            "layout line 3: an integer of 5000 digits",
        ),
        # A key twice: json alone would keep the last silently.
        ("a key twice", [], with_key_twice(record, "piles"), "key 'piles' appears twice"),
        (
            "a key twice on the first of several lines",
            [],
            with_key_twice(record, "seed") + "\n" + layout_lines(SEED, "0"),
            "layout line 1: key 'seed' appears twice",
        ),
        (
            "a key twice on a line of several",
            [],
            layout_lines(SEED, "0") + with_key_twice(record, "deal") + "\n",
            "layout line 2: key 'deal' appears twice",
        ),
        # Bad tokens of any length are quoted short.
        (
            "a long deck text",
            [],
            " ".join(deck[:10] + ["Q" * LONG] + deck[11:]),
            "deck: card 11: 'QQQQ",
        ),
        ("a long key", [], json.dumps({**record, "k" * LONG: 1}), "unknown key 'kkkk"),
        ("a long order", [], json.dumps({**record, "order": "o" * LONG}), "order 'oooo"),
        (
            "a long card text",
            [],
            swapped(good_layout(), 3, 2, "c" * LONG),
            "hour 4, card 3 from the top: 'cccc",
        ),
        (
            "a long deal scheme",
            ["--variant", "watch", "--strategy", "random"],
            json.dumps({**record, "scheme": "s" * LONG}),
            "names deal scheme ssss",
        ),
        ("--reverse on piles", ["--reverse"], json.dumps(record), "--reverse"),
        (
            "random without a deal",
            ["--variant", "watch", "--strategy", "random"],
            " ".join(deck),
            "--strategy random",
        ),
        ("another seed", ["--seed", "9"], json.dumps(record), "the layout names seed"),
        ("another deal", ["6"], json.dumps(record), "the layout names deal 5"),
        ("a range", ["--seed", str(SEED), "5-6"], " ".join(deck), "a layout is one deal number"),
        (
            "a strategy standard does not take",
            ["--strategy", "most"],
            json.dumps(record),
            "strategy",
        ),
    ]
    return cases


@pytest.mark.parametrize("case", malformed_cases(), ids=lambda case: case[0])
def test_malformed_layouts_are_refused_in_one_line(case):
    _name, extra, text, named = case
    result = CliRunner().invoke(cli, ["deal", "--layout", "-", *extra], input=text)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("clocksweep: error: "), result.stderr[:500]
    assert named in lines[0], lines[0][:500]
    assert len(lines[0]) <= LONGEST_ERROR, lines[0][:500]


def test_a_layout_with_a_byte_order_mark_or_over_many_lines_is_read():
    record = good_layout()
    plain = run("deal", "--layout", "-", "--json", stdin=json.dumps(record))
    assert plain.exit_code == 0, plain.output
    for text in (b"\xef\xbb\xbf" + json.dumps(record).encode(), json.dumps(record, indent=2)):
        result = run("deal", "--layout", "-", "--json", stdin=text)
        assert result.exit_code == 0, result.output
        assert result.stdout == plain.stdout


def test_a_layout_file_that_cannot_be_read(tmp_path):
    result = run("deal", "--layout", str(tmp_path / "nowhere.json"))
    assert result.exit_code == 2 and result.stdout == ""
    assert "--layout" in result.stderr and "No such file" in result.stderr
    folder = run("deal", "--layout", str(tmp_path))
    assert folder.exit_code == 2 and "Is a directory" in folder.stderr


# --- Input that is closed, endless or too large ----------------------------------------------

LIMIT = layout_input.MAX_INPUT_BYTES
REPO = Path(__file__).resolve().parents[2]
# The command as a process of its own, started from the source tree these tests import.
COMMAND = [sys.executable, "-c", "from pipeline.cli import main; main()"]


def refused_in_one_line(returncode: int, stdout: str, stderr: str) -> str:
    """The one error line of a refused command."""
    assert returncode == 2 and stdout == "", (returncode, stderr[-2000:])
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), stderr[-2000:]
    return lines[0]


def test_standard_input_closed_is_refused_in_one_line():
    # Started with standard input closed, Python's sys.stdin is None.
    shell = 'exec "$@" <&-'
    done = subprocess.run(
        ["sh", "-c", shell, "sh", *COMMAND, "deal", "--layout", "-"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    line = refused_in_one_line(done.returncode, done.stdout, done.stderr)
    assert (
        line == f"{ERROR_PREFIX}--layout: standard input: closed; pipe the input in, or give a FILE"
    )


@pytest.mark.parametrize("source", ["file", "standard input"])
def test_an_input_over_the_size_limit_is_refused_in_one_line(source, tmp_path):
    # Blanks: read whole, this would be an empty layout; it is refused for its size instead.
    text = b" " * (LIMIT + 1)
    path = tmp_path / "large.txt"
    path.write_bytes(text)
    if source == "file":
        result = run("deal", "--layout", str(path))
        named = str(path)
    else:
        result = run("deal", "--layout", "-", stdin=text)
        named = "standard input"
    line = refused_in_one_line(result.exit_code, result.stdout, result.stderr)
    assert line == (
        f"{ERROR_PREFIX}--layout: {named}: too large; --layout reads at most "
        f"{layout_input.MAX_INPUT_TEXT}"
    )


def test_an_input_at_the_size_limit_is_read():
    text = json.dumps(good_layout())
    padded = text + " " * (LIMIT - len(text))
    result = run("deal", "--layout", "-", "--json", stdin=padded)
    assert result.exit_code == 0, result.output[:500]


def test_the_size_limit_holds_the_layouts_it_promises():
    # The help promises MAX_INPUT_BYTES // DEAL_JSON_LINE_BYTES layouts: no `deal --json` line
    # is longer than DEAL_JSON_LINE_BYTES (the largest seed and deal, the longer order's name).
    last = str(2**64 - 1)
    for order in rules.ORDERS:
        line = layout_lines(int(last), last, order)
        assert len(line.encode()) <= layout_input.DEAL_JSON_LINE_BYTES, (order, line)
    helped = " ".join(run("deal", "--help").stdout.split())
    assert f"at most {layout_input.MAX_INPUT_TEXT}" in helped
    for doc in ("docs/deals.md", "README.md"):  # the limit as the docs state it
        assert layout_input.MAX_INPUT_TEXT in " ".join((REPO / doc).read_text().split()), doc


@pytest.mark.parametrize(
    "endless",
    ['"$@" --layout /dev/zero', "yes 'AH ' | \"$@\" --layout -"],
    ids=["a device", "a pipe"],
)
def test_an_endless_input_is_refused_without_being_read_whole(endless):
    # Under a memory limit the command's own needs fit in (it peaks near 150 MB of address
    # space) and an input read whole does not: it would end in a MemoryError. "$@" is the
    # command, `clocksweep deal`.
    shell = f"ulimit -v 600000; {endless}"
    done = subprocess.run(
        ["bash", "-c", shell, "bash", *COMMAND, "deal"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    line = refused_in_one_line(done.returncode, done.stdout, done.stderr)
    assert "too large; --layout reads at most" in line, line


def test_a_huge_deck_is_refused_from_its_first_cards():
    # More than 52 texts hold a repeat or a non-card among the first 53: no list of every
    # text is made (it would cost some 65 times the input), and no card is called missing
    # that a later text may hold.
    text = ("AH " * (LIMIT // 3)).encode()
    tracemalloc.start()
    try:
        result = run("deal", "--layout", "-", stdin=text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = refused_in_one_line(result.exit_code, result.stdout, result.stderr)
    assert line == f"{ERROR_PREFIX}deck: AH appears twice (card 1 and card 2)"
    assert peak < 8 * LIMIT, f"{peak / 1e6:.0f} MB"


def test_deal_without_a_layout_still_needs_seed_and_range():
    result = run("deal", "7")
    assert result.exit_code == 2 and "--seed S and a RANGE" in result.stderr


def test_every_shuffle_of_a_valid_layout_is_accepted():
    # Any 52 distinct cards in 13 piles of 4 is a layout, whatever its cards' places.
    cards = [rules.card_text(card) for card in range(rules.N_CARDS)]
    rng = random.Random(20261201)
    for _ in range(20):
        rng.shuffle(cards)
        piles = [cards[p * 4 : (p + 1) * 4] for p in range(13)]
        result = run("deal", "--layout", "-", "--json", stdin=json.dumps({"piles": piles}))
        assert result.exit_code == 0, result.output
        row = json.loads(result.stdout)
        assert row["variant"] == "standard" and 4 <= row["cards_turned"] <= 52
