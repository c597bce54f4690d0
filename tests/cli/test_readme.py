"""The README's main command and then its Python snippets, as written and in order, in a
fresh directory: the API's snippet (which once met the main command's results: "use
--fresh"), then the strategy of one's own, saved under the name its first line gives, and the
odds command the README gives for it. The one difference from a
user's machine is the directory's configs/quick.toml: the shipped one with fewer deals and
played on threads, so that the test takes seconds (what is tested is that the commands and
the snippet run in this order, not Ray's start, which tests/sweep tests)."""

from __future__ import annotations

import re
import subprocess
import sys

from test_docs import REPO, readme_command

QUICK_DEALS = 26_000


def python_snippets() -> list[str]:
    """The README's ```python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def quick_config() -> str:
    """configs/quick.toml with QUICK_DEALS deals in shards of a tenth, on threads."""
    text = (REPO / "configs" / "quick.toml").read_text()
    text, deals = re.subn(r"(?m)^deals = [\d_]+", f"deals = {QUICK_DEALS}", text)
    text, shards = re.subn(r"(?m)^shard_size = [\d_]+", f"shard_size = {QUICK_DEALS // 10}", text)
    assert deals == shards == 1, "configs/quick.toml has no deals or shard_size line to shrink"
    return text + '\n[run]\nexecutor = "threads"\n'


def test_the_main_command_then_the_python_snippet_run_as_written(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quick.toml").write_text(quick_config())
    # The main command but its install (this environment has the package installed).
    install, *commands = readme_command("Set up what a sweep needs").split(" && ")
    assert install.startswith("python3 -m pip install"), install
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert (tmp_path / "results" / "quick" / "report" / "report.html").is_file()
    api_snippet, strategy_file = python_snippets()
    # Each line of the snippet as a notebook runs it; its last expressions shown, as there.
    shown = api_snippet + "\nprint(results.cells().height, results.claims().height)\n"
    done = subprocess.run(
        [sys.executable, "-c", shown], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cells, claims = map(int, done.stdout.split()[-2:])
    assert cells == 48 and claims > 0, done.stdout

    name = re.match(r"# (\S+\.py)\n", strategy_file).group(1)
    (tmp_path / name).write_text(strategy_file)
    (odds,) = re.findall(r"`(clocksweep odds --strategy [^`]+)`", (REPO / "README.md").read_text())
    done = subprocess.run(
        odds, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "nearest_twelve" in done.stdout, (done.stdout, done.stderr)
