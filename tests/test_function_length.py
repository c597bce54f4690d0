"""No function of pipeline/ over 60 lines, but the kernels numba compiles (engine/kernel.py,
and the functions compiled on their first call): a function that long is doing more than
one thing, and the next change makes it longer."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline

ROOT = Path(pipeline.__file__).parent
MAX_LINES = 60
COMPILED = {"njit", "jit", "compiled_on_first_call"}  # numba's, and the records' own wrapper


def compiled(node: ast.FunctionDef) -> bool:
    names = {
        getattr(d, "id", None) or getattr(d, "attr", None)
        for d in (getattr(d, "func", d) for d in node.decorator_list)
    }
    return bool(names & COMPILED)


def long_functions(source: str, name: str) -> list[str]:
    return [
        f"{name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_LINES
        and not compiled(node)
    ]


def test_no_function_is_over_sixty_lines_outside_the_kernels():
    found = [
        line
        for path in sorted(ROOT.rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "engine/kernel.py"
        for line in long_functions(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
    assert not found, "\n".join(found)


def test_a_long_function_is_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert long_functions(f"def f():\n{body}\n", "m.py") == ["m.py:1 f: 61 lines"]
    assert not long_functions(f"@njit\ndef f():\n{body}\n", "m.py")
