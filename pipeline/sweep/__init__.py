"""Sweeps: a config becomes a plan of shards, played as Ray tasks and committed to a store.
Imports the engine, the inference layer (a stop rule decides the claims' declarations on
confidence sequences), the records and the store; never the report, which never imports it."""
