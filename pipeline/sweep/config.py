"""Sweep configs: a TOML file, checked against one schema, expanded to cells, hashed.

A config names a sweep and says which deals to play under which rules:

    name = "quick"                # letters, digits, '.', '_', '-'; the default output dir
    seed = 20240601               # unsigned 64-bit
    deals = 1_000_000             # how many deals ...
    first = 0                     # ... from which deal number (default 0)
    shard_size = 50_000           # deals per shard, one Ray task each (default 1_000_000)
    record = "deals"              # "deals" (one row per deal x cell) or "summary" (counts)
    output = "results/quick"      # a path or a pyarrow.fs URI (default results/<name>)

    [grid]                        # lists; the sweep plays every meaningful combination
    variant = ["standard", "watch"]
    strategy = ["clockwise", "most", "mine.py:nearest_twelve"]  # FILE.py:FUNCTION: your own
    finale = ["down", "up"]
    order = ["round-robin"]
    depth = ["bottom"]            # exchange only

    [run]                         # optional
    executor = "ray"              # "ray" (default) or "threads": this process's threads, no Ray
    device = "cpu"                # "cpu" (default) or "cuda": the CUDA kernel (the cuda extra);
                                  # the same results either way
    lease_wait = 30               # seconds to wait for an S3 output another run holds to be
                                  # free (default: the lease's time; 0: refuse at once)
    strategy_seconds = 60         # how long a strategy of your own may take on one batch of
                                  # deals before the run stops, naming it (default 60)

    [ray]                         # optional
    address = "127.0.0.1:6379"    # an existing cluster (default: a local instance)
    num_cpus = 2                  # CPUs of the local instance (default: all)
    max_retries = 3               # further attempts of a failed shard

    [stop]                        # optional: stop once the answer is known (`stopping`);
    win_rate = 0.001              # every cell's win rate to +-0.1 points, and/or
    comparisons = "decided"       # every paired strategy comparison settled (or a half-width)
    min_deals = 1_000_000         # never before this many deals; `deals` is the most played
    confidence = 0.95             # of the rule's confidence sequences

Every mistake is a `ConfigError` whose message is one line naming the key and what it
allows. `--set KEY=VALUE` overrides take the same path through the same checks. The config
hash covers what decides the results (seed, deals, shards, record mode, cells, the stop rule,
deal-scheme and result-schema versions), not where they go or which cluster plays them, so a sweep can
be resumed from another machine but never mixed with another sweep.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field

from pipeline import echoed, html_fields
from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.inference import anytime, claim_file
from pipeline.records import identity
from pipeline.store import credentials
from pipeline.sweep import stopping
from pipeline.sweep.config_keys import (  # noqa: F401 (others read some as config.X)
    DEFAULT_MAX_RETRIES,
    DEFAULT_SHARD_SIZE,
    DEFAULT_STRATEGY_SECONDS,
    DEVICES,
    EXECUTORS,
    FLOAT,
    FULL_GRID,
    GRID_AXES,
    INT,
    MAX_LEASE_WAIT,
    MAX_NAME_LENGTH,
    MAX_STRATEGY_SECONDS,
    NAME_PATTERN,
    NAMES,
    OWN,
    RECORD_MODES,
    REQUIRED,
    TABLE_KEYS,
    TARGET,
    TOP_KEYS,
    U64_LIMIT,
    URI_SCHEMES,
    ConfigError,
    kind_of,
)
from pipeline.sweep.stopping import StopRule

# --- The resolved config ------------------------------------------------------------------


@dataclass(frozen=True)
class SweepConfig:
    """A checked config with every default filled in and its grid expanded to cells."""

    name: str
    seed: int
    first: int
    deals: int
    shard_size: int
    record: str
    # The output as given, credentials and all: read only where a run opens it (`output`
    # is what everything else names it by).
    output_given: str = field(repr=False)
    grid: dict[str, tuple[str, ...]]
    cells: tuple[Cell, ...]
    ray: dict = field(default_factory=dict)
    source: str = ""
    stop: StopRule | None = None
    executor: str = EXECUTORS[0]
    device: str = DEVICES[0]
    # Seconds a run waits for its S3 output's lease, held by another run, to lapse (None:
    # the lease's own time, `store.lease.lease_seconds`).
    lease_wait: float | None = None
    strategy_seconds: float | None = None  # None: DEFAULT_STRATEGY_SECONDS
    customs: tuple[rules.Custom, ...] = ()  # the grid's strategies of the user's, by name

    def fields(self) -> list[tuple[str, object]]:
        """What a notebook shows of the config: its keys as a user reads them."""
        labels = [cell.label for cell in self.cells]
        shown = ", ".join(labels[:4]) + (f", and {len(labels) - 4} more" if len(labels) > 4 else "")
        return [
            ("seed", self.seed),
            ("deals", f"{self.first:,}-{self.first + self.deals - 1:,} ({self.deals:,})"),
            ("shard_size", f"{self.shard_size:,}"),
            ("record", self.record),
            ("cells", f"{len(labels)}: {shown}"),
            ("stop", self.stop.describe() if self.stop else "none"),
            ("executor", self.executor + (f", on {self.device}" if self.device != "cpu" else "")),
            ("output", self.output),
        ]

    def __repr__(self) -> str:
        # The dataclass's own repr is every cell in full, thousands of characters.
        lines = [f"SweepConfig {self.name!r}"]
        return "\n".join(lines + [f"  {name}: {value}" for name, value in self.fields()])

    def _repr_html_(self) -> str:
        return html_fields(f"SweepConfig {self.name!r}", self.fields())

    @property
    def output(self) -> str:
        """The output as lines, logs and records name it: a URI's credentials shown as ***
        (`credentials.shown`)."""
        return credentials.shown(self.output_given)

    @property
    def strategy_bound(self) -> float:
        """Seconds a strategy of the user's may take on one batch (``[run] strategy_seconds``)."""
        return self.strategy_seconds or DEFAULT_STRATEGY_SECONDS

    @property
    def max_retries(self) -> int:
        return self.ray.get("max_retries", DEFAULT_MAX_RETRIES)

    @property
    def n_shards(self) -> int:
        return -(-self.deals // self.shard_size)

    def resolved(self) -> dict:
        """The config as plain data, defaults filled in: what run.json records."""
        return {
            "name": self.name,
            "seed": self.seed,
            "first": self.first,
            "deals": self.deals,
            "shard_size": self.shard_size,
            "record": self.record,
            "output": self.output,
            "grid": {axis: list(values) for axis, values in self.grid.items()},
            "ray": dict(self.ray),
            **({"stop": self.stop.to_json()} if self.stop else {}),
            # Recorded where not the default, so that a record of Ray is as it was.
            **({"run": self.run_options()} if self.run_options() else {}),
            # Strategies of the user's: what a reader of the results needs of each, its source
            # too (`identity.custom_records`); none for a sweep of built-ins only.
            **(
                {
                    "custom": identity.custom_records(self.customs),
                    "custom_source": identity.custom_sources(self.customs),
                }
                if self.customs
                else {}
            ),
        }

    def run_options(self) -> dict:
        """The ``[run]`` table's keys that are not their defaults."""
        options: dict = {}
        if self.executor != EXECUTORS[0]:
            options["executor"] = self.executor
        if self.device != DEVICES[0]:
            options["device"] = self.device
        if self.lease_wait is not None:
            options["lease_wait"] = self.lease_wait
        if self.strategy_seconds is not None:
            options["strategy_seconds"] = self.strategy_seconds
        return options

    def identity(self) -> dict:
        """What decides the results, and nothing else: the content the config hash covers."""
        return identity.sweep_identity(
            seed=self.seed,
            first=self.first,
            shard_size=self.shard_size,
            record=self.record,
            cells=self.cells,
        )

    @property
    def hash(self) -> str:
        return identity.identity_hash(self.identity())


# --- Loading ------------------------------------------------------------------------------


def load(path: str, overrides: tuple[str, ...] | list[str] = ()) -> SweepConfig:
    """The config at ``path`` with ``KEY=VALUE`` overrides applied, checked and expanded."""
    raw = read_toml(path)
    for override in overrides:
        apply_override(raw, override)
    return from_dict(raw, source=path)


def read_toml(path: str) -> dict:
    """The TOML file at ``path`` as a dict; ConfigError if it cannot be read as TOML."""
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML for a config: nested too deeply") from None


def apply_override(raw: dict, override: str) -> None:
    """Set one ``KEY=VALUE`` in the raw config, the value read as the key's kind."""
    key, equals, text = override.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ConfigError(
            f"--set: {echoed(override)} is not KEY=VALUE (e.g. deals=1000000, grid.strategy=most,random)"
        )
    kind, allowed = kind_of(key)
    text = text.strip()
    if kind == INT:
        value = parse_int(key, text, allowed)
    elif kind in (FLOAT, TARGET) and not (kind == TARGET and text == stopping.DECIDED):
        try:
            value = float(text.replace("_", ""))
        except ValueError:
            raise ConfigError(
                f"{key}: {echoed(text)} is not a number; expected {allowed}"
            ) from None
    elif kind == NAMES:
        value = [item.strip() for item in text.split(",")]
        if not text or any(not item for item in value):
            raise ConfigError(
                f"{key}: {echoed(text)} is not a comma-separated list; expected {allowed}"
            )
    else:
        value = text
    table, dot, leaf = key.partition(".")
    if dot:
        target = raw.setdefault(table, {})
        if not isinstance(target, dict):
            raise ConfigError(f"{table}: expected a table of keys, got {type(target).__name__}")
        target[leaf] = value
    else:
        raw[key] = value


def parse_int(key: str, text: str, allowed: str) -> int:
    """An integer from the command line: 1000000, 1_000_000, 1e6 or -5 (a sign is read, and
    the range is the key's to check, so that -5 is out of range, not "not an integer")."""
    digits = text.replace("_", "")
    unsigned = digits[1:] if digits[:1] in "+-" else digits
    if unsigned.isascii() and unsigned.isdigit():  # not '²' (isdigit) nor others' digits (int)
        return int(digits)
    try:
        number = float(digits) if digits.isascii() else None
    except ValueError:
        number = None
    if number is not None and number.is_integer() and abs(number) < 2**53:
        return int(number)
    raise ConfigError(f"{key}: {echoed(text)} is not an integer; expected {allowed}")


def checked_keys(raw: dict) -> None:
    """Every key and table of a raw config known, and the required ones there."""
    for key, value in raw.items():
        if key not in TABLE_KEYS:
            kind_of(key)  # unknown keys fail here
            continue
        if not isinstance(value, dict):
            raise ConfigError(
                f"{key}: expected a table [{key}] with keys {', '.join(TABLE_KEYS[key])}"
            )
        for leaf in value:
            kind_of(f"{key}.{leaf}")
    for key in REQUIRED:
        if key not in raw:
            raise ConfigError(f"{key}: missing; expected {TOP_KEYS[key][1]}")


def from_dict(raw: dict, source: str = "") -> SweepConfig:
    """Check a raw config (as TOML reads it) and resolve it."""
    checked_keys(raw)
    name = checked_str(raw, "name")
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"name: {echoed(name)} is not allowed; expected {TOP_KEYS['name'][1]}")
    seed = checked_int(raw, "seed", 0, U64_LIMIT - 1)
    deals = checked_int(raw, "deals", 1, U64_LIMIT)
    first = checked_int(raw, "first", 0, U64_LIMIT - 1, default=0)
    if first + deals > U64_LIMIT:
        raise ConfigError(
            f"deals: first + deals runs past 2**64 ({first} + {deals}); "
            "deal numbers are unsigned 64-bit"
        )
    shard_size = checked_int(raw, "shard_size", 1, U64_LIMIT, default=DEFAULT_SHARD_SIZE)
    record = checked_str(raw, "record", default="deals")
    if record not in RECORD_MODES:
        raise ConfigError(
            f"record: {echoed(record)} is not known; allowed: {', '.join(RECORD_MODES)}"
        )
    output = checked_output(checked_str(raw, "output", default=f"results/{name}"))

    grid_raw = raw.get("grid", {})
    grid = {axis: checked_names(grid_raw, axis) for axis in GRID_AXES if axis != "strategy"}
    grid["strategy"], customs = checked_strategies(grid_raw, source, grid["finale"])
    cells = expand(grid, customs)

    ray_raw = raw.get("ray", {})
    ray = checked_address(ray_raw)  # named before the stop rule, its counts after
    stop = checked_stop(raw.get("stop"), deals, cells)
    ray.update(checked_ray_counts(ray_raw))
    executor = checked_run_choice(raw.get("run", {}), "executor", EXECUTORS)
    device = checked_run_choice(raw.get("run", {}), "device", DEVICES)
    lease_wait = checked_lease_wait(raw.get("run", {}))
    strategy_seconds = checked_strategy_seconds(raw.get("run", {}))
    return SweepConfig(
        name=name,
        seed=seed,
        first=first,
        deals=deals,
        shard_size=shard_size,
        record=record,
        output_given=output,
        grid=grid,
        cells=cells,
        ray=ray,
        source=source,
        stop=stop,
        executor=executor,
        device=device,
        lease_wait=lease_wait,
        strategy_seconds=strategy_seconds,
        customs=customs,
    )


def checked_strategies(
    grid_raw: dict, source: str, finales: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[rules.Custom, ...]]:
    """``grid.strategy``: the built-in names (as `checked_names` checks them) and strategies
    of the user's (``FILE.py:FUNCTION``, relative to the config's directory, or
    ``module:FUNCTION``), read and compiled; the names, the built-ins in the rules' order
    and then the user's by name (the hash ignores the order), and the user's."""
    from pipeline.engine import custom

    value = grid_raw.get("strategy")
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    specs = [item for item in items if isinstance(item, str) and custom.is_custom(item)]
    if not specs:
        return checked_names(grid_raw, "strategy"), ()
    rest = [item for item in items if item not in specs]
    builtins = checked_names({"strategy": rest}, "strategy") if rest else ()
    base = os.path.dirname(os.path.abspath(source)) if source else os.getcwd()
    customs: dict[str, rules.Custom] = {}
    for spec in dict.fromkeys(specs):
        try:
            found = custom.read(spec, base)
        except custom.CustomError as error:
            raise ConfigError(f"grid.{error}") from None
        if found.name in customs and customs[found.name] != found:
            raise ConfigError(
                f"grid.strategy: {echoed(customs[found.name].spec)} and {echoed(spec)} are both named "
                f"{echoed(found.name)}; the strategies of a sweep need names of their own"
            )
        if found.reads_bottoms and "up" not in finales:
            raise ConfigError(
                f"grid.strategy: {echoed(spec)} reads bottoms, the face-up bottom cards, which "
                "only finale = 'up' shows; add 'up' to grid.finale"
            )
        customs[found.name] = found
    if len(customs) > rules.MAX_CUSTOM:
        raise ConfigError(
            f"grid.strategy: {len(customs)} strategies of your own; a sweep plays at most "
            f"{rules.MAX_CUSTOM}"
        )
    mine = tuple(customs[name] for name in sorted(customs))
    return tuple(builtins) + tuple(c.name for c in mine), mine


def checked_address(ray_raw: dict) -> dict:
    if "address" not in ray_raw:
        return {}
    address = checked_str(ray_raw, "address", key_name="ray.address")
    if not address:
        raise ConfigError(f"ray.address: empty; expected {TABLE_KEYS['ray']['address'][1]}")
    return {"address": address}


def checked_ray_counts(ray_raw: dict) -> dict:
    ray = {}
    if "num_cpus" in ray_raw:
        ray["num_cpus"] = checked_int(ray_raw, "num_cpus", 1, 1 << 16, key_name="ray.num_cpus")
    ray["max_retries"] = checked_int(
        ray_raw, "max_retries", 0, 100, default=DEFAULT_MAX_RETRIES, key_name="ray.max_retries"
    )
    return ray


def checked_run_choice(run_raw: dict, key: str, allowed: tuple[str, ...]) -> str:
    """A ``[run]`` key that names one of ``allowed`` (the first its default)."""
    value = checked_str(run_raw, key, default=allowed[0], key_name=f"run.{key}")
    if value not in allowed:
        raise ConfigError(f"run.{key}: {echoed(value)} is not known; allowed: {', '.join(allowed)}")
    return value


def checked_lease_wait(run_raw: dict) -> float | None:
    if "lease_wait" not in run_raw:
        return None
    return checked_float(run_raw, "lease_wait", 0, MAX_LEASE_WAIT, "run.lease_wait", closed=True)


def checked_strategy_seconds(run_raw: dict) -> float | None:
    if "strategy_seconds" not in run_raw:
        return None
    return checked_float(
        run_raw, "strategy_seconds", 1, MAX_STRATEGY_SECONDS, "run.strategy_seconds", closed=True
    )


def checked_float(raw, key, low, high, key_name, closed: bool = False) -> float:
    """``raw[key]``, a number strictly between ``low`` and ``high`` (``closed``: or either of
    them), a TOML float or integer."""
    allowed = kind_of(key_name)[1]
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"{key_name}: {echoed(value)} is a {toml_type(value)}; expected {allowed}"
        )
    if not (low <= value <= high if closed else low < value < high):  # also refuses nan
        raise ConfigError(f"{key_name}: {value} is out of range; expected {allowed}")
    return float(value)


def checked_stop(stop_raw: dict | None, deals: int, cells) -> StopRule | None:
    """The ``[stop]`` table: at least one target, each one the cells can answer."""
    if stop_raw is None:
        return None
    win_rate = comparisons = None
    if "win_rate" in stop_raw:
        win_rate = checked_float(stop_raw, "win_rate", anytime.MIN_AIM, 0.5, "stop.win_rate")
    if "comparisons" in stop_raw:
        if stop_raw["comparisons"] == stopping.DECIDED:
            comparisons = stopping.DECIDED
        elif isinstance(stop_raw["comparisons"], str):
            raise ConfigError(
                f"stop.comparisons: {echoed(stop_raw['comparisons'])} is not known; "
                f"expected {kind_of('stop.comparisons')[1]}"
            )
        else:
            comparisons = checked_float(
                stop_raw, "comparisons", anytime.MIN_AIM, 0.5, "stop.comparisons"
            )
        if not stopping.strategy_pairs(cells):
            raise ConfigError(
                "stop.comparisons: the grid has no two cells that differ in their strategy "
                "only, so no comparison to decide; give grid.strategy two or more strategies "
                "(with a variant that has a rescue)"
            )
    claims, claims_file, claim_set = checked_claims(stop_raw, cells)
    if win_rate is None and comparisons is None and claims is None:
        raise ConfigError("stop: no target; set stop.win_rate, stop.comparisons or stop.claims")
    min_deals = checked_int(
        stop_raw, "min_deals", 1, U64_LIMIT, default=0, key_name="stop.min_deals"
    )
    if min_deals > deals:
        raise ConfigError(
            f"stop.min_deals: {min_deals:,} is above deals ({deals:,}), the most the run may "
            "play; expected at most deals"
        )
    confidence = stopping.DEFAULT_CONFIDENCE
    if "confidence" in stop_raw:
        confidence = checked_float(stop_raw, "confidence", 0, 1, "stop.confidence")
    return StopRule(win_rate, comparisons, claims, min_deals, confidence, claims_file, claim_set)


def checked_claims(stop_raw: dict, cells) -> tuple[str | None, str | None, tuple]:
    """``stop.claims`` and ``stop.claims_file``: the claims the rule decides, read and
    checked, at least one of them answered by the cells' tallies."""
    claims_file = None
    if "claims_file" in stop_raw:
        claims_file = checked_str(stop_raw, "claims_file", key_name="stop.claims_file")
        if "claims" not in stop_raw:
            raise ConfigError(
                f"stop.claims_file: the rule reads it only for stop.claims = '{stopping.DECIDED}'; "
                "set stop.claims too"
            )
    if "claims" not in stop_raw:
        return None, None, ()
    claims = checked_str(stop_raw, "claims", key_name="stop.claims")
    if claims != stopping.DECIDED:
        raise ConfigError(
            f"stop.claims: {echoed(claims)} is not known; expected {kind_of('stop.claims')[1]}"
        )
    try:
        claim_set = claim_file.read(claims_file or claim_file.RULE_PAGES)
    except claim_file.ClaimFileError as error:
        raise ConfigError(f"stop.claims_file: {error}") from None
    if not stopping.claim_checks(cells, claim_set):
        wanted = [f"{c.id} needs {c.measure.needs()}" for c in claim_set if stopping.decidable(c)]
        raise ConfigError(
            "stop.claims: no claim the rule decides is answered by this grid's cells"
            + (
                f" ({'; '.join(wanted)})"
                if wanted
                else f": {claims_file} has no claim a stop rule decides"
            )
        )
    return claims, claims_file, claim_set


def checked_int(raw, key, low, high, default=None, key_name=None) -> int:
    """``raw[key]`` as an integer in [low, high]; TOML integers only (no floats, no bools)."""
    key_name = key_name or key
    allowed = kind_of(key_name)[1]
    if key not in raw:
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{key_name}: {echoed(value)} is a {toml_type(value)}; expected {allowed}"
        )
    if not low <= value <= high:
        raise ConfigError(
            f"{key_name}: {value} is out of range {bound(low)}..{bound(high)}; expected {allowed}"
        )
    return value


def bound(number: int) -> str:
    """A range's end as a reader knows it: 2**64 rather than its twenty digits."""
    return {U64_LIMIT: "2**64", U64_LIMIT - 1: "2**64-1"}.get(number, str(number))


def checked_str(raw, key, default=None, key_name=None) -> str:
    key_name = key_name or key
    if key not in raw:
        return default
    value = raw[key]
    if not isinstance(value, str):
        raise ConfigError(
            f"{key_name}: {echoed(value)} is a {toml_type(value)}; expected {kind_of(key_name)[1]}"
        )
    return value


def checked_names(grid_raw: dict, axis: str) -> tuple[str, ...]:
    """A grid axis: known names, deduplicated, in the rules' order (so the hash ignores order)."""
    names, default = GRID_AXES[axis]
    value = grid_raw.get(axis, list(default))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(
            f"grid.{axis}: {echoed(value)} is not a list of names; expected a list of: {', '.join(names)}"
        )
    if not value:
        raise ConfigError(f"grid.{axis}: empty; expected a list of: {', '.join(names)}")
    for item in value:
        if item not in names:
            raise ConfigError(
                f"grid.{axis}: {echoed(item)} is not known; allowed: {', '.join(names)}"
                + OWN.get(axis, "")
            )
    return tuple(name for name in names if name in value)


def checked_output(output: str) -> str:
    """A local directory we could create, or a URI of a pyarrow.fs scheme."""
    named = credentials.shown(output)
    if not output:
        raise ConfigError(f"output: empty; expected {TOP_KEYS['output'][1]}")
    if "\0" in output:
        raise ConfigError(
            f"output: {echoed(named)} holds a NUL character, which no path or URI "
            f"can; expected {TOP_KEYS['output'][1]}"
        )
    scheme, sep, rest = output.partition("://")
    if sep and scheme not in URI_SCHEMES:
        raise ConfigError(
            f"output: URI scheme {echoed(scheme)} is not supported; allowed: {', '.join(URI_SCHEMES)}"
        )
    if sep and scheme != "file":
        if not rest.split("?", 1)[0].strip("/"):
            raise ConfigError(
                f"output: {echoed(named)} names no bucket or path; expected {scheme}://BUCKET/PREFIX"
            )
        return output  # object stores are checked when the run opens them
    path = os.path.abspath(rest if sep else output)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(
            f"output: {echoed(named)} exists and is not a directory; expected a directory path"
        )
    ancestor = path
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ConfigError(
            f"output: {echoed(named)} cannot be created: {echoed(ancestor)} is not a directory"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(
            f"output: {echoed(named)} cannot be written: no permission on {echoed(ancestor)}"
        )
    return output


def expand(
    grid: dict[str, tuple[str, ...]], customs: tuple[rules.Custom, ...] = ()
) -> tuple[Cell, ...]:
    """Every cell of the grid the rules allow (`rules.expand`); ConfigError if there is none."""
    try:
        return tuple(rules.expand(grid, customs))
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None


def toml_type(value) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)
