"""A strategy of the user's that never returns stops the sweep, within its bound, in one line
naming it, its deal and its shard, exit status 2, the shards committed before it kept: tried
on the sweep's first deals before anything is written, and bounded on every batch after
(docs/rules.md, the bound on a strategy's time).

Each sweep runs as its own `clocksweep` process, as a user runs it: the strategy's thread,
which nothing stops, ends with that process, never with this one."""

from __future__ import annotations

import json
import subprocess
import time

import faults
import pytest
from helpers import clocksweep, config_file

from pipeline.engine import deals, rules
from pipeline.sweep.driver import TRIED_DEALS

SEED = 8
SHARD = 32  # deals a shard: the deals tried first are the first two shards'
STRATEGIES = """
def endless(counts):
    h = 0
    while counts[0] >= 0:  # counts are never negative: numba cannot see that it never ends
        h += 1
    return h


def endless_on_rare(counts, rand):
    h = 0
    if abs(rand - RARE) < 1e-9:
        while counts[0] >= 0:
            h += 1
    for q in range(12):
        if counts[q] > 0:
            return q + 1 + 0 * h
    return 1


def raises_on_rare(counts, rand):
    if abs(rand - RARE) < 1e-9:
        raise ValueError("a rare rand")
    for q in range(12):
        if counts[q] > 0:
            return q + 1
    return 1


RARE = {rare!r}
"""
CONFIG = """
name = "bounded"
seed = {seed}
deals = {deals}
shard_size = {shard_size}
output = "{out}"
[grid]
variant = ["one_swap"]
strategy = ["most", "mine.py:{strategy}"]
[run]
executor = "{executor}"
strategy_seconds = 2
[ray]
num_cpus = {cpus}
max_retries = 0
"""


def rare_rand() -> tuple[float, int]:
    """A value of ``rand`` (it takes few: `rules.rand_value`) that no deal the sweep tries
    first has, and the first deal after those that has it."""
    rands = [
        rules.rand_value(deals.strategy_draw(SEED, deal, rules.RAND_GRID))
        for deal in range(TRIED_DEALS + 4000)
    ]
    later = next(
        deal for deal in range(TRIED_DEALS, len(rands)) if rands[deal] not in rands[:TRIED_DEALS]
    )
    return rands[later], later


def deals_with_rand(rare: float, deals_to: int = 4000) -> set[int]:
    """The deals of the sweep whose ``rand`` is ``rare``."""
    return {
        deal
        for deal in range(deals_to)
        if rules.rand_value(deals.strategy_draw(SEED, deal, rules.RAND_GRID)) == rare
    }


def swept(
    tmp_path, strategy: str, executor: str = "threads", shard_size: int = 1000, cpus: int = 2
):
    rare, _ = rare_rand()
    (tmp_path / "mine.py").write_text(STRATEGIES.format(rare=rare))
    out = tmp_path / "res"
    text = CONFIG.format(
        seed=SEED,
        deals=4000,
        shard_size=shard_size,
        out=out,
        strategy=strategy,
        executor=executor,
        cpus=cpus,
    )
    path = config_file(tmp_path, text, "bounded.toml")
    began = time.monotonic()
    done = subprocess.run(
        faults.driver_command("none", "run", str(path)),
        env=faults.driver_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done, out, time.monotonic() - began


def test_a_strategy_that_never_returns_is_stopped_before_anything_is_written(tmp_path):
    done, out, seconds = swept(tmp_path, "endless")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "strategy 'endless' did not return within 2 s on deal 0" in lines[0], lines[0]
    assert "run.strategy_seconds" in lines[0]
    assert not out.exists()  # nothing written
    assert seconds < 60  # the bound, Python's start and a compile: not for ever


@pytest.mark.parametrize(
    ("strategy", "executor", "cpus"),
    [
        ("endless_on_rare", "threads", 2),
        ("endless_on_rare", "ray", 2),
        # One thread plays the shards in order, so those before the one that raises are
        # done before it: two threads may still be writing one when the raise comes.
        ("raises_on_rare", "threads", 1),
    ],
)
def test_a_strategy_that_fails_later_stops_the_sweep_at_its_shard(
    tmp_path, strategy, executor, cpus
):
    """It returns on the deals tried first, so the sweep starts; on a later deal it loops,
    or raises: that batch ends the sweep, naming the deal (and, for a loop, its shard), the
    run is recorded as failed, and the shards before it are committed, whole, not that one.
    Where shards are played side by side, the loop named may be another deal's of the same
    rand, in a later shard, whose bound ran out first (seen on Ray: deal 209 for 70)."""
    rare, first_later = rare_rand()
    assert TRIED_DEALS + SHARD > first_later  # in the shard after the deals tried (seed 8)
    done, out, seconds = swept(tmp_path, strategy, executor, SHARD, cpus)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    later = first_later
    if strategy == "endless_on_rare" and cpus > 1:
        named = int(line.split(" on deal ")[1].split(";")[0])
        assert named in deals_with_rand(rare), line
        later = named
    shard = later // SHARD
    if strategy == "endless_on_rare":
        assert line.startswith(f"clocksweep: error: shard {shard} (deals {shard * SHARD}-"), line
        assert f"strategy '{strategy}' did not return within 2 s on deal {later};" in line
    else:
        assert line == (
            f"clocksweep: error: strategy '{strategy}' raised ValueError: a rare rand on "
            f"deal {later}"
        ), line
    assert "Traceback" not in done.stderr and "retrying" not in done.stderr
    assert json.loads((out / "run.json").read_text())["runs"][-1]["status"] == "failed"
    committed = json.loads((out / "manifest.json").read_text())["shards"]
    assert all(not entry["first"] <= later <= entry["last"] for entry in committed)
    assert seconds < 120
    checked = clocksweep("validate", out)  # shards missing (the run stopped), none damaged
    said = checked.output.splitlines()
    assert said[0].startswith("problem: shards missing: ") and "1 problem(s)" in said[1], said
    committed = int(said[1].split("/")[0])
    # Those before the first deal that fails are committed; the failing shard never is.
    assert committed >= first_later // SHARD, said
