"""What a process's first kernel call loads: numba's registries, without scipy.linalg (numba
imports it only to learn whether BLAS is there, and the kernel uses no linear algebra)."""

from __future__ import annotations

import json
import subprocess
import sys

FIRST_CALL = """
import json, sys
{before}
from pipeline.engine import kernel, rules
cell = rules.Cell("standard")
won = kernel.play(7, 0, 2000, [cell])["won"]
loaded_without = sorted(m for m in ("scipy.linalg", "scipy.linalg.cython_blas") if m in sys.modules)
import scipy.linalg.cython_blas  # importable as usual afterwards
print(json.dumps({{"modules": loaded_without, "wins": int(won.sum()), "decks": kernel.deck_ranks(7, 0, 3).tolist()}}))
"""


def first_call(before: str = "") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL.format(before=before)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_first_kernel_call_does_not_import_scipy_linalg():
    assert first_call()["modules"] == []


def test_blas_imported_before_stays_and_the_results_are_the_same():
    # A process that has scipy.linalg already (a report's) keeps it, and plays the same deals.
    fresh = first_call()
    with_blas = first_call("import scipy.linalg.cython_blas")
    assert with_blas["modules"] == ["scipy.linalg", "scipy.linalg.cython_blas"]
    assert with_blas["wins"] == fresh["wins"]
    assert with_blas["decks"] == fresh["decks"]
