"""The fast engine: numba plays a range of deals for a list of cells in one pass.

Each deal is shuffled once; every cell plays that same deal (common random numbers), and
cells with the same deal order share the standard chain up to its first death, where the
rescue variants branch off. The rules are those of `pipeline.engine.rules` and the deal scheme that
of `pipeline.engine.deals`; the tests compare this kernel with the reference engine deal by deal.

Deals go LANES at a time, in lockstep, up to their first deaths: their Philox words in one
loop the compiler vectorizes, their shuffles' swaps side by side, and their standard chains
stepped together. A chain is a run of dependent loads (each card read names the next pile),
so one chain alone leaves the core waiting most of each step; the other lanes' steps fill
that wait. Each deal's rescues are then played one deal after the other.

Arrays, described once:

- ``ranks``: the shuffled deck as ranks (uint8[52], position 0 dealt first). Only ranks matter
  to play, and shuffling the ranks of the ordered deck gives the ranks of the shuffled cards.
- ``piles``: uint8[13 * 4]; pile q's cards at ``q * 4 + k``, k = 0 its top.
- ``taken``: uint8[13], cards taken into hand from each pile so far; a pile is empty at 4.
  The standard chain plays on ``piles`` and ``taken``.
- ``lane_...``: the same for the LANES deals in lockstep, a row per lane (``ranks`` too).
- ``stacks``: uint64[13], the face-down cards from the first death on, each pile's as bytes,
  its top lowest, then at least three EMPTY bytes (0xFF), where a walk stops; above them, the
  zeros a right shift brings in. Taking a card is one load, a shift and a store,
  where ``taken`` and ``piles`` make two dependent loads, and a continuation is a run of
  takes; a rescue is a change of one stack (the fourth king a card like any other).
- Unsigned element types matter: an unsigned index spares numba's negative-index fix-up on
  the chain's critical path.
- Results: int8 arrays shaped (cells, deals), see `RESULT_FIELDS`; in the compiled code,
  rows of one int8 array (fields, cells, deals) named by the ``ROW_`` constants.
"""

from __future__ import annotations

import sys
import warnings

import numba as nb
import numpy as np
from numba.core.errors import NumbaExperimentalFeatureWarning

from pipeline.engine import bounded, custom, deals, rules
from pipeline.engine.calls import call_codes
from pipeline.engine.record import NO_COUNT, NO_PILE, Tallies
from pipeline.engine.rules import CENTRE, KING, N_CARDS, N_HOURS, N_PILES, PILE_SIZE, Cell

# Result arrays, name -> meaning; all int8, shaped (cells, deals).
RESULT_FIELDS = {
    "won": "1 if every card was turned",
    "cards_turned": "cards taken into hand over the whole deal",
    "down_at_stop": "face-down cards when the chain first died",
    "rescue_pile": "hour 1..12 of the rescue, record.NO_PILE if none",
    "hint_num": "the hint's chance for the rescue pile, numerator (0 with no rescue)",
    "hint_den": "... and denominator (record.NO_PILE with no rescue)",
    "restarts": "play_out restarts, record.NO_COUNT for other variants",
    "stray_deaths": "deaths not where the rules predict (first at the centre, later ones at "
    "their restart pile): play_out only, record.NO_COUNT elsewhere",
    # Facts of the deal's standard play, the same for every cell of one deal order:
    "kings_at_bottom": "hour piles whose bottom card is a king, as dealt",
    "unvisited_at_third_king": "hours no card had been taken from when the third king was placed",
}
# The rows of ``out``, in this order: `play` names the arrays from this tuple, the compiled
# code writes each row by its constant (a module-level int, which numba compiles in).
RESULT_ROWS = tuple(RESULT_FIELDS)
_ROWS_WRITTEN = tuple(
    RESULT_ROWS.index(name)
    for name in (
        "won",
        "cards_turned",
        "down_at_stop",
        "rescue_pile",
        "hint_num",
        "hint_den",
        "restarts",
        "stray_deaths",
        "kings_at_bottom",
        "unvisited_at_third_king",
    )
)
(
    ROW_WON,
    ROW_CARDS_TURNED,
    ROW_DOWN_AT_STOP,
    ROW_RESCUE_PILE,
    ROW_HINT_NUM,
    ROW_HINT_DEN,
    ROW_RESTARTS,
    ROW_STRAY_DEATHS,
    ROW_KINGS_AT_BOTTOM,
    ROW_UNVISITED_AT_THIRD_KING,
) = _ROWS_WRITTEN
if sorted(_ROWS_WRITTEN) != list(range(len(RESULT_ROWS))):
    raise RuntimeError("the kernel writes a row constant for every result field, and no other")
if ROW_WON != 0:  # what a counting call's one row holds
    raise RuntimeError("the kernel's counting calls give the wins as their first row")

_VARIANT = {name: i for i, name in enumerate(rules.VARIANTS)}
_STRATEGY = {name: i for i, name in enumerate(rules.STRATEGIES)}
STANDARD, WATCH, ONE_SWAP, EXCHANGE, PLAY_OUT = (
    _VARIANT[v] for v in ("standard", "watch", "one_swap", "exchange", "play_out")
)
CLOCKWISE, RANDOM, MOST, FEWEST, INFORMED, ORACLE = (
    _STRATEGY[s] for s in ("clockwise", "random", "most", "fewest", "informed", "oracle")
)
# Strategies of the user's: code CUSTOM + k plays the k-th function of the call's `customs`.
CUSTOM = rules.CUSTOM
MAX_CUSTOM = rules.MAX_CUSTOM  # functions of the user's one call plays: `customs`'s length
# What `custom_reads` says the call's strategies of the user's read, by index.
READS_SEEN, READS_BOTTOMS, READS_RAND = range(3)
FINALE_UP = rules.FINALES.index("up")
DEPTH_TOP = rules.DEPTHS.index("top")

# Rescue modes: how the rescue changes the piles. Cells of one mode share continuations.
MODE_WATCH, MODE_ONE_SWAP, MODE_EXCHANGE_BOTTOM, MODE_EXCHANGE_TOP = range(4)
N_MODES = 4
NO_RESCUE = -1


def scheme_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The deal scheme and layouts as arrays, derived from `deals` and `rules` (their one
    definition) and passed to the compiled code as arguments.

    Arguments rather than globals: numba freezes a global array into the compiled code and
    its on-disk cache is keyed to this file alone, so a change in `deals` or `rules` could
    otherwise run stale constants.

    - positions[order, q * 4 + k]: the deck position of pile q's k-th card from the top;
    - ranges[b * 4 + k]: Fisher-Yates's ranges 52..2, four to a batch;
    - thresholds[b]: Lemire's rejection bound for batch b, 2**32 mod its product;
    - rand_interval[k]: the interval of `rand` (`rules.RAND_BREAKS`) that holds draw k, for
      k in [0, RAND_GRID); rand_values[i]: the value of interval i (`rules.RAND_VALUES`).
    """
    positions = np.array(
        [
            [rules.deal_position(order, q, k) for q in range(N_PILES) for k in range(PILE_SIZE)]
            for order in rules.ORDERS
        ],
        dtype=np.int64,
    )
    # Every batch padded to the full width with ranges of 1, whose digit is always 0 and
    # which leave the word unchanged, so the compiled loops have one fixed trip count.
    batches = deals.SHUFFLE_BATCHES
    width = deals.BATCH_WIDTH
    if (
        width != BATCH_WIDTH
        or len(batches) != N_BATCHES
        or any(len(batch) > width for batch in batches)
    ):
        raise RuntimeError("the kernel's BATCH_WIDTH no longer matches the deal scheme")
    ranges = np.array(
        [n for batch in batches for n in batch + (1,) * (width - len(batch))], dtype=np.uint64
    )
    thresholds = np.array(
        [deals.WORD_LIMIT % int(np.prod(batch, dtype=object)) for batch in batches],
        dtype=np.uint64,
    )
    # A draw's interval by table (27,720 bytes): a search's branches are unpredictable.
    rand_interval = np.repeat(
        np.arange(len(rules.RAND_VALUES), dtype=np.uint8), np.diff(rules.RAND_BREAKS)
    )
    rand_values = np.array(rules.RAND_VALUES, dtype=np.float64)
    return positions, ranges, thresholds, rand_interval, rand_values


# The compiled loops' fixed width; written here, not imported, so that a change in `deals`
# must come with an edit of this file, which is what renews numba's on-disk cache.
BATCH_WIDTH = 4
N_BATCHES = 13  # 51 ranges, four to a batch
SHUFFLE_BLOCKS = 4  # Philox blocks (of four words) that cover the 13 batches
# Deals played in lockstep (`standard_chains` is written out for eight). Standard deals a
# second in CPU time, against two at a time: 4 lanes 1.6x, 6 lanes 2.1x, 8 lanes 2.25x, and
# 10, 12 or 16 lanes no more than 8 (each lane's chain holds a register; x86-64 has 16).
LANES = 8
TABLES = scheme_tables()

M32 = np.uint64(0xFFFFFFFF)
EMPTY = np.uint64(0xFF)  # a stack's byte past its last card
BYTE = np.uint64(8)
HIGH_EMPTY = np.uint64(0xFFFFFFFF00000000)  # a pile's word over four EMPTY bytes
# The kernel takes the strategies of the user's as first-class functions (`play_cells`'s
# ``customs``), which numba calls experimental: a warning at every compile, for the user.
# By its category: numba may wrap the message in terminal escapes, which a message filter misses.
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)
if sys.byteorder != "little":
    # `play_cells` reads a pile's four card bytes as one word, the top card its lowest byte.
    raise ImportError("the kernel reads cards as little-endian words")
PHILOX_M0 = np.uint64(deals.PHILOX_M0)
PHILOX_M1 = np.uint64(deals.PHILOX_M1)
PHILOX_W0 = np.uint64(deals.PHILOX_W0)
PHILOX_W1 = np.uint64(deals.PHILOX_W1)
STREAM_DEAL = np.uint64(deals.STREAM_DEAL)
STREAM_STRATEGY = np.uint64(deals.STREAM_STRATEGY)
U32 = np.uint64(32)
SIGNATURE_OF_CUSTOM = custom.signature()
SEEN_COLUMNS = rules.SEEN_COLUMNS
DIED = rules.DIED


@nb.njit(cache=True, inline="always")
def philox(seed, deal, block, stream):
    """Philox4x32-10 of counter (deal lo, deal hi, block, stream), key = seed: four words."""
    c0 = deal & M32
    c1 = deal >> U32
    c2 = block
    c3 = stream
    k0 = seed & M32
    k1 = seed >> U32
    for _ in range(deals.PHILOX_ROUNDS):
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        c0 = (p1 >> U32) ^ c1 ^ k0
        c1 = p1 & M32
        c2 = (p0 >> U32) ^ c3 ^ k1
        c3 = p0 & M32
        k0 = (k0 + PHILOX_W0) & M32
        k1 = (k1 + PHILOX_W1) & M32
    return c0, c1, c2, c3


@nb.njit(cache=True, inline="always")
def philox_block(seed, deal, block, stream, words, at):
    """`philox` into words[at:at+4]."""
    words[at], words[at + 1], words[at + 2], words[at + 3] = philox(seed, deal, block, stream)


@nb.njit(cache=True)
def word_at(seed, deal, stream, index, block_words):
    """The stream's 32-bit word number ``index`` (``block_words``: scratch uint64[4])."""
    philox_block(seed, deal, np.uint64(index >> 2), stream, block_words, 0)
    return block_words[index & 3]


@nb.njit(cache=True, inline="always")
def decode_batch(word, batch, ranges, draws):
    """Lemire digits of one word for batch ``batch`` into ``draws``; gives the leftover."""
    leftover = word
    for k in range(BATCH_WIDTH):
        scaled = leftover * ranges[batch * BATCH_WIDTH + k]
        draws[batch * BATCH_WIDTH + k] = scaled >> U32
        leftover = scaled & M32
    return leftover


@nb.njit(cache=True)
def decode_in_order(seed, deal, words, draws, ranges, thresholds):
    """Every batch from the next unused word, rejected words skipped: the scheme as written."""
    buffered = words.shape[0] - 4
    next_word = 0
    for b in range(thresholds.shape[0]):
        while True:
            if next_word < buffered:
                word = words[next_word]
            else:
                word = word_at(seed, deal, STREAM_DEAL, next_word, words[buffered:])
            next_word += 1
            if decode_batch(word, b, ranges, draws) >= thresholds[b]:
                break


@nb.njit(cache=True, inline="always")
def philox_lanes(seed, first, words):
    """The first SHUFFLE_BLOCKS blocks of stream 0 of deals first .. first + LANES - 1:
    ``words[4 * block + k, lane]``. One loop over the lanes with no loads, which the compiler
    turns into vector instructions, the deals side by side (`words` a local array of
    constant shape: its strides are known)."""
    for block in range(SHUFFLE_BLOCKS):
        for lane in range(LANES):
            deal = first + np.uint64(lane)
            c0, c1, c2, c3 = philox(seed, deal, np.uint64(block), STREAM_DEAL)
            words[4 * block, lane] = c0
            words[4 * block + 1, lane] = c1
            words[4 * block + 2, lane] = c2
            words[4 * block + 3, lane] = c3


@nb.njit(cache=True, inline="always")
def shuffle_lanes(seed, first, ranks, words, draws, lane_words, ranges, thresholds):
    """Fill ``ranks[lane]`` with the shuffled deck of deal first + lane, as ranks, for the
    LANES lanes: the `deals` scheme.

    Scratch: ``words`` (uint64[4 * SHUFFLE_BLOCKS, LANES]), ``draws`` (uint64[LANES, 4 per
    batch]) and ``lane_words`` (uint64[4 * SHUFFLE_BLOCKS + 4]).
    """
    philox_lanes(seed, first, words)
    # Fast path: batch b takes word b. The batches are independent, so the CPU overlaps
    # their multiply chains; a lane with a rejected word (about 1 deal in 800) is decoded
    # again strictly in order.
    for lane in range(LANES):
        rejected = False
        for b in range(N_BATCHES):
            rejected |= decode_batch(words[b, lane], b, ranges, draws[lane]) < thresholds[b]
        if rejected:
            for k in range(4 * SHUFFLE_BLOCKS):
                lane_words[k] = words[k, lane]
            deal = first + np.uint64(lane)
            decode_in_order(seed, deal, lane_words, draws[lane], ranges, thresholds)
    for lane in range(LANES):
        for i in range(N_CARDS):
            ranks[lane, i] = i >> 2
    # Fisher-Yates, the lanes' swaps side by side: draw r swaps position 51 - r with a
    # position at or below it.
    for r in range(N_CARDS - 1):
        i = N_CARDS - 1 - r
        for lane in range(LANES):
            j = draws[lane, r]
            swap = ranks[lane, i]
            ranks[lane, i] = ranks[lane, j]
            ranks[lane, j] = swap


@nb.njit(cache=True, inline="always")
def strategy_draw(seed, deal, n, block_words):
    """A draw in [0, n) from the deal's strategy stream (as `deals.strategy_draw`): the
    `random` strategy's, and `rand`'s (`rand_of`). ``block_words`` is scratch (uint64[4]).
    """
    n64 = np.uint64(n)
    philox_block(seed, deal, np.uint64(0), STREAM_STRATEGY, block_words, 0)
    index = 0
    while True:
        word = (
            block_words[index]
            if index < 4
            else word_at(seed, deal, STREAM_STRATEGY, index, block_words)
        )
        scaled = word * n64
        index += 1
        # Lemire: only a leftover under n can fall under 2**32 mod n, so the division is rare.
        leftover = scaled & M32
        if leftover >= n64 or leftover >= np.uint64(deals.WORD_LIMIT) % n64:
            return np.int64(scaled >> U32)


@nb.njit(cache=True)
def rand_of(seed, deal, rand_interval, rand_values, block_words):
    """`rand` of a deal: its draw from the strategy stream (`strategy_draw`, uniform in
    [0, RAND_GRID)) rounded to the middle of its interval (`rules.rand_value`)."""
    draw = strategy_draw(seed, deal, rand_interval.shape[0], block_words)
    return rand_values[rand_interval[draw]]


@nb.njit(SIGNATURE_OF_CUSTOM, cache=True, nogil=True)
def no_strategy(counts, seen, bottoms, rand):
    """What fills the `customs` a call does not use: never called."""
    return 0


@nb.njit(cache=True, inline="always")
def chain_step(piles, taken, when, step, lane, card):
    """Step ``step`` of lane ``lane``'s standard chain: take a card from pile ``card`` (the
    home of the card in hand), which names the next pile, and note in ``when`` the step each
    card was taken at. At an empty pile the chain has died, and it stays there: every lane
    takes the same number of steps, with no branch.
    """
    slot = taken[lane, card]
    live = slot != PILE_SIZE
    taken[lane, card] = slot + live
    at = card * PILE_SIZE + slot
    when[lane, at] = step
    next_card = piles[lane, at]
    return next_card if live else card


@nb.njit(cache=True, inline="always")
def standard_chains(piles, taken, when, turned, death, unvisited):
    """Standard play of the LANES lanes' deals, stepped together: a chain is a run of
    dependent loads, and while one lane waits on its loads the others' steps run.

    Gives, per lane: cards turned, the pile where the chain died, and the hours never
    visited when the third king was placed. ``piles[lane]`` and ``when[lane]`` have PILE_SIZE
    bytes past the centre, where a chain that has died there reads and writes. Only the
    centre can run out in standard play, but the test is the general one, so the harness can
    check where the chain died.
    """
    taken[:, :] = 0
    # Each lane's pile in a register of its own (the lanes written out: in an array it would
    # be a store and a load each step); every chain starts by taking from the centre.
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = np.int64(CENTRE)
    for step in range(N_CARDS + 1):  # 52 takes at most, and a step that finds the death
        c0 = chain_step(piles, taken, when, step, 0, c0)
        c1 = chain_step(piles, taken, when, step, 1, c1)
        c2 = chain_step(piles, taken, when, step, 2, c2)
        c3 = chain_step(piles, taken, when, step, 3, c3)
        c4 = chain_step(piles, taken, when, step, 4, c4)
        c5 = chain_step(piles, taken, when, step, 5, c5)
        c6 = chain_step(piles, taken, when, step, 6, c6)
        c7 = chain_step(piles, taken, when, step, 7, c7)
    cards = (c0, c1, c2, c3, c4, c5, c6, c7)
    for lane in range(LANES):
        death[lane] = cards[lane]
        # The third king was placed at the step that took the centre's last card; an hour
        # was unvisited then if its first card was taken later, or never. (Counted after
        # the chains, rather than at each step, which would add to every step.)
        third_king = when[lane, CENTRE * PILE_SIZE + PILE_SIZE - 1]
        hours = 0
        for q in range(N_HOURS):
            hours += (taken[lane, q] == 0) | (when[lane, q * PILE_SIZE] > third_king)
        unvisited[lane] = hours
        cards_turned = 0
        for q in range(N_PILES):
            cards_turned += taken[lane, q]
        turned[lane] = cards_turned


@nb.njit(cache=True, inline="always")
def walk(stacks, card, turned):
    """Deliver ``card`` and keep taking until a pile is empty: (cards turned, pile of death).

    ``stacks`` is taken from (see the module's notes). `one_swap` and `exchange` put the fourth
    king into a stack as a card like any other, `watch` and `play_out` only take a top card,
    so this one loop plays every continuation.
    """
    while True:
        stack = stacks[card]
        top = stack & EMPTY
        if top == EMPTY:
            return turned, card
        stacks[card] = stack >> BYTE
        turned += 1
        card = top


@nb.njit(cache=True, inline="always")
def watch_winners(powers, holding, start, orbit):
    """The hour piles from which a `watch` rescue wins, as a bit mask (0 if none).

    The bottom cards of the piles that hold cards form a functional graph (each points at its
    home, which still holds cards since a card of its rank is still down). Every pile leads
    to p, with p's own pointer dropped, exactly when the graph is one component and p lies on
    its cycle. This is `rules.bottoms_reach` for every p at once, and a different route to
    the same answer, which the tests hold to the reference engine.

    ``powers[0]`` holds each pile's bottom-card home (empty piles point at themselves);
    ``holding`` is the mask of hour piles holding cards and ``start`` one of them; the other
    rows of ``powers`` and ``orbit`` (16 entries) are scratch. Sixteen steps from any pile
    land on its component's cycle (at most 12 piles hold cards) and map each cycle onto
    itself, so the piles reached in exactly sixteen steps are the cycles' piles. Pointer
    doubling gives 1, 2, 4, 8 and 16 steps; the one component test is whether the start's
    cycle, 16 steps of it read off those powers, holds every cycle pile. No branch depends on
    the deal: the answer is unpredictable, a mispredicted branch costs more than the work.
    """
    for k in range(1, 5):
        for q in range(N_PILES):
            powers[k, q] = powers[k - 1, powers[k - 1, q]]
    cycles = np.int64(0)
    for q in range(N_HOURS):
        cycles |= ((holding >> q) & 1) << np.int64(powers[4, q])
    # The start's cycle: orbit[i] = i steps on from a pile of it, for i < 16.
    orbit[0] = powers[4, start]
    for k in range(4):
        for i in range(1 << k):
            orbit[(1 << k) + i] = powers[k, orbit[i]]
    start_cycle = np.int64(0)
    for i in range(16):
        start_cycle |= np.int64(1) << np.int64(orbit[i])
    return cycles if start_cycle == cycles else np.int64(0)


# nogil: a driver plays its first shards in a thread while Ray starts (`sweep.early`).
@nb.njit(cache=True, nogil=True)
def play_cells(seed, first, count, cell_codes, tables, out, tallies, customs, custom_reads, errors):
    """Play deals first .. first+count-1 under every cell; fill ``out`` (fields x cells x deals).
    With ``tallies`` (`record.Tallies`; None: rows), each record is counted into them instead,
    and ``out`` (1 x cells x deals) gets only the wins.

    ``cell_codes[c]`` = (variant, strategy, finale, order, depth) codes of `Cell.codes`, a
    strategy of the user's CUSTOM + k for ``customs[k]`` (`custom.compiled`; MAX_CUSTOM of
    them, the unused `no_strategy`; None where no cell has one), ``custom_reads`` what those
    read (READS_...: nonzero if any does); ``tables`` = `scheme_tables()`. A strategy of
    the user's that names no pile holding cards stops the play: ``errors`` gets (deal offset,
    k, its answer); what one raises ends the call, ``errors[3:5]`` holding the deal offset
    and k it was called for.
    """
    positions, ranges, thresholds, rand_interval, rand_values = tables
    if tallies is not None:  # each tally as one row (`count_into`), made once
        counts_shape = tallies.counts.shape
        turned_shape = tallies.turned_piles.shape
        facts_shape = tallies.facts.shape
        hint_columns = np.uint64(tallies.hint_code.shape[1])
        flat_counts = tallies.counts.reshape(tallies.counts.size)
        flat_turned = tallies.turned_piles.reshape(tallies.turned_piles.size)
        flat_facts = tallies.facts.reshape(tallies.facts.size)
        flat_hints = tallies.hint_code.reshape(tallies.hint_code.size)
    n_cells = cell_codes.shape[0]
    # The lanes' deals (`shuffle_lanes`, `standard_chains`); constant shapes, so that the
    # compiler knows their strides.
    ranks = np.zeros((LANES, N_CARDS), dtype=np.uint8)
    words = np.empty((4 * SHUFFLE_BLOCKS, LANES), dtype=np.uint64)
    draws = np.empty((LANES, N_BATCHES * BATCH_WIDTH), dtype=np.uint64)
    lane_words = np.empty(4 * SHUFFLE_BLOCKS + 4, dtype=np.uint64)
    lane_piles = np.zeros((LANES, N_CARDS + PILE_SIZE), dtype=np.uint8)
    lane_taken = np.zeros((LANES, N_PILES), dtype=np.uint8)
    lane_when = np.zeros((LANES, N_CARDS + PILE_SIZE), dtype=np.uint8)
    lane_turned = np.zeros(LANES, dtype=np.int64)
    lane_death = np.zeros(LANES, dtype=np.int64)
    lane_unvisited = np.zeros(LANES, dtype=np.int64)
    lane_kings = np.zeros(LANES, dtype=np.int64)
    piles = np.empty(N_PILES * PILE_SIZE, dtype=np.uint8)  # the deal being recorded
    # Each pile's four cards as one word, its top the lowest byte (checked at import: the
    # machine is little-endian).
    pile_words = piles.view(np.uint32)
    taken = np.empty(N_PILES, dtype=np.uint8)
    stacks = np.empty(N_PILES, dtype=np.uint64)  # the face-down cards at the first death
    scratch_stacks = np.empty(N_PILES, dtype=np.uint64)  # `stacks` for a continuation
    down = np.zeros(N_PILES, dtype=np.int64)  # face-down counts at the first death
    # Row 0: home of each pile's bottom card; rows 1-4 `watch_winners`'s scratch.
    powers = np.zeros((5, N_PILES), dtype=np.uint8)
    bottom_home = powers[0]
    orbit = np.zeros(16, dtype=np.uint8)
    eligible = np.zeros(N_PILES, dtype=np.int64)  # hour piles holding cards, in order
    strategy_words = np.zeros(4, dtype=np.uint64)  # the strategy stream's first block
    # Each rescue mode's continuation from each pile, computed once per deal and order.
    # An entry is current when its stamp is this deal's, which spares a reset per deal.
    memo_turned = np.zeros((N_MODES, N_HOURS), dtype=np.int64)
    memo_stamp = np.full((N_MODES, N_HOURS), -1, dtype=np.int64)
    stamp = 0
    n_orders = positions.shape[0]
    uses_order = np.zeros(n_orders, dtype=np.bool_)
    uses_random = needs_winners = any_rescue = uses_custom = False
    # Strategies of the user's: which each order's cells play, what they are shown (made
    # afresh for each call), and their piles.
    uses_slot = np.zeros((n_orders, MAX_CUSTOM), dtype=np.bool_)
    slots = np.zeros((n_orders, MAX_CUSTOM), dtype=np.int64)  # each order's, listed
    n_slots = np.zeros(n_orders, dtype=np.int64)
    custom_pile = np.zeros(MAX_CUSTOM, dtype=np.int64)
    shown_counts = np.zeros(N_HOURS, dtype=np.int64)
    shown_seen = np.zeros((N_PILES, SEEN_COLUMNS), dtype=np.int64)
    flat_seen = shown_seen.reshape(N_PILES * SEEN_COLUMNS)  # the same memory, one row
    shown_bottoms = np.zeros(N_PILES, dtype=np.int64)
    for c in range(n_cells):
        strategy = cell_codes[c, 1]
        uses_order[cell_codes[c, 3]] = True
        uses_random |= strategy == RANDOM
        any_rescue |= cell_codes[c, 0] != STANDARD
        # informed and oracle choose winners; under face-up finales the hint is a verdict.
        needs_winners |= (strategy == INFORMED or strategy == ORACLE) or (
            strategy >= 0 and cell_codes[c, 2] == FINALE_UP
        )
        if strategy >= CUSTOM:
            uses_custom = True
            uses_slot[cell_codes[c, 3], strategy - CUSTOM] = True
    reads_rand = uses_custom and custom_reads[READS_RAND] != 0
    reads_seen = uses_custom and custom_reads[READS_SEEN] != 0
    reads_bottoms = uses_custom and custom_reads[READS_BOTTOMS] != 0
    for o in range(n_orders):
        for k in range(MAX_CUSTOM):
            if uses_slot[o, k]:
                slots[o, n_slots[o]] = k
                n_slots[o] += 1
    cell_mode = np.full(n_cells, NO_RESCUE, dtype=np.int64)
    for c in range(n_cells):
        variant = cell_codes[c, 0]
        if variant == WATCH:
            cell_mode[c] = MODE_WATCH
        elif variant == ONE_SWAP:
            cell_mode[c] = MODE_ONE_SWAP
        elif variant == EXCHANGE:
            top = cell_codes[c, 4] == DEPTH_TOP
            cell_mode[c] = MODE_EXCHANGE_TOP if top else MODE_EXCHANGE_BOTTOM

    # Deals go LANES at a time, shuffled and played in lockstep up to their first deaths
    # (the last group's spare lanes play deals past the range, whose results are dropped);
    # then each deal's rescues, one deal after the other.
    for d0 in range(0, count, LANES):
        lanes = min(LANES, count - d0)
        shuffle_lanes(
            seed, first + np.uint64(d0), ranks, words, draws, lane_words, ranges, thresholds
        )
        for order in range(n_orders):
            if not uses_order[order]:
                continue
            for lane in range(LANES):
                for k in range(N_PILES * PILE_SIZE):
                    lane_piles[lane, k] = ranks[lane, positions[order, k]]
                kings = 0
                for q in range(N_HOURS):
                    kings += lane_piles[lane, q * PILE_SIZE + PILE_SIZE - 1] == KING
                lane_kings[lane] = kings
            # The standard chain, shared by every cell of this order up to its first death.
            standard_chains(
                lane_piles, lane_taken, lane_when, lane_turned, lane_death, lane_unvisited
            )
            for i in range(lanes):
                # This deal's piles and first death into the working arrays.
                d = d0 + i
                deal = first + np.uint64(d)
                if any_rescue:
                    for k in range(N_PILES * PILE_SIZE):
                        piles[k] = lane_piles[i, k]
                    for q in range(N_PILES):
                        taken[q] = lane_taken[i, q]
                turned = lane_turned[i]
                death = lane_death[i]
                unvisited = lane_unvisited[i]
                kings_at_bottom = lane_kings[i]
                down_at_stop = N_CARDS - turned

                clockwise = most = fewest = random_pile = first_winner = -1
                winners = np.int64(0)  # mask of the piles a watch rescue wins from
                if any_rescue and down_at_stop > 0:
                    stamp += 1
                    # The piles each strategy takes, found with selects rather than branches:
                    # which piles hold cards, and most or fewest, is unpredictable, and a
                    # mispredicted branch costs more than the work. `eligible` lists the hour
                    # piles holding cards: every pile is written, the count moves past it only
                    # if it holds cards.
                    n_eligible = 0
                    holding = np.int64(0)
                    one_left = np.int64(0)
                    most_down = 0
                    fewest_down = PILE_SIZE + 1
                    for q in range(N_PILES):
                        left = PILE_SIZE - np.int64(taken[q])
                        down[q] = left
                        bottom_home[q] = piles[q * PILE_SIZE + PILE_SIZE - 1] if left > 0 else q
                        stacks[q] = (np.uint64(pile_words[q]) | HIGH_EMPTY) >> (
                            BYTE * np.uint64(taken[q])
                        )
                    for q in range(N_HOURS):
                        left = down[q]
                        eligible[n_eligible] = q
                        n_eligible += left > 0
                        holding |= np.int64(left > 0) << q
                        one_left |= np.int64(left == 1) << q
                        if left > most_down:
                            most = q
                            most_down = left
                        key = left if left > 0 else PILE_SIZE + 1
                        if key < fewest_down:
                            fewest = q
                            fewest_down = key
                    clockwise = eligible[0]
                    if uses_random:
                        pick = strategy_draw(seed, deal, n_eligible, strategy_words)
                        random_pile = eligible[pick]
                    if needs_winners:
                        winners = watch_winners(powers, holding, clockwise, orbit)
                        for q in range(N_HOURS - 1, -1, -1):  # downwards: the lowest is kept
                            if (winners >> q) & 1:
                                first_winner = q
                    # A call of built-in strategies only passes no `customs`: numba then
                    # compiles this kernel without this block (a branch on an argument that
                    # is None is pruned), so their loop is as it was before there were any.
                    if customs is not None and uses_custom:
                        rand = 0.0
                        if reads_rand:
                            rand = rand_of(seed, deal, rand_interval, rand_values, strategy_words)
                        # Each strategy of the user's this order plays, shown what it sees
                        # made afresh (whatever the last one did to its arrays). Called here,
                        # in the loop: through another function, it cost five times as much.
                        for j in range(n_slots[order]):
                            k = slots[order, j]
                            for q in range(N_HOURS):
                                shown_counts[q] = down[q]
                            if reads_seen:
                                # One flat run of stores, and every card of every pile added
                                # as 1 if taken, else 0: a loop over the cards taken, whose
                                # number is unpredictable, cost 2-3 times as much.
                                flat_seen[:] = 0
                                for q in range(N_PILES):
                                    row = q * SEEN_COLUMNS
                                    for t in range(PILE_SIZE):
                                        card = piles[q * PILE_SIZE + t]
                                        flat_seen[row + card] += np.int64(t < taken[q])
                                flat_seen[death * SEEN_COLUMNS + DIED] = 1
                            if reads_bottoms:
                                for q in range(N_PILES):
                                    shown_bottoms[q] = piles[q * PILE_SIZE + PILE_SIZE - 1]
                            errors[3] = d  # the deal and strategy of what it raises, if it does
                            errors[4] = k
                            hour = customs[k](shown_counts, shown_seen, shown_bottoms, rand)
                            if hour < 1 or hour > N_HOURS or down[hour - 1] == 0:
                                errors[0] = d
                                errors[1] = k
                                errors[2] = hour
                                return out
                            custom_pile[k] = hour - 1

                for c in range(n_cells):
                    if cell_codes[c, 3] != order:
                        continue
                    # The deal's record under this cell: as at the first death, then changed
                    # by play_out's restarts or by a rescue.
                    variant = cell_codes[c, 0]
                    mode = cell_mode[c]
                    won = down_at_stop == 0
                    end_turned = turned
                    rescue_pile = NO_PILE
                    hint_num = hint_den = NO_PILE
                    restarts = stray = NO_COUNT
                    if variant == PLAY_OUT:
                        restarts, stray, later = play_out(stacks, scratch_stacks, down_at_stop)
                        end_turned = turned + later
                        stray += death != CENTRE
                        if tallies is not None:  # counted here, off the other cells' path:
                            tallies.restarts[  # there, this cost a sixth of the kernel
                                tallies.restart_slot[c],
                                np.int64(won),
                                down_at_stop,
                                restarts - NO_COUNT,
                                stray - NO_COUNT,
                            ] += 1
                    elif mode != NO_RESCUE and down_at_stop > 0:
                        # A rescue variant: pick the pile, then play (or recall) its
                        # continuation.
                        strategy = cell_codes[c, 1]
                        if strategy == CLOCKWISE:
                            pile = clockwise
                        elif strategy == RANDOM:
                            pile = random_pile
                        elif strategy == MOST:
                            pile = most
                        elif strategy == FEWEST:
                            pile = fewest
                        elif customs is not None and strategy >= CUSTOM:  # the user's (pruned
                            pile = custom_pile[strategy - CUSTOM]  # where none are: see above)
                        elif mode != MODE_EXCHANGE_TOP:
                            # informed / oracle: watch, one_swap and exchange at the bottom all
                            # win from the same piles (the king ends up below the rescue pile's
                            # cards).
                            pile = first_winner if first_winner >= 0 else most
                        else:
                            # At the top, the king comes back at the pile's next turn: only a
                            # pile with one card left can win.
                            pile = most
                            for q in range(N_HOURS - 1, -1, -1):  # the lowest such pile
                                if (winners >> q) & (one_left >> q) & 1:
                                    pile = q
                        wins_here = (winners >> pile) & 1 == 1 and (
                            mode != MODE_EXCHANGE_TOP or down[pile] == 1
                        )

                        if needs_winners and wins_here:
                            # A winning continuation turns every card: no need to walk it.
                            end_turned = N_CARDS + (mode != MODE_WATCH)
                        else:
                            if memo_stamp[mode, pile] != stamp:
                                # The rescue as a change of the pile's stack; then one walk.
                                for q in range(N_PILES):
                                    scratch_stacks[q] = stacks[q]
                                stack = stacks[pile]
                                left = np.uint64(down[pile])
                                if mode == MODE_WATCH:  # its top card into hand, the king aside
                                    card = stack & EMPTY
                                    scratch_stacks[pile] = stack >> BYTE
                                elif mode == MODE_ONE_SWAP:  # its top card into hand, the king
                                    card = stack & EMPTY  # under it
                                    at = BYTE * left
                                    stack = (stack & ~(EMPTY << at)) | (np.uint64(KING) << at)
                                    scratch_stacks[pile] = stack >> BYTE
                                else:  # exchange: the king takes the place of the card taken
                                    at = np.uint64(0)
                                    if mode == MODE_EXCHANGE_BOTTOM:
                                        at = BYTE * (left - np.uint64(1))
                                    card = (stack >> at) & EMPTY
                                    scratch_stacks[pile] = (stack & ~(EMPTY << at)) | (
                                        np.uint64(KING) << at
                                    )
                                end_turned, _ = walk(scratch_stacks, card, turned + 1)
                                memo_turned[mode, pile] = end_turned
                                memo_stamp[mode, pile] = stamp
                            end_turned = memo_turned[mode, pile]
                        # `watch` turns 52 cards to win; the others turn the fourth king twice.
                        won = end_turned == N_CARDS + (mode != MODE_WATCH)
                        rescue_pile = pile + 1
                        hint_den = 1
                        if cell_codes[c, 2] == FINALE_UP:
                            hint_num = np.int64(wins_here)
                        elif mode == MODE_EXCHANGE_TOP and down[pile] > 1:
                            hint_num = 0
                        else:
                            hint_num = down[pile]
                            hint_den = down_at_stop

                    if tallies is None:  # the record as a row of ``out`` (pruned where counted)
                        out[ROW_WON, c, d] = won
                        out[ROW_CARDS_TURNED, c, d] = end_turned
                        out[ROW_DOWN_AT_STOP, c, d] = down_at_stop
                        out[ROW_KINGS_AT_BOTTOM, c, d] = kings_at_bottom
                        out[ROW_UNVISITED_AT_THIRD_KING, c, d] = unvisited
                        # The rest were filled in before the call: only what differs is written.
                        if rescue_pile != NO_PILE:
                            out[ROW_RESCUE_PILE, c, d] = rescue_pile
                            out[ROW_HINT_NUM, c, d] = hint_num
                            out[ROW_HINT_DEN, c, d] = hint_den
                        if restarts != NO_COUNT:
                            out[ROW_RESTARTS, c, d] = restarts
                            out[ROW_STRAY_DEATHS, c, d] = stray
                    else:
                        # The record counted where it is made (`record.Tallies`): only the win
                        # is kept, deal by deal.
                        out[ROW_WON, c, d] = won
                        if variant != PLAY_OUT:  # play_out's are counted with its restarts
                            hint = flat_hints[
                                np.uint64(hint_num) * hint_columns + np.uint64(hint_den)
                            ]
                            count_into(flat_counts, counts_shape, c, won, down_at_stop, hint)
                        count_into(flat_turned, turned_shape, c, won, end_turned, rescue_pile)
                        if variant == STANDARD:
                            count_into(flat_facts, facts_shape, c, won, kings_at_bottom, unvisited)
    return out


@nb.njit(cache=True, inline="always")
def count_into(flat, shape, a, b, c, d):
    """tally[a, b, c, d] += 1 for a C-ordered tally of ``shape``, ``flat`` its one row. One
    unsigned index: numba's index of four signed ones (each checked for a negative, then
    scaled) cost a twentieth of a summary kernel's time."""
    u = np.uint64
    flat[((u(a) * u(shape[1]) + u(b)) * u(shape[2]) + u(c)) * u(shape[3]) + u(d)] += 1


@nb.njit(cache=True)
def play_out(stacks, scratch, down_at_stop):
    """`play_out` from the first death: (restarts, later deaths away from their restart pile,
    cards turned after the first death). ``stacks`` as at the first death."""
    for q in range(N_PILES):
        scratch[q] = stacks[q]
    restarts = 0
    stray = 0
    turned_after = 0
    left = down_at_stop
    while left > 0:
        # Restart at hour 1, or the first hour clockwise from it that holds a card.
        restart = 0
        while scratch[restart] & EMPTY == EMPTY:
            restart += 1
        restarts += 1
        stack = scratch[restart]
        scratch[restart] = stack >> BYTE
        turned, died = walk(scratch, stack & EMPTY, 1)
        turned_after += turned
        left -= turned
        stray += died != restart
    return restarts, stray, turned_after


def play(
    seed: int,
    first: int,
    count: int,
    cells: list[Cell],
    into: np.ndarray | None = None,
    tallies: Tallies | None = None,
    strategy_seconds: float | None = None,
) -> dict[str, np.ndarray]:
    """Play deals ``first`` .. ``first + count - 1`` under each cell: result arrays by field.

    ``into``, an int8 array (fields x cells x count) of an earlier call, is written over and
    its rows given: a caller done with one batch's results before the next spares the fresh
    pages of a new array (batches past the allocator's threshold for reusing memory, 32 MB,
    are mapped afresh each time, and every page faulted in).

    With ``tallies``, the records are added to them (`record.Tallies`) and only ``won`` is
    given (``into`` then 1 x cells x count): what a summary sweep keeps of a batch, without
    writing its rows and reading them back.

    With ``strategy_seconds``, a call that plays a strategy of the user's ends within that
    bound or raises `bounded.StrategyTimeout` (`bounded`).
    """
    codes, mine = call_codes(seed, first, count, cells)
    fields = 1 if tallies is not None else len(RESULT_ROWS)
    out = results_array((fields, len(cells), count), into, filled=tallies is None)
    errors = np.full(5, -1, dtype=np.int64)
    customs, reads = user_functions(mine)
    arguments = (np.uint64(seed), np.uint64(first), count, codes, TABLES, out, tallies)
    arguments += (customs, reads, errors)
    try:
        returned = True
        if customs is None or strategy_seconds is None:
            play_cells(*arguments)
        else:  # compiled (or read from numba's cache) first: the bound is the strategy's
            play_cells(*arguments[:2], 0, *arguments[3:])
            returned = bounded.within(strategy_seconds, play_cells, arguments)
    except Exception:  # a strategy of the user's raised (the deal it was called for is known)
        if errors[3] < 0:
            raise
        raise strategy_failure(
            seed, first + int(errors[3]), mine[errors[4]], cells, custom.RAISED
        ) from None
    if not returned:  # the deal and strategy it was called for are known (`errors[3:5]`)
        called = int(errors[3]) >= 0
        deal = f"deal {first + int(errors[3])}" if called else f"the deals from {first}"
        names = [mine[int(errors[4])].name] if called else [strategy.name for strategy in mine]
        raise bounded.overdue(" or ".join(map(repr, names)), deal, strategy_seconds)
    if errors[0] >= 0:
        raise strategy_failure(seed, first + int(errors[0]), mine[errors[1]], cells, int(errors[2]))
    return dict(zip(RESULT_ROWS, out))


def results_array(shape: tuple[int, ...], into: np.ndarray | None, filled: bool) -> np.ndarray:
    """The int8 array `play_cells` writes: ``into`` if given (checked), else a new one; if
    ``filled``, with what the kernel does not write (it writes only what varies: zero is
    `record.NO_PILE`, "no rescue", in the rescue's rows; restarts and stray deaths are
    NO_COUNT but in play_out)."""
    if into is None:
        out = np.zeros(shape, dtype=np.int8)
    elif into.shape != shape or into.dtype != np.int8 or not into.flags.c_contiguous:
        raise ValueError(f"into: an int8 array {shape} expected, not {into.dtype} {into.shape}")
    else:
        out = into
        if filled:
            out[...] = 0
    if filled:
        out[ROW_RESTARTS] = NO_COUNT
        out[ROW_STRAY_DEATHS] = NO_COUNT
    return out


def user_functions(mine: list[rules.Custom]) -> tuple[tuple | None, np.ndarray]:
    """`play_cells`'s ``customs`` and ``custom_reads`` for the strategies ``mine`` (no
    ``customs`` without any: the kernel compiled without them)."""
    if not mine:
        return None, np.zeros(3, dtype=np.int64)
    functions = tuple(custom.compiled(strategy) for strategy in mine)
    reads = np.zeros(3, dtype=np.int64)
    for strategy in mine:
        reads[READS_SEEN] |= "seen" in strategy.sees
        reads[READS_BOTTOMS] |= "bottoms" in strategy.sees
        reads[READS_RAND] |= "rand" in strategy.sees
    return functions + (no_strategy,) * (MAX_CUSTOM - len(functions)), reads


def strategy_failure(seed: int, deal: int, strategy: rules.Custom, cells, hour: int):
    """The StrategyError of a strategy of the user's that named no rescue pile on ``deal``
    in the kernel: the reference engine's own, replaying the deal with its Python function,
    which says why (and what it raised); one of the kernel's answer if that plays on."""
    from pipeline.engine import reference

    cell = next(cell for cell in cells if cell.custom == strategy)
    try:
        reference.play(seed, deal, cell)
    except rules.StrategyError as error:
        return error
    if hour == custom.RAISED:
        return rules.StrategyError(
            f"strategy {strategy.name!r} raised an error on deal {deal} compiled by numba "
            "(its Python function did not: an index out of range?)"
        )
    return rules.strategy_error(
        strategy.name,
        deal,
        hour,
        "compiled by numba it names no pile holding cards (its Python function named another)",
    )


@nb.njit(cache=True)
def _deck_ranks(seed, first, count, tables, decks):
    _, ranges, thresholds, _, _ = tables
    ranks = np.zeros((LANES, N_CARDS), dtype=np.uint8)
    words = np.empty((4 * SHUFFLE_BLOCKS, LANES), dtype=np.uint64)
    draws = np.empty((LANES, N_BATCHES * BATCH_WIDTH), dtype=np.uint64)
    lane_words = np.empty(4 * SHUFFLE_BLOCKS + 4, dtype=np.uint64)
    for d0 in range(0, count, LANES):
        shuffle_lanes(
            seed, first + np.uint64(d0), ranks, words, draws, lane_words, ranges, thresholds
        )
        for i in range(min(LANES, count - d0)):
            decks[d0 + i] = ranks[i]
    return decks


def deck_ranks(seed: int, first: int, count: int) -> np.ndarray:
    """The shuffled decks of deals first.. as ranks, uint8 (count, 52): for tests and tools."""
    decks = np.empty((count, N_CARDS), dtype=np.uint8)
    return _deck_ranks(np.uint64(seed), np.uint64(first), count, TABLES, decks)
