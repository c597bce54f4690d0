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
    ("api",),  # the Python API over them
    ("cli",),  # the thin command line over the API
)

# How every one-line error of the command line begins (the CLI's, and the sweep's deadlines,
# which end the process themselves).
ERROR_PREFIX = "clocksweep: error: "
# How a claims file argument (`report --claims`, a stop rule's `claims_file`) names the rule
# pages' claims, shipped with the package (pipeline/claims/rule-pages.toml).
RULE_PAGES = "rule-pages"
