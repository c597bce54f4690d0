"""What a strategy of the user's reaches beyond its own file: the helpers and values it reads.

A strategy's source travels as text and is named by its sha256 (`custom`), but numba compiles
more than that text: every function the strategy calls, from whatever module it was imported
from, and every value it reads at module level. An edit to a helper in another file changes
what the cells play, so it must change the strategy's identity, or a grown or resumed sweep
mixes rows of two functions under one name.

What numba compiles is what the code's names resolve to when it is compiled: a global name
looks itself up in the function's module (``__globals__``), an attribute of a module global
(``helpers.first_nonempty``) in that module, a free variable in the function's closure. So
`reached` follows those, from the strategy's function, through every function it reaches:
the code objects' names (``co_names``, of nested code too) looked up where Python and numba
look them up, not the import lines. What it records:

- a function or numba dispatcher from a module of the user's: its module, name and source
  text, and what it reaches in turn;
- one defined in the strategy's own file: nothing of its own (the file's digest covers its
  text), but what it reaches;
- a value a function reads (a number, a string, a tuple, an array): its type and value;
- a function or module of Python's or of an installed package (``np.argmax``, ``math``):
  its name only; their code is the environment's, like numba's own.

The record is empty for a strategy that reads nothing outside its file but its own functions,
numbers and the environment's modules; then the identity is the file's digest alone, as it
was before helpers were followed.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import sys
import sysconfig
import types
from pathlib import Path

import numpy as np

# Where Python's own modules and installed packages live: theirs, not the user's.
_ENVIRONMENT = tuple(
    Path(p).resolve()
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
)
OWN_FILE = "<strategy file>"  # how the record names the strategy's own module
PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _is_environment(module: types.ModuleType | None) -> bool:
    """Whether ``module`` is Python's or an installed package's (or built in)."""
    if module is None:
        return False
    file = getattr(module, "__file__", None)
    if not file:
        return True  # built into the interpreter
    path = Path(file).resolve()
    return any(path.is_relative_to(root) for root in _ENVIRONMENT)


def _code_names(code: types.CodeType) -> set[str]:
    """The names a code object looks up (globals and attributes), its nested code's too."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return names


class _Walk:
    """One walk from a strategy's function: ``record`` what it reaches, by qualified name.
    ``own_names`` are the names the strategy's file binds itself (not by an import): its own
    numbers and tuples, which its digest covers."""

    def __init__(self, own_module: str, own_names: frozenset[str]):
        self.own_module = own_module
        self.own_names = own_names
        self.record: dict[str, object] = {}
        self.seen: set[int] = set()

    def function(self, python: types.FunctionType) -> None:
        if id(python) in self.seen:
            return
        self.seen.add(id(python))
        names = _code_names(python.__code__)
        in_file = python.__module__ == self.own_module
        module = OWN_FILE if in_file else python.__module__
        for name in sorted(names & python.__globals__.keys()):
            own = in_file and name in self.own_names
            self.value(f"{module}.{name}", python.__globals__[name], names, own)
        for name, cell in zip(python.__code__.co_freevars, python.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
            self.value(f"{module}.{python.__qualname__}.{name}", contents, names, False)

    def value(self, where: str, value, names: set[str], own: bool) -> None:
        python = getattr(value, "py_func", value)  # a numba dispatcher: its Python function
        if isinstance(python, types.FunctionType):
            self.callee(where, python)
        elif isinstance(value, types.ModuleType):
            self.module(value, names)
        elif isinstance(value, PLAIN + (tuple, np.ndarray, np.generic)) and not own:
            self.record[where] = _plain(value)
        # Anything else (a builtin, a ufunc, a class) is the environment's: numba's own
        # typing of it does not change with the user's files.

    def callee(self, where: str, python: types.FunctionType) -> None:
        if python.__module__ == self.own_module:
            self.function(python)  # its text is the file's; what it reaches may not be
        elif not _is_environment(sys.modules.get(python.__module__)):
            self.record[where] = {"function": python.__qualname__, "source": _source(python)}
            self.function(python)

    def module(self, module: types.ModuleType, names: set[str]) -> None:
        """The attributes of a module global that the code reads (``helpers.LIMIT``)."""
        if _is_environment(module):
            return
        for name in sorted(names):
            if hasattr(module, name):
                self.value(f"{module.__name__}.{name}", getattr(module, name), names, False)


class StaleHelper(ValueError):
    """A helper whose file has changed since its module was imported into this process: the
    code that would run is not the text the identity would record."""


def _source(python: types.FunctionType) -> str:
    """The helper's source text, as its file holds it; StaleHelper if that is not the code
    this process has (the file edited after the import, in a long-lived process)."""
    try:
        text = inspect.getsource(python)
        module_text = inspect.getsource(inspect.getmodule(python))
        # The whole file, compiled as the import did: how a line compiles depends on what
        # the module around it binds (an imported name's attribute is loaded another way).
        compiled = compile(module_text, python.__code__.co_filename, "exec")
    except (OSError, TypeError, SyntaxError):  # no file to read: the code stands for it
        return f"code {_code_key(python.__code__)!r}"
    if _code_key(python.__code__) not in map(_code_key, _nested(compiled)):
        raise StaleHelper(
            f"{python.__module__}.{python.__qualname__} has changed in its file since this "
            "process imported it; start Python afresh to play the new one"
        )
    return text


def _nested(code: types.CodeType):
    """Every code object inside ``code``, at any depth."""
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield constant
            yield from _nested(constant)


def _code_key(code: types.CodeType) -> tuple:
    """What a code object does, without where its lines are: its instructions, names and
    constants (nested code by the same key)."""
    constants = tuple(
        _code_key(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts
    )
    return (
        code.co_qualname,
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        constants,
    )


def _plain(value) -> object:
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {
            "array": str(data.dtype),
            "shape": list(data.shape),
            "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
        }
    if isinstance(value, tuple):
        return {"tuple": [_plain(item) for item in value]}
    return f"{type(value).__name__} {value!r}"


def own_names(source: str) -> frozenset[str]:
    """The names a strategy's file binds at its top level, none of them by an import (a name
    bound both ways may hold what another module gave it)."""
    bound, imported = set(), set()
    nodes = list(ast.parse(source).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)  # its body is its own scope
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif not isinstance(node, ast.Lambda | ast.comprehension):
            nodes.extend(ast.iter_child_nodes(node))
    return frozenset(bound - imported)


def reached(python: types.FunctionType, own_module: str, source: str) -> dict[str, object]:
    """What ``python`` (a strategy's function, defined by ``source`` as the module named
    ``own_module``) reaches outside its file, by qualified name (the module docstring)."""
    walk = _Walk(own_module, own_names(source))
    walk.function(python)
    return walk.record


def digest(record: dict[str, object]) -> str:
    """The sha256 of what a strategy reaches, or "" where it reaches nothing that counts."""
    if not record:
        return ""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
