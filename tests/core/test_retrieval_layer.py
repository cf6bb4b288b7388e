"""The retrieval layer sits in the core: no core module imports the offline ``indexes``
package, and importing retrieval or the rerankers loads no heavy optional dependency."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("bm25s", "numba", "scipy", "torch", "sentence_transformers", "FlagEmbedding")


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_core_never_imports_indexes() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "typed_rag").rglob("*.py"))
        for name in _imported(ast.parse(path.read_text(encoding="utf-8")))
        if name == "indexes" or name.startswith("indexes.")
    ]
    assert offenders == []


def test_retrieval_imports_no_heavy_dependency() -> None:
    code = (
        "import sys, typed_rag.retrieval, typed_rag.rerank, typed_rag.encoder; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
