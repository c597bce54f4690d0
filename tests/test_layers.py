"""Layers one way: every module of pipeline/ imports only its own package and the layers below
its own (`pipeline.LAYERS`), read from its source (every import statement, those inside
functions too); and docs/architecture.md lists the packages in that order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pipeline

ROOT = Path(pipeline.__file__).parent
LAYER = {package: level for level, packages in enumerate(pipeline.LAYERS) for package in packages}


def package_of(module: str) -> str:
    """``pipeline.sweep.driver`` -> ``sweep``; ``pipeline.cli`` -> ``cli``; ``pipeline`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported(source: str, module: str) -> list[str]:
    """The pipeline modules ``source`` (the text of ``module``) imports, relative ones resolved."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package upwards
                base = module.split(".")[: -node.level]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module)
    return [name for name in names if name == "pipeline" or name.startswith("pipeline.")]


def against_the_order(module: str, source: str) -> list[str]:
    """Each import of ``module`` that runs against `pipeline.LAYERS`, as a line of text."""
    own = package_of(module)
    wrong = []
    for name in imported(source, module):
        target = package_of(name)
        if target in ("", own):
            continue  # the package root (its constants) and the module's own package
        if own not in LAYER or target not in LAYER:
            wrong.append(f"{module} imports {name}: a package not in pipeline.LAYERS")
        elif LAYER[target] >= LAYER[own]:
            wrong.append(f"{module} ({own}) imports {name} ({target}): not a layer below")
    return wrong


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path.read_text()


def test_every_import_runs_down_the_layers():
    wrong = [line for module, source in modules() for line in against_the_order(module, source)]
    assert not wrong, "\n".join(wrong)


def test_an_import_up_or_across_the_layers_is_caught():
    up = "def f():\n    from pipeline.report import claims\n"
    assert against_the_order("pipeline.engine.rules", up)
    across = "from pipeline.sweep import stopping\n"
    assert against_the_order("pipeline.report.figures", across)
    relative = "from ..store import layout\n"
    assert against_the_order("pipeline.inference.stats", relative)
    down = "import pipeline.engine.rules\nfrom pipeline import ERROR_PREFIX\n"
    assert not against_the_order("pipeline.cli", down)


def test_the_architecture_page_lists_the_layers_in_their_order():
    page = (ROOT.parent / "docs" / "architecture.md").read_text()
    section = page.split("## The layers", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `pipeline/(\w+)(?:/|\.py)`", section, flags=re.MULTILINE)
    assert listed == [package for packages in pipeline.LAYERS for package in packages]
