"""clocksweep: sweeps of Clock Patience deals, its rescue rules and their odds."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source of truth: the version in pyproject.toml, as installed.
    __version__ = version("clocksweep")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

# How every one-line error of the command line begins (the CLI's, and the sweep's deadlines,
# which end the process themselves).
ERROR_PREFIX = "clocksweep: error: "
