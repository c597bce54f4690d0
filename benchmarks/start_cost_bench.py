"""What a sweep pays before its first deal: Ray's start, and each process's first kernel call.

    python benchmarks/start_cost_bench.py [--runs 3]

Figures, not assertions; each in a process of its own, rounds interleaved (this machine's speed
drifts from minute to minute):

- **Ray's start**, as the sweep starts a local instance: its wall time, the CPU seconds of
  the driver and of each process it started (read from /proc once it is up, before its stop),
  and their sum over the wall time: the cores the start keeps busy. The rest of the
  machine's cores is what the driver's threads that play meanwhile (`pipeline.sweep.early`)
  can take; the start's own CPU seconds are what no overlap wins back.
- **A process's first kernel call** (the driver's early threads, every Ray worker): importing
  the kernel, then its first call, which loads numba's registries (scipy.linalg among them,
  which numba imports to look for BLAS) and the compiled kernel from numba's cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RAY_START = """
import json, os, time
started = time.monotonic()
import ray
ray.init(address="local", include_dashboard=False, logging_level="warning")
up = time.monotonic() - started
from pipeline.sweep.processes import descendants, stat_fields
ticks = os.sysconf("SC_CLK_TCK")
by_name = {}
for pid in descendants():
    fields = stat_fields(pid)  # after the name: utime and stime are the 12th and 13th
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = cmdline.read().split(b"\\0")
    except OSError:
        continue
    if fields is None:
        continue
    script = next((w for w in words[1:] if w.endswith(b".py")), None)
    name = os.path.basename((script or words[0]).decode(errors="replace")) or str(pid)
    by_name[name] = by_name.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
driver = sum(os.times()[:2])
ray.shutdown()
print(json.dumps({"up": up, "driver": driver, "started": by_name}))
"""

FIRST_CALL = """
import json, time
began = time.monotonic()
from pipeline.engine import kernel, rules
imported = time.monotonic()
kernel.play(1, 0, 1000, [rules.Cell("standard")])
called = time.monotonic()
print(json.dumps({"import": imported - began, "first_call": called - imported}))
"""


def child(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} (median {statistics.median(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    child(FIRST_CALL)  # numba's cache made, if this checkout has none yet
    starts, calls = [], []
    for _ in range(args.runs):
        starts.append(child(RAY_START))
        calls.append(child(FIRST_CALL))

    up = [s["up"] for s in starts]
    driver = [s["driver"] for s in starts]
    started = [sum(s["started"].values()) for s in starts]
    busy = [(d + c) / u for d, c, u in zip(driver, started, up)]
    print(f"Ray's start: {span(up)} s wall")
    print(f"  CPU seconds, the driver: {span(driver)}; the processes it started: {span(started)}")
    print(f"  cores busy on average while it starts: {span(busy)}")
    names = sorted({name for s in starts for name in s["started"]})
    for name in names:
        print(f"    {name}: {span([s['started'].get(name, 0.0) for s in starts])} CPU s")
    print(
        f"first kernel call: import {span([r['import'] for r in calls])} s, "
        f"first call {span([r['first_call'] for r in calls])} s"
    )


if __name__ == "__main__":
    main()
