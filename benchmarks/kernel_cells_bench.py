"""The kernel's rate on one core, cell by cell: what a change of the kernel does to each cell.

    python benchmarks/kernel_cells_bench.py [--config configs/quick.toml] [--seconds 0.5]
        [--rounds 5] [--json]

Measures, in deals a second, the kernel (`kernel.play`) playing: standard play alone; all of
the config's cells at once; and each of its cells alone. In a round every measurement plays
one batch (its size fitted once to about 0.05 s), the measurements taking turns, so that a
drift of the machine touches every figure of a round alike. Each figure is the median over
the rounds of the rate in CPU time of the thread (what the kernel costs, much less moved by
other work on the machine than wall time) and, beside it, in wall time. The load average is
printed before and after.

To compare two versions of the kernel, run this script once under each checkout
(``PYTHONPATH=CHECKOUT``), several times and alternating, and take the ratios cell by cell.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def fitted_batch(cells: list, kernel, batch_seconds: float = 0.05) -> int:
    """Deals the kernel plays under ``cells`` in about ``batch_seconds`` (its compile or its
    cache's load first, outside any timing)."""
    kernel.play(1, 0, 1000, cells)
    batch = 1000
    while True:
        start = time.thread_time()
        kernel.play(1, 0, batch, cells)
        if time.thread_time() - start >= batch_seconds:
            return batch
        batch *= 2


def rounds_of(measured: dict[str, list], rounds: int, kernel) -> dict[str, dict]:
    """Each measurement's rates (CPU and wall) in each round, the measurements in turn; each
    plays into one results array, as a sweep's task does."""
    batches = {name: fitted_batch(cells, kernel) for name, cells in measured.items()}
    results = {
        name: np.zeros((len(kernel.RESULT_ROWS), len(cells), batches[name]), dtype=np.int8)
        for name, cells in measured.items()
    }
    rates = {name: {"cpu": [], "wall": []} for name in measured}
    first = 0
    for _ in range(rounds):
        for name, cells in measured.items():
            cpu, wall = time.thread_time(), time.perf_counter()
            kernel.play(1, first, batches[name], cells, results[name])
            rates[name]["cpu"].append(batches[name] / (time.thread_time() - cpu))
            rates[name]["wall"].append(batches[name] / (time.perf_counter() - wall))
        first += max(batches.values())
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/quick.toml")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    args = parser.parse_args()
    from pipeline.engine import kernel
    from pipeline.engine.rules import Cell
    from pipeline.sweep import config

    cells = list(config.load(str(ROOT / args.config), []).cells)
    measured = {"standard alone": [Cell()], f"all {len(cells)} cells": cells}
    measured.update({cell.label: [cell] for cell in cells})
    load_before = os.getloadavg()[0]
    rates = rounds_of(measured, args.rounds, kernel)
    figures = {
        "kernel": kernel.__file__,
        "load": [load_before, os.getloadavg()[0]],
        "rounds": args.rounds,
        "cpu": {name: float(np.median(rate["cpu"])) for name, rate in rates.items()},
        "wall": {name: float(np.median(rate["wall"])) for name, rate in rates.items()},
    }
    if args.json:
        json.dump(figures, sys.stdout)
        print()
        return
    print(f"{figures['kernel']}, load {load_before:.1f} then {figures['load'][1]:.1f}")
    print(
        f"{'deals a second, median of ' + str(args.rounds) + ' rounds':<60} {'cpu':>12} {'wall':>12}"
    )
    for name in rates:
        print(f"  {name:<58} {figures['cpu'][name]:>12,.0f} {figures['wall'][name]:>12,.0f}")


if __name__ == "__main__":
    main()
