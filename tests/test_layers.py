"""The import graph of the project: which area may import which, and no import cycle.

Every import statement counts, including those inside functions (a function-level
import hides a cycle but does not remove it); imports under ``if TYPE_CHECKING:``
do not, since they never run. See ARCHITECTURE.md for the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AREAS = ("typed_rag", "indexes", "serving", "ui", "eval", "training", "cli", "benchmarks")
# The runtime (what the wheel and the image ship) and the research lab beside it.
RUNTIME = ("typed_rag", "indexes", "serving", "ui", "cli")
LAB_CLI = "cli.lab"  # the lab's commands, inside the cli folder but an area of the lab
# Which areas each area may import (itself always).
ALLOWED: dict[str, set[str]] = {
    "typed_rag": set(),  # the runtime: never training, eval or anything above it
    "indexes": {"typed_rag"},
    "serving": {"typed_rag", "ui"},  # the server mounts the demo
    "ui": {"typed_rag"},
    "cli": {"typed_rag", "indexes", "serving", "ui", LAB_CLI},  # cli.lab: where it is installed
    "eval": {"typed_rag", "indexes"},
    "training": {"typed_rag", "eval"},  # judges and resampling come from eval
    LAB_CLI: {"typed_rag", "indexes", "serving", "ui", "eval", "training", "cli"},
    "benchmarks": {"typed_rag", "indexes", "serving", "ui", "eval", "training", "cli", LAB_CLI},
}
# Inside the runtime, packages that must not import others (source prefix -> forbidden
# prefixes): an engine only generates text, so it knows no pipeline, retrieval or finishing
# step; retrieval knows no pipeline; finishing works on text and passages, not on pipelines.
SUB_LAYERS: dict[str, tuple[str, ...]] = {
    "typed_rag.engines": (
        "typed_rag.pipelines",
        "typed_rag.retrieval",
        "typed_rag.finishing",
        "typed_rag.system",
        "typed_rag.routing",
    ),
    "typed_rag.retrieval": (
        "typed_rag.pipelines",
        "typed_rag.engines",
        "typed_rag.system",
        "typed_rag.finishing",
    ),
    "typed_rag.rerank": ("typed_rag.pipelines", "typed_rag.system"),
    "typed_rag.finishing": ("typed_rag.pipelines", "typed_rag.system", "typed_rag.engines"),
    "typed_rag.classifier": ("typed_rag.pipelines", "typed_rag.system"),
}
# What the lab defines and the runtime must not (issue 78: the runtime holds no lab code):
# classifier training, calibration and its metrics (training.classifier), the NF-CATS files
# it reads, and the resumable JSONL records of runs (eval.store).
LAB_ONLY = frozenset(
    {
        "train_head",
        "train_linear",
        "train_lexical_part",
        "fit_vocabulary",
        "fit_temperature",
        "expected_calibration_error",
        "class_weights",
        "classification_report",
        "read_nfcats_csv",
        "HeadConfig",
        "FineTuneConfig",
        "JsonlStore",
        "read_jsonl",
        "rewrite_jsonl",
        "with_method_profile",
    }
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """Line numbers of statements under ``if TYPE_CHECKING:``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports_of(path: Path, modules: set[str]) -> Iterator[str]:
    """The project modules ``path`` imports (the longest known module of each name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_blocks(tree)
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports the module pkg.sub; ``from mod import name``, mod.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        for name in names:
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                candidate = ".".join(parts[:i])
                if candidate in modules:
                    yield candidate
                    break


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for area in AREAS for p in (ROOT / area).rglob("*.py")}
    modules = set(files)
    return {m: set(imports_of(p, modules)) - {m} for m, p in files.items()}


def area(module: str) -> str:
    if module == LAB_CLI or module.startswith(LAB_CLI + "."):
        return LAB_CLI
    return module.split(".")[0]


def test_areas_import_only_what_their_layer_allows() -> None:
    bad = [
        f"{m} -> {t}"
        for m, targets in graph().items()
        for t in targets
        if (src := area(m)) != (dst := area(t)) and dst not in ALLOWED[src]
    ]
    assert not bad, "imports across layers:\n" + "\n".join(sorted(bad))


def test_runtime_sub_layers() -> None:
    bad = [
        f"{m} -> {t}"
        for m, targets in graph().items()
        for src, forbidden in SUB_LAYERS.items()
        if m == src or m.startswith(src + ".")
        for t in targets
        if any(t == f or t.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, "imports against the runtime's sub-layers:\n" + "\n".join(sorted(bad))


def test_no_import_cycle() -> None:
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_only_the_entry_point_reaches_the_lab() -> None:
    """The runtime reaches the lab's commands only from ``cli.main``, which registers them
    where the lab is installed (a runtime-only install gets a message instead)."""
    reaching = {
        m
        for m, targets in graph().items()
        if area(m) in RUNTIME and any(area(t) == LAB_CLI for t in targets)
    }
    assert reaching == {"cli.main"}


def test_the_runtime_defines_no_lab_code() -> None:
    """No function, method or class of the runtime has a name of :data:`LAB_ONLY`."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
        for area_ in RUNTIME
        for path in sorted((ROOT / area_).rglob("*.py"))
        if area(module_name(path)) != LAB_CLI
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name in LAB_ONLY
    ]
    assert not found, "lab code in the runtime:\n" + "\n".join(found)
