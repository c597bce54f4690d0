"""`clocksweep deal --layout`: layouts a user brings (a file, or standard input), checked,
then each drawn and replayed under a cell."""

from __future__ import annotations

import json
import sys

import click

from pipeline import echoed
from pipeline.commands.inputs import (
    InputError,
    make_cell,
    parse_range,
    parse_u64,
    played,
    strategy_fields,
)
from pipeline.engine import layout_input


def read_text(path: str, name: str) -> str:
    """A file's text, or standard input's for ``-``, as UTF-8 (a byte-order mark dropped);
    one line if it cannot be read or holds more than layout_input.MAX_INPUT_BYTES."""
    source = source_named(path)
    limit = layout_input.MAX_INPUT_BYTES
    try:
        # One byte past the limit tells a larger input, however long, from one at the limit.
        if path == "-":
            data = standard_input(name).read(limit + 1)
        else:
            with open(path, "rb") as file:
                data = file.read(limit + 1)
    except OSError as error:
        raise InputError(f"{name}: {source}: {error.strerror or error}") from None
    if len(data) > limit:
        raise InputError(
            f"{name}: {source}: too large; {name} reads at most {layout_input.MAX_INPUT_TEXT}"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{name}: {source}: not UTF-8 text (byte {error.start}: {error.reason}); "
            "expected a layout as `deal --json` prints it, or 52 cards"
        ) from None


def source_named(path: str) -> str:
    return "standard input" if path == "-" else path


def standard_input(name: str):
    """Standard input's bytes; one line if the process has none (started with it closed,
    Python's sys.stdin is None)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"{name}: standard input: closed; pipe the input in, or give a FILE")
    return stream


def deal_from_layout(
    path, seed_text, deal_range, order, reverse, variant, strategy, finale, depth, as_json
):
    """`deal --layout`: check the layouts a user brings, then draw each and replay it under a
    cell. Every layout is checked before anything is printed."""
    from pipeline.engine import display, reference

    try:
        layouts = layout_input.parse(read_text(path, "--layout"), order, reverse)
    except layout_input.LayoutError as error:
        raise InputError(str(error)) from None
    seed, number = deal_named_beside_layouts(seed_text, deal_range, len(layouts))
    strategy_cell = strategy_fields(strategy)
    plays = []
    for at, given in enumerate(layouts, 1):
        where = f"layout {at}: " if len(layouts) > 1 else ""
        if seed is not None and given.seed not in (None, seed):
            raise InputError(f"--seed: {seed}, but the layout names seed {given.seed}")
        if number is not None and given.deal not in (None, number):
            raise InputError(f"RANGE: deal {number}, but the layout names deal {given.deal}")
        deal_seed = given.seed if seed is None else seed
        deal_number = given.deal if number is None else number
        cell = make_cell(
            variant=variant or "standard",
            finale=finale,
            order=given.order or order,
            depth=depth,
            **strategy_cell,
        )
        if cell.strategy == "random" or (cell.custom and "rand" in cell.custom.sees):
            problem = layout_input.random_draw_problem(cell.strategy, given, deal_seed, deal_number)
            if problem:
                raise InputError(f"{where}{problem}")
        plays.append((given, cell, deal_seed, deal_number))
    # Every layout played before anything is printed: a strategy of the user's may refuse one.
    results = []
    for given, cell, deal_seed, deal_number in plays:
        table = reference.Table(down=[list(pile) for pile in given.piles])
        result = played(reference.play, deal_seed or 0, deal_number or 0, cell, table)
        results.append((table, result))
    for (given, cell, deal_seed, deal_number), (table, result) in zip(plays, results):
        if as_json:
            click.echo(json.dumps(result.record.row(cell, deal_seed, deal_number)))
            continue
        named = (
            f"seed {deal_seed}, deal {deal_number}"
            if deal_seed is not None and deal_number is not None
            else "a deal"
        )
        click.echo(f"{named} from {source_named(path)}, order {cell.order}")
        piles = [list(pile) for pile in given.piles]
        click.echo(display.clock_face(piles, finale_up=finale == "up"))
        click.echo(display.replay_text(cell, table, result))


def deal_named_beside_layouts(seed_text, deal_range, count: int) -> tuple[int | None, int | None]:
    """The seed and deal number given beside `--layout` (None where not given), refused unless
    they name one deal of an input of one layout."""
    seed = number = None
    if seed_text is not None:
        seed = parse_u64("--seed", seed_text)
    if deal_range is not None:
        numbers = parse_range(deal_range)
        if len(numbers) != 1:
            raise InputError(f"RANGE: {echoed(deal_range)}; a layout is one deal number")
        number = numbers[0]
    if (seed is not None or number is not None) and count > 1:
        raise InputError(f"--seed, RANGE: name one deal, and the input holds {count} layouts")
    return seed, number
