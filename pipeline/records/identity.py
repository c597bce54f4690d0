"""What decides a sweep's rows, and its hash: the identity every shard file, the manifest and
run.json carry, so that results of two sweeps are never mixed and an edited record is caught.
The number of deals is not in it: the same sweep with more deals is the same sweep, grown."""

from __future__ import annotations

import hashlib
import json

from pipeline.engine import deals, rules
from pipeline.engine.rules import Cell


def cell_record(cell: Cell) -> dict:
    """A cell as the identity and run.json list it. A strategy of the user's adds what it
    sees and its digests (`custom_record`: a changed function is another cell); the built-in
    cells' records, and so their hashes, are as they were before there were any."""
    record = {
        "variant": cell.variant,
        "strategy": cell.strategy,
        "finale": cell.finale,
        "order": cell.order,
        "depth": cell.depth,
    }
    if cell.custom is not None:
        record["custom"] = custom_record(cell.custom)
    return record


def custom_record(strategy: rules.Custom) -> dict:
    """What of a strategy of the user's decides its cells' rows: what it sees, its source's
    digest, and the digest of what it reaches outside its file where it reaches anything
    (`reach`; absent otherwise, so that the cells of one that reaches nothing keep the
    identity they had before helpers were followed)."""
    record = {"sees": list(strategy.sees), "digest": strategy.digest}
    if strategy.reaches:
        record["reaches"] = strategy.reaches
    return record


def result_schema_version(record: str) -> str:
    """The version of what a record mode writes: the per-deal schema, or the summary tables."""
    if record == "deals":
        from pipeline.records import schema

        return schema.RESULT_SCHEMA_VERSION
    from pipeline.records import summary

    return summary.SUMMARY_SCHEMA_VERSION


def sweep_identity(*, seed: int, first: int, shard_size: int, record: str, cells) -> dict:
    """What decides the results' rows, and nothing else: not how many deals are played (a
    sweep grows by more deals, or by a stop rule that needs more, without replaying what is
    done), nor where the rows go, nor who plays them. The shard size is in it: it names the
    files and bounds the shards a stop rule is checked at."""
    return {
        "seed": seed,
        "first": first,
        "shard_size": shard_size,
        "record": record,
        "cells": [cell_record(cell) for cell in cells],
        "deal_scheme": deals.SCHEME_VERSION,
        "result_schema": result_schema_version(record),
    }


def identity_hash(identity: dict) -> str:
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def group_identity(identity: dict, cells, grows: str | None) -> dict:
    """The identity of a cell group of a sweep (`store.groups`): the sweep's, with the group's
    cells, and for a group added by growth the hash of the group before it, whose cells its
    shards were paired with (so that its files are never read beside other groups')."""
    grouped = {**identity, "cells": [cell_record(cell) for cell in cells]}
    return grouped if grows is None else {**grouped, "grows": grows}


def custom_records(customs) -> dict:
    """Strategies of the user's as run.json's config records them (``custom``): by name, how
    the config named each, what it sees and its source's digest (the source itself under
    ``custom_source``, `custom_sources`), so that a reader of the results (the report,
    `validate`) knows each without the user's file."""
    return {
        strategy.name: {"spec": strategy.spec, **custom_record(strategy)} for strategy in customs
    }


def custom_sources(customs) -> dict:
    """The sources of strategies of the user's, by digest: a file that holds several once."""
    return {strategy.digest: strategy.source for strategy in customs}


def customs_of(config: dict) -> tuple[rules.Custom, ...]:
    """The strategies of the user's a recorded config names (``custom``, ``custom_source``);
    ValueError (KeyError, TypeError) where the record is not one, or a source is not its
    digest's."""
    sources = config.get("custom_source") or {}
    customs = []
    for name, recorded in (config.get("custom") or {}).items():
        source = sources[recorded["digest"]]
        if hashlib.sha256(source.encode()).hexdigest() != recorded["digest"]:
            raise ValueError(f"strategy {name!r}: its source is not the one its digest names")
        customs.append(
            rules.Custom(
                name,
                tuple(recorded["sees"]),
                recorded["digest"],
                recorded.get("reaches", ""),
                spec=recorded["spec"],
                source=source,
            )
        )
    return tuple(customs)
