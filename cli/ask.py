"""``typed-rag ask``: answer one question and show the type, plan, answer, sources and cost."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from typed_rag.config import Settings
from typed_rag.engines.base import EngineError
from typed_rag.errors import UserError
from typed_rag.pipelines import MODES, describe_plan
from typed_rag.request import AnswerRequest, RequestError, Resolved
from typed_rag.result import Result
from typed_rag.retrieval.collections import collection_settings
from typed_rag.system import TypedRAG
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
    ask.add_argument(
        "--collection",
        help="answer from this collection (`typed-rag index list`; default: the Wikipedia index)",
    )
    ask.set_defaults(func=run_ask)


# What a request field is called on this command line, for its error messages.
FLAGS = {"force_type": "--type", "top_k": "-k/--top-k", "model": "--mode"}


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    settings = collection_settings(settings, args.collection)  # its index is the one searched
    try:
        request = AnswerRequest(
            args.question,
            mode=args.mode,
            force_type=args.force_type,
            top_k=args.top_k,
            seed=args.seed,
        ).resolve(settings)
    except RequestError as exc:
        flag = FLAGS.get(exc.param or "")
        raise UserError(f"{flag}: {exc}" if flag else str(exc)) from None
    try:
        result = asyncio.run(_ask(request, settings))
    except EngineError as exc:
        print(f"typed-rag: error: the LLM engine failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print_result(result)
    return 0


async def _ask(request: Resolved, settings: Settings) -> Result:
    """The request as the server would answer it: resolved (defaults, checks, ``top_k``
    fitted to the context) by :mod:`typed_rag.request`, like an HTTP request."""
    rag = TypedRAG.from_settings(settings.model_copy(update={"mode": request.mode}))
    async with rag:
        return await rag.answer(request)


def print_result(result: Result, out: TextIO | None = None) -> None:
    """The human-readable trace: type, plan, answer, numbered sources, cost."""
    out = out or sys.stdout  # looked up per call: tests and pipes replace sys.stdout
    w = out.write
    shown = result.type
    prob = result.probabilities.get(shown or "")
    detail = [result.type_source if result.type_source != "none" else "no classifier"]
    if prob is not None:
        detail.insert(0, f"p={prob:.2f}")
    if result.predicted_type and result.predicted_type != shown:
        detail.append(f"classifier said {result.predicted_type}")
    w(f"mode: {result.mode}\n")
    w(f"type: {shown} ({', '.join(detail)})\n")
    found = result.constraints or {}
    if found.get("detected"):
        w(f"constraints: core question: {found.get('question', '')}\n")
        for word, key in (("include", "include"), ("leave out", "exclude")):
            if found.get(key):
                w(f"  {word}: {'; '.join(found[key])}\n")
    for line in describe_plan(result.plan):
        w(f"{line}\n")
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
            where = f"id {p.id}" if p.source is None else p.source
            if p.page is not None:
                where += f", page {p.page}"
            w(f"  [{p.citation}] {p.title} ({where}, score {p.score:.2f}{rerank})\n")
    total = result.timings.get("total", 0.0)
    w(
        f"cost: {result.rounds} rounds, {len(result.calls)} calls, "
        f"{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens, "
        f"{total:.1f} s\n"
    )
