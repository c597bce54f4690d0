"""A strategy of the user's, played under a bound on its time.

numba's compiled code cannot be interrupted: a strategy in a loop that never ends (one numba
cannot prove endless, so it compiles) would hold its batch, its shard and the sweep for as
long as one waits. So a batch that plays one is played in a thread of its own, waited for at
most the bound (``[run] strategy_seconds``); past it, the caller is told, and the thread,
which nothing can stop, is left to end with its process (`LEFT`): the sweep's driver ends
itself once the shards are safe, and a Ray worker ends itself once its task has said why.
Built-in strategies are never bounded: they are the rules' own, and return.
"""

from __future__ import annotations

import threading

from pipeline.engine import rules

# The threads of strategies that did not return, left running: what the process that holds
# them must end by ending itself.
LEFT: list[threading.Thread] = []


class StrategyTimeout(rules.StrategyError):
    """A strategy of the user's that did not return within its bound; the message is one
    line, naming it and the deal it was called for."""


def within(seconds: float, play, arguments: tuple) -> bool:
    """``play(*arguments)`` in a thread of its own, waited for at most ``seconds``: whether
    it returned (what it raised is raised here). False: it is still running, kept in `LEFT`."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            play(*arguments)
        except BaseException as error:  # noqa: BLE001 (raised again in the caller's thread)
            raised.append(error)

    thread = threading.Thread(target=target, name="clocksweep-strategy", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        LEFT.append(thread)
        return False
    if raised:
        raise raised[0]
    return True


def overdue(named: str, where: str, seconds: float) -> StrategyTimeout:
    """The error of a strategy (``named``: its name, quoted) that did not return on ``where``
    (``deal 123``)."""
    return StrategyTimeout(
        f"strategy {named} did not return within {seconds:g} s on {where}; a strategy "
        "must return an hour (a loop that never ends?); if it is only slow, raise "
        "run.strategy_seconds"
    )
