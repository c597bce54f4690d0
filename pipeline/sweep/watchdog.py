"""The local Ray instance a run starts ends with the run's process, however that ends.

A driver that exits, or is stopped by a signal, ends its instance itself (`ray.shutdown`);
one killed outright (SIGKILL, the out-of-memory killer, a crash) cannot, and Ray's agents
then outlive it by a minute or more. So a driver that starts an instance first starts this
small process (`Watchdog.start`), which holds the read end of a pipe whose write end only
the driver holds: the pipe ends when the driver does, whatever ends it. Meanwhile the
watchdog looks at the driver's descendants every few seconds (often while Ray starts) and
keeps each by pid and start time; when the pipe ends, those still running are killed. A
driver that ended its instance itself says so first, and its processes are given a few
seconds to exit on their own.

    python -m pipeline.sweep.watchdog DRIVER_PID
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from pipeline.sweep.processes import Process, alive, descendants_of, kill

ENDED = b"ended\n"  # the driver ended its instance itself
STARTING_POLL = 0.2  # seconds between looks while Ray starts its processes
RUNNING_POLL = 5.0  # and once it is up (workers it starts later end with their raylet)
UP = b"up\n"  # the driver's word that Ray is up
GRACE = 10.0  # seconds an instance ended by its driver has to exit on its own


class Watchdog:
    """The driver's end of a watchdog: started before Ray, told when Ray is up, and told
    that the instance was ended before the driver lets it go."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    @classmethod
    def start(cls) -> Watchdog:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())],
            stdin=subprocess.PIPE,
            # Nothing of the driver's output held open: a pipe the user reads the run through
            # ends when the run does, not when the watchdog does.
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a terminal's Ctrl-C, sent to the driver's process group,
            # is the driver's to handle, and the watchdog must outlive the driver.
            start_new_session=True,
        )
        return cls(process)

    def say(self, word: bytes) -> None:
        try:
            self.process.stdin.write(word)
            self.process.stdin.flush()
        except (OSError, ValueError):  # it is gone: nothing is watched
            pass

    def up(self) -> None:
        self.say(UP)

    def release(self, ended: bool) -> None:
        """Let it go: ``ended`` if the driver ended its instance itself."""
        if ended:
            self.say(ENDED)
        try:
            self.process.stdin.close()
        except OSError:
            pass
        self.process.returncode = 0  # not waited for: it outlives the driver by design


def watch(driver: int, words) -> None:
    """Keep the driver's descendants until ``words`` (the pipe) ends; then end them."""
    already = descendants_of(driver)  # none but this process, for a new driver
    kept: set[Process] = set()
    said = b""
    poll = STARTING_POLL
    while True:
        kept |= descendants_of(driver) - already
        ready, _, _ = select.select([words], [], [], poll)
        if not ready:
            continue
        chunk = os.read(words.fileno(), 64)
        if not chunk:
            break
        said += chunk
        if UP in said:
            poll = RUNNING_POLL
    kept = {process for process in kept if process[0] != os.getpid()}
    if ENDED in said:
        until = time.monotonic() + GRACE
        while any(alive(process) for process in kept) and time.monotonic() < until:
            time.sleep(0.2)
    # Their own children, found while the parents still run (an agent's, a worker's).
    for process in list(kept):
        if alive(process):
            kept |= descendants_of(process[0])
    kill(kept)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's to handle
    watch(int(sys.argv[1]), sys.stdin.buffer)


if __name__ == "__main__":
    main()
