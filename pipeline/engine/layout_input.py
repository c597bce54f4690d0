"""A layout a user brings, read from text and checked before it is played (docs/deals.md,
a deal you hold).

Two forms are read:

- the JSON object `clocksweep deal --json` prints: ``piles``, 13 lists of 4 cards (hours 1..12
  then the centre, each top card first), with the ``seed``, ``deal``, ``scheme`` and ``order``
  it names optional; or several, one per line, as `deal --json` prints a range;
- a deck: 52 card texts in the order they are dealt, the first text dealt first (``reverse``:
  the last text dealt first), separated by spaces, commas or new lines, or as a JSON array.
  The deal order lays it out; the first card dealt to a pile is its bottom, the last its top.

Anything else is refused with one line that names what is wrong: a text that is not a card, a
card missing or repeated, a pile of the wrong size, a key that is not the layout's or that
appears twice in an object, an integer longer than a layout's. Nothing is ever repaired or
guessed. The command reads at most `MAX_INPUT_BYTES` of input, and refuses more.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.engine import deals, rules
from pipeline.engine.rules import N_CARDS, N_PILES, PILE_SIZE, RANKS, SUITS

LAYOUT_KEYS = ("seed", "deal", "scheme", "order", "piles")

# The most input `deal --layout` reads, so that an endless or huge input (a device, a pipe that
# never ends) is refused, not read whole into memory; generous, since layouts one per line
# (`deal --json` of a range) are played one after the other.
MAX_INPUT_MIB = 4
MAX_INPUT_BYTES = MAX_INPUT_MIB * 1024 * 1024
# The longest line `deal --json` prints (seed and deal of 20 digits, order round-robin): the
# limit holds at least this many layouts one per line.
DEAL_JSON_LINE_BYTES = 491
MAX_INPUT_TEXT = (
    f"{MAX_INPUT_MIB} MiB ({MAX_INPUT_BYTES:,} bytes, at least "
    f"{MAX_INPUT_BYTES // DEAL_JSON_LINE_BYTES:,} layouts one per line)"
)

# The longest integer a layout holds: its seed or deal, unsigned 64-bit.
U64_DIGITS = len(str(deals.UINT64_LIMIT - 1))

# How much of a bad token an error line quotes: a token may be megabytes long.
EXCERPT_CHARS = 40


class LayoutError(ValueError):
    """Input that is not a layout; the message is one line naming the problem."""


@dataclass(frozen=True)
class Layout:
    """The 13 piles, top card first (index 12 the centre), and the deal they came from if the
    input named it (the `random` strategy draws from the deal's seed and number)."""

    piles: tuple[tuple[int, ...], ...]
    order: str | None = None
    seed: int | None = None
    deal: int | None = None
    scheme: str | None = None


_CARD_OF_TEXT = {rules.card_text(card): card for card in range(N_CARDS)}

# A deck's card text: anything between spaces, commas and new lines (re's \s is the
# whitespace str.split splits at). Found one at a time, never all at once.
_DECK_TEXT = re.compile(r"[^\s,]+")


def shortened(text: str) -> str:
    """``text`` cut to EXCERPT_CHARS, an ellipsis marking the cut."""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def random_draw_problem(strategy: str, given: Layout, deal_seed, deal_number) -> str | None:
    """Why `--strategy random` (or one of the user's that reads `rand`) cannot play a layout
    as a sweep plays it, or None: its draw needs the deal's seed and number, and this deal
    scheme."""
    draws = "pick" if strategy == "random" else "rand"
    if deal_seed is None or deal_number is None:
        return (
            f"--strategy {strategy}: its {draws} is drawn from the deal's seed and "
            "number; give --seed S and the deal number, or a layout from `deal --json`, "
            "which names them"
        )
    if given.scheme not in (None, deals.SCHEME_VERSION):
        return (
            f"--strategy {strategy}: the layout names deal scheme {shortened(given.scheme)}, "
            f"and this version draws from scheme {deals.SCHEME_VERSION}"
        )
    return None


def excerpt(value: object) -> str:
    """A value from the input as an error line quotes it: a text's repr, anything else as
    JSON, shortened."""
    return shortened(repr(value) if isinstance(value, str) else json.dumps(value))


def card_of(text: object, where: str) -> int:
    """A card from its text (``7H``, ``TD``, ``KS``; ``10`` for the ten, either case)."""
    card = _CARD_OF_TEXT.get(text) if isinstance(text, str) else None
    if card is not None:  # as `deal --json` writes it
        return card
    if not isinstance(text, str):
        raise LayoutError(f"{where}: {excerpt(text)} is not a card text such as 7H, TD or KS")
    cleaned = text.strip().upper()
    if cleaned.startswith("10"):
        cleaned = "T" + cleaned[2:]
    try:
        return rules.parse_card(cleaned)
    except ValueError:
        raise LayoutError(
            f"{where}: {excerpt(text)} is not a card (a rank of {RANKS}, then a suit of {SUITS})"
        ) from None


def pile_where(pile: int) -> str:
    return "the centre" if pile == rules.CENTRE else f"hour {pile + 1}"


def _missing(cards: list[tuple[int, str]]) -> str:
    """The cards of the deck that ``cards`` (card, where) lacks, as text ('' for none)."""
    present = {card for card, _ in cards}
    return ", ".join(rules.card_text(c) for c in range(N_CARDS) if c not in present)


def _refuse_repeats(cards: list[tuple[int, str]], what: str, all_read: bool = True) -> None:
    """Refuse (card, where) pairs in which a card appears twice, naming both places and
    what is missing (not if ``cards`` are only the first of the input's: the rest may hold
    it)."""
    seen: dict[int, str] = {}
    for card, where in cards:
        if card in seen:
            missing = _missing(cards) if all_read else ""
            gap = f"; missing: {missing}" if missing else ""
            raise LayoutError(
                f"{what}: {rules.card_text(card)} appears twice ({seen[card]} and {where}){gap}"
            )
        seen[card] = where


def _check_every_card_once(cards: list[tuple[int, str]], what: str) -> None:
    """Refuse a set of (card, where) that is not each of the 52 cards exactly once."""
    _refuse_repeats(cards, what)
    missing = _missing(cards)
    if missing:
        raise LayoutError(f"{what}: missing {missing}")


def _unsigned(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < deals.UINT64_LIMIT:
        raise LayoutError(f"layout: {key} is {excerpt(value)}; expected an unsigned 64-bit integer")
    return value


def _from_object(record: dict, reverse: bool) -> Layout:
    if reverse:
        raise LayoutError("--reverse: applies to a deck of 52 cards, not to a layout's piles")
    unknown = [key for key in record if key not in LAYOUT_KEYS]
    if unknown:
        raise LayoutError(
            f"layout: unknown key {excerpt(unknown[0])}; a layout has {', '.join(LAYOUT_KEYS)}"
        )
    if "piles" not in record:
        raise LayoutError("layout: no 'piles' (13 lists of 4 cards, hours 1..12 then the centre)")
    piles = record["piles"]
    if not isinstance(piles, list) or len(piles) != N_PILES:
        size = f"{len(piles)} piles" if isinstance(piles, list) else excerpt(piles)
        raise LayoutError(
            f"layout: piles is {size}; expected {N_PILES} lists (hours 1..12, then the centre)"
        )
    for pile, texts in enumerate(piles):
        if not isinstance(texts, list) or len(texts) != PILE_SIZE:
            size = f"{len(texts)} cards" if isinstance(texts, list) else excerpt(texts)
            raise LayoutError(
                f"layout: {pile_where(pile)} holds {size}; every pile holds {PILE_SIZE}"
            )
    values = [
        _CARD_OF_TEXT.get(text) if isinstance(text, str) else None
        for texts in piles
        for text in texts
    ]
    if None in values or len(set(values)) != N_CARDS:
        # Not 52 cards as `deal --json` writes them: read each text, and name what is wrong.
        cards = []
        for pile, texts in enumerate(piles):
            for k, text in enumerate(texts):
                where = f"{pile_where(pile)}, card {k + 1} from the top"
                cards.append((card_of(text, f"layout: {where}"), where))
        _check_every_card_once(cards, "layout")
        values = [card for card, _ in cards]
    order = record.get("order")
    if order is not None and order not in rules.ORDERS:
        raise LayoutError(
            f"layout: order {excerpt(order)}; expected one of {', '.join(rules.ORDERS)}"
        )
    seed = _unsigned(record["seed"], "seed") if record.get("seed") is not None else None
    deal = _unsigned(record["deal"], "deal") if record.get("deal") is not None else None
    scheme = record.get("scheme")
    if scheme is not None and not isinstance(scheme, str):
        raise LayoutError(f"layout: scheme is {excerpt(scheme)}; expected a deal scheme's name")
    piles_of = tuple(tuple(values[p * PILE_SIZE : (p + 1) * PILE_SIZE]) for p in range(N_PILES))
    return Layout(piles_of, order, seed, deal, scheme)


def _from_deck(texts: Iterable[object], order: str, reverse: bool) -> Layout:
    # There are 52 cards, so the first 53 texts of a longer deck already hold a text that is
    # no card or a card twice: no more are read, and a huge input costs no more than a deck.
    first = list(itertools.islice(texts, N_CARDS + 2))
    all_read = len(first) <= N_CARDS + 1
    cards = [
        (card_of(text, f"deck: card {position + 1}"), f"card {position + 1}")
        for position, text in enumerate(first[: N_CARDS + 1])
    ]
    if len(cards) != N_CARDS:
        _refuse_repeats(cards, "deck", all_read)
        missing = _missing(cards)
        gap = f" (missing: {missing})" if missing else ""
        raise LayoutError(f"deck: {len(cards)} cards; a deck is {N_CARDS}{gap}")
    _check_every_card_once(cards, "deck")
    deck = [card for card, _ in cards]
    if reverse:
        deck.reverse()
    piles = rules.lay_out(deck, order)
    return Layout(tuple(tuple(pile) for pile in piles), order)


def parse(text: str, order: str = "round-robin", reverse: bool = False) -> list[Layout]:
    """The layouts ``text`` holds (see the module's docstring), in order; `LayoutError` if it
    holds anything else. A deck, a JSON array or one JSON object (on any number of lines) is
    one layout; JSON objects one per line are one layout each.

    ``order`` lays out a deck (a JSON layout's own ``order``, if any, labels it instead);
    ``reverse`` reads a deck's texts last to first.
    """
    if order not in rules.ORDERS:
        raise LayoutError(f"order: {order!r}; expected one of {', '.join(rules.ORDERS)}")
    stripped = text.strip()
    if not stripped:
        raise LayoutError(
            "layout: empty; expected a layout as `deal --json` prints it, or 52 cards"
        )
    if stripped[0] not in "{[":
        texts = (match.group() for match in _DECK_TEXT.finditer(stripped))
        return [_from_deck(texts, order, reverse)]
    try:
        value = _json_value(text)  # the text itself: an error's line is the file's line
    except (json.JSONDecodeError, LayoutError) as error:
        # Not one JSON value, or its first object is no layout: layouts one per line are read
        # line by line, an error named at its line.
        numbered = list(_numbered(text))
        if len(numbered) > 1 and stripped[0] == "{" and _is_json(numbered[0][1]):
            return [_one_line(line, number, reverse) for number, line in numbered]
        if isinstance(error, LayoutError):
            raise
        raise LayoutError(f"layout: not valid JSON: {error}") from None
    except RecursionError:
        raise LayoutError("layout: not valid JSON: nested too deeply to be a layout") from None
    return [_from_json(value, order, reverse)]


def _json_value(text: str):
    """The JSON value of ``text``. A key twice in one object is refused (json would keep the
    last silently), and so is an integer longer than any a layout holds (Python would refuse
    one of over 4,300 digits with an error of its own)."""
    return json.loads(text, object_pairs_hook=_object_of_unique_keys, parse_int=_layout_int)


def _object_of_unique_keys(pairs: list[tuple[str, object]]) -> dict:
    record = dict(pairs)
    if len(record) < len(pairs):
        counts = Counter(key for key, _ in pairs)
        twice = next(key for key, count in counts.items() if count > 1)
        raise LayoutError(
            f"layout: key {excerpt(twice)} appears twice in one object; each key appears once"
        )
    return record


def _layout_int(digits: str) -> int:
    length = len(digits.lstrip("-"))
    if length > U64_DIGITS:
        raise LayoutError(
            f"layout: an integer of {length} digits ({shortened(digits)}); a layout's integers "
            f"(seed, deal) are unsigned 64-bit, at most {U64_DIGITS} digits"
        )
    return int(digits)


def _is_json(line: str) -> bool:
    """Whether one line is JSON on its own: the first of layouts one per line, not the opening
    of one layout printed over many."""
    try:
        _json_value(line)
    except LayoutError:
        return True  # JSON, though not a layout: read on its own, its error names its line
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _numbered(text: str):
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line


def _one_line(line: str, number: int, reverse: bool) -> Layout:
    try:
        return _layout_of_line(line, reverse)
    except LayoutError as error:
        raise LayoutError(str(error).replace("layout:", f"layout line {number}:", 1)) from None


def _layout_of_line(line: str, reverse: bool) -> Layout:
    try:
        value = _json_value(line)
    except json.JSONDecodeError as error:
        raise LayoutError(f"layout: not valid JSON: {error}") from None
    except RecursionError:
        raise LayoutError("layout: not valid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise LayoutError('layout: not a layout object ({"piles": ...})')
    return _from_object(value, reverse)


def _from_json(value, order: str, reverse: bool) -> Layout:
    if isinstance(value, dict):
        return _from_object(value, reverse)
    if isinstance(value, list) and not any(isinstance(item, list) for item in value):
        return _from_deck(value, order, reverse)
    raise LayoutError(
        'layout: a JSON value that is neither a layout object ({"piles": ...}) nor a list '
        "of 52 card texts"
    )
