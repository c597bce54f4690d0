"""Tests of sweep configs (pipeline/sweep/config.py) and of `clocksweep run --dry-run`.

No Ray here: loading, overrides, grid expansion and the config hash are pure. Every way a
config can be wrong is driven through the CLI with CliRunner: exit status 2, one line on
stderr naming the key, and nothing written.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import clocksweep, config_file

import pipeline
from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.sweep import config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write_config(tmp_path: Path, body: str) -> Path:
    return config_file(tmp_path, body, "sweep.toml")


BASE = """
name = "t"
seed = 1
deals = 1000
shard_size = 300
output = "{out}"
[grid]
variant = ["standard", "watch"]
strategy = ["most", "random"]
"""


@pytest.fixture
def base(tmp_path):
    out = tmp_path / "out"
    return write_config(tmp_path, BASE.format(out=out)), out


# --- Loading and expansion ----------------------------------------------------------------


def test_shipped_configs_load():
    quick = config.load(str(CONFIGS / "quick.toml"))
    assert quick.record == "deals" and quick.deals == 1_000_000
    # Every variant and every strategy appears, informed only with face-up finales.
    assert {cell.variant for cell in quick.cells} == set(rules.VARIANTS)
    assert {cell.strategy for cell in quick.cells} - {None} == set(rules.STRATEGIES)
    assert len(quick.cells) == len(rules.all_cells(orders=("round-robin",)))
    for name in ("published-odds.toml", "strategies.toml", "settle-claims.toml"):
        text = (CONFIGS / name).read_text()
        assert 'record = "summary"' in text
    settle = config.load(str(CONFIGS / "settle-claims.toml"))
    from pipeline.sweep import stopping

    assert settle.stop.claims == stopping.DECIDED and settle.stop.comparisons == 0.001
    assert [check.id for check in stopping.claim_checks(settle.cells, settle.stop.claim_set)] == [
        "one_in_13",
        "better_than_one_in_three",
        "pick_makes_no_difference",
        "deal_order_no_change",
    ]


def test_expansion_only_meaningful_cells(base):
    path, _ = base
    cfg = config.load(
        str(path),
        [
            "grid.variant=standard,watch,exchange,play_out",
            "grid.strategy=informed,most",
            "grid.finale=down,up",
            "grid.depth=bottom,top",
        ],
    )
    for cell in cfg.cells:
        assert (cell.strategy is None) == (cell.variant in ("standard", "play_out"))
        assert (cell.depth is None) == (cell.variant != "exchange")
        if cell.strategy == "informed":
            assert cell.finale == "up"
    assert Cell("watch", "informed", "up") in cfg.cells
    assert ("watch", "informed", "down") not in [
        (c.variant, c.strategy, c.finale) for c in cfg.cells
    ]
    assert Cell("exchange", "most", "down", depth="top") in cfg.cells
    # 2 finales x (standard + play_out) + watch: 1 + 2 + exchange: 2 depths x (1 + 2)
    assert len(cfg.cells) == 2 * 2 + 1 + 2 + 2 * 1 + 2 * 2


def test_overrides_and_hash(base, tmp_path):
    path, _ = base
    plain = config.load(str(path))
    assert [c.strategy for c in plain.cells] == [None, "random", "most"]  # the rules' order
    bigger = config.load(str(path), ["deals=100_000_000", "grid.strategy=most,random"])
    assert bigger.deals == 100_000_000 and bigger.cells == plain.cells
    assert config.load(str(path), ["deals=1e8"]).deals == 100_000_000
    # The hash covers what decides the results, and only that.
    assert config.load(str(path), ["grid.strategy=random,most"]).hash == plain.hash
    assert config.load(str(path), [f"output={tmp_path / 'elsewhere'}"]).hash == plain.hash
    assert config.load(str(path), ["ray.num_cpus=1"]).hash == plain.hash
    for change in ("seed=2", "shard_size=301", "first=5", "grid.strategy=most"):
        assert config.load(str(path), [change]).hash != plain.hash, change
    # How many deals are kept is not what decides the rows: more deals grow the same sweep.
    assert config.load(str(path), ["deals=1001"]).hash == plain.hash
    assert plain.ray["max_retries"] == config.DEFAULT_MAX_RETRIES
    # How long a run waits for its output is not what decides the rows either.
    waiting = config.load(str(path), ["run.lease_wait=0"])
    assert waiting.hash == plain.hash and waiting.lease_wait == 0.0
    assert waiting.resolved()["run"] == {"lease_wait": 0.0} and "run" not in plain.resolved()
    assert config.load(str(path), ["run.lease_wait=2.5"]).lease_wait == 2.5


def test_defaults(tmp_path):
    path = write_config(tmp_path, 'name = "d"\nseed = 0\ndeals = 5\n')
    cfg = config.load(str(path))
    assert cfg.output == "results/d" and cfg.record == "deals" and cfg.first == 0
    assert cfg.cells == (Cell(),)
    assert cfg.n_shards == 1


def test_dry_run(base):
    path, out = base
    result = clocksweep("run", path, "--dry-run")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "3 cells:" in text and "watch most finale=down order=round-robin" in text
    assert "4 shards of up to 300 deals" in text
    assert "shard-000000_deals-0-299" in text and "shard-000003_deals-900-999" in text
    assert "total: 1,000 deals x 3 cells = 3,000 deal results" in text
    assert not out.exists()


@pytest.mark.parametrize("record", ["deals", "summary"])
def test_the_dry_runs_size_is_what_the_run_then_writes(tmp_path, record):
    """The dry run's size, measured on its first shard played aside, is within 5% of the
    bytes the run's four shards then hold (equal shards: they differ only in how their
    rows compress), and the dry run writes nothing to the output."""
    out = tmp_path / "out"
    body = BASE.format(out=out).replace("deals = 1000", "deals = 2600")
    body = body.replace("shard_size = 300", f'shard_size = 650\nrecord = "{record}"')
    path = write_config(tmp_path, body + '[run]\nexecutor = "threads"\n')
    planned = clocksweep("run", path, "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert not out.exists()
    said = re.search(r"size: about ([\d.]+) (kB|MB) of shard files", planned.stdout)
    assert said, planned.stdout
    estimated = float(said.group(1)) * {"kB": 1e3, "MB": 1e6}[said.group(2)]
    ran = clocksweep("run", path)
    assert ran.exit_code == 0, ran.output
    written = int(re.search(r"([\d,]+) bytes", ran.stderr).group(1).replace(",", ""))
    assert abs(estimated - written) <= 0.05 * written, (planned.stdout, ran.stderr)


# --- Errors: one line, exit 2, nothing written --------------------------------------------

BAD_EDITS = [
    # (replace this, with this) in BASE, then the words the message must contain
    ("seed = 1", 'seed = "one"', ["seed:", "string", "unsigned 64-bit"]),
    ("seed = 1", "seed = -1", ["seed:", "out of range"]),
    ("seed = 1", "seed = 18446744073709551616", ["seed:"]),
    ("deals = 1000", "deals = 0", ["deals:", "at least 1"]),
    ("deals = 1000", "deals = 1.5e3", ["deals:", "float"]),
    ("deals = 1000", "deals = 1000\nfirst = 18446744073709551000", ["deals:", "2**64"]),
    ("shard_size = 300", "shard_size = 0", ["shard_size:"]),
    ('name = "t"', 'name = "../t"', ["name:", "letters"]),
    ('name = "t"', "", ["name: missing"]),
    ("seed = 1", "seed = 1\nsede = 2", ["sede: unknown key", "allowed: name, seed"]),
    ("seed = 1", 'seed = 1\nrecord = "rows"', ["record:", "allowed: deals, summary"]),
    (
        'strategy = ["most", "random"]',
        'strategy = ["most", "best"]',
        ["grid.strategy: 'best' is not known", "allowed: clockwise, random"],
    ),
    (
        'strategy = ["most", "random"]',
        'strategies = ["most"]',
        ["grid.strategies: unknown key", "grid.strategy"],
    ),
    ('strategy = ["most", "random"]', "strategy = [1, 2]", ["grid.strategy:", "list of"]),
    ('strategy = ["most", "random"]', "strategy = []", ["grid.strategy: empty"]),
    ("[grid]", "[ray]\nnum_cpus = 0\n[grid]", ["ray.num_cpus:", "at least 1"]),
    ("[grid]", '[ray]\nadress = "x"\n[grid]', ["ray.adress: unknown key", "ray.address"]),
    ("[grid]", "[cluster]\n[grid]", ["cluster: unknown key", "grid, ray"]),
    (
        '[grid]\nvariant = ["standard", "watch"]\nstrategy = ["most", "random"]',
        "grid = 3",
        ["grid: expected a table"],
    ),
    ("seed = 1", "seed = = 1", ["not valid TOML"]),
    ("[grid]", '[run]\nlease_wait = "30"\n[grid]', ["run.lease_wait:", "string", "from 0"]),
    ("[grid]", "[run]\nlease_wait = -1\n[grid]", ["run.lease_wait:", "out of range"]),
    ("[grid]", "[run]\nlease_wait = nan\n[grid]", ["run.lease_wait:", "out of range"]),
    ("[grid]", "[run]\nlease_wait = true\n[grid]", ["run.lease_wait:", "boolean"]),
]


def run_cli(args):
    return clocksweep(*args)


def assert_one_line_error(result, words, out: Path | None = None):
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("clocksweep: error: ")
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "Traceback" not in result.output
    if out is not None:
        assert not out.exists()


@pytest.mark.parametrize("old, new, words", BAD_EDITS)
def test_config_errors(tmp_path, old, new, words):
    out = tmp_path / "out"
    body = BASE.format(out=out)
    assert old in body
    path = write_config(tmp_path, body.replace(old, new, 1))
    assert_one_line_error(run_cli(["run", str(path)]), words, out)


def test_grid_without_cells(tmp_path):
    out = tmp_path / "out"
    path = write_config(
        tmp_path,
        f"""
name = "t"
seed = 1
deals = 10
output = "{out}"
[grid]
variant = ["watch"]
strategy = ["informed"]
finale = ["down"]
""",
    )
    assert_one_line_error(
        run_cli(["run", str(path)]), ["grid: expands to no cell", "informed", "finale = 'up'"], out
    )


@pytest.mark.parametrize(
    "override, words",
    [
        ("deals", ["--set: 'deals' is not KEY=VALUE"]),
        ("deals=lots", ["deals: 'lots' is not an integer"]),
        ("deals=-5", ["deals: -5 is out of range 1..2**64"]),  # an integer, below the range
        ("deals=-1e3", ["deals: -1000 is out of range 1..2**64"]),
        (f"name={'n' * 129}", ["name:", "at most 128 characters"]),
        ("colour=red", ["colour: unknown key"]),
        ("grid.strategy=most,,random", ["grid.strategy:", "comma-separated"]),
        ("grid.strategy=most,worst", ["grid.strategy: 'worst' is not known"]),
        ("grid=most", ["grid: is a table"]),
        ("ray.num_cpus=two", ["ray.num_cpus: 'two' is not an integer"]),
        ("record=summaries", ["record: 'summaries' is not known"]),
        ("output=gopher://host/x", ["output: URI scheme 'gopher'"]),
        (
            "deals=\u00b2",
            ["deals: '\u00b2' is not an integer"],
        ),  # a digit to str.isdigit, not to int()
        (
            "deals=\u0663",
            ["deals: '\u0663' is not an integer"],
        ),  # Arabic-Indic three: ASCII digits only
        ("ray.max_retries=101", ["ray.max_retries: 101 is out of range 0..100"]),
        ("run.lease_wait=soon", ["run.lease_wait: 'soon' is not a number", "seconds"]),
        ("run.lease_wait=1e9", ["run.lease_wait: 1000000000.0 is out of range", "86400"]),
    ],
)
def test_override_errors(base, override, words):
    path, out = base
    assert_one_line_error(run_cli(["run", str(path), "--set", override, "--dry-run"]), words, out)


def test_output_errors(base, tmp_path):
    path, _ = base
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    assert_one_line_error(
        run_cli(["run", str(path), "--set", f"output={a_file}"]), ["output:", "not a directory"]
    )
    assert_one_line_error(
        run_cli(["run", str(path), "--set", f"output={a_file}/below"]),
        ["output:", "cannot be created"],
    )
    # A directory that is not ours (no run.json) is refused before Ray starts.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert_one_line_error(
        run_cli(["run", str(path), "--set", f"output={foreign}"]),
        ["output:", "not a clocksweep results directory"],
    )
    assert sorted(os.listdir(foreign)) == ["notes.txt"]


def test_missing_config_file(tmp_path):
    assert_one_line_error(run_cli(["run", str(tmp_path / "nope.toml")]), ["nope.toml"])


def test_config_file_not_text(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe\x00name")
    assert_one_line_error(run_cli(["run", str(path), "--dry-run"]), ["binary.toml", "not UTF-8"])


def test_bench_seconds_must_be_a_number():
    result = run_cli(["bench", "--seconds", "nan"])
    assert result.exit_code == 2 and "nan" in result.output and "Traceback" not in result.output


RUN_RECORD = {
    "config": {"seed": 1, "first": 0, "deals": 10, "shard_size": 10, "record": "deals", "grid": {}},
    "cells": [],
    "config_hash": "h",
    "record": "deals",
}


@pytest.mark.parametrize(
    "run_json, words",
    [
        ("[]", ["run.json is not a clocksweep run record", "a JSON list, not an object"]),
        ('"x"', ["run.json is not a clocksweep run record"]),
        ("{}", ["run.json is not a clocksweep run record", "no config"]),
        (
            json.dumps({**RUN_RECORD, "config": {**RUN_RECORD["config"], "deals": "x"}}),
            ["run.json is not a clocksweep run record", "config.deals is 'x'"],
        ),
        (
            json.dumps({key: value for key, value in RUN_RECORD.items() if key != "cells"}),
            ["run.json is not a clocksweep run record", "no list of cells"],
        ),
        (None, ["run.json is a directory", "move it away"]),
    ],
)
def test_malformed_run_records_are_named(tmp_path, run_json, words):
    where = tmp_path / "results"
    where.mkdir()
    if run_json is None:
        (where / "run.json").mkdir()
    else:
        (where / "run.json").write_text(run_json)
    for command in ("validate", "report"):
        assert_one_line_error(run_cli([command, str(where)]), words)
    assert sorted(p.name for p in where.iterdir()) == ["run.json"]


def real_run_record(where: Path) -> dict:
    """run.json as a run of a one-shard config into ``where`` writes it."""
    from pipeline.sweep import driver as sweep

    made = config.from_dict(
        {
            "name": "t",
            "seed": 1,
            "deals": 10,
            "shard_size": 10,
            "output": str(where),
            "grid": {"variant": ["standard"]},
        }
    )
    return sweep.start_run_record(made, None, None, 1, 0).to_json()


@pytest.mark.parametrize(
    "manifest_json, words, report_words",
    [
        (
            "[]",
            ["manifest.json is not a clocksweep manifest"],
            ["manifest.json is not a clocksweep manifest"],
        ),
        (
            '{"shards": 5}',
            ["manifest.json is not a clocksweep manifest"],
            ["not a clocksweep manifest"],
        ),
        (
            '{"config_hash": HASH, "shards": [{"index": "a"}]}',
            ["manifest.json: shard entry", "is malformed (its index is 'a', not a count)"],
            ["no committed shard verifies"],
        ),
    ],
)
def test_malformed_manifests_are_named(tmp_path, manifest_json, words, report_words):
    where = tmp_path / "results"
    where.mkdir()
    run = real_run_record(where)
    (where / "run.json").write_text(json.dumps(run))
    (where / "manifest.json").write_text(
        manifest_json.replace("HASH", json.dumps(run["config_hash"]))
    )
    checked = run_cli(["validate", str(where)])
    assert checked.exit_code == 1 and "Traceback" not in checked.output
    assert any(all(word in line for word in words) for line in checked.output.splitlines()), (
        checked.output
    )
    assert_one_line_error(run_cli(["report", str(where)]), report_words)


def test_validate_bad_input(tmp_path):
    assert_one_line_error(run_cli(["validate", str(tmp_path / "nowhere")]), ["no such directory"])
    (tmp_path / "a_file").write_text("not a directory\n")
    assert_one_line_error(
        run_cli(["validate", str(tmp_path / "a_file")]), ["a file, not a results"]
    )
    assert_one_line_error(
        run_cli(["validate", str(tmp_path)]), ["not a clocksweep results directory"]
    )


def test_unreachable_address(base):
    """A cluster address where nothing listens: one line at once, not Ray's minutes of retries."""
    import socket

    path, out = base
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert_one_line_error(
        run_cli(["run", str(path), "--address", f"127.0.0.1:{port}"]),
        ["--address: nothing answers at 127.0.0.1:", "ray start --head"],
        out,
    )
    assert_one_line_error(run_cli(["run", str(path), "--address", ""]), ["--address: empty"], out)
    # Ray's client address form: the same, at once, not after the client's 30-second timeout.
    assert_one_line_error(
        run_cli(["run", str(path), "--address", f"ray://127.0.0.1:{port}"]),
        [f"--address: nothing answers at ray://127.0.0.1:{port}", "10001"],
        out,
    )


def silent_listener():
    """A socket on loopback that takes every connection and never answers: (port, close)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def accept_and_hold():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_hold, daemon=True).start()

    def close():
        listener.close()
        for connection in held:
            connection.close()

    return listener.getsockname()[1], close


def run_subprocess(args: list[str], env: dict):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )


def test_object_store_that_never_answers(base, tmp_path):
    """An S3 endpoint that takes the connection and never answers (its client would retry for
    minutes): the run gives up after CLOCKSWEEP_CONNECT_SECONDS, one line, exit 1 (the store's
    failure, not bad input)."""
    path, _ = base
    port, close = silent_listener()
    uri = f"s3://bucket/results?endpoint_override=127.0.0.1:{port}&scheme=http"
    try:
        done = run_subprocess(
            ["run", str(path), "--set", f"output={uri}"],
            {
                "CLOCKSWEEP_CONNECT_SECONDS": "3",
                "AWS_ACCESS_KEY_ID": "a",
                "AWS_SECRET_ACCESS_KEY": "b",
                "AWS_EC2_METADATA_DISABLED": "true",
            },
        )
    finally:
        close()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"clocksweep: error: output: {uri} did not answer within 3 s"
    ]


def test_address_that_answers_but_is_not_ray(base):
    """Something listens at the address but is not Ray (Ray would wait without end): the run
    gives up after CLOCKSWEEP_CONNECT_SECONDS with one error line, exit 2, nothing written."""
    path, out = base
    port, close = silent_listener()
    try:
        done = run_subprocess(
            ["run", str(path), "--address", f"127.0.0.1:{port}"],
            {"CLOCKSWEEP_CONNECT_SECONDS": "5", "RAY_ADDRESS": ""},
        )
    finally:
        close()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]  # Ray may log its retries before it
    assert last.startswith("clocksweep: error: --address: 127.0.0.1:")
    assert "no Ray cluster answered there within 5 s" in last
    assert not out.exists()


@pytest.mark.parametrize(
    "override, words",
    [
        (
            f"grid.strategy={'x' * 100_000}.py:f",
            ["grid.strategy: 'xxx", "...", "(100,007 characters)"],
        ),
        (f"name={'n' * 5000}", ["name: 'nnn", "...", "(5,002 characters)", "at most 128"]),
        (f"k{'k' * 5000}=1", ["...", "unknown key"]),
    ],
)
def test_a_long_value_is_echoed_cut_short(base, override, words):
    """Issue 45: a 100,000-character strategy name gave a 100,174-byte error line. A value
    an error repeats is cut in its middle (`pipeline.echoed`), and the line too (`cut`)."""
    path, out = base
    result = run_cli(["run", str(path), "--set", override, "--dry-run"])
    assert_one_line_error(result, words, out)
    assert len(result.stderr) <= len("clocksweep: error: ") + pipeline.LINE_LIMIT + 1
