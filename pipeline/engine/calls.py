"""A call of a kernel (`kernel.play`, `gpu.play`) as both take it: the deal range checked, the
cells as integer codes, and the strategies of the user's among them, each given its place."""

from __future__ import annotations

import numpy as np

from pipeline.engine import deals, rules
from pipeline.engine.rules import CUSTOM, MAX_CUSTOM, Cell


def call_codes(seed: int, first: int, count: int, cells: list[Cell]):
    """A call's cell codes (`Cell.codes`, a strategy of the user's CUSTOM + its place) and
    its strategies of the user's (`custom_slots`), the deal range checked: what `play` and
    the CUDA kernel's (`gpu.play`) are given."""
    deals.check_u64("seed", seed)
    deals.check_u64("deal", first)
    if count and first + count - 1 >= deals.UINT64_LIMIT:
        raise ValueError("deal: the range runs past 2**64 - 1")
    codes = np.array([cell.codes() for cell in cells], dtype=np.int64).reshape(-1, 5)
    mine = custom_slots(cells)
    for c, cell in enumerate(cells):
        if cell.custom is not None:
            codes[c, 1] = CUSTOM + mine.index(cell.custom)
    return codes, mine


def custom_slots(cells: list[Cell]) -> list[rules.Custom]:
    """The strategies of the user's among ``cells``, each once, in the order they come."""
    mine = list(dict.fromkeys(cell.custom for cell in cells if cell.custom is not None))
    if len(mine) > MAX_CUSTOM:
        raise ValueError(
            f"strategy: {len(mine)} strategies of your own in one play; at most {MAX_CUSTOM}"
        )
    return mine
