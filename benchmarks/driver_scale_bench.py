"""The driver's cost as the shard count grows: a sweep of many tiny shards (a few deals each)
on a local Ray instance, at 1,000, 10,000 and 100,000 shards.

    python benchmarks/driver_scale_bench.py [--shards 1000,10000,100000] [--deals-per-shard 5]

Each sweep is `clocksweep run` in its own process, timed as a user times it (the command's
wall time, Ray's start included), with the driver's resident memory sampled from outside every
0.2 s (the driver process alone, not Ray's), and its CPU time. Printed per size: wall
seconds, milliseconds per committed shard (wall less the smallest run's wall, over the shards
it added), the driver's CPU milliseconds per shard, its peak RSS, and the manifest's size.
Flat per-shard figures and memory mean the driver scales: the manifest it rewrites holds a
page or two of entries (the rest are in pages written once), whatever the shard count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_sweep(shards: int, per_shard: int, work: Path) -> dict:
    config = work / f"scale-{shards}.toml"
    out = work / f"scale-{shards}"
    config.write_text(
        f'name = "scale"\nseed = 5\ndeals = {shards * per_shard}\nshard_size = {per_shard}\n'
        f'record = "summary"\noutput = "{out}"\n[grid]\nvariant = ["standard"]\n'
    )
    peak, cpu = [0], [0.0]
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", "run", str(config)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def sample() -> None:
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/statm") as statm:
                    peak[0] = max(peak[0], int(statm.read().split()[1]) * page)
                with open(f"/proc/{proc.pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                cpu[0] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            except OSError:
                return
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    wall = time.monotonic() - started
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{shards} shards: exit {proc.returncode}: {stderr[-2000:]}")
    return {
        "shards": shards,
        "wall_seconds": round(wall, 2),
        "driver_peak_rss_mb": round(peak[0] / 2**20, 1),
        "driver_cpu_seconds": round(cpu[0], 2),  # its own threads, to the last 0.2 s sample
        "manifest_bytes": (out / "manifest.json").stat().st_size,  # the last one written
        "pages": len(list((out / "manifest").glob("shards-*.json"))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="1000,10000,100000")
    parser.add_argument("--deals-per-shard", type=int, default=5)
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.shards.split(","))
    with tempfile.TemporaryDirectory(prefix="clocksweep-scale-") as work:
        results = [one_sweep(n, args.deals_per_shard, Path(work)) for n in sizes]
    base = results[0]
    for result in results:
        added = result["shards"] - base["shards"]
        extra = result["wall_seconds"] - base["wall_seconds"]
        result["ms_per_added_shard"] = round(1000 * extra / added, 3) if added else None
        result["ms_per_shard"] = round(1000 * result["wall_seconds"] / result["shards"], 3)
        result["driver_cpu_ms_per_shard"] = round(
            1000 * result["driver_cpu_seconds"] / result["shards"], 3
        )
        print(json.dumps(result))


if __name__ == "__main__":
    main()
