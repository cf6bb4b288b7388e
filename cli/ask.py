"""``typed-rag ask``: answer one question and show the type, plan, answer, sources and cost."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from eval.data.wikinfqa import load_wikinfqa
from training.conversation_set import (
    Conversation,
    build_conversations,
    evaluate,
    read_conversations,
    write_conversations,
)
from typed_rag.config import Settings
from typed_rag.engines import build_engine
from typed_rag.engines.base import EngineError
from typed_rag.errors import UserError
from typed_rag.pipelines import MODES, describe_plan
from typed_rag.request import AnswerRequest, RequestError, Resolved
from typed_rag.result import Result
from typed_rag.retrieval.collections import collection_settings
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType

DEFAULT_SET = Path("results/conversations/wiki_nfqa_followups.jsonl")


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

    conv = sub.add_parser(
        "conversations",
        help="two-turn Wiki-NFQA conversations: build the set, evaluate follow-up rewrites",
        description="Follow-up questions made standalone: build a two-turn conversation set "
        "from Wiki-NFQA, or evaluate how often the rewrite resolves the follow-up.",
    )
    conv_sub = conv.add_subparsers(dest="conv_command", required=True, metavar="ACTION")
    build = conv_sub.add_parser("build", help="write the conversation set (deterministic)")
    build.add_argument(
        "--out", type=Path, default=DEFAULT_SET, help=f"JSONL (default {DEFAULT_SET})"
    )
    build.add_argument("-n", type=int, default=30, help="conversations (default 30)")
    build.set_defaults(func=run_conversations_build)
    ev = conv_sub.add_parser("eval", help="rewrite each follow-up with the engine and judge it")
    ev.add_argument("--input", type=Path, default=DEFAULT_SET, help="the set (JSONL)")
    ev.add_argument("-n", type=int, default=30, help="first N conversations (default 30)")
    ev.add_argument("--out", type=Path, required=True, help="JSON summary and rows")
    ev.set_defaults(func=run_conversations_eval)


def run_conversations_build(args: argparse.Namespace, settings: Settings) -> int:
    if args.n < 1:
        raise UserError(f"-n must be at least 1, got {args.n}")
    records = load_wikinfqa(settings.eval.data_dir).records
    conversations = build_conversations(records, args.n)
    write_conversations(args.out, conversations)
    print(f"wrote {len(conversations)} conversations to {args.out}")
    return 0


def run_conversations_eval(args: argparse.Namespace, settings: Settings) -> int:
    if not args.input.is_file():
        raise UserError(f"no conversation set at {args.input}; run `typed-rag conversations build`")
    conversations = read_conversations(args.input)[: args.n]
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def write(report: dict[str, Any]) -> None:
        report["summary"].update(
            input=str(args.input),
            engine=settings.engine.backend,
            model=settings.engine.model,
            rewrite_mode=settings.conversation.rewrite,
            planned=len(conversations),
        )
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")

    report = asyncio.run(_conversations_eval(settings, conversations, write))
    write(report)
    print(json.dumps(report["summary"], indent=2))
    return 0


async def _conversations_eval(
    settings: Settings,
    conversations: list[Conversation],
    on_row: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    rag = TypedRAG(settings, engine=build_engine(settings))
    async with rag:
        return await evaluate(rag, conversations, on_row)


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
