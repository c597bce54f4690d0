"""numba functions of the records compiled when first called, not when imported."""

from __future__ import annotations

import functools
import threading


def compiled_on_first_call(function):
    """numba-compile ``function`` (from the on-disk cache) when it is first called: a report
    over summary records never calls it, and is spared importing numba (a tenth of a second).
    Threads that call it first at once (the report reads shards in threads) compile it once."""
    compiled = None
    compiling = threading.Lock()

    @functools.wraps(function)
    def call(*args):
        nonlocal compiled
        if compiled is None:
            with compiling:
                if compiled is None:
                    import numba as nb

                    compiled = nb.njit(cache=True, nogil=True)(function)
        return compiled(*args)

    return call
