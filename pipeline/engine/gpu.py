"""The CUDA kernel: the same deals as `kernel`, one deal to a GPU thread, the same rows.

Each thread plays one deal under every cell of the call: it draws the deal's Philox words
(`deals`' scheme, under the same counters), shuffles the ranks, lays out each order the
cells use, plays the standard chain once per order and then each cell's rescue or restarts
from there, and writes the deal's column of every result row (`kernel.RESULT_ROWS`). The
rules are `pipeline.engine.rules`' and are followed as the reference engine follows them
(piles as small arrays, each take a load and an increment), not by `kernel`'s lockstep
tricks: a GPU thread has no neighbour lanes to interleave with, and a warp's 32 threads
step the same instructions anyway. What a thread holds (the deck, the piles, the counts)
is a few hundred bytes of local arrays, registers and their spill; no global memory is
touched per move, only the tables once and the rows at the end.

Strategies of the user's are compiled as device functions (`device_strategy`) into a kernel
of their own (`kernel_of`): a CUDA kernel cannot be handed functions as the CPU kernel is,
so each set of them is compiled in (`caller_for`, `kernel_for`).

Without a GPU, numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs this very code on
the CPU, a thread at a time in Python: the suite compares its rows with `kernel`'s there.
The simulator computes with NumPy's scalars, so every value here has an explicit type that
means the same on both: 32-bit words in uint64, cards and counts in int32 arrays (NumPy
would wrap a uint8 sum where the GPU widens it).

`play` has `kernel.play`'s contract, and `gpu_problem` says in one line why this process
cannot use it (no numba-cuda, no GPU and no simulator).
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba import cuda

from pipeline.engine import calls, custom, deals, row_tallies, rules

# The kernel's rows and codes, and its Philox: numba-cuda compiles them in afresh (it keeps
# no cache on disk), so a change there is a change here.
from pipeline.engine.kernel import (
    BATCH_WIDTH,
    CLOCKWISE,
    CUSTOM,
    DEPTH_TOP,
    DIED,
    EXCHANGE,
    FEWEST,
    FINALE_UP,
    M32,
    MAX_CUSTOM,
    MOST,
    N_BATCHES,
    ONE_SWAP,
    PLAY_OUT,
    RANDOM,
    RESULT_ROWS,
    ROW_CARDS_TURNED,
    ROW_DOWN_AT_STOP,
    ROW_HINT_DEN,
    ROW_HINT_NUM,
    ROW_KINGS_AT_BOTTOM,
    ROW_RESCUE_PILE,
    ROW_RESTARTS,
    ROW_STRAY_DEATHS,
    ROW_UNVISITED_AT_THIRD_KING,
    ROW_WON,
    SEEN_COLUMNS,
    STANDARD,
    STREAM_DEAL,
    STREAM_STRATEGY,
    U32,
    WATCH,
)
from pipeline.engine.kernel import philox as cpu_philox
from pipeline.engine.measures import NO_COUNT, NO_PILE
from pipeline.engine.rules import CENTRE, KING, N_CARDS, N_HOURS, N_PILES, PILE_SIZE, Cell

N_ROWS = len(RESULT_ROWS)
THREADS = 128  # a block's deals on a GPU
# Under the simulator, which runs a block's threads as Python threads: 4 keeps its time
# steady (32 to 128 of them in one process swung a launch's time by up to ten times here).
SIMULATED_THREADS = 4
SLOT = PILE_SIZE + 1  # a pile's room in a continuation: one_swap tucks a fifth card under
SCRATCH_WIDTH = N_PILES * SLOT  # a global, which numba reads as a constant (a local array's
# shape must be one)

WORD_LIMIT = np.uint64(deals.WORD_LIMIT - 1)  # 2**32 - 1: 2**32 mod n is (this - n + 1) mod n


# Philox4x32-10 of counter (deal lo, deal hi, block, stream) under key = seed: `kernel`'s.
philox = cuda.jit(device=True, inline=True)(cpu_philox.py_func)


@cuda.jit(device=True)
def stream_word(seed, deal, stream, index, block):
    """The stream's 32-bit word number ``index``; ``block`` (uint64[5]) holds the last
    block computed, its number in ``block[4]``, so that four words cost one block."""
    wanted = np.uint64(index >> 2)
    if block[4] != wanted:
        block[0], block[1], block[2], block[3] = philox(seed, deal, wanted, stream)
        block[4] = wanted
    return block[index & 3]


@cuda.jit(device=True)
def shuffle(seed, deal, ranges, thresholds, ranks, draws, block):
    """``ranks`` (int32[52]) the deal's shuffled deck as ranks, position 0 dealt first:
    the batched Lemire draws (``draws``, int32[52]) and Fisher-Yates of `deals`."""
    block[4] = np.uint64(0xFFFFFFFFFFFFFFFF)  # no block yet
    index = 0
    for b in range(N_BATCHES):
        while True:
            leftover = stream_word(seed, deal, STREAM_DEAL, index, block)
            index += 1
            for k in range(BATCH_WIDTH):
                scaled = leftover * ranges[b * BATCH_WIDTH + k]
                draws[b * BATCH_WIDTH + k] = np.int32(scaled >> U32)
                leftover = scaled & M32
            if leftover >= thresholds[b]:
                break
    for i in range(N_CARDS):
        ranks[i] = i >> 2
    for r in range(N_CARDS - 1):
        i = N_CARDS - 1 - r
        j = draws[r]
        swap = ranks[i]
        ranks[i] = ranks[j]
        ranks[j] = swap


@cuda.jit(device=True)
def strategy_draw(seed, deal, n, block):
    """A draw in [0, n) from the deal's strategy stream, as `deals.strategy_draw`."""
    block[4] = np.uint64(0xFFFFFFFFFFFFFFFF)
    n64 = np.uint64(n)
    limit = (WORD_LIMIT - n64 + np.uint64(1)) % n64  # 2**32 mod n
    index = 0
    while True:
        scaled = stream_word(seed, deal, STREAM_STRATEGY, index, block) * n64
        index += 1
        if (scaled & M32) >= limit:
            return np.int32(scaled >> U32)


@cuda.jit(device=True)
def standard_chain(piles, taken):
    """Standard play from the centre, ``taken`` (int32[13]) counting each pile's cards
    taken: (cards turned, pile of the death, hours unvisited when the third king showed)."""
    for q in range(N_PILES):
        taken[q] = 0
    turned = 1
    taken[CENTRE] = 1
    card = piles[CENTRE * PILE_SIZE]
    kings = 0
    unvisited = 0
    while True:
        pile = card  # a rank is its home pile
        if pile == CENTRE:
            kings += 1
            if kings == 3:
                for hour in range(N_HOURS):
                    unvisited += taken[hour] == 0
        if taken[pile] == PILE_SIZE:
            return turned, pile, unvisited
        card = piles[pile * PILE_SIZE + taken[pile]]
        taken[pile] += 1
        turned += 1


@cuda.jit(device=True)
def bottoms_reach(homes, down, end, reaches, path):
    """`rules.bottoms_reach`: whether from every pile holding cards (``down`` > 0) the
    bottom-card pointers ``homes`` lead to ``end``."""
    for q in range(N_PILES):
        reaches[q] = 0
    reaches[end] = 1
    for start in range(N_PILES):
        if down[start] == 0 or reaches[start] == 1:
            continue
        steps = 0
        pile = start
        while reaches[pile] == 0 and steps <= N_PILES:
            path[steps] = pile
            steps += 1
            pile = homes[pile]
        if reaches[pile] == 0:
            return False
        for s in range(steps):
            reaches[path[s]] = 1
    return True


@cuda.jit(device=True)
def rescue_wins(variant, top, pile, bottom_home, down, homes, reaches, path):
    """`rules.rescue_wins`: whether the rescue at ``pile`` wins, from the bottom cards."""
    if variant == WATCH:
        return bottoms_reach(bottom_home, down, pile, reaches, path)
    for q in range(N_PILES):
        homes[q] = bottom_home[q]
    if variant == ONE_SWAP or not top or down[pile] == 1:
        homes[pile] = CENTRE
    return bottoms_reach(homes, down, CENTRE, reaches, path)


@cuda.jit(device=True)
def choose_pile(strategy, variant, top, down, bottom_home, random_index, scratch):
    """`rules.choose_pile` for the built-in strategies (``scratch``'s rows 0-2 its own)."""
    eligible = 0
    clockwise = most = fewest = picked = -1
    for q in range(N_HOURS):
        left = down[q]
        if left > 0:
            if clockwise < 0:
                clockwise = q
            if eligible == random_index:
                picked = q
            eligible += 1
            if most < 0 or left > down[most]:
                most = q
            if fewest < 0 or left < down[fewest]:
                fewest = q
    if strategy == CLOCKWISE:
        return clockwise
    if strategy == RANDOM:
        return picked
    if strategy == FEWEST:
        return fewest
    if strategy == MOST:
        return most
    for q in range(N_HOURS):  # informed, oracle: the first winning pile, else `most`
        if down[q] > 0 and rescue_wins(
            variant, top, q, bottom_home, down, scratch[0], scratch[1], scratch[2]
        ):
            return q
    return most


@cuda.jit(device=True)
def continuation(variant, top, pile, piles, taken, cards, upto, size):
    """Cards turned after the rescue at ``pile``, and whether every card was turned:
    the rescue as `reference.rescue` makes it, then the chain until a pile is empty.
    ``cards`` (int32[13 * SLOT]), ``upto`` and ``size`` (int32[13]) are scratch: each
    pile's cards top first, the next to take and the end."""
    for q in range(N_PILES):
        for k in range(PILE_SIZE):
            cards[q * SLOT + k] = piles[q * PILE_SIZE + k]
        upto[q] = taken[q]
        size[q] = PILE_SIZE
    at = pile * SLOT
    if variant == EXCHANGE:  # the king takes the bottom (or top) card's place; it is turned
        where = upto[pile] if top else size[pile] - 1
        card = cards[at + where]
        cards[at + where] = KING
    else:
        if variant == ONE_SWAP:  # the king tucked under the pile (under `watch`, set aside)
            cards[at + size[pile]] = KING
            size[pile] += 1
        card = cards[at + upto[pile]]
        upto[pile] += 1
    turned = 1
    while upto[card] < size[card]:
        pile = card
        card = cards[pile * SLOT + upto[pile]]
        upto[pile] += 1
        turned += 1
    left = 0
    for q in range(N_PILES):
        left += size[q] - upto[q]
    return turned, left == 0


@cuda.jit(device=True)
def play_out(piles, taken, upto):
    """`play_out` from the first death: (restarts, later deaths away from their restart
    pile, cards turned after the first death)."""
    for q in range(N_PILES):
        upto[q] = taken[q]
    restarts = stray = turned = 0
    while True:
        restart = -1
        for q in range(N_HOURS - 1, -1, -1):  # the first hour holding a card
            if upto[q] < PILE_SIZE:
                restart = q
        if restart < 0:
            return restarts, stray, turned
        restarts += 1
        pile = restart
        while upto[pile] < PILE_SIZE:
            card = piles[pile * PILE_SIZE + upto[pile]]
            upto[pile] += 1
            turned += 1
            pile = card
        stray += pile != restart


@cuda.jit(device=True)
def record_cell(c, d, codes, seed, deal, block, piles, taken, chain, scratch, chosen, out):
    """Deal ``d``'s column of cell ``c``'s rows, from the standard play ``chain`` (turned,
    death, unvisited, kings at bottom) of the cell's order; ``chosen``, the pile a strategy
    of the user's picked (-1: a built-in strategy's, picked here)."""
    turned, death, unvisited, kings = chain[0], chain[1], chain[2], chain[3]
    variant, strategy, finale, top = codes[c, 0], codes[c, 1], codes[c, 2], codes[c, 4] == DEPTH_TOP
    down_at_stop = N_CARDS - turned
    won = down_at_stop == 0
    end_turned = turned
    rescue_pile = hint_num = hint_den = NO_PILE
    restarts = stray = NO_COUNT
    if variant == PLAY_OUT:
        restarts, stray, later = play_out(piles, taken, scratch[3])
        stray += death != CENTRE
        end_turned = turned + later
    elif variant != STANDARD and down_at_stop > 0:
        down, bottom_home = scratch[4], scratch[5]
        eligible = 0
        for q in range(N_PILES):
            down[q] = PILE_SIZE - taken[q]
            bottom_home[q] = piles[q * PILE_SIZE + PILE_SIZE - 1] if down[q] > 0 else q
            if q < N_HOURS and down[q] > 0:
                eligible += 1
        random_index = strategy_draw(seed, deal, eligible, block) if strategy == RANDOM else 0
        pile = chosen
        if chosen < 0:
            pile = choose_pile(strategy, variant, top, down, bottom_home, random_index, scratch)
        later, won = continuation(
            variant, top, pile, piles, taken, scratch[6], scratch[3], scratch[7]
        )
        end_turned = turned + later
        rescue_pile = pile + 1
        hint_den = 1
        if finale == FINALE_UP:
            hint_num = (
                1
                if rescue_wins(
                    variant, top, pile, bottom_home, down, scratch[0], scratch[1], scratch[2]
                )
                else 0
            )
        elif variant == EXCHANGE and top and down[pile] > 1:
            hint_num = 0
        else:
            hint_num = down[pile]
            hint_den = down_at_stop
    out[ROW_WON, c, d] = 1 if won else 0
    out[ROW_CARDS_TURNED, c, d] = end_turned
    out[ROW_DOWN_AT_STOP, c, d] = down_at_stop
    out[ROW_RESCUE_PILE, c, d] = rescue_pile
    out[ROW_HINT_NUM, c, d] = hint_num
    out[ROW_HINT_DEN, c, d] = hint_den
    out[ROW_RESTARTS, c, d] = restarts
    out[ROW_STRAY_DEATHS, c, d] = stray
    out[ROW_KINGS_AT_BOTTOM, c, d] = kings
    out[ROW_UNVISITED_AT_THIRD_KING, c, d] = unvisited


@cuda.jit(device=True)
def standard_play(ranks, positions, piles, taken, chain):
    """The layout of one order (``positions``, `kernel.scheme_tables`) into ``piles``, and
    its standard play: ``chain`` gets (cards turned, pile of the death, hours unvisited at
    the third king, kings at the bottom of hour piles)."""
    for k in range(N_CARDS):
        piles[k] = ranks[positions[k]]
    chain[0], chain[1], chain[2] = standard_chain(piles, taken)
    kings = 0
    for q in range(N_HOURS):
        kings += piles[q * PILE_SIZE + PILE_SIZE - 1] == KING
    chain[3] = kings


@cuda.jit(device=True)
def shown(piles, taken, death, counts, seen, bottoms):
    """What a strategy of the user's sees at the first death (`rules.SEES`) but ``rand``,
    into ``counts``, ``seen`` and ``bottoms``."""
    for q in range(N_PILES):
        if q < N_HOURS:
            counts[q] = PILE_SIZE - taken[q]
        bottoms[q] = piles[q * PILE_SIZE + PILE_SIZE - 1]
        for r in range(SEEN_COLUMNS):
            seen[q, r] = 0
        for t in range(PILE_SIZE):
            if t < taken[q]:
                seen[q, piles[q * PILE_SIZE + t]] += 1
    seen[death, DIED] = 1


@cuda.jit(device=True)
def no_strategy(counts, seen, bottoms, rand):
    """What fills the strategies a kernel does not play: never called."""
    return 0


def caller_for(strategies: tuple):
    """A device function ``hour_of(k, counts, seen, bottoms, rand)`` that calls the k-th of
    ``strategies`` (MAX_CUSTOM device functions of (counts, seen, bottoms, rand) -> hour,
    `device_strategy`; `no_strategy` where unused): a kernel is compiled with its device
    functions, not given them, so each set of strategies has a caller and a kernel."""
    s0, s1, s2, s3, s4, s5, s6, s7 = strategies

    @cuda.jit(device=True)
    def hour_of(k, counts, seen, bottoms, rand):
        if k == 0:
            return s0(counts, seen, bottoms, rand)
        if k == 1:
            return s1(counts, seen, bottoms, rand)
        if k == 2:
            return s2(counts, seen, bottoms, rand)
        if k == 3:
            return s3(counts, seen, bottoms, rand)
        if k == 4:
            return s4(counts, seen, bottoms, rand)
        if k == 5:
            return s5(counts, seen, bottoms, rand)
        if k == 6:
            return s6(counts, seen, bottoms, rand)
        return s7(counts, seen, bottoms, rand)

    return hour_of


def kernel_for(hour_of):
    """The CUDA kernel whose strategies CUSTOM + k are ``hour_of``'s k-th (`caller_for`)."""

    @cuda.jit
    def play_deals(
        seed,
        first,
        count,
        codes,
        positions,
        ranges,
        thresholds,
        rand_interval,
        rand_values,
        out,
        failed,
    ):
        """Deal first + i on thread i: its column of ``out`` (rows x cells x deals) for
        every cell (``codes``: `Cell.codes`, the user's strategies CUSTOM + k). A strategy
        of the user's that names no pile holding cards lowers ``failed[k]`` to the deal."""
        d = cuda.grid(1)
        if d >= count:
            return
        deal = first + np.uint64(d)
        block = cuda.local.array(5, np.uint64)
        ranks = cuda.local.array(N_CARDS, np.int32)
        draws = cuda.local.array(N_CARDS, np.int32)
        piles = cuda.local.array(N_CARDS, np.int32)
        taken = cuda.local.array(N_PILES, np.int32)
        chain = cuda.local.array(4, np.int32)
        # Rows 0-2: `rescue_wins`'s; 3: next card per pile; 4: down; 5: bottom homes; 6: a
        # continuation's cards; 7: its piles' ends. (``block`` serves the strategy stream.)
        scratch = cuda.local.array((8, SCRATCH_WIDTH), np.int32)
        counts = cuda.local.array(N_HOURS, np.int64)
        seen = cuda.local.array((N_PILES, SEEN_COLUMNS), np.int64)
        bottoms = cuda.local.array(N_PILES, np.int64)
        shuffle(seed, deal, ranges, thresholds, ranks, draws, block)
        for order in range(positions.shape[0]):
            played = False
            for c in range(codes.shape[0]):
                if codes[c, 3] != order:
                    continue
                if not played:
                    standard_play(ranks, positions[order], piles, taken, chain)
                    played = True
                chosen = -1
                k = codes[c, 1] - CUSTOM
                if k >= 0 and chain[0] < N_CARDS:
                    shown(piles, taken, chain[1], counts, seen, bottoms)
                    draw = strategy_draw(seed, deal, rand_interval.shape[0], block)
                    hour = hour_of(k, counts, seen, bottoms, rand_values[rand_interval[draw]])
                    if hour < 1 or hour > N_HOURS or taken[hour - 1] == PILE_SIZE:
                        cuda.atomic.min(failed, k, d)
                        return
                    chosen = hour - 1
                record_cell(
                    c, d, codes, seed, deal, block, piles, taken, chain, scratch, chosen, out
                )

    return play_deals


BUILT_INS = kernel_for(
    caller_for((no_strategy,) * MAX_CUSTOM)
)  # the kernel of the built-in strategies


class GpuUnavailable(RuntimeError):
    """This process cannot play on the GPU; the message says why, in one line."""


def gpu_problem() -> str | None:
    """Why `play` cannot run here (no GPU that CUDA sees, and no simulator), None if it can."""
    try:
        if cuda.is_available():
            return None
    except Exception as error:  # the driver's own complaint, whatever its type
        return f"CUDA is not usable here: {str(error).splitlines()[0] if str(error) else error}"
    return (
        "no CUDA GPU is visible to this process (numba-cuda found no driver or device); "
        'use device = "cpu", or NUMBA_ENABLE_CUDASIM=1 for numba-cuda\'s simulator'
    )


def device_name() -> str:
    """The GPU this process plays on, by name; the simulator as such."""
    name = getattr(cuda.get_current_device(), "name", None)
    if name is None:
        return "numba-cuda's simulator (the CPU, a thread at a time: no measure of a GPU)"
    return name.decode() if isinstance(name, bytes) else str(name)


_tables: dict[str, tuple] = {}
# One launch at a time from this process's threads: numba-cuda's simulator swaps this
# module's ``cuda`` for its own while a kernel runs, which another thread would then see;
# on a GPU the launches would run one after another anyway.
_launching = threading.Lock()


def device_tables() -> tuple:
    """The deal scheme's tables (`kernel.scheme_tables`) on the device, copied once."""
    from pipeline.engine import kernel

    if "tables" not in _tables:
        _tables["tables"] = tuple(cuda.to_device(np.ascontiguousarray(a)) for a in kernel.TABLES)
    return _tables["tables"]


def device_strategy(strategy: rules.Custom):
    """A strategy of the user's compiled for the device (its Python function, `custom`),
    behind a wrapper of one signature for all: (counts, seen, bottoms, rand) -> hour."""
    user = cuda.jit(device=True)(custom.python_function(strategy))
    text = (
        f"def strategy(counts, seen, bottoms, rand):\n    return user({', '.join(strategy.sees)})\n"
    )
    namespace = {"user": user}
    exec(text, namespace)
    return cuda.jit(device=True)(namespace["strategy"])


_kernels: dict[tuple, object] = {}


def kernel_of(mine: list[rules.Custom]):
    """The kernel that plays the strategies of the user's ``mine`` (made once for each)."""
    if not mine:
        return BUILT_INS
    key = tuple(mine)
    if key not in _kernels:
        strategies = tuple(device_strategy(strategy) for strategy in mine)
        padded = strategies + (no_strategy,) * (MAX_CUSTOM - len(mine))
        _kernels[key] = kernel_for(caller_for(padded))
    return _kernels[key]


def play(
    seed: int,
    first: int,
    count: int,
    cells: list[Cell],
    into: np.ndarray | None = None,
    tallies=None,
    strategy_seconds: float | None = None,
) -> dict[str, np.ndarray]:
    """`kernel.play` on the GPU: the same result arrays by field, for the same deals; with
    ``tallies`` the records are counted into them on the host (`row_tallies`). ``into`` is
    accepted for the same call and not needed: the rows come back into a fresh host array.
    With ``strategy_seconds``, a call that plays a strategy of the user's ends within that
    bound or raises `bounded.StrategyTimeout`."""
    from pipeline.engine import kernel

    del into
    codes, mine = calls.call_codes(seed, first, count, cells)
    rows = np.empty((N_ROWS, len(cells), count), dtype=np.int8)
    failed = np.full(MAX_CUSTOM, count, dtype=np.int64)
    with _launching:
        problem = gpu_problem()
        if problem:
            raise GpuUnavailable(problem)
        if count:
            arguments = (kernel_of(mine), seed, first, codes, rows, failed)
            launched(mine, cells, arguments, strategy_seconds)
    if (failed < count).any():  # the CPU kernel's own error for the first such deal
        k = int(np.argmin(failed))
        deal = first + int(failed[k])
        kernel.play(seed, deal, 1, [cell for cell in cells if cell.custom == mine[k]])
        raise rules.strategy_error(
            mine[k].name, deal, "?", "compiled for the GPU it names no pile holding cards"
        )
    if tallies is not None:
        row_tallies.count(codes, rows, tallies)
    return dict(zip(RESULT_ROWS, rows))


def launched(mine: list[rules.Custom], cells, arguments: tuple, seconds: float | None) -> None:
    """`launch` of ``arguments``, under the bound where it plays strategies of the user's;
    what they raise (the simulator runs them as Python) or cannot compile, in one line."""
    from pipeline.engine import bounded, kernel

    try:
        if not mine or seconds is None:
            launch(*arguments)
        elif not bounded.within(seconds, launch, arguments):
            names = " or ".join(repr(strategy.name) for strategy in mine)
            raise bounded.overdue(names, f"the deals from {arguments[2]}", seconds)
    except rules.StrategyError:
        raise
    except Exception as error:
        if not mine:
            raise
        _, seed, first, _, rows, _ = arguments
        kernel.play(seed, first, rows.shape[2], cells)  # raises the deal's own error, if any
        raise custom.CustomError(
            f"strategy: {' or '.join(repr(s.spec or s.name) for s in mine)}: numba-cuda cannot "
            f"compile it for the GPU: {custom.numba_reason(error)}"
        ) from None


def launch(play_deals, seed: int, first: int, codes: np.ndarray, rows, failed) -> None:
    """``play_deals`` over ``rows``' deals, a block of THREADS at a time, into ``rows``."""
    count = rows.shape[2]
    on_device = cuda.device_array(rows.shape, dtype=np.int8)
    on_device_failed = cuda.to_device(failed)
    positions, ranges, thresholds, rand_interval, rand_values = device_tables()
    threads = SIMULATED_THREADS if numba.config.ENABLE_CUDASIM else THREADS
    play_deals[-(-count // threads), threads](
        np.uint64(seed),
        np.uint64(first),
        count,
        cuda.to_device(codes),
        positions,
        ranges,
        thresholds,
        rand_interval,
        rand_values,
        on_device,
        on_device_failed,
    )
    on_device.copy_to_host(rows)
    on_device_failed.copy_to_host(failed)
