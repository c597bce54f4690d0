"""A sweep config's keys, declared once: each key, its kind and what it allows (the words
every one-line error says), the constants the checks read, and `kind_of`, which names an
unknown key with what is allowed. `config` reads and checks a config by them; the API and
the docs' tests read them too."""

from __future__ import annotations

import re

from pipeline.engine import rules
from pipeline.inference import anytime
from pipeline.sweep import stopping

U64_LIMIT = 1 << 64
RECORD_MODES = ("deals", "summary")
# What plays the shards: Ray's tasks (a local instance or a cluster), or threads of the
# driver's own process (one machine, no Ray started): the same bytes either way.
EXECUTORS = ("ray", "threads")
# What plays the deals: the CPU kernel, or the CUDA kernel (`engine.gpu`, the `cuda` extra):
# the same bytes either way.
DEVICES = ("cpu", "cuda")
URI_SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME_LENGTH = 128  # a name is a directory's (results/<name>): 255 bytes at most, often
DEFAULT_SHARD_SIZE = 1_000_000
DEFAULT_MAX_RETRIES = 3
MAX_LEASE_WAIT = 86_400.0  # a day: a wait for an output beyond that is a mistake
# A batch of a strategy of the user's takes well under a second (ROWS_PER_BATCH rows), so a
# minute is a strategy that will not return (a loop numba cannot see is endless), not one
# that is slow; an hour is the most a config may allow.
DEFAULT_STRATEGY_SECONDS = 60.0
MAX_STRATEGY_SECONDS = 3_600.0

# The grid's axes: the rules' own tuples of names, and what an absent axis means.
GRID_AXES = {axis: (rules.AXES[axis], default) for axis, default in rules.AXIS_DEFAULTS.items()}
# Every name on every axis: the grid of every cell the rules know.
FULL_GRID = {axis: list(names) for axis, (names, _) in GRID_AXES.items()}


# An axis that takes more than the rules' names: strategies of the user's.
OWN = {"strategy": "; or a strategy of your own, FILE.py:FUNCTION or module:FUNCTION"}


class ConfigError(ValueError):
    """A config that cannot run; the message is one line naming the key and what is allowed."""


# --- The schema: key -> (kind, what it allows, default) -----------------------------------

INT, STR, NAMES, FLOAT, TARGET = "int", "str", "names", "float", "target"
HALF_WIDTH = f"a half-width, a fraction in ({anytime.MIN_AIM:g}, 0.5) such as 0.001 (0.1 points)"

TOP_KEYS = {
    "name": (STR, f"letters, digits, '.', '_', '-', at most {MAX_NAME_LENGTH} characters"),
    "seed": (INT, "an unsigned 64-bit integer (0 to 2**64-1)"),
    "deals": (INT, "a number of deals, at least 1"),
    "first": (INT, "the first deal number, an unsigned 64-bit integer"),
    "shard_size": (INT, "deals per shard, at least 1"),
    "record": (STR, f"one of {', '.join(RECORD_MODES)}"),
    "output": (STR, "a directory path or a pyarrow.fs URI (" + ", ".join(URI_SCHEMES) + ")"),
}
TABLE_KEYS = {
    "grid": {
        axis: (NAMES, f"a list of: {', '.join(names)}" + OWN.get(axis, ""))
        for axis, (names, _) in GRID_AXES.items()
    },
    "ray": {
        "address": (STR, "a Ray cluster address such as 127.0.0.1:6379, or 'auto'"),
        "num_cpus": (INT, "CPUs for the local Ray instance, at least 1"),
        "max_retries": (INT, "further attempts of a failed shard, 0 or more"),
    },
    "stop": {
        "win_rate": (FLOAT, f"every cell's win rate to within {HALF_WIDTH}"),
        "comparisons": (
            TARGET,
            f"'{stopping.DECIDED}' (every paired strategy comparison's interval excludes 0) "
            f"or {HALF_WIDTH}",
        ),
        "claims": (
            STR,
            f"'{stopping.DECIDED}' (every claim the cells answer confirmed or refuted)",
        ),
        "claims_file": (
            STR,
            "a claims file (docs/claims.md) whose claims stop.claims decides; default: the "
            "rule pages' claims shipped with clocksweep",
        ),
        "min_deals": (INT, "the fewest deals the run may stop at, from 1 to deals"),
        "confidence": (FLOAT, "the confidence of the rule's intervals, in (0, 1), e.g. 0.95"),
    },
    "run": {
        "executor": (STR, f"one of {', '.join(EXECUTORS)}"),
        "device": (STR, f"one of {', '.join(DEVICES)}"),
        "lease_wait": (
            FLOAT,
            f"seconds to wait for an S3 output held by another run's lease to be free, from 0 "
            f"(refuse at once) to {MAX_LEASE_WAIT:.0f}",
        ),
        "strategy_seconds": (
            FLOAT,
            "seconds a strategy of your own may take on one batch of deals (it is called on "
            f"each deal's rescue) before the run stops, from 1 to {MAX_STRATEGY_SECONDS:.0f}; "
            f"default {DEFAULT_STRATEGY_SECONDS:.0f}",
        ),
    },
}
REQUIRED = ("name", "seed", "deals")


def kind_of(key: str) -> tuple[str, str]:
    """The kind and the allowed values of a dotted key; ConfigError for an unknown one."""
    table, dot, leaf = key.partition(".")
    if not dot:
        if key in TOP_KEYS:
            return TOP_KEYS[key]
        if key in TABLE_KEYS:
            raise ConfigError(
                f"{key}: is a table; set one of its keys "
                f"({', '.join(f'{key}.{k}' for k in TABLE_KEYS[key])})"
            )
        raise ConfigError(f"{key}: unknown key; allowed: {', '.join([*TOP_KEYS, *TABLE_KEYS])}")
    if table not in TABLE_KEYS:
        raise ConfigError(f"{table}: unknown table; allowed: {', '.join(TABLE_KEYS)}")
    if leaf not in TABLE_KEYS[table]:
        raise ConfigError(
            f"{key}: unknown key; allowed: {', '.join(f'{table}.{k}' for k in TABLE_KEYS[table])}"
        )
    return TABLE_KEYS[table][leaf]
