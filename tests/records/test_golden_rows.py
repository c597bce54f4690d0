"""A fixed sweep's rows held to digests committed beside this file (golden_rows.json), so a
change of the engine, the records or the summary that alters one byte of what a sweep
records fails here, whatever else it keeps: the guard of a refactor that must leave results
as they were.

The sweep is every built-in cell (the full grid, 96 cells) and a strategy of the user's that
reads ``rand``, played on threads, once per record mode; each table's committed rows are
read back by Polars and digested column by column (labels as text, floats by their bits),
sorted, so that the digest is of what the rows say, not of how Parquet laid them out.

A change of the results on purpose comes with a new deal scheme or result schema version
(docs/results.md), and new digests: run this file as a script to print them,
``python3 tests/records/test_golden_rows.py``, and commit them with the change.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import polars as pl
import pytest

HERE = Path(__file__).resolve().parent
GOLDEN_PATH = HERE / "golden_rows.json"
CUSTOM = HERE.parent / "engine" / "builtins_as_functions.py"
MODES = ("deals", "summary")

CONFIG = """
name = "golden"
seed = 20261207
deals = 3000
shard_size = 1000
record = "{record}"
output = "{out}"
[run]
executor = "threads"
[grid]
variant = ["standard", "watch", "one_swap", "exchange", "play_out"]
strategy = ["clockwise", "random", "most", "fewest", "informed", "oracle", "{custom}:random_mine"]
finale = ["down", "up"]
order = ["round-robin", "packets"]
depth = ["bottom", "top"]
"""


def column_text(series: pl.Series) -> pl.Series:
    """A column as text that says exactly what it holds: a float by its 64 bits (no
    printing rounds it), anything else as Polars writes it; null as empty."""
    if series.dtype.is_float():
        bits = series.cast(pl.Float64).to_numpy().view("<u8")
        series = pl.Series(series.name, bits).scatter(series.is_null().arg_true(), None)
    elif series.dtype == pl.Binary:
        series = series.bin.encode("hex")
    elif isinstance(series.dtype, pl.List):
        return pl.Series(series.name, [json.dumps(v) for v in series.to_list()])
    return series.cast(pl.String).fill_null("")


def rows_digest(frame: pl.DataFrame) -> str:
    """sha256 of a table's rows (their order aside) with its columns' names and types."""
    text = pl.DataFrame([column_text(frame[name]) for name in frame.columns])
    lines = sorted(text.select(pl.concat_str(pl.all(), separator="\x1f")).to_series().to_list())
    head = "\x1f".join(f"{name}:{dtype}" for name, dtype in frame.schema.items())
    return hashlib.sha256("\n".join([head, *lines]).encode()).hexdigest()


def sweep_digests(directory: Path, record: str) -> dict[str, str]:
    """Run the fixed sweep in ``record`` mode into ``directory``: each table's digest."""
    import pipeline.api as clocksweep_api
    from pipeline.store import layout

    out = directory / record
    config = CONFIG.format(record=record, out=out, custom=CUSTOM)
    clocksweep_api.run(clocksweep_api.load_config(_written(directory, record, config)))
    results = clocksweep_api.open_results(out)
    digests = {}
    for table in layout.table_names():
        frame = results.rows(table).collect()
        if frame.height:
            digests[table] = rows_digest(frame)
    return digests


def _written(directory: Path, record: str, text: str) -> Path:
    path = directory / f"{record}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("record", MODES)
def test_a_fixed_sweep_records_the_rows_it_always_has(tmp_path, record):
    golden = json.loads(GOLDEN_PATH.read_text())
    assert sweep_digests(tmp_path, record) == golden["digests"][record]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        digests = {mode: sweep_digests(Path(scratch), mode) for mode in MODES}
    about = (
        "sha256 of each table's rows of the fixed sweep of tests/records/test_golden_rows.py, "
        "by record mode; printed by running that file as a script (see its docstring)"
    )
    json.dump({"about": about, "digests": digests}, sys.stdout, indent=2)
    print()
