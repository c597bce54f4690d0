"""Per-deal rows as the tests compare them: label columns as strings, sorted by cell and deal,
whether read from a results directory or made by the kernel for a config."""

from __future__ import annotations

import tomllib

import polars as pl

from pipeline.engine import kernel
from pipeline.records import schema
from pipeline.sweep import config as sweep_config

SORT_KEY = ["order", "variant", "strategy", "finale", "depth", "deal"]


def as_strings(frame: pl.DataFrame) -> pl.DataFrame:
    labels = [c for c in schema.LABEL_COLUMNS if c in frame.columns]
    return frame.with_columns(pl.col(labels).cast(pl.String))


def sorted_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return as_strings(frame).sort(SORT_KEY, nulls_last=True)


def read_rows(source) -> pl.DataFrame:
    """The rows of Parquet files (a directory, or a list of paths), read by Polars."""
    return sorted_rows(pl.scan_parquet(source).collect())


def kernel_rows(config_text: str, seed: int | None = None) -> pl.DataFrame:
    """The kernel's rows for a config (TOML text; ``seed`` overrides its seed), converted by
    the schema's own function."""
    raw = tomllib.loads(config_text)
    cfg = sweep_config.from_dict(
        {**raw, **({"seed": seed} if seed is not None else {})}, source="test"
    )
    cells = list(cfg.cells)
    results = kernel.play(cfg.seed, cfg.first, cfg.deals, cells)
    return sorted_rows(pl.from_arrow(schema.deal_table(cfg.seed, cfg.first, results, cells)))


def manifest_entries(out) -> list[dict]:
    """Every shard entry a local results directory's manifest lists, its own and its pages'
    (read as JSON, as a user's script would)."""
    import json
    from pathlib import Path

    out = Path(out)
    manifest = json.loads((out / "manifest.json").read_text())
    entries = list(manifest["shards"])
    for page in manifest.get("pages", []):
        entries += json.loads((out / page["path"]).read_text())["shards"]
    return sorted(entries, key=lambda entry: entry["index"])
