"""Results directories: where shard files live and how they are written whole, the manifest
and run records, and the checks that `validate`, a resumed run and the report share.
Imports the engine and the records."""
