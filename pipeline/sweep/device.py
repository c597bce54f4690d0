"""Which kernel a run's deals are played by (``[run] device``), and whether it can be.

A run on the CUDA kernel that cannot have it (numba-cuda not installed, no GPU and no
simulator here, a Ray cluster without a GPU) stops before anything is written, in one line.
"""

from __future__ import annotations

import os

from pipeline.sweep.config import ConfigError, SweepConfig

SIMULATOR_ENV = "NUMBA_ENABLE_CUDASIM"  # numba-cuda's simulator: the CUDA kernel on the CPU
EXTRA = "pip install -e '.[cuda]'"


def simulated() -> bool:
    """Whether numba-cuda's simulator stands in for a GPU in this process (and its workers,
    which inherit its environment)."""
    return os.environ.get(SIMULATOR_ENV, "0") not in ("", "0")


def check_here(config: SweepConfig) -> None:
    """ConfigError if the run's device cannot play in this process (where a run on threads,
    or on a local Ray instance, plays)."""
    if config.device != "cuda":
        return
    try:
        from pipeline.engine import gpu
    except ImportError:
        raise ConfigError(f"run.device: 'cuda' needs numba-cuda, the cuda extra: {EXTRA}") from None
    problem = gpu.gpu_problem()
    if problem:
        raise ConfigError(f"run.device: 'cuda': {problem}")


def gpus_per_task(config: SweepConfig) -> float:
    """The GPUs a Ray task of the run asks for: one on the CUDA kernel, none under the
    simulator (the CPU plays it) or on the CPU kernel."""
    return 1.0 if config.device == "cuda" and not simulated() else 0.0


def check_cluster(config: SweepConfig, resources: dict) -> None:
    """ConfigError if the run asks its tasks for a GPU and the cluster has none: they would
    wait for one for ever."""
    if gpus_per_task(config) and not resources.get("GPU"):
        raise ConfigError(
            "run.device: 'cuda', and the Ray cluster has no GPU (its resources: "
            f"{', '.join(f'{k} {v:g}' for k, v in sorted(resources.items()) if '/' not in k and 'node:' not in k)})"
        )
