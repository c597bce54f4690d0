"""Text pictures of a deal: the clock face, and a replay of the reference engine's steps."""

from __future__ import annotations

import math

from pipeline.engine import reference, rules
from pipeline.engine.rules import CENTRE, N_HOURS, card_text

WIDTH = 78
HEIGHT = 15


def pile_label(pile: int, cards: list[int]) -> str:
    name = "K" if pile == CENTRE else str(pile + 1)
    return f"{name:>2}: " + " ".join(card_text(card) for card in cards)


def clock_face(piles: list[list[int]], finale_up: bool = False) -> str:
    """The thirteen piles drawn as a clock, each listed top card first.

    Every card is shown (this is the deal as laid, for checking); the bottom card, the one
    face up under face-up finales, is last on each line.
    """
    grid = [[" "] * WIDTH for _ in range(HEIGHT)]

    def put(text: str, row: int, centre_col: int) -> None:
        start = max(0, min(WIDTH - len(text), centre_col - len(text) // 2))
        for offset, char in enumerate(text):
            grid[row][start + offset] = char

    mid_row, mid_col = HEIGHT // 2, WIDTH // 2
    for hour in range(N_HOURS):
        angle = 2 * math.pi * (hour + 1) / 12
        row = round(mid_row - math.cos(angle) * (HEIGHT // 2))
        col = round(mid_col + math.sin(angle) * (WIDTH // 2 - 9))
        put(pile_label(hour, piles[hour]), row, col)
    put(pile_label(CENTRE, piles[CENTRE]), mid_row, mid_col)
    lines = ["".join(row).rstrip() for row in grid]
    legend = "(each pile top card first; the last card of a pile is its bottom"
    legend += ", dealt face up)" if finale_up else ")"
    return "\n".join(lines + [legend])


def replay(seed: int, deal: int, cell: rules.Cell) -> str:
    """The deal played step by step under a cell by the reference engine, and its result."""
    table = reference.Table(down=reference.layout(seed, deal, cell.order))
    result = reference.play(seed, deal, cell, table)
    return replay_text(cell, table, result)


def replay_text(cell: rules.Cell, table: reference.Table, result: reference.DealResult) -> str:
    """A played table's steps, numbered, and the deal's result."""
    lines = [f"replay under {cell.label}:"]
    lines += [f"{number:3d}. {step.describe()}" for number, step in enumerate(table.steps, 1)]
    outcome = "won" if result.won else "lost"
    summary = (
        f"{outcome}: {result.cards_turned} cards turned, "
        f"{result.down_at_stop} face down at the first death"
    )
    if result.rescue_pile is not None:
        summary += f", rescue at hour {result.rescue_pile} (hint {result.hint})"
    if result.restarts is not None:
        summary += f", {result.restarts} restarts"
    return "\n".join(lines + [summary])
