"""What each part of a summary task costs when two run side by side: the task's rate with a
part taken out, against the kernel alone, in the same rounds.

    python benchmarks/task_parts_bench.py [--config configs/strategies.toml] [--rounds 3]

Each figure is two processes side by side, no Ray, as in `first_result_bench.py` (whose
kernel and task scripts these are): the kernel alone (`kernel.play`, 200,000-deal batches,
5 s, its rows written); the sweep's own task (`task.write_shard`, with its stop tally), whose
kernel counts the records as it makes them; the task without `KernelBatches.add_wins` (the
pairs and blocks of its wins: those tables are then empty, the rest as played); and without
that and the stop tally. Rounds are
interleaved (this machine drifts by tens of percent from minute to minute); each prints its
rates in deals a second, summed over the two processes, and each part's rate over the kernel's
of its round.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from first_result_bench import ROOT, TASKS, kernel_rate, task_rate  # noqa: E402

from pipeline.sweep import config  # noqa: E402

# Parts taken out by the environment, in the task processes only.
WITHOUT = """
import os
from pipeline.records import summary
if os.environ.get("WITHOUT_PAIRS"):
    summary.KernelBatches.add_wins = lambda self, won: None
"""
STOP_TALLY = "tally_pairs=tuple(tally_pairs(cells))"
assert STOP_TALLY in TASKS, "first_result_bench.TASKS no longer makes its jobs' stop tally so"
SCRIPT = WITHOUT + TASKS.replace(
    STOP_TALLY,
    "tally_pairs=None if os.environ.get('WITHOUT_STOP_TALLY') else tuple(tally_pairs(cells))",
)
VARIANTS = {
    "task": {},
    "without pairs and blocks": {"WITHOUT_PAIRS": "1"},
    "without those and stop tally": {"WITHOUT_PAIRS": "1", "WITHOUT_STOP_TALLY": "1"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/strategies.toml")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if config.load(str(ROOT / args.config), []).record != "summary":
        raise SystemExit(f"{args.config}: the parts measured here are those of summary records")
    for round_number in range(1, args.rounds + 1):
        kernel = kernel_rate(args.config, [], 2)
        rates = {name: task_rate(args.config, [], 2, SCRIPT, env) for name, env in VARIANTS.items()}
        shown = ", ".join(
            f"{name} {rate:,.0f} ({rate / kernel:.3f})" for name, rate in rates.items()
        )
        print(f"round {round_number}: kernel {kernel:,.0f}; {shown}", flush=True)


if __name__ == "__main__":
    main()
