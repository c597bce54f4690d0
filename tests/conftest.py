"""Fixtures shared by the test modules."""

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for a module's in-process runs (sweep.run uses it as it is)."""
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="warning",
        log_to_driver=False,
    )
    yield
    ray.shutdown()
