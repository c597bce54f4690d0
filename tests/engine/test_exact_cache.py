"""The exact totals of strategies of your own, kept on disk (pipeline/engine/exact_cache.py):
enumerated once, with one line saying so, then read back; a file that is damaged in any way
is not trusted but enumerated again and replaced; a changed function or another deck has a
file of its own. Small decks, so that each enumeration takes milliseconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import forge_exact_total

from pipeline.engine import custom, exact_cache, odds, rules

HERE = Path(__file__).parent
DECK = (4, 3)  # hour ranks, suits: 4**4 count vectors


@pytest.fixture
def kept_in(tmp_path, monkeypatch):
    monkeypatch.setenv(exact_cache.ENVIRONMENT, str(tmp_path / "kept"))
    return tmp_path / "kept"


def coin() -> rules.Custom:
    return custom.read("more_strategies.py:coin_among_most", str(HERE))


def test_totals_are_enumerated_once_said_and_then_read_back(kept_in, capsys):
    strategy = coin()
    totals = exact_cache.count_totals(strategy, *DECK)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        f"clocksweep: exact value of coin_among_most: enumerating {4**4:,} count vectors x "
        f"{len(rules.RAND_VALUES)} values of rand, under a second, once; kept in {kept_in}"
    ]
    assert totals == custom.count_totals(strategy, *DECK)
    [path] = kept_in.iterdir()
    assert path == exact_cache.path_of(strategy, *DECK)
    assert exact_cache.count_totals(strategy, *DECK) == totals
    assert capsys.readouterr().err == ""  # read back, not enumerated


def damaged(text: str) -> list[str]:
    """The file's text spoiled in each way a disk, a crash or a hand can spoil it."""
    kept = json.loads(text)
    one_total_changed = json.loads(text)
    one_total_changed["totals"][0][3] += 1
    other_identity = json.loads(text)
    other_identity["identity"]["digest"] = "0" * 64
    short = json.loads(text)
    short["totals"][1] = short["totals"][1][:-1]
    short["checksum"] = exact_cache._checksum(short["identity"], short["totals"])
    return [
        "",
        text[: len(text) // 2],
        "not json at all",
        json.dumps([kept["totals"]]),
        json.dumps(one_total_changed),
        json.dumps(other_identity),
        json.dumps(short),
    ]


def test_a_damaged_file_is_never_trusted_but_enumerated_again(kept_in, capsys):
    strategy = coin()
    totals = exact_cache.count_totals(strategy, *DECK)
    path = exact_cache.path_of(strategy, *DECK)
    good = path.read_text()
    for spoiled in damaged(good):
        path.write_text(spoiled)
        capsys.readouterr()
        assert exact_cache.count_totals(strategy, *DECK) == totals, spoiled[:40]
        said = capsys.readouterr().err
        assert "enumerating" in said and "(the copy kept there was damaged: " in said
        assert path.read_text() == good  # replaced whole
    assert [p.name for p in kept_in.iterdir()] == [path.name]  # no temporary file left


def test_another_function_or_deck_has_a_file_of_its_own(kept_in, tmp_path):
    (tmp_path / "mine.py").write_text("def pick(counts):\n    return 1 if counts[0] else 2\n")
    before = custom.read("mine.py:pick", str(tmp_path))
    (tmp_path / "mine.py").write_text(
        "def pick(counts):\n    return 1 if counts[0] >= counts[1] else 2\n"
    )
    after = custom.read("mine.py:pick", str(tmp_path))
    paths = {
        exact_cache.path_of(before, 2, 2),
        exact_cache.path_of(after, 2, 2),
        exact_cache.path_of(before, 2, 3),
    }
    assert len(paths) == 3
    assert exact_cache.count_totals(before, 2, 2) != exact_cache.count_totals(after, 2, 2)


def test_the_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(exact_cache.ENVIRONMENT, str(tmp_path / "mine"))
    assert exact_cache.directory() == tmp_path / "mine"
    monkeypatch.delenv(exact_cache.ENVIRONMENT)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert exact_cache.directory() == tmp_path / "xdg" / "clocksweep"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert exact_cache.directory() == tmp_path / "home" / ".cache" / "clocksweep"


def test_the_exact_values_come_from_the_kept_totals(kept_in):
    """`odds` reads its totals through the cache: the value from a kept file is the one
    enumerated, and `coin_among_most`'s is `most`'s (ties change no pile's count)."""
    strategy = coin()
    exact_cache.count_totals(strategy, *DECK)
    for depth in rules.DEPTHS:
        value = odds.custom_rescue_win(strategy, *DECK, depth)
        assert value == odds.rescue_win("most", *DECK, depth)


def test_a_strategy_that_raises_on_some_counts_has_no_exact_value(kept_in):
    raises = custom.read("more_strategies.py:raises_on_three", str(HERE))
    with pytest.raises(rules.StrategyError, match=r"raised ValueError: three cards at one o'clock"):
        exact_cache.count_totals(raises, 3, 3)
    assert not kept_in.exists() or not any(kept_in.iterdir())  # nothing kept


def test_a_forged_total_with_its_checksum_made_again_is_enumerated_again(kept_in, capsys):
    """Issue 45: the checksum is an unkeyed sha256 that anyone who edits the totals can make
    again, so the totals are checked against what the enumeration makes them
    (`exact_cache.consistent`); a forged file is not trusted but enumerated again, replaced,
    and the process can say so (`exact_cache.recomputed`)."""
    strategy = custom.read("more_strategies.py:second_most", str(HERE))
    totals = exact_cache.count_totals(strategy, *DECK)
    path = exact_cache.path_of(strategy, *DECK)
    good = path.read_text()
    forge_exact_total(path)
    capsys.readouterr()
    assert exact_cache.count_totals(strategy, *DECK) == totals
    said = capsys.readouterr().err
    assert "enumerating" in said and "(the copy kept there was damaged: " in said, said
    assert path.read_text() == good
    why = exact_cache.recomputed(strategy, *DECK)
    assert why is not None and why in said
