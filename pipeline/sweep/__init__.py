"""Sweeps: a config becomes a plan of shards, played by an executor (Ray's tasks, or threads
of this process) and committed to a store.
Imports the engine, the records and the store, and the report's claims and statistics (a
stop rule decides claims by the report's own rules); the report never imports the sweep."""
