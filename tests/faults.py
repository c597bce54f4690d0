"""Faults the tests inject into real sweeps on real Ray: a task that stops after its first
batch (so that a test can kill its worker, or the driver, mid-shard), one held there until
the test releases it (so that what the test does mid-sweep races no clock) and a task that
fails a shard every time.

The driver runs the task its caller gives it (`driver.run(task=...)`; the CLI takes one from
click's ``obj``), so these wrap the production task and the production job stays as it is.
This module is pickled by value, so Ray's workers run these wrappers without importing it.
"""

from __future__ import annotations

import os
import sys
import time

import ray
import ray.cloudpickle

from pipeline.sweep.task import play_shard, write_shard

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
# `clocksweep` as its own process with a fault: python -c DRIVER FAULT COMMAND ARGS...
DRIVER = "import sys, faults; faults.drive(sys.argv[1:])"


RELEASE = "release"  # the file, in a held task's directory, that lets it go on (`release`)
# The longest a held task waits for its release: a test that fails before releasing or
# killing its driver leaves no process behind for longer.
HOLD_SECONDS = 300.0


def pausing(seconds: float, directory: str):
    """A task that, once its first batch is written (its file exists under shards/.partial),
    writes its pid to DIRECTORY/shard-N.attempt-K.pid and waits SECONDS."""
    return after_first_batch(directory, lambda job: time.sleep(seconds))


def holding(first: int, directory: str):
    """A task whose shards from index ``first`` on, once their first batch is written, write
    their pid (as `pausing`: the file says the shard is held now) and wait until the test
    writes DIRECTORY/release (`release`); the shards before ``first`` play through. What a
    test sees while one is held waits on no clock: the shards before it are committed (in
    the driver's next manifest write), none after it is."""

    def wait(job) -> None:
        until = time.monotonic() + HOLD_SECONDS
        while not os.path.exists(f"{directory}/{RELEASE}") and time.monotonic() < until:
            time.sleep(0.02)

    return after_first_batch(directory, wait, first)


def release(directory) -> None:
    """Let every task `holding` waits in ``directory`` go on."""
    with open(f"{directory}/{RELEASE}", "w"):
        pass


def after_first_batch(directory: str, wait, first: int = 0):
    """A task that, once the first batch of a shard of index ``first`` or later is written,
    writes its pid to DIRECTORY/shard-N.attempt-K.pid and calls ``wait(job)``."""

    def hold(job, start: int) -> None:
        if start or job.shard.index < first:
            return
        path = f"{directory}/shard-{job.shard.index}.attempt-{job.attempt}.pid"
        with open(path + ".tmp", "w") as file:
            file.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        wait(job)

    def task(job, after_batch=None) -> dict:  # ``after_batch``: the thread executor's
        def then(job, start: int) -> None:
            hold(job, start)
            if after_batch is not None:
                after_batch(job, start)

        return played(job, after_batch=then)

    return task


def failing(index: int):
    """A task whose every attempt at shard ``index`` raises."""

    def task(job, after_batch=None) -> dict:
        if job.shard.index == index:
            raise RuntimeError(f"test hook: shard {index} fails")
        return played(job, after_batch)

    return task


def played(job, after_batch=None):
    """The production task: on a Ray worker `play_shard`, in a thread of the driver (the
    thread executor) `write_shard`."""
    return (play_shard if ray.is_initialized() else write_shard)(job, after_batch)


def task_of(fault: str):
    """The task a fault names: ``pause=SECONDS:DIR``, ``hold=FIRST:DIR``, ``fail=N`` or
    ``none``."""
    kind, _, value = fault.partition("=")
    if kind == "pause":
        seconds, _, directory = value.partition(":")
        return pausing(float(seconds), directory)
    if kind == "hold":
        first, _, directory = value.partition(":")
        return holding(int(first), directory)
    if kind == "fail":
        return failing(int(value))
    return play_shard


def drive(argv: list[str]) -> None:
    """The CLI with the task of ``argv[0]`` (see `task_of`), given the rest of ``argv``."""
    from pipeline.cli import main

    main(argv[1:], obj={"task": task_of(argv[0])})


def driver_command(fault: str, *args: str) -> list[str]:
    """The command line of a driver process with ``fault``; run it with `driver_env`."""
    return [sys.executable, "-c", DRIVER, fault, *args]


def driver_env(env: dict | None = None) -> dict:
    """This process's environment, less RAY_ADDRESS, plus ``env``, with this folder importable."""
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environment.update(env or {})
    environment["PYTHONPATH"] = os.pathsep.join(
        [TESTS_DIR, *filter(None, [environment.get("PYTHONPATH")])]
    )
    return environment


def driver(config_file, out, *sets: str, fault: str = "none", env: dict | None = None, **popen):
    """`clocksweep run CONFIG --set output=OUT --set ...` as its own process (its own local Ray
    instance unless told otherwise), with ``fault``."""
    import subprocess

    command = driver_command(
        fault, "run", str(config_file), f"--set=output={out}", *(f"--set={s}" for s in sets)
    )
    return subprocess.Popen(
        command,
        env=driver_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def paused_driver(config_file, out, pids, pause: float, env: dict | None = None):
    """A driver process playing on one thread of its own, no Ray (what is tested is the
    driver, not Ray), whose shards write their pid into the directory ``pids`` and pause
    ``pause`` s after their first batch: a test may kill it mid-sweep."""
    return threads_driver(config_file, out, f"pause={pause}:{pids}", env)


def held_driver(config_file, out, pids, first: int, env: dict | None = None):
    """`paused_driver`, but its shards from index ``first`` on are held (`holding`) until the
    test calls ``release(pids)`` or kills it: what the test does mid-sweep races no clock."""
    return threads_driver(config_file, out, f"hold={first}:{pids}", env)


def threads_driver(config_file, out, fault: str, env: dict | None = None):
    """A driver process with ``fault`` on one thread of its own, no Ray."""
    return driver(config_file, out, "run.executor=threads", "ray.num_cpus=1", fault=fault, env=env)


def committed_while_running(proc, count_committed, at_least: int, timeout: float = 180) -> int:
    """Wait while the driver process ``proc`` runs until ``count_committed()`` (the shards its
    manifest lists; an error while it is not yet written counts 0) reaches ``at_least``;
    gives the last count. The caller checks that ``proc`` is still running."""
    deadline = time.monotonic() + timeout
    committed = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            committed = count_committed()
        except Exception:  # noqa: BLE001 (the manifest not written yet, or mid-replace)
            committed = 0
        if committed >= at_least:
            break
        time.sleep(0.1)
    return committed
