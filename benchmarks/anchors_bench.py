"""The kernel beside plain C, in one run: what "fast" means on the CPU at hand.

    python benchmarks/anchors_bench.py [--rounds 9] [--seconds 0.25] [--json]

Builds `benchmarks/anchors/clock.c` with the system's C compiler (``cc``, or ``$CC``) at
``-O3 -march=native``: standard Clock patience under clocksweep's own deal scheme (Philox
counters, batched Lemire draws, Fisher-Yates, the round-robin layout), once one deal at a
time ("plain C") and once eight deals in lockstep with a vectorized Philox ("8-lane C"), as
the kernel plays them. Both must give the kernel's wins and cards turned on the same deals
before anything is timed.

Then, in each round, one batch of each, taking turns: the kernel on standard play; the
kernel on `strategies.toml`'s seven cells (standard and one_swap with each built-in
strategy, face-up finale) writing rows, as a per-deal task does; the same seven cells
counting their records as a summary task's kernel does (`record.Tallies`); plain C; 8-lane C.
A batch is fitted once to about ``--seconds``; the C programs time their own play loop, so a
process's start is not in their figure. Each ratio is taken within a round, where a drift of
the machine touches both sides alike, and printed as the median over the rounds; the rates
are the medians too, the summary kernel's best batch beside its median (what a sweep can
sustain is the median). One core; the CPU's model name is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "anchors" / "clock.c"
SEED = 1


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build(directory: Path) -> Path:
    """clock.c compiled here; exits with a line if no C compiler is found."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("anchors_bench: no C compiler (cc, gcc or $CC) on this machine")
    binary = directory / "clock"
    command = [compiler, "-O3", "-march=native", "-o", str(binary), str(SOURCE)]
    subprocess.run(command, check=True)
    return binary


def run_c(binary: Path, mode: str, first: int, count: int) -> tuple[int, int, float]:
    """(wins, cards turned, seconds of play) of the C anchor over deals first.."""
    done = subprocess.run(
        [str(binary), mode, str(SEED), str(first), str(count)],
        check=True,
        capture_output=True,
        text=True,
    )
    wins, cards, seconds = done.stdout.split()
    return int(wins), int(cards), float(seconds)


def check_same_deals(binary: Path, kernel, cells) -> None:
    """The anchors play the kernel's deals: the same wins and cards turned, seed and range
    alike (a range past 32 bits of deal number, and one that holds rejected words)."""
    for seed, first, count in ((SEED, 0, 100_000), (2**63 + 5, 2**40, 20_000)):
        rows = kernel.play(seed, first, count, cells)
        expected = (int(rows["won"].sum()), int(rows["cards_turned"].astype(np.int64).sum()))
        for mode in ("plain", "lockstep"):
            done = subprocess.run(
                [str(binary), mode, str(seed), str(first), str(count)],
                check=True,
                capture_output=True,
                text=True,
            )
            got = tuple(int(v) for v in done.stdout.split()[:2])
            if got != expected:
                sys.exit(
                    f"anchors_bench: C {mode} gives {got} on {count} deals, the kernel {expected}"
                )


def fitted(play, seconds: float) -> int:
    """A batch that ``play(first, count) -> seconds`` takes about ``seconds`` over."""
    count = 8192
    while True:
        took = play(0, count)
        if took >= seconds / 2 or count >= 1 << 27:
            return max(8, int(count * seconds / max(took, 1e-6)) // 8 * 8)
        count *= 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=0.25)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from pipeline.engine import bench, kernel
    from pipeline.records import summary

    standard, seven = bench.STANDARD, bench.ONE_SWAP_ALL_STRATEGIES
    with tempfile.TemporaryDirectory() as directory:
        binary = build(Path(directory))
        check_same_deals(binary, kernel, standard)
        arrays: dict = {}

        def rows_play(cells, name):
            def play(first, count):
                shape = (len(kernel.RESULT_ROWS), len(cells), count)
                if arrays.get(name) is None or arrays[name].shape != shape:
                    arrays[name] = np.empty(shape, dtype=np.int8)
                start = time.perf_counter()
                kernel.play(SEED, first, count, cells, arrays[name])
                return time.perf_counter() - start

            return play

        counted = summary.KernelBatches(seven)

        def summary_play(first, count):
            tallies = counted.kernel_tallies()
            start = time.perf_counter()
            kernel.play(SEED, first, count, seven, None, tallies)
            return time.perf_counter() - start

        plays = {
            "kernel_standard": rows_play(standard, "standard"),
            "kernel_seven": rows_play(seven, "seven"),
            "kernel_seven_summary": summary_play,
            "c_plain": lambda first, count: run_c(binary, "plain", first, count)[2],
            "c_lockstep": lambda first, count: run_c(binary, "lockstep", first, count)[2],
        }
        for play in plays.values():  # compiled, or read from numba's cache, before timing
            play(0, 1000)
        batches = {name: fitted(play, args.seconds) for name, play in plays.items()}
        rates: dict[str, list[float]] = {name: [] for name in plays}
        first = 1 << 30
        for _ in range(args.rounds):
            for name, play in plays.items():
                rates[name].append(batches[name] / play(first, batches[name]))
            first += max(batches.values())
    rate = {name: np.array(values) for name, values in rates.items()}
    ratios = {
        "standard_vs_c_lockstep": rate["kernel_standard"] / rate["c_lockstep"],
        "standard_vs_c_plain": rate["kernel_standard"] / rate["c_plain"],
        "seven_vs_c_plain": rate["kernel_seven"] / rate["c_plain"],
        "seven_summary_vs_seven": rate["kernel_seven_summary"] / rate["kernel_seven"],
    }
    figures = {
        "cpu": cpu_model(),
        "rounds": args.rounds,
        **{f"{name}_median": float(np.median(values)) for name, values in rate.items()},
        "kernel_seven_summary_best": float(rate["kernel_seven_summary"].max()),
        **{name: float(np.median(values)) for name, values in ratios.items()},
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"deals per second on one core of {figures['cpu']}, medians of {args.rounds} rounds:")
    shown = [
        ("kernel, standard", "kernel_standard_median"),
        ("kernel, seven cells (rows)", "kernel_seven_median"),
        ("kernel, seven cells counting records (a summary task's)", "kernel_seven_summary_median"),
        ("  ... its best batch", "kernel_seven_summary_best"),
        ("plain C, standard, one deal at a time", "c_plain_median"),
        ("8-lane C, standard, eight deals in lockstep", "c_lockstep_median"),
    ]
    for label, key in shown:
        print(f"  {label:<58} {figures[key]:>13,.0f}")
    print(f"  kernel standard / 8-lane C:          {figures['standard_vs_c_lockstep']:.2f}")
    print(f"  kernel standard / plain C:           {figures['standard_vs_c_plain']:.2f}")
    print(f"  kernel seven cells / plain C:        {figures['seven_vs_c_plain']:.2f}")
    print(f"  seven cells counting / writing rows: {figures['seven_summary_vs_seven']:.2f}")


if __name__ == "__main__":
    main()
