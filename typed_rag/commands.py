"""``typed-rag ask``: answer one question and show the type, plan, answer, sources and cost."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from typed_rag.config import Settings
from typed_rag.engines.base import EngineError
from typed_rag.errors import UserError
from typed_rag.pipelines import MODES
from typed_rag.result import Result
from typed_rag.types import QuestionType


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    ask = sub.add_parser(
        "ask",
        help="answer one question and show its trace",
        description="Answer one question with Typed-RAG (or a baseline) and print the trace.",
    )
    ask.add_argument("question", help="the question, in quotes")
    ask.add_argument("--mode", choices=MODES, help="pipeline (default: settings mode, typed-rag)")
    ask.add_argument(
        "--type",
        dest="force_type",
        metavar="TYPE",
        help="skip the classifier and use this type: " + ", ".join(t.value for t in QuestionType),
    )
    ask.add_argument("-k", "--top-k", type=int, dest="top_k", help="passages per query (paper: 5)")
    ask.add_argument("--seed", type=int, help="sampling seed (default: sampling.seed)")
    ask.add_argument("--json", action="store_true", help="print the whole Result as JSON")
    ask.set_defaults(func=run_ask)


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    if args.force_type is not None:
        try:
            QuestionType.parse(args.force_type)
        except ValueError as exc:
            raise UserError(f"--type: {exc}") from None
    if args.top_k is not None and args.top_k < 1:
        raise UserError(f"-k/--top-k must be at least 1, got {args.top_k}")
    if args.mode:
        settings = settings.model_copy(update={"mode": args.mode})
    try:
        result = asyncio.run(_ask(args, settings))
    except EngineError as exc:
        print(f"typed-rag: error: the LLM engine failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print_result(result)
    return 0


async def _ask(args: argparse.Namespace, settings: Settings) -> Result:
    from typed_rag.system import TypedRAG

    rag = TypedRAG.from_settings(settings)
    async with rag:
        return await rag.answer(
            args.question,
            mode=settings.mode,
            force_type=args.force_type,
            top_k=args.top_k,
            seed=args.seed,
        )


def print_result(result: Result, out: TextIO | None = None) -> None:
    """The human-readable trace: type, plan, answer, numbered sources, cost."""
    out = out or sys.stdout  # looked up per call: tests and pipes replace sys.stdout
    w = out.write
    prob = result.probabilities.get(result.type or "")
    detail = [result.type_source if result.type_source != "none" else "no classifier"]
    if prob is not None:
        detail.insert(0, f"p={prob:.2f}")
    if result.predicted_type and result.predicted_type != result.type:
        detail.append(f"classifier said {result.predicted_type}")
    w(f"mode: {result.mode}\n")
    w(f"type: {result.type} ({', '.join(detail)})\n")
    found = result.constraints or {}
    if found.get("detected"):
        w(f"constraints: core question: {found.get('question', '')}\n")
        for word, key in (("include", "include"), ("leave out", "exclude")):
            if found.get(key):
                w(f"  {word}: {'; '.join(found[key])}\n")
    plan = result.plan
    if plan.get("core_sub_questions"):
        use = "augmented retrieval" if plan.get("augmented") else "for the answer to cover"
        w(f"plan: core sub-questions ({use}):\n")
        for i, q in enumerate(plan["core_sub_questions"], 1):
            w(f"  {i}. {q}\n")
    if plan.get("keywords"):
        extra = f" [{plan['compare_type']}]" if plan.get("compare_type") else ""
        w(f"plan: keywords{extra}: {'; '.join(plan['keywords'])}\n")
    if plan.get("is_compare") is False:
        w("plan: not a comparison\n")
    if plan.get("sub_queries"):
        w("plan: sub-queries:\n")
        for i, q in enumerate(plan["sub_queries"], 1):
            w(f"  {i}. {q}\n")
    if plan.get("perspectives"):
        w(f"plan: debate topic: {plan.get('debate_topic', '')}\n")
        for p in plan["perspectives"]:
            w(f"  - {p['perspective']}: {p['query']}\n")
    for sub in result.sub_answers:
        if sub.dropped:
            w(f"left out: sub-answer to {sub.query!r} ({sub.dropped})\n")
    for note in result.fallbacks:
        w(f"fallback: {note}\n")
    w(f"\n{result.answer}\n\n")
    if result.invalid_citations:
        numbers = ", ".join(f"[{n}]" for n in result.invalid_citations)
        w(f"citations: {numbers} point at no shown passage\n")
    if result.passages:
        w("sources:\n")
        for p in result.passages:
            rerank = f", rerank {p.rerank_score:.3f}" if p.rerank_score is not None else ""
            w(f"  [{p.citation}] {p.title} (id {p.id}, score {p.score:.2f}{rerank})\n")
    total = result.timings.get("total", 0.0)
    w(
        f"cost: {result.rounds} rounds, {len(result.calls)} calls, "
        f"{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens, "
        f"{total:.1f} s\n"
    )
