"""The import graph: the library never imports the command line, and the core no outer area.

Walks every import statement (function-level ones included) with ``ast``, so a
lazy import cannot hide an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = ("typed_rag", "indexes", "serving", "eval", "ui")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (by path) and the top-level packages it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        tops: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
        found[str(path.relative_to(REPO))] = tops
    return found


@pytest.mark.parametrize("package", LIBRARY)
def test_the_library_does_not_import_the_cli(package: str) -> None:
    offenders = [m for m, tops in imported_packages(package).items() if "cli" in tops]
    assert offenders == []


def test_the_core_does_not_import_serving_eval_ui_or_cli() -> None:
    outer = {"serving", "eval", "ui", "cli"}
    offenders = {m: tops & outer for m, tops in imported_packages("typed_rag").items()}
    assert {m: t for m, t in offenders.items() if t} == {}
