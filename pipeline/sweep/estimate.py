"""The bytes a sweep will write, for its dry run: measured, not modelled. The sweep's first
deals are played as one shard into a temporary directory, on threads (no Ray), in a process
of its own (what fails there, out of memory say, costs the dry run only its size line), and
its files' bytes are scaled to the whole plan: by the deals for per-deal records (a shard's bytes grow
with its rows: about 3.3 a row), by the shards for summary records (a shard's counts are much
the same whatever its deals). The temporary directory is removed; the sweep's output is not
touched."""

from __future__ import annotations

import dataclasses
import io
import pickle
import signal
import subprocess
import sys
import tempfile

from pipeline.sweep import driver
from pipeline.sweep.config import SweepConfig

SAMPLE_DEALS = 13_000  # a summary kernel batch's multiple of 13; under a second on a core
SAMPLE_SECONDS = 120.0  # the sample's bound: a cold start compiles the kernel (about 20 s)


def sample_of(config: SweepConfig, directory: str) -> SweepConfig:
    """``config``'s first deals, up to SAMPLE_DEALS and no more than a shard, as one shard
    played on threads into ``directory``, with no stop rule."""
    deals = min(config.shard_size, config.deals, SAMPLE_DEALS)
    return dataclasses.replace(
        config,
        deals=deals,
        shard_size=deals,
        output_given=f"{directory}/sample",
        executor="threads",
        stop=None,
    )


class NoSample(Exception):
    """The sample could not be played: why, in a line."""


def played_bytes(sample: SweepConfig) -> int:
    """The bytes of ``sample``'s shard, played in a process of its own."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__],
            input=pickle.dumps(sample),
            capture_output=True,
            timeout=SAMPLE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise NoSample(f"its first deals took over {SAMPLE_SECONDS:.0f} s") from None
    said = done.stdout.decode(errors="replace").strip()
    if done.returncode < 0:  # a signal: what it wrote on the way out says less than its name
        raise NoSample(
            f"the process playing them was ended by {signal.Signals(-done.returncode).name}"
        )
    if done.returncode != 0 or not said.isdigit():
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise NoSample(lines[-1][:200] if lines else f"exit status {done.returncode}")
    return int(said)


def written_bytes(config: SweepConfig) -> tuple[int, int]:
    """(the bytes the whole plan's shards will hold, the deals the sample played)."""
    with tempfile.TemporaryDirectory(prefix="clocksweep-estimate-") as directory:
        sample = sample_of(config, directory)
        played = played_bytes(sample)
    if config.record == "summary":
        return played * driver.plan(config).count, sample.deals
    return played * config.deals // sample.deals, sample.deals


def estimate_line(config: SweepConfig) -> str:
    """The dry run's line on size; if the sample cannot be played, why (the run would say
    the same, in its own line, when it starts)."""
    try:
        total, sampled = written_bytes(config)
    except (NoSample, OSError) as error:
        return f"size: no estimate (its first deals could not be played: {error})"
    at_most = " at most" if config.stop else ""
    return (
        f"size: about {_bytes(total)}{at_most} of shard files "
        f"(measured on {sampled:,} of its deals played now)"
    )


def _bytes(count: int) -> str:
    """A byte count as a reader takes it in: 3.16 GB, 829 kB, 512 bytes."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} bytes"


if __name__ == "__main__":  # the sample's process: a pickled SweepConfig in, its bytes out
    print(driver.run(pickle.loads(sys.stdin.buffer.read()), stream=io.StringIO()).bytes)
