"""Sweeps: a config becomes a plan of shards, played as Ray tasks and committed to a store.
Imports the engine, the records and the store."""
