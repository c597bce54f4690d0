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
won = kernel.play(7, 0, 2000, [rules.Cell("standard")])["won"]
from numba.np import arraymath
loaded = sorted(m for m in ("scipy.linalg", "scipy.linalg.cython_blas") if m in sys.modules)
import scipy.linalg.cython_blas  # importable as usual afterwards
print(json.dumps({{
    "modules": loaded,
    "blas": arraymath._HAVE_BLAS,
    "wins": int(won.sum()),
    "decks": kernel.deck_ranks(7, 0, 3).tolist(),
}}))
"""

# What numba's own first load does, in this numba: the control that shows the refusal matters.
NUMBA_ALONE = """
import sys
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
print("scipy.linalg" in sys.modules)
"""


def child(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def first_call(before: str = "") -> dict:
    return json.loads(child(FIRST_CALL.format(before=before)))


def test_the_first_kernel_call_does_not_import_scipy_linalg_where_numba_would():
    assert child(NUMBA_ALONE).split() == ["True"]
    fresh = first_call()
    assert fresh["modules"] == []
    assert fresh["blas"] is False


def test_blas_imported_before_is_found_and_the_results_are_the_same():
    # A process that has scipy.linalg already (a report's) keeps it, numba finds BLAS there
    # as it would alone, and the kernel plays the same deals.
    fresh = first_call()
    with_blas = first_call("import scipy.linalg.cython_blas")
    assert with_blas["modules"] == ["scipy.linalg", "scipy.linalg.cython_blas"]
    assert with_blas["blas"] is True
    assert with_blas["wins"] == fresh["wins"]
    assert with_blas["decks"] == fresh["decks"]
