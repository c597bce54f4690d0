"""Strategies of your own for the engine tests: one that reads each thing a strategy may see,
and some that break the rules at play time."""


def least_seen(counts, seen):
    """The hour whose rank has come up least so far, of those holding cards; ties clockwise."""
    best, fewest = 0, 1 << 30
    for q in range(counts.shape[0]):
        if counts[q] > 0:
            turned = 0
            for pile in range(seen.shape[0]):
                turned += seen[pile, q]
            if turned < fewest:
                best, fewest = q + 1, turned
    return best


def died_at_centre(seen, counts):
    """The last hour holding cards if the chain died at the centre (it always does), else 0."""
    if seen[12, 13] != 1:
        return 0
    for q in range(counts.shape[0] - 1, -1, -1):
        if counts[q] > 0:
            return q + 1
    return 0


def no_king_below(counts, bottoms):
    """The most cards among piles whose bottom card is not a king; else the most cards."""
    best, most, fallback, fallback_most = 0, 0, 0, 0
    for q in range(counts.shape[0]):
        if counts[q] > fallback_most:
            fallback, fallback_most = q + 1, counts[q]
        if bottoms[q] != 12 and counts[q] > most:
            best, most = q + 1, counts[q]
    return best if best else fallback


def coin_among_most(counts, rand):
    """A uniform choice among the piles with the most cards."""
    most, ties = 0, 0
    for q in range(counts.shape[0]):
        if counts[q] > most:
            most, ties = counts[q], 1
        elif counts[q] == most:
            ties += 1
    index = int(rand * ties)
    for q in range(counts.shape[0]):
        if counts[q] == most:
            if index == 0:
                return q + 1
            index -= 1
    return 0


def raises_on_three(counts):
    if counts[0] == 3:
        raise ValueError("three cards at one o'clock")
    for q in range(counts.shape[0]):
        if counts[q] > 0:
            return q + 1
    return 0


def empty_hour(counts):
    """An hour with no card when there is one."""
    for q in range(counts.shape[0]):
        if counts[q] == 0:
            return q + 1
    return 1


def past_twelve(counts):
    return 13


def not_compilable(counts):
    return {"hour": 1}["hour"] + undefined_name  # noqa: F821


def returns_a_float(counts):
    return 1.5


def peeks(counts, deck):
    return 1


def second_most(counts):
    """The pile with the second-most cards (the first such clockwise), or the only one."""
    first, second = 0, 0
    for q in range(counts.shape[0]):
        if counts[q] > 0 and (first == 0 or counts[q] > counts[first - 1]):
            first, second = q + 1, first
        elif counts[q] > 0 and (second == 0 or counts[q] > counts[second - 1]):
            second = q + 1
    return second if second else first


def none_for_two_piles(counts):
    """Names a pile with no card when exactly two piles hold cards."""
    holding = 0
    for q in range(counts.shape[0]):
        holding += counts[q] > 0
    for q in range(counts.shape[0]):
        if (counts[q] > 0) == (holding != 2):
            return q + 1
    return 1
