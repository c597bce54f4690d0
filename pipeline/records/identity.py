"""What decides a sweep's rows, and its hash: the identity every shard file, the manifest and
run.json carry, so that results of two sweeps are never mixed and an edited record is caught."""

from __future__ import annotations

import hashlib
import json

from pipeline.engine import deals
from pipeline.engine.rules import Cell


def cell_record(cell: Cell) -> dict:
    return {
        "variant": cell.variant,
        "strategy": cell.strategy,
        "finale": cell.finale,
        "order": cell.order,
        "depth": cell.depth,
    }


def result_schema_version(record: str) -> str:
    """The version of what a record mode writes: the per-deal schema, or the summary tables."""
    if record == "deals":
        from pipeline.records import schema

        return schema.RESULT_SCHEMA_VERSION
    from pipeline.records import summary

    return summary.SUMMARY_SCHEMA_VERSION


def sweep_identity(
    *, seed: int, first: int, deals_count: int, shard_size: int, record: str, cells, stop=None
) -> dict:
    """What decides the results, and nothing else (not where they go, nor who plays them).
    A stop rule (its JSON) decides how many deals are kept; a sweep without one has none."""
    return ({"stop": stop} if stop is not None else {}) | {
        "seed": seed,
        "first": first,
        "deals": deals_count,
        "shard_size": shard_size,
        "record": record,
        "cells": [cell_record(cell) for cell in cells],
        "deal_scheme": deals.SCHEME_VERSION,
        "result_schema": result_schema_version(record),
    }


def identity_hash(identity: dict) -> str:
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
