"""The QTREE dataset: trees, coverage instructions, candidate outlines and their judgements.

Per question, in chunks that each go to the engine as batches:

1. the tree (``trees.jsonl``), resampled until it passes the quality check;
2. a background node and intent drawn from the seed, and the LLM's wordings
   of the coverage request (``instructions.jsonl``); a question that already
   comes conditioned (the project's constraint set) skips this step;
3. candidate outlines parsed from the tree for the conditioned question,
   moving on to the next instruction when none parse (the paper keeps the
   first of its five that yields three valid outlines), then every outline
   judged 1-5; one line per question in ``qtree.jsonl``.

Each file is a :class:`~eval.store.JsonlStore` keyed by question id and a
failure is stored with its reason, so a rerun of the same folder makes no
engine call for a question already done (or already failed).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.judging.resample import Parsed, generate_until_parsed
from eval.store import JsonlStore
from training.qtree.judge import judge_outlines
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.qtree.coverage import (
    N_INSTRUCTIONS,
    conditioned_question,
    draw_background,
    instruction_schema,
    parse_instructions,
)
from typed_rag.qtree.outlines import (
    N_CANDIDATES,
    OUTLINE_SIZE,
    Intent,
    Outline,
    outline_schema,
    parse_outlines,
)
from typed_rag.qtree.prompts import instruction_messages, outline_messages, tree_messages
from typed_rag.qtree.tree import DEPTH, WIDTH, QTree, TreeError, parse_tree, tree_schema

log = logging.getLogger(__name__)

TREES = "trees.jsonl"
INSTRUCTIONS = "instructions.jsonl"
DATASET = "qtree.jsonl"
OK = "ok"


@dataclass(frozen=True)
class QTreeQuestion:
    """A base question; ``conditioned_question`` set when it already carries its instruction."""

    question_id: str
    question: str
    source: str = ""
    conditioned_question: str | None = None


@dataclass
class QTreeConfig:
    """Sizes and sampling of a build (the paper: width 3, depth 3, 5 instructions, 3 outlines of 4)."""

    width: int = WIDTH
    depth: int = DEPTH
    n_instructions: int = N_INSTRUCTIONS
    n_outlines: int = N_CANDIDATES
    outline_size: int = OUTLINE_SIZE
    max_instructions: int = 2  # instructions tried per question before giving up on outlines
    max_resamples: int = 2
    temperature: float = 1.0  # the paper generates with temperature 1.0
    top_p: float = 0.95
    tree_max_tokens: int = 2048
    max_tokens: int = 512
    seed: int = 42
    chunk: int = 32


@dataclass
class BuildStats:
    trees: Counter[str] = field(default_factory=Counter)
    instructions: Counter[str] = field(default_factory=Counter)
    outlines: Counter[str] = field(default_factory=Counter)


def _key(record: dict[str, Any]) -> str:
    return str(record["question_id"])


def _parsed(fn: Any) -> Any:
    """A parser for generate_until_parsed from one that raises :class:`TreeError`."""

    def parse(i: int, text: str) -> Parsed[Any]:
        try:
            return Parsed(fn(i, text))
        except TreeError as exc:
            return Parsed(None, str(exc)[:160])

    return parse


@dataclass
class _Live:
    """A question on its way to outlines: its tree, instructions to try and the rule."""

    q: QTreeQuestion
    tree: QTree
    conditioned: list[str]
    background: str | None
    intent: Intent | None


class QTreeBuilder:
    """One output folder; :meth:`run` does what is missing in it."""

    def __init__(self, engine: Engine, out_dir: Path, config: QTreeConfig | None = None) -> None:
        self.engine = engine
        self.cfg = config or QTreeConfig()
        out = Path(out_dir)
        self.trees = JsonlStore(out / TREES, key=_key)
        self.instructions = JsonlStore(out / INSTRUCTIONS, key=_key)
        self.items = JsonlStore(out / DATASET, key=_key)
        self.stats = BuildStats()

    def _request(
        self, messages: list[dict[str, str]], schema: dict[str, Any], tokens: int
    ) -> ChatRequest:
        c = self.cfg
        return ChatRequest(
            messages=messages, temperature=c.temperature, top_p=c.top_p, max_tokens=tokens,
            seed=c.seed, json_schema=schema,
        )  # fmt: skip

    async def run(self, questions: Sequence[QTreeQuestion]) -> BuildStats:
        todo = [q for q in questions if q.question_id not in self.items]
        for start in range(0, len(todo), self.cfg.chunk):
            chunk = todo[start : start + self.cfg.chunk]
            await self._trees(chunk)
            await self._instructions(chunk)
            await self._outlines(chunk)
            log.info("qtree: %d/%d questions done", len(self.items), len(questions))
        return self.stats

    async def _trees(self, chunk: Sequence[QTreeQuestion]) -> None:
        c = self.cfg
        need = [q for q in chunk if q.question_id not in self.trees]
        if not need:
            return
        requests = [
            self._request(tree_messages(q.question, c.width, c.depth), tree_schema(c.width, c.depth), c.tree_max_tokens)
            for q in need
        ]  # fmt: skip
        outcomes = await generate_until_parsed(
            self.engine, requests,
            _parsed(lambda i, t: parse_tree(t, need[i].question, c.width, c.depth)),
            c.max_resamples, c.seed,
        )  # fmt: skip
        records = []
        for q, out in zip(need, outcomes, strict=True):
            self.stats.trees[out.status if out.ok else "failed"] += 1
            tree = out.value.to_dict() if out.value is not None else None
            records.append({"question_id": q.question_id, "question": q.question,
                            "status": out.status, "attempts": out.attempts, "tree": tree})  # fmt: skip
        self.trees.append(records)

    def _tree(self, q: QTreeQuestion) -> QTree | None:
        rec = self.trees.get(q.question_id)
        return QTree.from_dict(rec["tree"]) if rec and rec["status"] == OK else None

    async def _instructions(self, chunk: Sequence[QTreeQuestion]) -> None:
        c = self.cfg
        need: list[tuple[QTreeQuestion, QTree]] = []
        for q in chunk:
            tree = self._tree(q)
            if (
                tree is not None
                and q.conditioned_question is None
                and q.question_id not in self.instructions
            ):
                need.append((q, tree))  # fmt: skip
        if not need:
            return
        drawn = [draw_background(tree, c.seed, q.question_id) for q, tree in need]
        requests = [
            self._request(
                instruction_messages(q.question, tree.text(b.node), b.intent, c.n_instructions),
                instruction_schema(c.n_instructions), c.max_tokens,
            )
            for (q, tree), b in zip(need, drawn, strict=True)
        ]  # fmt: skip
        outcomes = await generate_until_parsed(
            self.engine, requests, _parsed(lambda i, t: parse_instructions(t, c.n_instructions)),
            c.max_resamples, c.seed,
        )  # fmt: skip
        records = []
        for (q, tree), b, out in zip(need, drawn, outcomes, strict=True):
            self.stats.instructions[out.status if out.ok else "failed"] += 1
            records.append({
                "question_id": q.question_id, "status": out.status, "background": b.node,
                "background_query": tree.text(b.node), "intent": b.intent,
                "instructions": out.value or [],
            })  # fmt: skip
        self.instructions.append(records)

    def _live(self, q: QTreeQuestion) -> _Live | None:
        """The tree, the conditioned questions to try and the rule; None when not reachable."""
        tree = self._tree(q)
        if tree is None:
            return None
        if q.conditioned_question is not None:
            return _Live(q, tree, [q.conditioned_question], None, None)
        rec = self.instructions.get(q.question_id)
        if rec is None or rec["status"] != OK:
            return None
        tries = rec["instructions"][: self.cfg.max_instructions]
        conditioned = [conditioned_question(q.question, s) for s in tries]
        return _Live(q, tree, conditioned, rec["background"], rec["intent"])

    async def _outlines(self, chunk: Sequence[QTreeQuestion]) -> None:
        records: dict[str, dict[str, Any]] = {}
        live: list[_Live] = []
        for q in chunk:
            if q.question_id in self.items:
                continue
            item = self._live(q)
            if item is None:
                stage = "tree" if self._tree(q) is None else "instructions"
                records[q.question_id] = {
                    "question_id": q.question_id, "source": q.source, "question": q.question,
                    "status": f"no-{stage}", "outlines": [],
                }  # fmt: skip
            else:
                live.append(item)
        attempt = 0
        while live:
            done = await self._parse_outlines(live, attempt)
            for item, record in zip(live, done, strict=True):
                if record is not None:
                    records[item.q.question_id] = record
            attempt += 1
            live = [it for it, r in zip(live, done, strict=True) if r is None]
        await self._judge([r for r in records.values() if r["status"] == OK])
        for r in records.values():
            self.stats.outlines[r["status"] if r["status"] == OK else "failed"] += 1
        self.items.append(records[q.question_id] for q in chunk if q.question_id in records)

    async def _parse_outlines(
        self, live: Sequence[_Live], attempt: int
    ) -> list[dict[str, Any] | None]:
        """One instruction per question (the ``attempt``-th); a record when done, else None."""
        c = self.cfg
        requests = [
            self._request(
                outline_messages(it.tree, it.conditioned[attempt], it.background, it.intent,
                                 c.n_outlines, c.outline_size),
                outline_schema(c.n_outlines, c.outline_size, list(it.tree)), c.max_tokens,
            )
            for it in live
        ]  # fmt: skip

        def parse(i: int, text: str) -> list[Outline]:
            it = live[i]
            return parse_outlines(
                text, it.tree, it.background, it.intent, c.n_outlines, c.outline_size
            )

        outcomes = await generate_until_parsed(
            self.engine, requests, _parsed(parse), c.max_resamples, c.seed + 100 * attempt
        )
        out: list[dict[str, Any] | None] = []
        for it, res in zip(live, outcomes, strict=True):
            if not res.ok and attempt + 1 < len(it.conditioned):
                out.append(None)  # try the next instruction
                continue
            out.append({
                "question_id": it.q.question_id, "source": it.q.source, "question": it.q.question,
                "conditioned_question": it.conditioned[attempt], "instruction_index": attempt,
                "background": it.background, "intent": it.intent, "status": res.status,
                "attempts": res.attempts,
                "outlines": [{"ids": list(o.ids), "queries": o.queries(it.tree)}
                             for o in res.value or []],
            })  # fmt: skip
        return out

    async def _judge(self, records: Sequence[dict[str, Any]]) -> None:
        pairs = [(r["conditioned_question"], o["queries"]) for r in records for o in r["outlines"]]
        scores = iter(await judge_outlines(self.engine, pairs))
        for r in records:
            for o in r["outlines"]:
                o.update(next(scores).to_dict())
            order = sorted(range(len(r["outlines"])), key=lambda i: -r["outlines"][i]["expected"])
            r["best"], r["worst"] = order[0], order[-1]


async def build_qtree_dataset(
    engine: Engine,
    questions: Sequence[QTreeQuestion],
    out_dir: Path,
    config: QTreeConfig | None = None,
) -> BuildStats:
    """Build (or finish) the dataset in ``out_dir``; a rerun only does what is missing."""
    return await QTreeBuilder(engine, out_dir, config).run(questions)
