"""Sweeps: a config becomes a plan of shards, played by an executor (Ray's tasks, or threads
of this process) and committed to a store. Imports the engine, the inference layer (a stop
rule decides claims on confidence sequences), the records and the store;
never the report, which never imports it."""
