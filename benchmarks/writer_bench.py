"""Writer benchmark: the per-deal encoder (`dealfile`) against pyarrow's Parquet writer.

    python benchmarks/writer_bench.py            # standard play, and the cells of quick.toml

Both write the same rows, one batch of the sweep's size (half a million rows), to memory: the
encoder from the kernel's arrays, pyarrow's writer from `schema.deal_table`'s Arrow table (its
building is not timed) with the options the sweep gave it before (`files.parquet_options`).
Interleaved rounds, median ns a row, and bytes a row of each file; the kernel's ns a deal on
the same results, for scale. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=500_000, help="rows a batch (default 500000)")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()

    import pyarrow.parquet as pq

    from pipeline.engine import kernel, rules
    from pipeline.engine.rules import Cell
    from pipeline.records import dealfile, schema
    from pipeline.store import files
    from pipeline.sweep import config

    grids = {
        "standard": [Cell()],
        "quick.toml": list(config.load(str(ROOT / "configs" / "quick.toml")).cells),
    }
    metadata = files.file_metadata({"bench": True})
    for name, cells in grids.items():
        count = max(1, args.rows // len(cells))
        rows = count * len(cells)
        kernel.play(1, 0, 100, cells)  # numba's cache loaded before timing
        began = time.perf_counter()
        results = kernel.play(1, 0, count, cells)
        kernel_ns = (time.perf_counter() - began) / count * 1e9
        table = schema.deal_table(1, 0, results, cells)
        # One chunk, one dictionary a label (deal_table builds one a cell), as the sweep had it.
        table = table.cast(schema.DEAL_WRITE_SCHEMA).unify_dictionaries().combine_chunks()
        table = table.replace_schema_metadata(metadata)

        def encoder() -> int:
            sink = io.BytesIO()
            file = dealfile.DealFileEncoder(sink, schema.DEAL_WRITE_SCHEMA, rules.AXES, metadata)
            file.write_batch(1, 0, results, cells)
            file.close()
            return sink.tell()

        def pyarrow_writer() -> int:
            sink = io.BytesIO()
            with pq.ParquetWriter(
                sink, table.schema, **files.parquet_options(table.schema)
            ) as writer:
                writer.write_table(table, row_group_size=files.ROWS_PER_GROUP)
            return sink.tell()

        writers = {"dealfile": encoder, "pyarrow": pyarrow_writer}
        seconds = {key: [] for key in writers}
        size = {key: write() for key, write in writers.items()}  # and warm up (numba's cache)
        for _ in range(args.rounds):
            for key, write in writers.items():
                began = time.perf_counter()
                write()
                seconds[key].append(time.perf_counter() - began)
        ns = {key: statistics.median(values) / rows * 1e9 for key, values in seconds.items()}
        print(
            f"{name} ({len(cells)} cells, {rows:,} rows; kernel {kernel_ns:.0f} ns a deal, "
            f"{kernel_ns / len(cells):.0f} a row):"
        )
        for key in writers:
            print(f"  {key:9s} {ns[key]:6.1f} ns a row  {size[key] / rows:.3f} bytes a row")
        print(f"  pyarrow / dealfile: {ns['pyarrow'] / ns['dealfile']:.1f}")


if __name__ == "__main__":
    main()
