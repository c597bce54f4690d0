"""What a sweep's task spends besides the kernel, and the ceiling that puts on its rate.

    python benchmarks/task_share_bench.py [--config configs/strategies.toml] [--shards 4]
        [--processes 2]

Each process (no Ray: the sweep's own `task.write_shard`, writing real files to a scratch
directory) takes turns, shard by shard: a kernel-only loop over the shard's deals in the
task's own batches (`task.batch_starts`), into one array as the task plays them, then the
shard played and written as a task does.
Printed per shard: the task's wall time, its kernel time, the kernel's share of the task,
and the kernel's rate inside the task against the kernel-only loop just before it (this
machine drifts by tens of percent from minute to minute, so each ratio is taken within one
turn). The kernel's share of a task bounds "less Ray over two kernel processes" in
`first_result_bench.py`: with no tail and no start-up, a sweep reaches at most that share.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_PROCESS = """
import json, sys, time
import numpy as np
from pipeline.engine import kernel
from pipeline.store.location import Location
from pipeline.sweep import config as sweep_config, driver, task

config_file, where, first_shard, shards = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = sweep_config.load(config_file, [])
plan = driver.plan(config)
cells = list(config.cells)
kernel.play(config.seed, 0, 1000, cells)  # the cache loaded outside the timing
for index in range(first_shard, first_shard + shards):
    job = task.ShardJob(
        location=Location(where), shard=plan[index], seed=config.seed, cells=tuple(cells),
        record=config.record, provenance=driver.provenance(config), attempt=1,
    )
    starts = task.batch_starts(job)
    # Into one array, as the task plays its batches: the ratio is then the task's doing alone.
    scratch = np.empty((len(kernel.RESULT_ROWS), len(cells), starts.step), dtype=np.int8)
    alone = time.perf_counter()
    for start in starts:
        count = min(starts.step, job.shard.count - start)
        into = scratch if count == starts.step else None
        kernel.play(config.seed, job.shard.first + start, count, cells, into)
    alone = time.perf_counter() - alone
    entry = task.write_shard(job)
    print(json.dumps({"shard": index, "deals": job.shard.count, "alone": alone,
                      "seconds": entry.seconds, "kernel": entry.kernel_seconds}), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/strategies.toml")
    parser.add_argument("--shards", type=int, default=4, help="shards per process")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clocksweep-task-share-") as scratch:
        running = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    ONE_PROCESS,
                    args.config,
                    str(Path(scratch) / str(k)),
                    str(k * args.shards),
                    str(args.shards),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(args.processes)
        ]
        began = time.monotonic()
        outputs = [proc.communicate()[0] for proc in running]
        if any(proc.returncode for proc in running):
            raise SystemExit("a process failed")
    rows = [json.loads(line) for out in outputs for line in out.splitlines()]
    for row in rows:
        share = row["kernel"] / row["seconds"]
        in_task = row["deals"] / row["kernel"]
        print(
            f"shard {row['shard']:>3}: task {row['seconds']:6.2f} s, kernel {row['kernel']:6.2f} s "
            f"(share {share:.3f}); kernel {in_task / 1e6:.2f}M deals/s in the task, "
            f"{row['deals'] / row['alone'] / 1e6:.2f}M alone (ratio {row['alone'] / row['kernel']:.3f})"
        )
    shares = sorted(r["kernel"] / r["seconds"] for r in rows)
    ratios = sorted(r["alone"] / r["kernel"] for r in rows)
    print(
        f"{args.processes} process(es), {time.monotonic() - began:.1f} s: kernel share of a task "
        f"{shares[0]:.3f}-{shares[-1]:.3f}; kernel in a task over alone {ratios[0]:.3f}-{ratios[-1]:.3f}"
    )


if __name__ == "__main__":
    main()
