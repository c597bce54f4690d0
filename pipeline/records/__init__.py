"""What a sweep records: the per-deal schema, the summary and facts tables, the per-deal
Parquet encoder. Imports the engine only."""
