"""clocksweep: sweeps of Clock Patience deals, its rescue rules and their odds.

The package is built in layers (`LAYERS`, bottom up): a module imports its own package and
the packages of the layers below its own, never one of its own layer or above it. The sweep
and the report share a layer: neither imports the other. tests/test_layers.py reads every
module's imports and holds them to this order; docs/architecture.md's table of the layers
lists the packages in it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source of truth: the version in pyproject.toml, as installed.
    __version__ = version("clocksweep")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

LAYERS = (
    ("engine",),  # the game: rules, deals, the engines, exact odds
    ("inference",),  # intervals, confidence sequences, claims as data and their verdict rules
    ("records",),  # what a sweep records
    ("store",),  # results directories
    ("sweep", "report"),  # playing a sweep; reporting on one
    ("api", "commands"),  # the Python API over them; what the commands read from their user
    ("cli",),  # the thin command line over the API
)

# How long a value an error line repeats may be, and the line itself: past them, a value or
# a line is cut in its middle (`echoed`, `cut`), so that a line stays one whatever was given.
ECHO_LIMIT = 120
LINE_LIMIT = 1000


def cut(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` if it is at most ``limit`` characters, else its start and end around "..."."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]}...{text[-tail:]}"


def echoed(value) -> str:
    """``value`` as a one-line error repeats it: its repr, cut past ECHO_LIMIT characters,
    with its length."""
    text = repr(value)
    return (
        text if len(text) <= ECHO_LIMIT else f"{cut(text, ECHO_LIMIT)} ({len(text):,} characters)"
    )


# How every one-line error of the command line begins (the CLI's, and the sweep's deadlines,
# which end the process themselves).
ERROR_PREFIX = "clocksweep: error: "
# How a claims file argument (`report --claims`, a stop rule's `claims_file`) names the rule
# pages' claims, shipped with the package (pipeline/claims/rule-pages.toml).
RULE_PAGES = "rule-pages"


def html_fields(title: str, fields: list[tuple[str, object]]) -> str:
    """A notebook's view of an object: its title, then a table of its fields, escaped."""
    import html

    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(str(name))}</th>"
        f"<td style='text-align:left'>{html.escape(str(value))}</td></tr>"
        for name, value in fields
    )
    return f"<div><strong>{html.escape(title)}</strong><table>{rows}</table></div>"
