"""Results directories: where shard files live and how they are written whole, the manifest
and run records, and the checks that `validate`, a resumed run and the report share.
Imports the engine and the records."""

# The implementations of `location.Location`, each registered by its class (see `KINDS`).
from pipeline.store import local, object_store  # noqa: E402, F401
