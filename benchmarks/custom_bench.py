"""Strategies of your own: what one costs the kernel, and the full-deck exact-value check.

    python benchmarks/custom_bench.py [--seconds S] [--exact]

Rates: `strategies.toml`'s seven cells (standard and one_swap under the six built-ins,
face-up finales), against the same seven with `most` replaced by a strategy of the user's:
`most_mine` (the built-in written as a function, tests/engine/builtins_as_functions.py), it
again shown `seen` or `rand` and ignoring them (`most_seen_ignored`, `most_rand_ignored`:
what making those costs the kernel), and the three of examples/strategies.py (`coin_among_most` reads `rand`). The lists
take turns batch by batch in one process (`bench.kernel_rounds`), so a drift of the
machine's speed touches a round alike; the cost is `most`'s rate over the list's, round by
round: median and middle half.

``--exact``: the four counts-only built-ins written as functions, their exact values by
every count vector (`odds.custom_rescue_win`) against the built-ins' own (`odds.rescue_win`),
both depths, with the seconds each took (random_mine reads rand: 46 calls a vector), each
enumerated afresh (the totals kept in a temporary directory, not the user's cache).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from pipeline.engine import bench, custom, odds
from pipeline.engine.rules import Cell

ROOT = Path(__file__).resolve().parent.parent
BUILTINS = ROOT / "tests" / "engine" / "builtins_as_functions.py"
EXAMPLES = ROOT / "examples" / "strategies.py"


def in_place_of_most(spec: str, base: Path) -> list[Cell]:
    strategy = custom.read(spec, str(base))
    return [
        Cell("one_swap", strategy.name, finale="up", custom=strategy)
        if cell.strategy == "most"
        else cell
        for cell in bench.ONE_SWAP_ALL_STRATEGIES
    ]


def rates(seconds: float) -> None:
    lists = {"most": bench.ONE_SWAP_ALL_STRATEGIES}
    lists["most_mine"] = in_place_of_most(f"{BUILTINS.name}:most_mine", BUILTINS.parent)
    for name in ("most_seen_ignored", "most_rand_ignored"):
        lists[name] = in_place_of_most(f"{BUILTINS.name}:{name}", BUILTINS.parent)
    for name in ("nearest_twelve", "least_visited", "coin_among_most"):
        if EXAMPLES.exists():
            lists[name] = in_place_of_most(f"{EXAMPLES.name}:{name}", EXAMPLES.parent)
    rounds = bench.kernel_rounds(lists, seconds)
    base = np.array(rounds["most"])
    print(f"load average {os.getloadavg()[0]:.2f}; {len(base)} rounds")
    for name, figures in rounds.items():
        cost = base / np.array(figures)
        low, high = np.quantile(cost, [0.25, 0.75])
        print(
            f"{name:18} {np.median(figures) / 1e6:6.3f} M deals/s  cost against most "
            f"{np.median(cost):.3f} ({low:.3f}-{high:.3f})"
        )


def exact() -> None:
    import tempfile

    from pipeline.engine import exact_cache

    os.environ[exact_cache.ENVIRONMENT] = tempfile.mkdtemp(prefix="clocksweep-exact-")
    for builtin in ("clockwise", "most", "fewest", "random"):
        strategy = custom.read(f"{BUILTINS.name}:{builtin}_mine", str(BUILTINS.parent))
        for depth in ("bottom", "top"):
            started = time.perf_counter()
            value = odds.custom_rescue_win(strategy, depth=depth)
            seconds = time.perf_counter() - started
            same = value == odds.rescue_win(builtin, depth=depth)
            print(
                f"{builtin}_mine depth={depth}: {odds.fraction_text(value)} "
                f"{'equals' if same else 'DIFFERS FROM'} {builtin}'s ({seconds:.1f} s)",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--exact", action="store_true")
    args = parser.parse_args()
    rates(args.seconds)
    if args.exact:
        exact()


if __name__ == "__main__":
    main()
