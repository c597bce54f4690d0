"""The progress a run shows: a bar on a terminal (a real pseudo-terminal here), plain lines
elsewhere, and how the sweep is played in its log file, not on the user's screen."""

from __future__ import annotations

import io
import os
import select
import time

import pytest

from pipeline.sweep.progress import Progress


@pytest.fixture
def terminal():
    """A pseudo-terminal: what the progress writes to its end, read back from the other."""
    reader, writer = os.openpty()
    stream = open(writer, "w", buffering=1)

    def screen() -> str:  # all that was written so far (a read may give only part of it)
        seen = b""
        while select.select([reader], [], [], 0.2)[0]:
            seen += os.read(reader, 1 << 16)
        return seen.decode()

    yield stream, screen
    stream.close()
    os.close(reader)


def test_on_a_terminal_a_bar_moves_in_place_and_messages_keep_their_own_lines(terminal):
    stream, screen = terminal
    progress = Progress(stream, 10, 1_000_000, 0, 0)
    progress.started = time.monotonic() - 2
    progress.done_shards, progress.done_deals = 5, 500_000
    progress.tick(force=True)
    first = screen()
    assert first.startswith("\r") and "\n" not in first
    assert "clocksweep: [" in first and " 50%" in first
    assert "deals 500,000/1,000,000" in first and "failures 0" in first
    progress.failures = 1
    progress.say("shard 7: a worker was lost; redoing it")
    progress.done_shards, progress.done_deals = 8, 800_000
    progress.tick(force=True)
    progress.close()
    rest = screen()
    message, _, after = rest.partition("clocksweep: shard 7: a worker was lost; redoing it\r\n")
    assert message == "\r\x1b[K"  # the bar's line cleared, the message on a line of its own
    assert " 80%" in after and "failures 1" in after
    assert after.endswith("\x1b[?25h\r\n")  # the cursor shown again, the line ended


def test_elsewhere_plain_lines_as_before():
    stream = io.StringIO()
    progress = Progress(stream, 10, 1_000_000, 2, 200_000)
    progress.tick(force=True)
    progress.say("a message")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("clocksweep: shards 2/10, deals 200,000/1,000,000, ")
    assert lines[1] == "clocksweep: a message"
    assert "\r" not in stream.getvalue() and "[" not in lines[0]


def test_how_the_sweep_is_played_goes_to_the_log_not_the_screen(tmp_path):
    stream = io.StringIO()
    progress = Progress(stream, 10, 1000, 0, 0)
    with open(tmp_path / "run.log", "w") as log:
        progress.log_file = log
        progress.log("shard 3: batches 1-2 of 4 played here, the rest on Ray")
        progress.say("shard 4: its file is truncated; redoing it")
        progress.verbose = True
        progress.log("the sweep's end: shards from 8 on in up to 2 pieces each")
    assert stream.getvalue().splitlines() == [
        "clocksweep: shard 4: its file is truncated; redoing it",
        "clocksweep: the sweep's end: shards from 8 on in up to 2 pieces each",
    ]
    logged = (tmp_path / "run.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in logged] == [
        "shard 3: batches 1-2 of 4 played here, the rest on Ray",
        "shard 4: its file is truncated; redoing it",
        "the sweep's end: shards from 8 on in up to 2 pieces each",
    ]
