"""Strategies of the user's: a function read from a file or a module, checked, and compiled.

A sweep names one beside the built-in strategies as ``FILE.py:FUNCTION`` (a path, relative to
the config that names it) or ``module:FUNCTION`` (a module Python can import). What it sees
is what its parameters are named (`rules.SEES`); it returns the hour of the rescue pile
(docs/rules.md, strategies of your own).

Its source travels as text inside every cell that plays it (`rules.Custom`, addressed by the
sha256 of that text), so a Ray worker on any node, or a job submitted to a cluster, compiles
the same function from the same text, and nothing of the user's need be importable there.
This is the one module of the engine that reads a file: the user's, when a strategy is named.

Both engines play it: the reference engine calls the Python function itself
(`pick_python`); the kernel calls it compiled by numba, through a wrapper of one signature
for every strategy (`compiled`), which the kernel takes as a first-class function, so the
kernel is compiled once (and cached on disk) whatever the strategies of the user's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import linecache
import os
import re
import threading

import numpy as np

from pipeline import echoed
from pipeline.engine import reach, rules
from pipeline.engine.rules import N_HOURS, N_PILES, SEEN_COLUMNS, Custom

SPEC = re.compile(r"(?P<where>[^:]+):(?P<function>[A-Za-z_][A-Za-z0-9_]*)")
# What the enumeration of count vectors (`count_totals`) records for a strategy that
# raised: not an hour, nor any number a strategy returns by mistake in practice.
RAISED = -(2**62)


class CustomError(ValueError):
    """A strategy of the user's that cannot be played; the message is one line."""


def is_custom(name: str) -> bool:
    """Whether a grid's strategy names a function of the user's (``WHERE:FUNCTION``)."""
    return ":" in name


# --- Reading ------------------------------------------------------------------------------


def read(spec: str, base: str = ".") -> Custom:
    """The strategy ``spec`` names: a file (relative to ``base``) or a module, and a function
    in it. CustomError, one line, if it cannot be played."""
    match = SPEC.fullmatch(spec.strip())
    if not match:
        raise CustomError(
            f"strategy: {echoed(spec)} is not FILE.py:FUNCTION nor module:FUNCTION "
            "(a function's name after the colon)"
        )
    where, function = match["where"], match["function"]
    if where.endswith(".py") or "/" in where or os.sep in where:
        origin = os.path.normpath(os.path.join(base, os.path.expanduser(where)))
        source = _file_text(spec, origin)
    else:
        origin, source = _module_text(spec, where)
    return from_source(spec, function, source, origin)


def _file_text(spec: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        raise CustomError(f"strategy: {echoed(spec)}: no file {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise CustomError(f"strategy: {echoed(spec)}: cannot read {path}: {reason}") from None


def _module_text(spec: str, module: str) -> tuple[str, str]:
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.origin or not found.origin.endswith(".py"):
        raise CustomError(
            f"strategy: {echoed(spec)}: no module {echoed(module)} with a Python source file "
            "(name a FILE.py, or a module on the Python path)"
        )
    return found.origin, _file_text(spec, found.origin)


def from_source(spec: str, function: str, source: str, origin: str) -> Custom:
    """The strategy of function ``function`` in ``source`` (read from ``origin``), checked:
    its parameters, and numba's compile. CustomError, one line, otherwise."""
    digest = hashlib.sha256(source.encode()).hexdigest()
    namespace = _namespace(spec, source, origin, digest)
    python = _function_in(spec, function, namespace, origin)
    parameters = inspect.signature(python).parameters.values()
    for parameter in parameters:
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            raise CustomError(
                f"strategy: {echoed(spec)}: parameter {echoed(parameter.name)} is not plain"
            )
        if parameter.name not in rules.SEES:
            raise CustomError(
                f"strategy: {echoed(spec)}: parameter {echoed(parameter.name)} is not something a strategy "
                f"sees; name its parameters from: {', '.join(rules.SEES)}"
            )
    sees = tuple(p.name for p in parameters)
    reaches = _reaches(spec, python, namespace, source)
    try:
        custom = Custom(function, sees, digest, reaches, spec=spec, source=source)
    except rules.RuleError as error:
        raise CustomError(str(error)) from None
    compiled(custom)
    return custom


def _namespace(spec: str, source: str, origin: str, digest: str) -> dict:
    """The module ``source`` makes, run once per process and source."""
    with _lock:
        if digest in _namespaces:
            return _namespaces[digest]
        # numba and tracebacks quote lines of the user's file from here.
        filename = f"{origin} (strategy source {digest[:12]})"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = {"__name__": f"clocksweep_strategy_{digest[:16]}", "__file__": origin}
        try:
            exec(compile(source, filename, "exec"), namespace)
        except Exception as error:  # the user's module: any error is theirs to fix
            raise CustomError(
                f"strategy: {echoed(spec)}: {origin} fails to load: {_first_line(error)}"
            ) from None
        _namespaces[digest] = namespace
        return namespace


def _function_in(spec: str, function: str, namespace: dict, origin: str):
    found = namespace.get(function)
    found = getattr(found, "py_func", found)  # a function the user compiled already
    if not inspect.isfunction(found):
        functions = sorted(
            name
            for name, value in namespace.items()
            if inspect.isfunction(getattr(value, "py_func", value)) and not name.startswith("_")
        )
        raise CustomError(
            f"strategy: {echoed(spec)}: no function {echoed(function)} in {origin}"
            + (f" (functions there: {', '.join(functions)})" if functions else "")
        )
    return found


def _reaches(spec: str, python, namespace: dict, source: str) -> str:
    """The digest of what the strategy reaches outside its file (`reach`)."""
    try:
        return reach.digest(reach.reached(python, namespace["__name__"], source))
    except reach.StaleHelper as error:
        raise CustomError(f"strategy: {echoed(spec)}: {error}") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


_lock = threading.RLock()
_namespaces: dict[str, dict] = {}
_compiled: dict[Custom, object] = {}
_functions: dict[Custom, object] = {}  # checked against what they reach, once a process


def python_function(custom: Custom):
    """The strategy's Python function (from the source the cell carries), with the helpers
    and values it reads from other files as they were where the sweep began (`reach`): a
    node whose copy of a helper differs is refused, not played."""
    with _lock:
        if custom in _functions:
            return _functions[custom]
    if hashlib.sha256(custom.source.encode()).hexdigest() != custom.digest:
        raise CustomError(
            f"strategy: {echoed(custom.name)}: its source is not the one its digest names"
        )
    namespace = _namespace(custom.spec, custom.source, custom.spec or custom.name, custom.digest)
    python = _function_in(custom.spec, custom.name, namespace, custom.spec)
    if _reaches(custom.spec, python, namespace, custom.source) != custom.reaches:
        raise CustomError(
            f"strategy: {custom.spec or custom.name!r}: the helpers or values it reads from "
            "other files are not those the sweep was started with (edited since, or another "
            "copy on this machine)"
        )
    with _lock:
        _functions[custom] = python
    return python


# --- What a strategy sees -----------------------------------------------------------------


def seen_matrix(taken_cards: list[list[int]], died: int) -> np.ndarray:
    """`seen` (rules.SEES): row q, cards of each rank taken from pile q, ``taken_cards[q]``
    being those cards' ranks; column DIED, 1 at the pile where the chain died."""
    seen = np.zeros((N_PILES, SEEN_COLUMNS), dtype=np.int64)
    for pile, ranks in enumerate(taken_cards):
        for rank in ranks:
            seen[pile, rank] += 1
    seen[died, rules.DIED] = 1
    return seen


def pick_python(custom: Custom, deal: int, down: list[int], seen, bottoms, rand: float) -> int:
    """The pile index the strategy's Python function rescues at; StrategyError if it raises
    or names no pile that holds cards."""
    given = {
        "counts": np.array(down[:N_HOURS], dtype=np.int64),
        "seen": np.array(seen, dtype=np.int64),
        "bottoms": np.array(bottoms, dtype=np.int64),
        "rand": float(rand),
    }
    try:
        hour = python_function(custom)(*(given[name] for name in custom.sees))
    except Exception as error:  # the user's code: whatever it raises stops the sweep
        raise rules.StrategyError(
            f"strategy {echoed(custom.name)} raised {_first_line(error)} on deal {deal}"
        ) from None
    if isinstance(hour, np.integer):
        hour = int(hour)
    why = rules.pick_problem(hour, down)
    if why:
        raise rules.strategy_error(custom.name, deal, hour, why)
    return hour - 1


# --- Compiled -----------------------------------------------------------------------------


def signature():
    """The one signature of every strategy the kernel calls (`compiled`)."""
    from numba import types

    return types.int64(types.int64[::1], types.int64[:, ::1], types.int64[::1], types.float64)


def _argument_types():
    from numba import types

    return {
        "counts": types.int64[::1],
        "seen": types.int64[:, ::1],
        "bottoms": types.int64[::1],
        "rand": types.float64,
    }


def compiled(custom: Custom):
    """The strategy compiled by numba behind a wrapper of one signature for all (counts,
    seen, bottoms, rand; the hour): what the kernel calls.
    CustomError with the first line of numba's reason if numba cannot compile it."""
    with _lock:
        if custom in _compiled:
            return _compiled[custom]
        import numba

        from_python = numba.njit(python_function(custom))
        argument_types = _argument_types()
        try:
            from_python.compile(tuple(argument_types[name] for name in custom.sees))
        except Exception as error:  # numba's errors are many kinds; the first line says which
            raise CustomError(
                f"strategy: {custom.spec or custom.name!r}: numba cannot compile "
                f"{custom.name}: {numba_reason(error)}"
            ) from None
        returns = from_python.nopython_signatures[0].return_type
        if not isinstance(returns, numba.types.Integer):
            raise CustomError(
                f"strategy: {custom.spec or custom.name!r}: {custom.name} "
                f"{_what_it_returns(custom, returns)}; expected an hour, an integer 1..{N_HOURS}"
            )
        wrapper = _wrapper(from_python, custom.sees)
        _compiled[custom] = wrapper
        return wrapper


def _what_it_returns(custom: Custom, returns) -> str:
    """What a strategy returns that is not an integer, in words: numba types a function
    that never returns a value as returning none, which reads as a bug of the reader's for
    one that only raises or has no return."""
    import ast

    if str(returns) == "none":
        tree = ast.parse(custom.source)
        body = [node for node in ast.walk(tree) if getattr(node, "name", None) == custom.name]
        nodes = [inner for node in body[:1] for inner in ast.walk(node)]
        if not any(isinstance(node, ast.Return) and node.value is not None for node in nodes):
            if any(isinstance(node, ast.Raise) for node in nodes):
                return "only raises, never returning a value"
            return "returns no value (it has no return of one)"
    return f"returns {returns}"


def numba_reason(error: Exception) -> str:
    """The first line of numba's message that says something (it opens with a banner)."""
    for line in str(error).splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line and not line.startswith(("Failed in", "During:", "File ")):
            return line
    return type(error).__name__


def _wrapper(from_python, sees: tuple[str, ...]):
    """A function of the one signature that calls ``from_python`` with what it sees. What
    it raises reaches the kernel's caller (`kernel.play`); a try here cost 3% of a sweep."""
    import numba

    text = f"def strategy(counts, seen, bottoms, rand):\n    return user({', '.join(sees)})\n"
    namespace = {"user": from_python}
    exec(text, namespace)
    return numba.njit(signature(), nogil=True)(namespace["strategy"])


# --- Every count vector (exact odds) --------------------------------------------------------

# Played over every vector of face-down counts (`count_totals`): the strategy inlined into
# the loop, for each value of `rand` if it reads it, with each vector's weight prod
# C(suits, d_q) and rand's chance as an integer over RAND_GRID. The number of piles, RANKS,
# is a constant of each compile: with the strategy inlined, the compiler then knows the
# length of what it loops over (3-4 times as fast as with both a run-time argument). The
# first piles are fixed by the caller (`leading`), so that threads share the vectors.
# Inlined, what the strategy raises cannot be caught here; a part where it raises is played
# again by the careful form (CAREFUL_CALL), which catches it and says on which counts.
_ENUMERATOR = """
def enumerate_counts(leading, suits, rand_values, rand_weights, choose, totals, counts):
    ranks = RANKS
    seen = np.zeros((N_PILES, SEEN_COLUMNS), dtype=np.int64)
    bottoms = np.zeros(N_PILES, dtype=np.int64)
    shown = np.zeros(RANKS, dtype=np.int64)
    # weight[q], down[q]: prod C(suits, counts[r]) and sum counts[r] over the piles r < q.
    weight = np.ones(ranks + 1, dtype=np.int64)
    down = np.zeros(ranks + 1, dtype=np.int64)
    fixed = leading.shape[0]
    counts[:] = 0
    counts[:fixed] = leading
    for q in range(ranks):
        weight[q + 1] = weight[q] * choose[counts[q]]
        down[q + 1] = down[q] + counts[q]
    while True:
        if down[ranks] > 0:
            # Over rand's values: the vector's weight, by the size of the pile chosen.
            for i in range(rand_values.shape[0]):
                for q in range(ranks):
                    shown[q] = counts[q]  # afresh for each call, whatever the last one did
                rand = rand_values[i]
                CALL
                if hour < 1 or hour > ranks or counts[max(0, min(hour, ranks) - 1)] == 0:
                    return hour, rand
                totals[counts[hour - 1] - 1, down[ranks]] += weight[ranks] * rand_weights[i]
        # The next vector, the last pile counting fastest; the leading piles stay fixed.
        q = ranks - 1
        while q >= fixed and counts[q] == suits:
            counts[q] = 0
            q -= 1
        if q < fixed:
            return 0, 0.0
        counts[q] += 1
        for r in range(q, ranks):
            weight[r + 1] = weight[r] * choose[counts[r]]
            down[r + 1] = down[r] + counts[r]
"""
_CAREFUL_CALL = """try:
                    hour = user(ARGUMENTS)
                except Exception:
                    hour = RAISED"""
LEADING_PILES = 3  # piles fixed per part of the enumeration: (suits + 1)**3 parts to share


def _enumerator(strategy: Custom, ranks: int, careful: bool = False):
    with _lock:
        key = ("enumerator", strategy, ranks, careful)
        if key not in _compiled:
            import numba

            user = numba.njit(inline="never" if careful else "always")(python_function(strategy))
            arguments = {"counts": "shown", "seen": "seen", "bottoms": "bottoms", "rand": "rand"}
            text = _ENUMERATOR.replace(
                "CALL", _CAREFUL_CALL if careful else "hour = user(ARGUMENTS)"
            ).replace("ARGUMENTS", ", ".join(arguments[name] for name in strategy.sees))
            namespace = {
                "np": np,
                "user": user,
                "RAISED": RAISED,
                "RANKS": ranks,
                "N_PILES": N_PILES,
                "SEEN_COLUMNS": SEEN_COLUMNS,
            }
            exec(text, namespace)
            _compiled[key] = numba.njit(nogil=True)(namespace["enumerate_counts"])
        return _compiled[key]


def rand_law(strategy: Custom) -> tuple[np.ndarray, np.ndarray]:
    """The values of `rand` the enumeration plays and their chances times RAND_GRID: its 46
    if the strategy reads it, else one."""
    if "rand" not in strategy.sees:
        return np.zeros(1), np.array([rules.RAND_GRID], dtype=np.int64)
    weights = [int(chance * rules.RAND_GRID) for _, chance in rules.RAND_LAW]
    return np.array(rules.RAND_VALUES, dtype=np.float64), np.array(weights, dtype=np.int64)


def count_totals(
    strategy: Custom, ranks: int, suits: int, started=None
) -> tuple[tuple[int, ...], ...]:
    """For each size k = 1..suits (row k - 1) and each U: the sum over vectors of face-down
    counts d (ranks hour piles, each 0..suits) with sum U of prod C(suits, d_q) *
    P(d_p = k) * RAND_GRID, p the pile the strategy picks (P over `rand`, where it reads it;
    `exact_cache.consistent` checks what this makes them). The parts (the first piles
    fixed) are shared by as many threads as the machine has cores; ``started(seconds)``, if
    given, is told how long the whole should take, from the time of the first part.
    StrategyError if the strategy names no pile holding cards for one of them (the first
    found), or raises."""
    import time
    from concurrent.futures import ThreadPoolExecutor
    from itertools import product
    from math import comb

    enumerate_counts = _enumerator(strategy, ranks)
    values, weights = rand_law(strategy)
    choose = np.array([comb(suits, k) for k in range(suits + 1)], dtype=np.int64)
    leading = [
        np.array(values_, dtype=np.int64)
        for values_ in product(range(suits + 1), repeat=min(LEADING_PILES, ranks))
    ]

    def part(first):
        totals = np.zeros((suits, ranks * suits + 1), dtype=np.int64)
        counts = np.zeros(ranks, dtype=np.int64)
        arguments = (first, suits, values, weights, choose, totals, counts)
        try:
            hour, rand = enumerate_counts(*arguments)
        except Exception:  # the user's code raised: the careful form finds where
            hour, rand = _enumerator(strategy, ranks, careful=True)(*arguments)
            if not hour:  # raised once, then not: not a function of its arguments alone
                raise
        return totals, (hour, rand, counts) if hour else None

    part(np.full(ranks, suits, dtype=np.int64))  # one vector: the compile, before the clock
    timed = time.perf_counter()
    parts = [part(leading[0])]
    threads = min(os.cpu_count() or 1, len(leading))
    if started is not None:
        started((time.perf_counter() - timed) * (len(leading) - 1) / threads)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts += pool.map(part, leading[1:])
    for _, wrong in parts:
        if wrong is not None:
            raise _wrong_answer(strategy, *wrong)
    totals = sum(totals for totals, _ in parts)
    return tuple(tuple(int(t) for t in row) for row in totals)


def _wrong_answer(strategy: Custom, hour: int, rand: float, counts: np.ndarray):
    """The StrategyError of an answer to counts that names no pile holding cards, or of a
    raise (the Python function's own error, called again on those counts)."""
    given = {"counts": counts.copy(), "seen": np.zeros((N_PILES, SEEN_COLUMNS), dtype=np.int64)}
    given |= {"bottoms": np.zeros(N_PILES, dtype=np.int64), "rand": rand}
    where = f"counts {tuple(int(c) for c in counts)}" + (
        f", rand {echoed(rand)}" if "rand" in strategy.sees else ""
    )
    if hour == RAISED:
        try:
            python_function(strategy)(*(given[name] for name in strategy.sees))
        except Exception as error:  # the user's code
            return rules.StrategyError(
                f"strategy {echoed(strategy.name)} raised {_first_line(error)} on {where}"
            )
        return rules.StrategyError(f"strategy {echoed(strategy.name)} raised an error on {where}")
    why = rules.pick_problem(hour, list(counts) + [0] * (N_PILES - len(counts)))
    return rules.StrategyError(
        f"strategy {echoed(strategy.name)} returned hour {hour} on {where}: {why}"
    )
