"""Rescue strategies of your own, for `examples/strategies.toml` (docs/rules.md, strategies of
your own), one for each thing a strategy may see. Each is a function that numba can compile;
what it sees is what its parameters are named:

- counts:  face-down cards left in each hour pile, counts[0] for hour 1 ... counts[11] for 12;
- seen:    the cards taken so far: seen[pile, rank] (pile 12 the centre, ranks A..K = 0..12),
           and seen[pile, 13] = 1 at the pile where the chain died (the centre);
- bottoms: the rank of each pile's bottom card as dealt (face-up finales only);
- rand:    a number in [0, 1) drawn for the deal: int(rand * n) picks one of n piles fairly.

Each returns the hour, 1 to 12, of a pile that still holds face-down cards.
"""

# The hours nearest twelve o'clock first: 12, then 11 and 1, then 10 and 2, ...
BY_DISTANCE_FROM_TWELVE = (12, 11, 1, 10, 2, 9, 3, 8, 4, 7, 5, 6)


def nearest_twelve(counts):
    """The pile nearest twelve o'clock that still has two cards or more; else the nearest
    with any."""
    for least in (2, 1):
        for hour in BY_DISTANCE_FROM_TWELVE:
            if counts[hour - 1] >= least:
                return hour
    return 0


def least_visited(seen, counts):
    """The hour whose pile the chain visited least: the fewest cards of its rank turned
    (ties: the first clockwise from one o'clock). It reads what was turned, not the counts'
    own law, so the report checks it against `most` rather than an exact value."""
    best, fewest = 0, 99
    for hour in range(1, 13):
        if counts[hour - 1] > 0:
            visits = 0
            for pile in range(13):
                visits += seen[pile, hour - 1]
            if visits < fewest:
                best, fewest = hour, visits
    return best


def follow_the_bottoms(counts, bottoms):
    """With the bottoms face up: from the pile with the most cards, follow each pile's bottom
    card to its home pile (the pile of its rank) until a pile comes round again, and rescue
    there. Every pile holding cards points at one that does (every king is up by the first
    death, so no bottom card left points at the centre), so the walk ends on a cycle; the
    rescue wins exactly when every pile leads to that cycle's pile (docs/rules.md, why the
    bottom cards decide), which is when the oracle wins too."""
    pile = 0
    for hour in range(1, 13):
        if counts[hour - 1] > counts[pile]:
            pile = hour - 1
    visited = [False] * 13
    while not visited[pile]:
        visited[pile] = True
        pile = bottoms[pile]
    return pile + 1


def coin_among_most(counts, rand):
    """The most cards, ties broken by a fair draw rather than clockwise. (Its exact value is
    most's: ties do not change the cards of the pile taken. `odds` plays every count vector
    for each of rand's 46 values to show it, which takes a minute or two, once: the totals
    are kept in your cache directory.)"""
    most, ties = 0, 0
    for hour in range(1, 13):
        if counts[hour - 1] > most:
            most, ties = counts[hour - 1], 1
        elif counts[hour - 1] == most:
            ties += 1
    pick = int(rand * ties)
    for hour in range(1, 13):
        if counts[hour - 1] == most:
            if pick == 0:
                return hour
            pick -= 1
    return 0
