"""The README's two commands and the documentation's links, read from the files themselves.

- CI runs the README's test command, exactly (`.ci/run`), and the README's main command
  installs what a sweep needs and nothing of the tests.
- Every relative link in the README, docs/ and benchmarks/ names a file that exists, and a
  heading of it where it names one (as GitHub makes a heading's anchor).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks/README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def readme_command(comment: str) -> str:
    """The command on the line after the README's shell comment that starts with ``comment``."""
    lines = (REPO / "README.md").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"# {comment}"))
    return lines[at + 1]


def test_ci_runs_the_readme_test_command_exactly():
    command = readme_command("Set up the test tools")
    assert "'.[test]'" in command and "pytest" in command, command
    ci = [line for line in (REPO / ".ci/run").read_text().splitlines() if line and line[0] != "#"]
    assert ci[-1] == command


def test_the_main_command_installs_no_test_tools():
    command = readme_command("Set up what a sweep needs")
    assert command.startswith("python3 -m pip install -e . && clocksweep run configs/"), command
    assert "[test]" not in command


def anchor(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it: lower case, punctuation dropped,
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(target)
    assert not broken, broken
