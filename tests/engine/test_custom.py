"""Strategies of your own (docs/rules.md): read and refused in one line, played by both
engines alike deal by deal, the four counts-only built-ins written as functions playing as the
built-ins do, `rand`'s law, and a strategy that breaks the rules stopping play with a line
that names it, the deal and its answer.

The exact values of counts-only ones (`odds`): the built-ins as functions against the
built-ins' own values, and every deal of small decks played out.

The strategies are in `builtins_as_functions.py` and `more_strategies.py` beside this file.
Each process compiles a strategy once (a fraction of a second); the kernel is the one
compiled kernel numba caches on disk, whatever the strategies.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from test_odds import RESCUES, rank_sequences, rescue_is_won, run_chain

from pipeline.engine import custom, deals, odds, reference, rules
from pipeline.engine.record import from_kernel
from pipeline.engine.rules import Cell

HERE = Path(__file__).parent
BUILTINS = HERE / "builtins_as_functions.py"
MORE = HERE / "more_strategies.py"
AS_FUNCTIONS = {
    "clockwise": "clockwise_mine",
    "random": "random_mine",
    "most": "most_mine",
    "fewest": "fewest_mine",
}
SEEING = ("least_seen", "died_at_centre", "no_king_below", "coin_among_most")
SEED = 20261130


@functools.cache
def strategy(path: Path, function: str) -> rules.Custom:
    return custom.read(f"{path.name}:{function}", str(path.parent))


def mine(builtin: str) -> rules.Custom:
    return strategy(BUILTINS, AS_FUNCTIONS[builtin])


def rescue_cells(strategies, finales=("down", "up")) -> list[Cell]:
    """Every rescue cell of ``strategies`` (strategies of the user's or built-in names)."""
    cells = []
    for finale in finales:
        for variant, depth in (
            ("watch", None),
            ("one_swap", None),
            ("exchange", "bottom"),
            ("exchange", "top"),
        ):
            for s in strategies:
                name, own = (s.name, s) if isinstance(s, rules.Custom) else (s, None)
                if own is not None and own.reads_bottoms and finale != "up":
                    continue
                cells.append(Cell(variant, name, finale, depth=depth, custom=own))
    return cells


# --- Reading a strategy ---------------------------------------------------------------------


def test_a_strategy_is_read_with_what_it_sees_and_its_digest():
    found = strategy(MORE, "coin_among_most")
    assert found.name == "coin_among_most"
    assert found.sees == ("counts", "rand")
    assert found.counts_only and not found.reads_bottoms
    assert len(found.digest) == 64 and found.source == MORE.read_text()
    assert strategy(MORE, "no_king_below").reads_bottoms
    assert not strategy(MORE, "least_seen").counts_only


def test_a_module_on_the_path_names_a_strategy_too(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    by_module = custom.read("builtins_as_functions:most_mine")
    assert by_module == mine("most")  # the same function, the same source: the same strategy


@pytest.mark.parametrize(
    "spec, says",
    [
        ("no_such_file.py:f", "no file"),
        ("builtins_as_functions.py:nowhere", "no function 'nowhere'"),
        ("more_strategies.py:peeks", "parameter 'deck' is not something a strategy sees"),
        ("more_strategies.py:not_compilable", "numba cannot compile not_compilable"),
        ("more_strategies.py:returns_a_float", "returns float64; expected an hour"),
        ("more_strategies.py", "is not FILE.py:FUNCTION"),
        ("no_such_module_anywhere:f", "no module 'no_such_module_anywhere'"),
    ],
)
def test_a_strategy_that_cannot_be_played_is_refused_in_one_line(spec, says):
    with pytest.raises(custom.CustomError) as refused:
        custom.read(spec, str(HERE))
    message = str(refused.value)
    assert says in message and "\n" not in message, message
    assert message.startswith("strategy: ")


def test_a_strategy_named_as_a_builtin_is_refused(tmp_path):
    (tmp_path / "mine.py").write_text("def most(counts):\n    return 1\n")
    with pytest.raises(custom.CustomError, match="clashes with the built-in strategy 'most'"):
        custom.read("mine.py:most", str(tmp_path))


def test_a_file_that_fails_to_load_is_refused_in_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("def f(counts):\n    return 1\nraise RuntimeError('no')\n")
    with pytest.raises(custom.CustomError, match="fails to load: RuntimeError: no$"):
        custom.read("broken.py:f", str(tmp_path))


def test_a_strategy_that_reads_the_bottoms_needs_face_up_finales():
    reader = strategy(MORE, "no_king_below")
    with pytest.raises(rules.RuleError, match="reads bottoms.*finale = 'up'"):
        Cell("watch", reader.name, "down", custom=reader)
    assert Cell("watch", reader.name, "up", custom=reader).custom is reader
    # A grid with both finales plays it face up only, as it does `informed`.
    grid = {**rules.AXIS_DEFAULTS, "variant": ("watch",), "finale": rules.FINALES}
    cells = rules.expand({**grid, "strategy": (reader.name,)}, (reader,))
    assert [cell.finale for cell in cells] == ["up"]


def test_a_changed_source_is_another_strategy(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def pick(counts):\n    return 1 + 0\n")
    before = custom.read("mine.py:pick", str(tmp_path))
    path.write_text("def pick(counts):\n    return 1 + 0  # the same function, a new comment\n")
    after = custom.read("mine.py:pick", str(tmp_path))
    assert before.digest != after.digest and before != after
    assert Cell("watch", "pick", custom=before) != Cell("watch", "pick", custom=after)


# --- Both engines play it -------------------------------------------------------------------


@pytest.mark.parametrize("seed, first", [(SEED, 0), (2**64 - 1, 2**64 - 200)])
def test_kernel_equals_reference_on_strategies_of_your_own(seed, first):
    """Deal by deal, field by field, every rescue cell of eight strategies of your own (the
    four built-ins as functions and four that read seen, bottoms and rand) and of `random`,
    whose draw `rand` shares: 2 x 120 deals x 120 cells."""
    from pipeline.engine import kernel

    count = 120
    strategies = [mine(name) for name in AS_FUNCTIONS] + [strategy(MORE, name) for name in SEEING]
    cells = rescue_cells(strategies + ["random"])
    out = kernel.play(seed, first, count, cells)
    mismatches = []
    for d in range(count):
        for c, cell in enumerate(cells):
            expected = reference.play(seed, first + d, cell).record
            got = from_kernel(out, c, d)
            if got != expected:
                mismatches.append((first + d, cell.label, got, expected))
    assert not mismatches, f"{len(mismatches)} mismatches: {mismatches[:5]}"
    assert (out["rescue_pile"] > 0).sum() > count * len(cells) // 2  # rescues were played


def test_the_builtins_written_as_functions_play_as_the_builtins():
    """clockwise, most and fewest pick the built-ins' piles on every deal; random_mine's
    `int(rand * n)` is random's draw but where the strategy stream's first word is refused
    by one of the two draws (Lemire's rejection: about 1 deal in 1.5 million)."""
    from pipeline.engine import kernel

    count = 20_000
    builtins = list(AS_FUNCTIONS)
    cells = rescue_cells(builtins, ("down",)) + rescue_cells([mine(b) for b in builtins], ("down",))
    out = kernel.play(SEED, 0, count, cells)
    half = len(cells) // 2
    for c in range(half):
        theirs = cells[c]
        differ = np.flatnonzero(
            (out["rescue_pile"][c] != out["rescue_pile"][half + c])
            | (out["won"][c] != out["won"][half + c])
        )
        if theirs.strategy != "random":
            assert len(differ) == 0, (theirs.label, differ[:5])
            continue
        for deal in differ:
            word = next(deals.random_words(SEED, int(deal), deals.STREAM_STRATEGY))
            down = out["down_at_stop"][c, deal]
            assert down > 0
            n = int(np.count_nonzero(first_death_counts(SEED, int(deal))))
            refused = [
                (word * size) & deals.MASK32 < deals.WORD_LIMIT % size
                for size in (n, rules.RAND_GRID)
            ]
            assert any(refused), (theirs.label, deal)


def first_death_counts(seed: int, deal: int) -> list[int]:
    table = reference.Table(down=reference.layout(seed, deal, "round-robin"))
    reference.play(seed, deal, Cell(), table)
    return table.down_counts()[: rules.N_HOURS]


def test_what_a_strategy_sees_is_the_table_at_the_first_death():
    """`seen` counts the cards taken from each pile by rank, with the centre where the chain
    died; `bottoms` are the bottom cards as dealt; `counts` the face-down cards."""
    seed, deal = SEED, 7
    piles = reference.layout(seed, deal, "round-robin")
    table = reference.Table(down=[list(p) for p in piles])
    reference.play(seed, deal, Cell(), table)
    taken = [[card // 4 for card in pile[: 4 - len(left)]] for pile, left in zip(piles, table.down)]
    seen = custom.seen_matrix(taken, rules.CENTRE)
    assert seen[:, : rules.N_PILES].sum() == 52 - table.cards_down()
    assert seen[:, rules.N_PILES].tolist() == [0] * 12 + [1]
    assert (seen[:, : rules.N_PILES].sum(axis=1) == [4 - len(left) for left in table.down]).all()
    by_rank = seen[:, : rules.N_PILES].sum(axis=0)
    assert by_rank[rules.KING] == 4  # every king came up: the chain died at the fourth


# --- rand -------------------------------------------------------------------------------------


def test_rand_law_is_uniform_over_fractions_of_up_to_twelve():
    values = [value for value, _ in rules.RAND_LAW]
    chances = [chance for _, chance in rules.RAND_LAW]
    assert len(values) == 46 and sum(chances) == 1
    assert all(a < b for a, b in zip(values, values[1:]))
    for n in range(1, rules.N_HOURS + 1):
        # int(rand * n), with the floats the engines give, is exactly uniform on 0..n-1.
        law: dict[int, Fraction] = {}
        for value, chance in zip(rules.RAND_VALUES, chances):
            law[int(value * n)] = law.get(int(value * n), Fraction(0)) + chance
        assert law == {k: Fraction(1, n) for k in range(n)}, n
    # A draw's value is the middle of the interval that holds it.
    for draw in (0, 1, rules.RAND_GRID // 2, rules.RAND_GRID - 1):
        low = max(b for b in rules.RAND_BREAKS if b <= draw)
        high = min(b for b in rules.RAND_BREAKS if b > draw)
        assert rules.rand_value(draw) == float(Fraction(low + high, 2 * rules.RAND_GRID))


def test_rand_follows_its_law_in_the_kernel():
    """Over 60,000 deals, the kernel's `rand` (read back through a strategy that returns
    the index of its interval) has each interval's chance, chi-square p > 1e-4."""
    from scipy.stats import chisquare

    from pipeline.engine import kernel

    count = 60_000
    out = kernel.play(SEED, 0, count, [Cell("watch", "random_mine", custom=mine("random"))])
    # Kernel against reference on rand itself: the reference's value for each deal.
    rescued = np.flatnonzero(out["down_at_stop"][0] > 0)[:50]
    for deal in rescued:
        n = int(np.count_nonzero(first_death_counts(SEED, int(deal))))
        rand = rules.rand_value(deals.strategy_draw(SEED, int(deal), rules.RAND_GRID))
        holding = [q for q, d in enumerate(first_death_counts(SEED, int(deal))) if d > 0]
        assert out["rescue_pile"][0, deal] == holding[int(rand * n)] + 1
    draws = [deals.strategy_draw(SEED, deal, rules.RAND_GRID) for deal in range(count)]
    intervals = np.searchsorted(rules.RAND_BREAKS, draws, side="right") - 1
    observed = np.bincount(intervals, minlength=len(rules.RAND_LAW))
    expected = np.array([float(chance) * count for _, chance in rules.RAND_LAW])
    assert chisquare(observed, expected).pvalue > 1e-4


# --- A strategy that breaks the rules ---------------------------------------------------------


@pytest.mark.parametrize(
    "function, says",
    [
        ("raises_on_three", "raised ValueError: three cards at one o'clock on deal "),
        ("empty_hour", "holds no face-down card"),
        ("past_twelve", "returned hour 13 on deal "),
    ],
)
@pytest.mark.parametrize("engine", ("reference", "kernel"))
def test_a_strategy_that_names_no_pile_stops_play_naming_the_deal(function, says, engine):
    from pipeline.engine import kernel

    bad = strategy(MORE, function)
    cell = Cell("one_swap", bad.name, custom=bad)
    with pytest.raises(rules.StrategyError) as stopped:
        if engine == "kernel":
            kernel.play(SEED, 0, 2000, [Cell(), cell])
        else:
            for deal in range(2000):
                reference.play(SEED, deal, cell)
    message = str(stopped.value)
    assert message.startswith(f"strategy {function!r} ") and says in message, message
    assert "\n" not in message
    deal = int(message.split(" on deal ")[1].split(":")[0].split()[0])
    # The deal named is the first that breaks it: every deal before it plays.
    kernel.play(SEED, 0, deal, [cell])


def test_more_strategies_of_your_own_than_one_play_takes_are_refused(tmp_path):
    from pipeline.engine import kernel

    source = "".join(f"def pick{k}(counts):\n    return 1 if counts[0] else 2\n" for k in range(9))
    (tmp_path / "many.py").write_text(source)
    many = [custom.read(f"many.py:pick{k}", str(tmp_path)) for k in range(9)]
    cells = [Cell("watch", s.name, custom=s) for s in many]
    with pytest.raises(ValueError, match=f"at most {kernel.MAX_CUSTOM}"):
        kernel.play(SEED, 0, 10, cells)


# --- Exact values ---------------------------------------------------------------------------

SMALL_DECKS = [(3, 2), (4, 3), (6, 4)]  # (hour ranks, suits)


@pytest.mark.parametrize("builtin", AS_FUNCTIONS)
def test_the_builtins_as_functions_have_the_builtins_exact_values_on_small_decks(builtin):
    """Every count vector played by the function, against the built-in's own dynamic
    programme (odds.rescue_win), computed, not written down."""
    for ranks, suits in SMALL_DECKS:
        for depth in rules.DEPTHS:
            assert odds.custom_rescue_win(mine(builtin), ranks, suits, depth) == odds.rescue_win(
                builtin, ranks, suits, depth
            ), (builtin, ranks, suits, depth)


def test_most_as_a_function_has_most_exact_value_on_the_full_deck():
    """5**12 count vectors, a second or two; the other three on the full deck are checked by
    benchmarks/custom_bench.py --exact (random_mine's 46 values of rand make it minutes)."""
    for depth in rules.DEPTHS:
        assert odds.custom_rescue_win(mine("most"), depth=depth) == odds.rescue_win(
            "most", depth=depth
        )


EXHAUSTIVE_DECKS = [(3, 2), (2, 3), (2, 4)]


@pytest.mark.parametrize("ranks,suits", EXHAUSTIVE_DECKS)
def test_exhaustive_play_gives_the_exact_values_of_strategies_of_your_own(ranks, suits):
    """Every deal of small decks played to its first death and rescued where the Python
    function says (for each value of rand, by its chance), against the enumeration."""
    strategies = [strategy(MORE, "second_most"), strategy(MORE, "coin_among_most")]
    king, deals_played = ranks, 0
    wins = {(s.name, v, d): Fraction(0) for s in strategies for v, d in RESCUES}
    for sequence in rank_sequences([suits] * (ranks + 1)):
        deals_played += 1
        piles = [list(sequence[p * suits : (p + 1) * suits]) for p in range(ranks + 1)]
        run_chain(piles, piles[king].pop(0), stop_at_king=False)
        counts = tuple(len(piles[p]) for p in range(ranks))
        for s in strategies:
            for variant, depth in RESCUES:
                if not any(counts):
                    wins[(s.name, variant, depth)] += 1
                    continue
                for pile, chance in python_picks(s, counts):
                    won = rescue_is_won(piles, pile, variant, depth)
                    wins[(s.name, variant, depth)] += chance * won
    for s in strategies:
        for variant, depth in RESCUES:
            expected = odds.custom_rescue_win(s, ranks, suits, depth or "bottom")
            assert wins[(s.name, variant, depth)] / deals_played == expected, (s.name, variant)


@functools.cache
def python_picks(s: rules.Custom, counts: tuple[int, ...]) -> list[tuple[int, Fraction]]:
    """The piles the Python function picks for ``counts``, with their chances over rand."""
    values = rules.RAND_LAW if "rand" in s.sees else [(Fraction(0), Fraction(1))]
    given = {"counts": np.array(counts, dtype=np.int64)}
    picks: dict[int, Fraction] = {}
    for value, chance in values:
        given["rand"] = float(value)
        pile = custom.python_function(s)(*(given[n] for n in s.sees)) - 1
        picks[pile] = picks.get(pile, Fraction(0)) + chance
    return list(picks.items())


def test_an_answer_that_names_no_pile_for_some_counts_has_no_exact_value():
    bad = strategy(MORE, "none_for_two_piles")
    with pytest.raises(rules.StrategyError, match=r"returned hour \d+ on counts \(") as refused:
        odds.custom_rescue_win(bad, 3, 2)
    assert "\n" not in str(refused.value)


def test_only_a_strategy_that_reads_the_counts_has_an_exact_value():
    reader = strategy(MORE, "least_seen")
    assert odds.exact_win_of(Cell("watch", reader.name, custom=reader)) is None
    assert odds.exact_win_given_down_of(Cell("watch", reader.name, custom=reader), 5) is None
    counted = mine("most")
    assert odds.exact_win_given_down_of(
        Cell("watch", counted.name, custom=counted), 5
    ) == odds.rescue_win_given_down("most", 5)


# --- The examples -----------------------------------------------------------------------------

EXAMPLES = HERE.parents[1] / "examples" / "strategies.py"


def test_the_examples_play_as_their_docstrings_say():
    """follow_the_bottoms wins exactly the deals the oracle wins (watch, one_swap, exchange at
    the bottom); least_visited picks most's pile on every deal; nearest_twelve reads only the
    counts, and so has an exact value."""
    from pipeline.engine import kernel

    follow = strategy(EXAMPLES, "follow_the_bottoms")
    least = strategy(EXAMPLES, "least_visited")
    count = 20_000
    for variant, depth in (("watch", None), ("one_swap", None), ("exchange", "bottom")):
        cells = [
            Cell(variant, "oracle", "up", depth=depth),
            Cell(variant, follow.name, "up", depth=depth, custom=follow),
            Cell(variant, "most", "up", depth=depth),
            Cell(variant, least.name, "up", depth=depth, custom=least),
        ]
        out = kernel.play(SEED, 0, count, cells)
        assert np.array_equal(out["won"][0], out["won"][1]), variant
        assert np.array_equal(out["rescue_pile"][2], out["rescue_pile"][3]), variant
        assert 0.4 < out["won"][0].mean() < 0.46
    assert strategy(EXAMPLES, "nearest_twelve").counts_only


# --- What a strategy reaches beyond its file --------------------------------------------------

HELPERS = """
import numba
import numpy as np

TABLE = np.arange(12)
LIMIT = 12


@numba.njit
def inner(counts):
    return int(np.argmax(counts[:LIMIT])) + 1


@numba.njit
def outer(counts):
    return inner(counts) + 0 * TABLE[0]
"""
USER = """
import {module}
from {module} import outer

OWN = 3


def mine(counts):
    return outer(counts) + 0 * OWN

def by_attribute(counts):
    return {module}.inner(counts)

def alone(counts):
    return int(counts.argmax()) + 1 + 0 * OWN
"""


def helper_files(tmp_path, monkeypatch, module: str):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / f"{module}.py").write_text(HELPERS)
    (tmp_path / "user.py").write_text(USER.format(module=module))
    return tmp_path / f"{module}.py"


def test_a_strategy_reaches_the_helpers_numba_compiles_into_it(tmp_path, monkeypatch):
    """Its helpers' sources and the values they read, through another helper and through a
    module's attribute; nothing for one that reads only its own file and numpy."""
    from pipeline.engine import reach

    helper_files(tmp_path, monkeypatch, "reach_helpers_a")
    found = {}
    for name in ("mine", "by_attribute", "alone"):
        strategy = custom.read(f"user.py:{name}", str(tmp_path))
        python = custom.python_function(strategy)
        found[name] = reach.reached(python, python.__module__, strategy.source)
        assert strategy.reaches == reach.digest(found[name])
    assert set(found["mine"]) == {
        "<strategy file>.outer",
        "reach_helpers_a.inner",
        "reach_helpers_a.LIMIT",
        "reach_helpers_a.TABLE",
    }
    assert "def inner(counts)" in found["mine"]["reach_helpers_a.inner"]["source"]
    assert found["mine"]["reach_helpers_a.LIMIT"] == "int 12"
    assert "reach_helpers_a.inner" in found["by_attribute"]
    assert found["alone"] == {} and custom.read("user.py:alone", str(tmp_path)).reaches == ""


def test_the_builtins_as_functions_reach_nothing_so_their_identity_is_as_it_was():
    for builtin in AS_FUNCTIONS:
        assert mine(builtin).reaches == ""


def test_a_helper_edited_after_its_import_is_refused_in_one_line(tmp_path, monkeypatch):
    """In a long-lived process (a notebook) the code that would run is the old helper's; its
    file's text is not what would be played, so the strategy is refused."""
    helpers = helper_files(tmp_path, monkeypatch, "reach_helpers_b")
    custom.read("user.py:mine", str(tmp_path))
    helpers.write_text(HELPERS.replace("+ 1", "+ 2"))
    with pytest.raises(custom.CustomError, match="has changed in its file since") as raised:
        custom.read("user.py:mine", str(tmp_path))
    assert "\n" not in str(raised.value)


def test_a_strategy_whose_helpers_differ_where_it_is_played_is_refused(tmp_path, monkeypatch):
    """A worker compiles the cell's strategy from its text, importing its helpers there: a
    helper that is not the one the sweep began with is refused, not played."""
    import dataclasses

    helper_files(tmp_path, monkeypatch, "reach_helpers_c")
    strategy = custom.read("user.py:mine", str(tmp_path))
    elsewhere = dataclasses.replace(strategy, reaches="0" * 64)
    with pytest.raises(custom.CustomError, match="not those the sweep was started with"):
        custom.compiled(elsewhere)


@pytest.mark.parametrize(
    "body, says",
    [
        ('    raise ValueError("never")\n', "only_this only raises, never returning a value"),
        ("    hour = counts[0]\n", "only_this returns no value (it has no return of one)"),
        ("    return None\n", "only_this returns none"),
    ],
)
def test_a_strategy_that_returns_no_value_is_named_for_what_it_does(tmp_path, body, says):
    """Issue 45: a strategy that only raises was refused as one that "returns none", which
    numba's type of it is, but not what its writer wrote."""
    (tmp_path / "mine.py").write_text(f"def only_this(counts):\n{body}")
    with pytest.raises(custom.CustomError) as refused:
        custom.read("mine.py:only_this", str(tmp_path))
    assert f"{says}; expected an hour, an integer 1..12" in str(refused.value)
