"""What the command line reads from its user, checked: seeds, deal ranges, cells, strategies.
Bad input is an `InputError`, which the command line reports as one line, exit status 2."""

from __future__ import annotations

import os

import click

from pipeline import echoed
from pipeline.engine import rules


class InputError(click.ClickException):
    """Bad input from the user: reported as one line, exit status 2."""

    exit_code = 2


def parse_u64(name: str, text: str) -> int:
    # isascii: str.isdigit() also accepts digits like '²' that int() refuses or reads oddly.
    if not (text.isascii() and text.isdigit()) or int(text) >= 1 << 64:
        raise InputError(f"{name}: {echoed(text)} is not an unsigned 64-bit integer (0 to 2**64-1)")
    return int(text)


def parse_range(text: str) -> range:
    """A deal range: ``7`` or ``0-1999`` (inclusive)."""
    first, dash, last = text.partition("-")
    numbers = (first, last) if dash else (first,)
    if not all(part.isascii() and part.isdigit() and int(part) < 1 << 64 for part in numbers):
        raise InputError(
            f"RANGE: {echoed(text)} is not a deal number or FIRST-LAST range of unsigned 64-bit "
            "integers (like 7 or 0-1999)"
        )
    if not dash:
        return range(int(first), int(first) + 1)
    low, high = int(first), int(last)
    if high < low:
        raise InputError(
            f"RANGE: {echoed(text)} ends before it starts; write FIRST-LAST with FIRST <= LAST"
        )
    return range(low, high + 1)


def make_cell(**choices) -> rules.Cell:
    try:
        return rules.Cell(**choices)
    except rules.RuleError as error:
        raise InputError(str(error)) from None


def checked_strategy_name(value: str | None) -> str | None:
    """``--strategy``: a built-in's name, checked as the rules check it, or a strategy of
    the user's (``WHERE:FUNCTION``), read later (`strategy_fields`): its compile takes a
    second, after the cheaper checks."""
    from pipeline.engine import custom

    if value is not None and not custom.is_custom(value):
        try:
            rules.check_choice("strategy", value, rules.STRATEGIES)
        except rules.RuleError as error:
            raise InputError(f"{error}, or FILE.py:FUNCTION for one of your own") from None
    return value


def read_strategy(spec: str) -> rules.Custom:
    """The strategy of the user's ``--strategy`` names (relative to the working directory),
    read, checked and compiled as a config's are; InputError with the config's message."""
    from pipeline.engine import custom

    try:
        return custom.read(spec, os.getcwd())
    except custom.CustomError as error:
        raise InputError(f"--{error}") from None


def strategy_fields(strategy: str | None) -> dict:
    """A cell's ``strategy`` and ``custom`` for ``--strategy``'s value."""
    from pipeline.engine import custom

    if strategy is None or not custom.is_custom(strategy):
        return {"strategy": strategy}
    mine = read_strategy(strategy)
    return {"strategy": mine.name, "custom": mine}


def played(play, *arguments):
    """What ``play(*arguments)`` gives; InputError, one line, if a strategy of the user's it plays
    names no pile holding cards or raises (`rules.StrategyError`)."""
    try:
        return play(*arguments)
    except rules.StrategyError as error:
        raise InputError(str(error)) from None


def read_counts_only(spec: str):
    """A strategy of the user's that reads only the counts (and rand), as `odds --strategy`
    takes; InputError, one line, for one that reads more."""
    strategy = read_strategy(spec)
    if not strategy.counts_only:
        raise InputError(
            f"--strategy: {echoed(spec)} reads {', '.join(strategy.sees)}: only a strategy "
            "that reads the counts (and rand) has an exact value"
        )
    return strategy
