"""Multi-hop questions: find what a question only describes before decomposing it.

"Why did the founder of the company that makes the iPhone leave it in 1985?" names
neither Apple nor Steve Jobs, so BM25 on the question or on its aspects finds
neither, and the aggregator never learns them. With ``method.resolve_hops`` the
question is first written as a chain of simple questions, later ones referring to
earlier answers as #1, #2 (MuSiQue's and Break's decomposition format). Each link but
the last is searched and answered in a few words, one short engine round each, in
order (self-ask; IRCoT's retrieve-then-reason loop); its answer is written into the
links after it. The decomposition then also searches the last link so resolved, and
the question with the found names, and the aggregator reads the answered links as
question-answer pairs.

A chain of one link, or one whose links never refer back, is no multi-hop question:
nothing changes. A link answered with "unknown" stops the chain where it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from typed_rag import plan_examples
from typed_rag.finishing.subanswers import says_unknown
from typed_rag.json_reply import read_string_list, string_list_schema
from typed_rag.messages import ANALYST_SYSTEM, CITATION_GROUP, Messages, chat
from typed_rag.pipelines.base import Context
from typed_rag.pipelines.prompting import rag_messages, with_guidance
from typed_rag.result import CitedPassage, SubAnswer
from typed_rag.retrieval import Passage

MAX_HOPS = 4
# A link's answer is a name or a short phrase: this many tokens (never more than
# ``sampling.max_tokens``, like every step's budget), and words kept.
HOP_ANSWER_TOKENS = 32
HOP_ANSWER_WORDS = 12

_REFERENCE = re.compile(r"#(\d)")


@dataclass
class HopPlan:
    hops: list[str]

    title: ClassVar[str] = "hop_plan"
    example: ClassVar[str] = json.dumps(
        {"hops": ["Which company makes the iPhone?", "Who founded #1?", "Why did #2 leave #1?"]}
    )

    def to_trace(self) -> dict[str, Any]:
        return {"hops": self.hops}

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        links = trace.get("hop_answers") or []
        if not links:
            return []
        return ["plan: hops resolved:"] + [
            f"  {i}. {link['question']} -> {link['answer']}" for i, link in enumerate(links, 1)
        ]

    @property
    def multi_hop(self) -> bool:
        """Whether a later link refers to an earlier answer (#1, #2 ...)."""
        return any(_REFERENCE.search(hop) for hop in self.hops[1:])


plan_examples.register(HopPlan.title, HopPlan.example)

HOP_SCHEMA: dict[str, Any] = string_list_schema(HopPlan.title, "hops", 1, MAX_HOPS)


def parse_hops(text: str) -> HopPlan:
    """1 to :data:`MAX_HOPS` links; extra ones are cut."""
    return HopPlan(read_string_list(text, ("hops", "chain", "questions", "steps"), 1, MAX_HOPS))


_EXAMPLES = (
    (
        "Why did the founder of the company that makes the iPhone leave it in 1985?",
        '{"hops": ["Which company makes the iPhone?", "Who founded #1?", '
        '"Why did #2 leave #1 in 1985?"]}',
    ),
    (
        "What is the national dish of the country whose capital is Lima?",
        '{"hops": ["Which country has Lima as its capital?", "What is the national dish of #1?"]}',
    ),
    (
        "Why do leaves change colour in autumn?",
        '{"hops": ["Why do leaves change colour in autumn?"]}',
    ),
)


def hop_plan_messages(question: str) -> Messages:
    """Write the question as its chain of simple questions (one link when it names all)."""
    examples = "\n\n".join(f"Question: {q}\nOutput: {a}" for q, a in _EXAMPLES)
    user = (
        "Act as a query analyst. Some questions name what they ask about only through a "
        'description, such as "the city where the author of X was born" or "the virus that '
        'Y identified"; answering them takes a chain of simple questions, each finding one '
        "thing the next one needs.\n"
        "1. Find each described thing and write the simple question that identifies it, "
        "innermost first.\n"
        "2. Write each later question with #1, #2 and so on in place of the thing an earlier "
        "question finds; the last one asks what the whole question asks.\n"
        "3. When the question already names everything it asks about, write it alone as a "
        "chain of one.\n\n"
        "### Output format\n"
        f'{{"hops": [1 to {MAX_HOPS} strings]}}\n\n'
        f"### Examples\n{examples}\n\n"
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


HOP_ANSWER_RULE = (
    "Reply with the answer alone: a name, place, date or short phrase, no sentence. "
    "If the references do not say, reply: unknown."
)


def fill(hop: str, answers: Sequence[str]) -> str:
    """``hop`` with each #k replaced by the k-th answer (dropped when there is none yet)."""

    def answer(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return answers[k - 1] if 1 <= k <= len(answers) else ""

    return " ".join(_REFERENCE.sub(answer, hop).split())


def numbered(hits: Sequence[Passage]) -> list[CitedPassage]:
    """A link's passages numbered for its own prompt only (not the question's citations)."""
    return [
        CitedPassage(citation=i, id=p.id, title=p.title, text=p.text, score=float(p.score))
        for i, p in enumerate(hits, 1)
    ]


def short_answer(text: str) -> str:
    """A link's reply as a search-ready phrase: its first line, without citations, quotes
    or a final full stop, at most :data:`HOP_ANSWER_WORDS` words; "" when it says unknown."""
    line = next((x for x in text.strip().splitlines() if x.strip()), "")
    line = CITATION_GROUP.sub("", line).strip(" \t\"'*.")
    if not line or says_unknown(line) or line.lower().startswith("unknown"):
        return ""
    return " ".join(line.split()[:HOP_ANSWER_WORDS])


@dataclass
class Resolved:
    """An answered chain: its links as sub-answers, and the searches it adds."""

    links: list[SubAnswer] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)


async def resolve_hops(ctx: Context) -> Resolved | None:
    """Plan the chain and answer its links but the last; None when the question is no
    multi-hop question or the first link goes unanswered (the plan trace's ``hop_plan``
    holds the chain, and ``stopped`` in that case)."""
    trace: dict[str, Any] = {}
    ctx.result.plan["hop_plan"] = trace
    plan = await ctx.plan(
        "hop-plan", hop_plan_messages(ctx.question), HOP_SCHEMA, parse_hops, trace
    )
    if plan is None:
        return None
    trace.update(plan.to_trace())
    if not plan.multi_hop:
        return None
    ctx.emit("plan", plan={"hop_plan": plan.to_trace()})
    answers: list[str] = []
    found: list[tuple[str, list[Passage]]] = []
    for hop in plan.hops[:-1]:
        query = fill(hop, answers)
        (hits,) = await ctx.retrieve([query], ctx.top_k)
        request = ctx.request(with_guidance(rag_messages(query, numbered(hits)), [HOP_ANSWER_RULE]))
        (res,) = await ctx.generate(
            "hop",
            [replace(request, max_tokens=min(HOP_ANSWER_TOKENS, request.max_tokens))],
            stage="sub_answers",
        )
        answer = short_answer(res.text)
        if not answer:
            break
        answers.append(answer)
        found.append((query, hits))
        total = len(plan.hops) - 1
        ctx.emit(
            "sub_answer",
            index=len(answers) - 1,
            total=total,
            step="hop",
            query=query,
            answer=answer,
        )
    if not answers:
        trace["stopped"] = "the first link went unanswered"
        return None
    # Only now do the links' passages get citation numbers: an abandoned chain leaves the
    # question's numbering, and so its answer, as without it.
    resolved = Resolved()
    for (query, hits), answer in zip(found, answers, strict=True):
        shown = ctx.cite(hits, query)
        resolved.links.append(
            SubAnswer(query=query, answer=answer, passages=[p.citation for p in shown])
        )
    ctx.result.plan["hop_answers"] = [
        {"question": s.query, "answer": s.answer} for s in resolved.links
    ]
    last = fill(plan.hops[len(answers)], answers)
    resolved.queries = [last, f"{ctx.question} {' '.join(answers)}"]
    return resolved
