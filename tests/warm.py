"""Compile the numba kernels into their on-disk cache once, before the suite's processes fan
out: on a fresh clone every process that plays (four of pytest's, the drivers the tests
start, Ray's workers) would otherwise compile the same kernels for itself at once, about
20 CPU-seconds each, in the suite's first minute. `warm_once` runs it (tests/conftest.py,
before pytest starts its processes) in two processes, one per record mode, unless the
package's sources are as they were when it last ran.

    python tests/warm.py DIRECTORY RECORD
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import pipeline

TESTS = Path(__file__).parent

# Every variant, strategy, finale, order and depth, so that each of the kernel's paths is
# compiled; two shards, so that the summary's merge is too.
GRID = {
    "variant": ["standard", "watch", "one_swap", "exchange", "play_out"],
    "strategy": ["clockwise", "random", "most", "fewest", "informed", "oracle"],
    "finale": ["down", "up"],
    "order": ["round-robin", "packets"],
    "depth": ["bottom", "top"],
}
# A strategy of the user's compiles the kernel's other form (the one that calls them).
MINE = f"{TESTS / 'engine' / 'more_strategies.py'}:least_seen"


RECORDS = ("deals", "summary")
STAMP = TESTS / "__pycache__" / "kernels-compiled"  # the sources' digest when last compiled


def compile_kernels(directory: Path, record: str) -> None:
    """Play a small sweep of every cell in ``record`` mode, and one of a strategy of the
    user's, and report on each: what they compile is then cached."""
    from pipeline import api

    for strategies in (GRID["strategy"], ["most", MINE]):
        config = {
            "name": "warm",
            "seed": 1,
            "deals": 2_600,
            "shard_size": 1_300,
            "record": record,
            "output": str(directory / f"{record}-{len(strategies)}"),
            "grid": {**GRID, "strategy": strategies},
            "run": {"executor": "threads"},
        }
        results = api.run(config, progress=io.StringIO())
        results.write_report(directory / f"report-{record}-{len(strategies)}", plots=False)


def sources_digest() -> str:
    """The package's sources by name, size and time written: numba's cache is keyed by its
    sources' times too, so a change of any may want a compile."""
    root = Path(pipeline.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def warm_once() -> None:
    """Compile the kernels (both record modes at once, one process each) unless the sources
    are those they were last compiled from. A failure is said, not raised: the tests that
    play then fail with the reason themselves."""
    digest = sources_digest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    with tempfile.TemporaryDirectory(prefix="clocksweep-warm-") as directory:
        processes = [
            subprocess.Popen(
                [sys.executable, __file__, directory, record],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for record in RECORDS
        ]
        failed = [out for p in processes if (out := p.communicate()[0]) and p.returncode]
    if failed:
        print("compiling the kernels before the suite failed:\n", *failed, file=sys.stderr)
        return
    STAMP.parent.mkdir(exist_ok=True)
    STAMP.write_text(digest)


if __name__ == "__main__":
    compile_kernels(Path(sys.argv[1]), sys.argv[2])
