"""The four counts-only built-in strategies written as strategies of your own (docs/rules.md):
the tests play them against the built-ins deal by deal, and check that `odds` gives their
exact values equal to the built-ins'. Each works for any number of hour piles (the tests'
small decks too), ties going to the lowest hour as the built-ins' do."""

import numba


def clockwise_mine(counts):
    for q in range(counts.shape[0]):
        if counts[q] > 0:
            return q + 1
    return 0


def random_mine(counts, rand):
    holding = 0
    for q in range(counts.shape[0]):
        if counts[q] > 0:
            holding += 1
    index = int(rand * holding)  # exactly uniform for up to 12 piles
    for q in range(counts.shape[0]):
        if counts[q] > 0:
            if index == 0:
                return q + 1
            index -= 1
    return 0


def most_mine(counts):
    best, most = 0, 0
    for q in range(counts.shape[0]):
        if counts[q] > most:
            best, most = q + 1, counts[q]
    return best


def fewest_mine(counts):
    best, fewest = 0, 1 << 30
    for q in range(counts.shape[0]):
        if 0 < counts[q] < fewest:
            best, fewest = q + 1, counts[q]
    return best


# most_mine shown `seen` or `rand` besides the counts, ignoring them: against most_mine, the
# kernel's cost of making those (benchmarks/custom_bench.py).
_most = numba.njit(inline="always")(most_mine)


def most_seen_ignored(counts, seen):
    return _most(counts)


def most_rand_ignored(counts, rand):
    return _most(counts)
