"""Configs naming strategies of your own (docs/rules.md, strategies of your own): read
relative to the config, recorded in run.json with their source, and every way to name one
wrongly refused through the CLI: exit status 2, one line naming the strategy, nothing written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import clocksweep, config_file
from test_config import assert_one_line_error

from pipeline.engine import rules
from pipeline.records import identity
from pipeline.sweep import config

ENGINE_TESTS = Path(__file__).resolve().parents[1] / "engine"

BASE = """
name = "t"
seed = 1
deals = 1000
shard_size = 500
output = "{out}"
[grid]
variant = ["standard", "watch"]
strategy = [{strategies}]
finale = [{finales}]
"""


def write(tmp_path: Path, strategies: str, finales: str = '"down"') -> tuple[Path, Path]:
    """A config beside copies of the engine tests' strategy files; gives (config, output)."""
    for name in ("more_strategies.py", "builtins_as_functions.py"):
        shutil.copy(ENGINE_TESTS / name, tmp_path / name)
    out = tmp_path / "out"
    body = BASE.format(out=out, strategies=strategies, finales=finales)
    return config_file(tmp_path, body, "sweep.toml"), out


def test_a_strategy_is_named_relative_to_its_config(tmp_path):
    path, _ = write(tmp_path, '"most", "more_strategies.py:second_most"')
    loaded = config.load(str(path))
    (mine,) = loaded.customs
    assert mine.name == "second_most" and mine.spec == "more_strategies.py:second_most"
    assert [c.strategy for c in loaded.cells if c.variant == "watch"] == ["most", "second_most"]
    resolved = loaded.resolved()
    assert resolved["grid"]["strategy"] == ["most", "second_most"]
    assert resolved["custom"]["second_most"]["digest"] == mine.digest
    assert resolved["custom_source"][mine.digest] == (tmp_path / "more_strategies.py").read_text()
    # The identity holds what it sees and its digest: the cell's record, and no more.
    (record,) = [c for c in loaded.identity()["cells"] if c["strategy"] == "second_most"]
    assert record["custom"] == {"sees": ["counts"], "digest": mine.digest}
    assert identity.customs_of(resolved) == (mine,)
    # The order it is listed in does not change the sweep.
    other, _ = write(tmp_path, '"more_strategies.py:second_most", "most"')
    assert config.load(str(other)).hash == loaded.hash


def test_a_changed_function_changes_the_hash_and_builtins_do_not(tmp_path):
    path, _ = write(tmp_path, '"most", "more_strategies.py:second_most"')
    before = config.load(str(path)).hash
    source = tmp_path / "more_strategies.py"
    source.write_text(source.read_text() + "\n# a change of the file\n")
    assert config.load(str(path)).hash != before
    builtins, _ = write(tmp_path, '"most"')
    by_rules = config.load(str(builtins))
    assert not by_rules.customs and "custom" not in by_rules.resolved()


def test_a_run_records_the_strategy_and_its_source(tmp_path):
    path, out = write(tmp_path, '"most", "more_strategies.py:coin_among_most"')
    done = clocksweep("run", path, "--set", "run.executor=threads")
    assert done.exit_code == 0, done.output
    recorded = json.loads((out / "run.json").read_text())
    custom = recorded["config"]["custom"]["coin_among_most"]
    assert custom["sees"] == ["counts", "rand"]
    assert custom["spec"] == "more_strategies.py:coin_among_most"
    assert recorded["config"]["custom_source"][custom["digest"]].startswith('"""Strategies')
    assert any(c.get("custom") == {"sees": ["counts", "rand"], "digest": custom["digest"]}
               for c in recorded["cells"])  # fmt: skip
    assert clocksweep("validate", out).exit_code == 0


@pytest.mark.parametrize(
    "strategies, finales, words",
    [
        ('"most", "nowhere.py:f"', '"down"', ["grid.strategy: 'nowhere.py:f': no file"]),
        ('"more_strategies.py:nothing"', '"down"', ["no function 'nothing'", "second_most"]),
        ('"more_strategies.py:peeks"', '"down"', ["parameter 'deck'", "counts, seen"]),
        (
            '"more_strategies.py:not_compilable"',
            '"down"',
            ["numba cannot compile not_compilable", "undefined_name"],
        ),
        ('"more_strategies.py:returns_a_float"', '"down"', ["returns float64", "1..12"]),
        (
            '"more_strategies.py:no_king_below"',
            '"down"',
            ["reads bottoms", "add 'up' to grid.finale"],
        ),
        ('"best"', '"down"', ["'best' is not known", "FILE.py:FUNCTION"]),
        ('"more_strategies.py"', '"down"', ["'more_strategies.py' is not known", "FUNCTION"]),
        ('"no_module_of_that_name:f"', '"down"', ["no module 'no_module_of_that_name'"]),
    ],
)
def test_a_strategy_named_wrongly_is_one_line(tmp_path, strategies, finales, words):
    path, out = write(tmp_path, strategies, finales)
    assert_one_line_error(clocksweep("run", path), words, out)


def test_a_name_of_a_builtin_or_taken_twice_is_refused(tmp_path):
    path, out = write(tmp_path, '"most", "mine.py:most"')
    (tmp_path / "mine.py").write_text("def most(counts):\n    return 1\n")
    assert_one_line_error(clocksweep("run", path), ["clashes with the built-in strategy"], out)
    (tmp_path / "other.py").write_text("def second_most(counts):\n    return 1\n")
    path, out = write(tmp_path, '"more_strategies.py:second_most", "other.py:second_most"')
    assert_one_line_error(clocksweep("run", path), ["both named 'second_most'"], out)


def test_more_strategies_of_your_own_than_a_sweep_plays_are_refused(tmp_path):
    source = "".join(f"def pick{k}(counts):\n    return 1\n" for k in range(rules.MAX_CUSTOM + 1))
    (tmp_path / "many.py").write_text(source)
    names = ", ".join(f'"many.py:pick{k}"' for k in range(rules.MAX_CUSTOM + 1))
    path, out = write(tmp_path, names)
    assert_one_line_error(clocksweep("run", path), [f"at most {rules.MAX_CUSTOM}"], out)


def test_a_strategy_given_on_the_command_line(tmp_path):
    path, out = write(tmp_path, '"most"')
    spec = tmp_path / "more_strategies.py"
    done = clocksweep("run", path, "--dry-run", "--set", f"grid.strategy=most,{spec}:second_most")
    assert done.exit_code == 0, done.output
    assert "second_most" in done.output and not out.exists()


def test_the_example_config_loads_with_its_strategies():
    examples = Path(__file__).resolve().parents[2] / "examples"
    loaded = config.load(str(examples / "strategies.toml"))
    assert {c.name for c in loaded.customs} == {
        "nearest_twelve",
        "least_visited",
        "follow_the_bottoms",
    }
    assert all(c.spec.startswith("strategies.py:") for c in loaded.customs)
