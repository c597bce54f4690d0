"""Fixtures shared by the test modules."""

import os
import sys
from pathlib import Path

import pytest

# The modules that take longest (each 30 s to two minutes in the suite: drivers of their own,
# Ray instances and clusters, leases run out, signals), about the longest first, begin before
# the rest. xdist gives each process one module at a time, by default those with the most
# tests first: these, with few tests each, came last, and the suite waited tens of seconds on
# the last of them while the other processes, done, sat idle. (pyproject.toml turns xdist's
# order off.)
STARTED_FIRST = (  # by their time in one run of the suite (seconds over their tests, 2 cores)
    "store/test_races.py",  # 137
    "sweep/test_sweep.py",  # 107
    "store/test_store_faults.py",  # 96
    "store/test_object_store.py",  # 95
    "sweep/test_early.py",  # 86
    "sweep/test_cluster.py",  # 79
    "engine/test_gpu.py",  # 50
    "sweep/test_custom_sweep.py",  # 45
    "sweep/test_signals.py",  # 44
    "report/test_report.py",  # 41
    "engine/test_custom.py",  # 37
    "engine/test_odds.py",  # 33
)


def pytest_configure(config):
    """Compile the kernels into numba's cache once, before xdist starts its processes
    (`warm`); in those processes (``workerinput``), nothing."""
    if not hasattr(config, "workerinput"):
        import warm

        warm.warm_once()


def pytest_collection_modifyitems(config, items):
    """The modules of STARTED_FIRST first, in its order; the others after, as collected (a
    module's tests keep their order, and stay together)."""
    tests = Path(__file__).parent

    def rank(item) -> int:
        module = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return STARTED_FIRST.index(module) if module in STARTED_FIRST else len(STARTED_FIRST)

    items.sort(key=rank)


@pytest.fixture(scope="session", autouse=True)
def exact_totals_kept_apart(tmp_path_factory):
    """The exact totals of strategies of the user's (`exact_cache`) are kept in a directory
    of the session's, not the user's cache: the tests enumerate, and the CLI they start too."""
    from pipeline.engine import exact_cache

    before = os.environ.get(exact_cache.ENVIRONMENT)
    os.environ[exact_cache.ENVIRONMENT] = str(tmp_path_factory.mktemp("exact-totals"))
    yield
    if before is None:
        os.environ.pop(exact_cache.ENVIRONMENT, None)
    else:
        os.environ[exact_cache.ENVIRONMENT] = before


@pytest.fixture(scope="module")
def local_ray(request):
    """A local Ray instance for a module's in-process runs (sweep.run uses it as it is). It
    is kept for the next module that asks for one, since each start costs seconds; a module
    whose workers must see an environment of its own (``FRESH_RAY = True``, set before its
    instance starts) gets an instance of its own, ended with the module."""
    import ray

    fresh = getattr(request.module, "FRESH_RAY", False)
    if fresh and ray.is_initialized():
        ray.shutdown()
    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="warning",
            log_to_driver=False,
        )
    yield
    if fresh:
        ray.shutdown()


@pytest.fixture(scope="module", autouse=True)
def no_ray_left_over(request):
    """A module that asks for no local instance runs with none: its runs start their own,
    or connect where they are told."""
    if "ray" in sys.modules:
        uses = any(
            item.module is request.module and "local_ray" in item.fixturenames
            for item in request.session.items
        )
        import ray

        if not uses and ray.is_initialized():
            ray.shutdown()
    yield


def pytest_sessionfinish(session, exitstatus):
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()
