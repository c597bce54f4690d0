"""Deal numbers: the shuffled deck as a pure function of (seed, deal), in readable Python.

The scheme (version ``SCHEME_VERSION``, recorded in every result):

- Random words come from Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
  1, 2, 3", SC 2011), a counter-based generator: the key is the 64-bit seed, the 128-bit
  counter is ``(deal low 32 bits, deal high 32 bits, block, stream)``. Counter-based means a
  deal's numbers are computed from its number directly, with no state carried from the deal
  before, so any shard, worker or machine reproduces any deal on its own; Philox passes
  BigCrush, needs only 32x32-bit multiplies (cheap in numba), and has published known-answer
  vectors (Random123's ``kat_vectors``), which the tests check.
- Each block gives four 32-bit words, used in order. Stream 0 shuffles the deck; stream 1
  feeds the `random` strategy, so that strategy never changes a layout.
- Bounded integers use Lemire's multiply-shift with rejection, batched (Brackett-Rozinsky and
  Lemire, "Batched ranged random integer generation", 2024): one 32-bit word yields the
  integers of a batch of four consecutive Fisher-Yates ranges (52, 51, 50, 49), (48, ..., 45),
  ..., (4, 3, 2): the word times each range in turn gives a mixed-radix digit, the low half
  carries on. The word is rejected, and the next word drawn for the whole batch, only when
  the final low half falls under ``2**32 mod product``, which keeps every tuple exactly
  uniform. No floats, no modulo of the random value. A batch's product stays under 2**23,
  so a word is rejected with probability under 2**-9, and 13 words (4 Philox blocks) shuffle
  a deck. Batches of one fixed width keep the kernel's loops branch-free.
- Fisher-Yates: for i = 51 down to 1, swap positions i and j, j uniform in [0, i], starting
  from the ordered deck (card ``rank * 4 + suit``). Position 0 is the first card dealt.

The fast kernel implements the same scheme in numba; the tests hold the two to each other.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.engine.rules import N_CARDS

SCHEME_VERSION = "philox4x32-10.batched-lemire.fisher-yates/2"

STREAM_DEAL = 0
STREAM_STRATEGY = 1

MASK32 = 0xFFFFFFFF
WORD_LIMIT = 1 << 32
UINT64_LIMIT = 1 << 64

# Philox4x32 constants (Random123): the multipliers and the Weyl key increments.
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

# Fisher-Yates's ranges are drawn four to a word.
BATCH_WIDTH = 4


def philox4x32(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, ...]:
    """Philox4x32-10 of a 4-word counter under a 2-word key: four 32-bit words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(PHILOX_ROUNDS):
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = (
            (p1 >> 32) ^ c1 ^ k0,
            p1 & MASK32,
            (p0 >> 32) ^ c3 ^ k1,
            p0 & MASK32,
        )
        k0 = (k0 + PHILOX_W0) & MASK32
        k1 = (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


def check_u64(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < UINT64_LIMIT:
        raise ValueError(f"{name}: {value!r} is not an unsigned 64-bit integer (0 to 2**64-1)")
    return value


def random_words(seed: int, deal: int, stream: int) -> Iterator[int]:
    """The endless sequence of 32-bit random words of one deal's stream."""
    key = (seed & MASK32, seed >> 32)
    block = 0
    while True:
        yield from philox4x32((deal & MASK32, deal >> 32, block, stream), key)
        block += 1


def shuffle_batches(top: int = N_CARDS, width: int = BATCH_WIDTH) -> list[tuple[int, ...]]:
    """Fisher-Yates's ranges top, top-1, ..., 2, in batches of ``width`` (the last shorter)."""
    sizes = list(range(top, 1, -1))
    return [tuple(sizes[at : at + width]) for at in range(0, len(sizes), width)]


SHUFFLE_BATCHES = shuffle_batches()


def bounded_batch(words: Iterator[int], ranges: tuple[int, ...]) -> list[int]:
    """One uniform integer in [0, n) for each n of ``ranges``, from as few words as it takes."""
    product = 1
    for size in ranges:
        product *= size
    while True:
        leftover = next(words)
        draws = []
        for size in ranges:
            scaled = leftover * size
            draws.append(scaled >> 32)
            leftover = scaled & MASK32
        # Lemire: the first (2**32 mod product) leftovers would favour some tuples.
        if leftover >= WORD_LIMIT % product:
            return draws


def shuffled_deck(seed: int, deal: int) -> list[int]:
    """The deck of deal ``deal`` under ``seed``, in dealing order (position 0 first)."""
    check_u64("seed", seed)
    check_u64("deal", deal)
    words = random_words(seed, deal, STREAM_DEAL)
    deck = list(range(N_CARDS))
    i = N_CARDS - 1
    for ranges in SHUFFLE_BATCHES:
        for j in bounded_batch(words, ranges):
            deck[i], deck[j] = deck[j], deck[i]
            i -= 1
    return deck


def strategy_draw(seed: int, deal: int, n: int) -> int:
    """The `random` strategy's choice for a deal: uniform in [0, n), from its own stream."""
    return bounded_batch(random_words(seed, deal, STREAM_STRATEGY), (n,))[0]
