"""``typed-rag eval report|compare|routes``: a run's report, one method paired across two
runs, and typed-rag by route."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.reports.compare import compare_runs, format_comparison
from eval.reports.report import write_report
from eval.reports.routes import route_rows, routes_table
from typed_rag.config import Settings


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser("report", help="tables, per-type figure, failures and cost of a run")
    p.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
    p.add_argument("--out", type=Path, help="write the report here instead of the run directory")
    p.set_defaults(func=cmd_report)

    p = eval_sub.add_parser(
        "compare",
        help="one method in two run directories (e.g. two retrieval configs), paired per question",
    )
    p.add_argument("a", metavar="RUN_DIR:METHOD", help="e.g. results/wiki-nfqa/reranked:rag")
    p.add_argument("b", metavar="RUN_DIR:METHOD", help="e.g. results/wiki-nfqa/run:rag")
    p.add_argument(
        "--changed-only",
        action="store_true",
        help="pair only the questions whose answers differ between the two runs (an option "
        "that acts on few questions, undiluted)",
    )
    p.add_argument("--json", type=Path, help="also write the comparison as JSON here")
    p.set_defaults(func=cmd_compare)

    p = eval_sub.add_parser(
        "routes",
        help="typed-rag minus rag and llm by the route each question took, optionally with "
        "routes answered by plain RAG (method.rag_types)",
    )
    p.add_argument("run_dir", type=Path, help="a directory made by `eval run` (rag and typed-rag)")
    p.add_argument(
        "--as-rag",
        default="",
        help="comma-separated routes scored as RAG's answers, e.g. DEBATE",
    )
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.set_defaults(func=cmd_routes)


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    files = write_report(args.run_dir, settings, args.out)
    print(files.markdown.read_text(encoding="utf-8"))
    print(f"wrote {files.markdown}, {files.json}" + (f", {files.figure}" if files.figure else ""))
    return 0


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    result = compare_runs(args.a, args.b, changed_only=args.changed_only)
    print(format_comparison(result))
    _write_json(args.json, result)
    return 0


def cmd_routes(args: argparse.Namespace, settings: Settings) -> int:
    as_rag = [r.strip().upper() for r in args.as_rag.split(",") if r.strip()]
    rows = route_rows(args.run_dir, as_rag)
    print(routes_table(rows, as_rag))
    _write_json(args.json, {"run": str(args.run_dir), "as_rag": as_rag, "rows": rows})
    return 0


def _write_json(path: Path | None, body: object) -> None:
    """``--json``: also write the result there."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
