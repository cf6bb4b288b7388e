"""``typed-rag conversations build|eval``: two-turn Wiki-NFQA conversations, and how often the
follow-up rewrite makes the follow-up stand alone."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from typed_rag.errors import UserError
from typed_rag.system import TypedRAG

DEFAULT_SET = Path("results/conversations/wiki_nfqa_followups.jsonl")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``conversations`` and its actions."""
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
