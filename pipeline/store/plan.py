"""The shard plan: a sweep's deals as consecutive ranges, one Ray task and one file per table
each. A range, not a list: a plan of 2**64 shards costs what a plan of one does."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.layout import SHARDS_DIR


@dataclass(frozen=True)
class Shard:
    """A shard of a sweep: deals ``first`` .. ``first + count - 1``, shard number ``index``."""

    index: int
    first: int
    count: int

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    @property
    def stem(self) -> str:
        return f"shard-{self.index:06d}_deals-{self.first}-{self.last}"

    def path(self, table: str) -> str:
        """The shard's file of ``table``, relative to the results directory."""
        return f"{SHARDS_DIR}/{table}/{self.stem}.parquet"


@dataclass(frozen=True)
class ShardPlan:
    """The shards of a sweep: consecutive deal ranges of ``shard_size`` from deal ``first``,
    the last one shorter. A range, not a list: any shard, and the count, cost the same
    however many shards there are."""

    first: int
    deals: int
    shard_size: int

    @property
    def count(self) -> int:
        """The number of shards (no `len`: Python caps it at 2**63 - 1, and plans can be longer)."""
        return -(-self.deals // self.shard_size)

    def __getitem__(self, index: int) -> Shard:
        count = self.count
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"shard {index} is not in a plan of {count} shards")
        start = index * self.shard_size
        return Shard(index, self.first + start, min(self.shard_size, self.deals - start))

    def __iter__(self):
        return self.from_index(0)

    def from_index(self, index: int):
        """The shards from ``index`` on, made as they are asked for."""
        while index < self.count:
            yield self[index]
            index += 1

    def __contains__(self, index) -> bool:
        return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < self.count

    def missing(self, present) -> tuple[int, list[Shard]]:
        """How many shards of the plan are not in ``present`` (a set of indices), and the
        first five of them; costs the size of ``present``, not of the plan."""
        count, shown, expected = 0, [], 0
        for index in sorted(i for i in present if i in self) + [self.count]:
            gap = index - expected
            count += gap
            shown += [self[i] for i in range(expected, expected + min(gap, 5 - len(shown)))]
            expected = index + 1
        return count, shown


def plan_shards(first: int, deals: int, shard_size: int) -> ShardPlan:
    return ShardPlan(first, deals, shard_size)
