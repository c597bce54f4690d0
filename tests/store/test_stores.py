"""The store interface without a sweep: which implementation a place is, and the local
store's commit protocol on the real filesystem (staged, put in place, taken back, discarded).
The object store's side of it runs on the S3 server in test_object_store.py."""

from __future__ import annotations

import pickle

import pytest

from pipeline.store.local import LocalStore
from pipeline.store.location import Location
from pipeline.store.object_store import ObjectStore, Unheld


@pytest.mark.parametrize("scheme", ["", "file://"])
def test_a_path_or_a_file_uri_is_a_local_store(tmp_path, scheme):
    where = f"{scheme}{tmp_path}/results"
    location = Location(where)
    assert isinstance(location, LocalStore) and not location.may_stall
    assert location.address == location.root == f"{tmp_path}/results"
    assert location.local_path("report") == f"{tmp_path}/results/report"
    travelled = pickle.loads(pickle.dumps(location))  # as a Ray worker gets it
    assert isinstance(travelled, LocalStore) and travelled.root == location.root


def test_a_uri_is_an_object_store_and_keeps_its_query():
    where = "s3://bucket/sweep?endpoint_override=127.0.0.1:9&scheme=http"
    location = Location(where)
    assert isinstance(location, ObjectStore) and location.may_stall
    assert location.address == where and location.local_path("report") is None
    assert location.child("cells-1").where == (
        "s3://bucket/sweep/cells-1?endpoint_override=127.0.0.1:9&scheme=http"
    )
    assert pickle.loads(pickle.dumps(location)).where == where


def test_an_object_store_without_a_lease_holds_nothing(tmp_path):
    """Only S3 has a lease; another store's hold checks, claims and releases nothing."""
    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    (tmp_path / "results").mkdir()  # keys need no directory; files on this one do
    location = Location("results", SubTreeFileSystem(str(tmp_path), LocalFileSystem()))
    assert isinstance(location, ObjectStore)
    hold = location.lock()
    assert isinstance(hold, Unheld) and location.hold is hold
    hold.check()
    location.write_json("run.json", {"a": 1})
    assert location.read_json("run.json") == {"a": 1}
    hold.release()


def staged_file(location: LocalStore, relative: str, data: bytes) -> tuple[str, str]:
    staged, stream = location.stage(relative, relative.split("/")[1])
    with stream:
        stream.write(data)
    return staged, relative


def test_staged_files_are_put_in_place_and_taken_back(tmp_path):
    location = Location(str(tmp_path / "r"))
    pairs = [
        staged_file(location, "shards/deals/shard-000000_deals-0-9.parquet", b"deals"),
        staged_file(location, "shards/facts/shard-000000_deals-0-9.parquet", b"facts"),
    ]
    for staged, final in pairs:
        assert staged.startswith("shards/.partial/") and location.kind(final) == "missing"
    location.put_in_place(pairs)
    assert [location.read_bytes(final) for _, final in pairs] == [b"deals", b"facts"]
    assert all(location.kind(staged) == "missing" for staged, _ in pairs)

    location.take_back(pairs)  # the manifest that would list them could not be written
    assert [location.read_bytes(staged) for staged, _ in pairs] == [b"deals", b"facts"]
    assert all(location.kind(final) == "missing" for _, final in pairs)


def test_a_file_that_cannot_be_put_in_place_takes_the_others_back(tmp_path):
    location = Location(str(tmp_path / "r"))
    pairs = [
        staged_file(location, "shards/deals/shard-000000_deals-0-9.parquet", b"deals"),
        staged_file(location, "shards/facts/shard-000000_deals-0-9.parquet", b"facts"),
    ]
    (tmp_path / "r" / "shards" / "facts").write_text("a file where a directory must be")
    with pytest.raises(OSError):
        location.put_in_place(pairs)
    # Not committed: nothing of the shard is in place, and what was staged is still there.
    assert location.kind(pairs[0][1]) == "missing"
    assert [location.read_bytes(staged) for staged, _ in pairs] == [b"deals", b"facts"]


def test_a_discarded_file_is_gone(tmp_path):
    location = Location(str(tmp_path / "r"))
    staged, final = staged_file(location, "shards/deals/shard-000000_deals-0-9.parquet", b"x")
    location.discard(staged, final)
    assert location.kind(staged) == "missing" and location.kind(final) == "missing"
    location.prune_partial()
    assert location.kind("shards/.partial") == "missing"
