"""Cell groups: how a sweep grows by cells without playing again what it has played.

A sweep's cells are played in groups. The first group is the cells its first run played, in
the results directory itself; each later run whose config adds cells (a strategy, a variant,
a finale) adds a group of those cells, in a directory of its own (``cells-<k>/``, laid out as
the results directory is: its own manifest, pages and shard files). A group's shard plays its
cells over the same deals as every other group's, and pairs them with the cells before it
from their committed wins (`records.wins`): so a shard of the sweep is its shards of every
group, read together, and every comparison stays paired.

A group's identity is the sweep's with its own cells and, past the first, the first group's
hash: its files, manifest and pages carry that hash. The sweep's cell list is its groups'
cells in order; run.json records the groups (``cell_groups``: how many cells each has, and its
hash) once there is more than one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.records import identity
from pipeline.store.entries import RunRecord
from pipeline.store.layout import START_OVER, ResultsError, group_directory
from pipeline.store.location import Location


@dataclass(frozen=True)
class CellGroup:
    index: int
    cells: tuple[Cell, ...]
    offset: int  # the index of its first cell in the sweep's cell list
    config_hash: str

    @property
    def directory(self) -> str:
        return group_directory(self.index)

    def location(self, top: Location) -> Location:
        return top.child(self.directory) if self.index else top

    def path(self, relative: str) -> str:
        """A path relative to the group's directory, made relative to the results directory."""
        return f"{self.directory}/{relative}" if self.index else relative

    def to_json(self) -> dict:
        return {"cells": len(self.cells), "config_hash": self.config_hash}


def cells_of(run: RunRecord) -> list[Cell]:
    """run.json's cells (a strategy of the user's from its recorded source); ResultsError if
    they are not cells of the rules."""
    try:
        customs = {strategy.name: strategy for strategy in identity.customs_of(run.config)}
        return [
            Cell(
                c["variant"],
                c.get("strategy"),
                c["finale"],
                c["order"],
                c.get("depth"),
                _recorded_custom(c, customs),
            )
            for c in run.cells
        ]
    except (KeyError, TypeError, ValueError) as error:
        raise ResultsError(f"run.json: its cells are not cells of the rules ({error})") from None


def _recorded_custom(cell: dict, customs: dict) -> rules.Custom | None:
    """A recorded cell's strategy of the user's: the one its config records, by name, if it
    is the one the cell names (what it sees, its digest)."""
    if "custom" not in cell:
        return None
    found = customs.get(cell["strategy"])
    if found is None or cell["custom"] != identity.custom_record(found):
        raise ValueError(f"strategy {cell['strategy']!r}: not the one run.json's config records")
    return found


def recorded_groups(run: RunRecord) -> list[CellGroup]:
    """The groups run.json records (its cells, cut by ``cell_groups``): one group of every
    cell, of its config hash, while it has no more."""
    cells = cells_of(run)
    listed = run.cell_groups or [{"cells": len(cells), "config_hash": run.config_hash}]
    groups, offset = [], 0
    for index, group in enumerate(listed):
        count = group["cells"]
        groups.append(
            CellGroup(index, tuple(cells[offset : offset + count]), offset, group["config_hash"])
        )
        offset += count
    return groups


def first_group(sweep_identity: dict, cells) -> CellGroup:
    return CellGroup(0, tuple(cells), 0, identity.identity_hash(sweep_identity))


def grown_groups(
    sweep_identity: dict, cells, recorded: list[CellGroup], where: str
) -> list[CellGroup]:
    """The groups a config of ``cells`` (its identity ``sweep_identity``) plays into a results
    directory whose run.json records ``recorded``: those, and a new group of the cells they
    lack. ResultsError if it is another sweep (another seed, deal scheme, shard size or record
    mode: its first group's hash differs), or lacks a cell the sweep has played."""
    first = recorded[0]
    again = identity.identity_hash(identity.group_identity(sweep_identity, first.cells, None))
    if again != first.config_hash:
        theirs = identity.identity_hash(sweep_identity)
        raise ResultsError(
            f"output: {where} holds results of another config (hash "
            f"{first.config_hash[:12]}, this one {theirs[:12]}); "
            f"use {START_OVER} to replace them, or choose another output"
        )
    played = [cell for group in recorded for cell in group.cells]
    _refuse_changed_strategies(played, cells, where)
    wanted = set(cells)
    lost = [cell for cell in played if cell not in wanted]
    if lost:
        raise ResultsError(
            f"grid: the sweep in {where} has played {lost[0].label}, which this config's grid "
            f"does not have{f' (nor {len(lost) - 1} more)' if len(lost) > 1 else ''}; a sweep "
            f"grows by cells, it does not lose any: add it back, or use {START_OVER} to start over"
        )
    new = [cell for cell in cells if cell not in set(played)]
    if not new:
        return recorded
    grown = identity.group_identity(sweep_identity, new, recorded[-1].config_hash)
    return recorded + [
        CellGroup(len(recorded), tuple(new), len(played), identity.identity_hash(grown))
    ]


def _refuse_changed_strategies(played, cells, where: str) -> None:
    """ResultsError if a strategy of the user's the sweep played has changed since (its
    source's digest, or what it sees): its rows are never mixed with the new function's."""
    then = {cell.custom.name: cell.custom for cell in played if cell.custom is not None}
    for cell in cells:
        before = then.get(cell.strategy) if cell.custom is not None else None
        if before is not None and before != cell.custom:
            raise ResultsError(
                f"grid.strategy: {cell.custom.spec or cell.strategy!r} is not the function "
                f"the sweep in {where} played as {cell.strategy!r} ({_what_changed(before, cell.custom)}); "
                f"restore it, rename the function to add it as a new strategy, or use {START_OVER} "
                "to start over"
            )


def _what_changed(before: rules.Custom, now: rules.Custom) -> str:
    if before.digest != now.digest:
        return f"its source's digest {before.digest[:12]}, now {now.digest[:12]}"
    if before.reaches != now.reaches:
        return (
            f"the helpers and values it reads from other files: digest "
            f"{before.reaches[:12] or 'none'}, now {now.reaches[:12] or 'none'}"
        )
    return f"it saw {', '.join(before.sees)}, now {', '.join(now.sees)}"


def sweep_cells(groups: list[CellGroup]) -> list[Cell]:
    return [cell for group in groups for cell in group.cells]
