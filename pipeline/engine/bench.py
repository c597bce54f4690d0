"""Speed measurements of the engines, on one core: figures, not assertions.

Every figure of one call is measured in the same process, the kernel's figures taking turns
batch by batch, so the ratios (kernel against reference, all cells against standard alone)
compare like with like.
"""

from __future__ import annotations

import time

import numpy as np

from pipeline.engine import kernel, reference, rules
from pipeline.engine.rules import Cell

STANDARD = [Cell()]
ONE_SWAP_ALL_STRATEGIES = [Cell(finale="up")] + [
    Cell("one_swap", strategy, finale="up") for strategy in rules.STRATEGIES
]


def kernel_rounds(
    cell_lists: dict[str, list[Cell]], seconds: float, seed: int = 1, batch_seconds: float = 0.05
) -> dict:
    """Deals per second the kernel plays under each list of cells at once, one figure per
    round: ``{name: [rate in round 1, rate in round 2, ...]}``.

    In a round the lists play one batch each, one after the other, from the same first deal;
    a list's batch is the number of deals it plays in ``batch_seconds`` to twice that. This
    machine's speed drifts by up to a third within a minute, and a drift touches the figures
    of one round alike, so a ratio taken within a round is fair. Each list plays into one
    results array, as a sweep's task does: a fresh array past the allocator's threshold
    (32 MB, every cell's batch) would put its page faults into the figure.
    """
    batches, results = {}, {}
    for name, cells in cell_lists.items():
        kernel.play(seed, 0, 1000, cells)  # compile (or load the cache) outside the timing
        batch = 1000
        while True:
            start = time.perf_counter()
            kernel.play(seed, 0, batch, cells)
            if time.perf_counter() - start >= batch_seconds:
                break
            batch *= 2
        batches[name] = batch
        results[name] = np.zeros((len(kernel.RESULT_ROWS), len(cells), batch), dtype=np.int8)
    rounds = {name: [] for name in cell_lists}
    first, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds * len(cell_lists):
        for name, cells in cell_lists.items():
            start = time.perf_counter()
            kernel.play(seed, first, batches[name], cells, results[name])
            rounds[name].append(batches[name] / (time.perf_counter() - start))
        first += max(batches.values())
    return rounds


def kernel_rate(cells: list[Cell], seconds: float, seed: int = 1) -> float:
    """Deals per second the kernel plays under all of ``cells`` at once: the best of batches
    of 0.2-0.4 s (the best of many short batches would run high)."""
    return max(kernel_rounds({"cells": cells}, seconds, seed, batch_seconds=0.2)["cells"])


def reference_rate(cells: list[Cell], seconds: float, seed: int = 1) -> float:
    """Deals per second the reference engine plays under all of ``cells``."""
    played, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for cell in cells:
            reference.play(seed, played, cell)
        played += 1
    return played / (time.perf_counter() - start)


def engine_figures(seconds: float = 3.0) -> dict:
    all_cells = rules.all_cells()
    rounds = kernel_rounds(
        {"standard": STANDARD, "one_swap_all": ONE_SWAP_ALL_STRATEGIES, "all_cells": all_cells},
        seconds,
    )
    # The cost of the seven cells: standard's rate over theirs, round by round (see
    # `kernel_rounds`); the median and the spread of the middle half.
    costs = np.quantile(
        np.array(rounds["standard"]) / np.array(rounds["one_swap_all"]), [0.25, 0.5, 0.75]
    )
    figures = {
        "kernel_standard": max(rounds["standard"]),
        "kernel_one_swap_all": max(rounds["one_swap_all"]),
        "kernel_all_cells": max(rounds["all_cells"]),
        "reference_standard": reference_rate(STANDARD, seconds),
        "reference_all_cells": reference_rate(all_cells, seconds),
        "cells_all": len(all_cells),
        "cells_one_swap_all": len(ONE_SWAP_ALL_STRATEGIES),
    }
    figures["kernel_vs_reference_standard"] = (
        figures["kernel_standard"] / figures["reference_standard"]
    )
    figures["kernel_vs_reference_all_cells"] = (
        figures["kernel_all_cells"] / figures["reference_all_cells"]
    )
    figures["one_swap_all_cost"] = float(costs[1])
    figures["one_swap_all_cost_quartiles"] = [float(costs[0]), float(costs[2])]
    figures["rounds"] = len(rounds["standard"])
    return figures


def describe(figures: dict) -> str:
    rows = [
        ("kernel, standard alone", figures["kernel_standard"]),
        (
            f"kernel, standard + one_swap x 6 strategies ({figures['cells_one_swap_all']} cells)",
            figures["kernel_one_swap_all"],
        ),
        (f"kernel, every cell ({figures['cells_all']} cells)", figures["kernel_all_cells"]),
        ("reference, standard alone", figures["reference_standard"]),
        (f"reference, every cell ({figures['cells_all']} cells)", figures["reference_all_cells"]),
    ]
    lines = ["deals per second on one core:"]
    lines += [f"  {name:<62} {rate:>14,.0f}" for name, rate in rows]
    lines.append(
        f"  kernel / reference, standard:    {figures['kernel_vs_reference_standard']:>10,.0f}x"
    )
    lines.append(
        f"  kernel / reference, every cell:  {figures['kernel_vs_reference_all_cells']:>10,.0f}x"
    )
    low, high = figures["one_swap_all_cost_quartiles"]
    lines.append(
        f"  standard + one_swap x 6 costs {figures['one_swap_all_cost']:.2f}x standard alone "
        f"(median of {figures['rounds']} rounds, middle half {low:.2f}-{high:.2f}x)"
    )
    return "\n".join(lines)


def gpu_figures(seconds: float = 3.0) -> dict:
    """Deals per second the CUDA kernel (`gpu`) plays, the rows copied back to the host as a
    sweep's are: the best of batches of 0.2-0.4 s for each list of cells, taking turns."""
    from pipeline.engine import gpu

    problem = gpu.gpu_problem()
    if problem:
        raise gpu.GpuUnavailable(problem)
    lists = {"standard": STANDARD, "one_swap_all": ONE_SWAP_ALL_STRATEGIES}
    lists["all_cells"] = rules.all_cells()
    batches = {}
    for name, cells in lists.items():
        batch = 1 << 12
        while True:
            start = time.perf_counter()
            gpu.play(1, 0, batch, cells)  # the first call compiles
            if time.perf_counter() - start >= 0.2 or batch >= 1 << 26:
                break
            batch *= 2
        batches[name] = batch
    best = dict.fromkeys(lists, 0.0)
    first, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds * len(lists):
        for name, cells in lists.items():
            start = time.perf_counter()
            gpu.play(1, first, batches[name], cells)
            best[name] = max(best[name], batches[name] / (time.perf_counter() - start))
        first += max(batches.values())
    return {
        "device": gpu.device_name(),
        "gpu_standard": best["standard"],
        "gpu_one_swap_all": best["one_swap_all"],
        "gpu_all_cells": best["all_cells"],
        "cells_all": len(lists["all_cells"]),
        "cells_one_swap_all": len(ONE_SWAP_ALL_STRATEGIES),
    }


def describe_gpu(figures: dict) -> str:
    rows = [
        ("standard alone", figures["gpu_standard"]),
        (
            f"standard + one_swap x 6 strategies ({figures['cells_one_swap_all']} cells)",
            figures["gpu_one_swap_all"],
        ),
        (f"every cell ({figures['cells_all']} cells)", figures["gpu_all_cells"]),
    ]
    lines = [f"deals per second on {figures['device']}, the rows copied back:"]
    lines += [f"  {name:<62} {rate:>14,.0f}" for name, rate in rows]
    return "\n".join(lines)
