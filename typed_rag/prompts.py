"""Chat prompts for every step of Typed-RAG, written after the paper's Appendix A.4.

Each builder returns chat messages (a system and a user message); the engine
applies the model's chat template. Passages reach the model as numbered text
(``[n] Title`` then the passage) and answers are asked to cite ``[n]``. The
numbers are the ones kept in ``Result.passages``, so a citation in any answer
(sub-answer, perspective or final) points at the same passage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

Messages = list[dict[str, str]]


class Numbered(Protocol):
    """A passage with the citation number it is shown under (e.g. ``CitedPassage``)."""

    citation: int
    title: str
    text: str


ANSWER_SYSTEM = "You are an assistant that answers questions accurately and helpfully."
ANALYST_SYSTEM = (
    "You are a query analyst. You study a question of a known type and rewrite it into the "
    "pieces a search engine needs, so the final answer matches what the asker wants. "
    "You reply with JSON only."
)
AGGREGATOR_SYSTEM = (
    "You combine answers. You receive an original question and several question-answer "
    "pairs; each question looks at one aspect of the original. You merge what they found "
    "into one concise, accurate answer to the original question."
)
MEDIATOR_SYSTEM = "You are the mediator of a debate between participants with different views."

CITE_RULE = (
    "Use the references where they help and cite them by their numbers in square brackets, "
    "for example [1] or [2][3]. Do not cite a number that is not listed."
)


def _msgs(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def format_passages(passages: Sequence[Numbered]) -> str:
    """``[n] Title`` followed by the passage text, one block per passage."""
    return "\n\n".join(f"[{p.citation}] {p.title}\n{p.text}" for p in passages)


# "[2]", and the lists small models write: "[2, 3]", "[2; 3]".
CITATION_GROUP = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


def cited_numbers(text: str) -> list[int]:
    """The citation numbers an answer uses, in order of first use."""
    seen: list[int] = []
    for match in CITATION_GROUP.finditer(text):
        for digits in re.findall(r"\d+", match.group(1)):
            n = int(digits)
            if n not in seen:
                seen.append(n)
    return seen


# --- Baselines (paper Figures 8 and 9) -------------------------------------------------


def llm_messages(question: str) -> Messages:
    """The LLM baseline: the question alone, answered from the model's own knowledge."""
    user = f"Answer the question below.\n\n### Question\n{question}\n\n### Answer\n"
    return _msgs(ANSWER_SYSTEM, user)


def rag_messages(question: str, passages: Sequence[Numbered]) -> Messages:
    """Plain RAG: numbered reference passages, then the question."""
    if not passages:
        return llm_messages(question)
    user = (
        "Below are passages taken from a larger collection, followed by a question. "
        "Read the references and answer the question. "
        f"{CITE_RULE}\n\n"
        f"### References\n{format_passages(passages)}\n\n"
        f"### Question\n{question}\n\n"
        "### Answer\n"
    )
    return _msgs(ANSWER_SYSTEM, user)


# --- Comparison ------------------------------------------------------------------------


def comparison_plan_messages(question: str) -> Messages:
    """Decide whether the question compares things; if so, how, and which things."""
    user = (
        "Act as a query analyst. First decide whether the question below asks to compare or "
        "contrast two or more things. If it does:\n"
        '1. Name the kind of comparison: "differences", "similarities" or "superiority".\n'
        "2. List the things being compared, each as a short phrase that carries its context "
        "(good search queries).\n\n"
        "### Output format\n"
        '{"is_compare": true or false, "compare_type": "differences" | "similarities" | '
        '"superiority", "keywords_list": ["phrase", ...]}\n\n'
        "### Example\n"
        'Question: "Is a bicycle or a car better for short trips in a city?"\n'
        'Output: {"is_compare": true, "compare_type": "superiority", "keywords_list": '
        '["bicycle for short city trips", "car for short city trips"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return _msgs(ANALYST_SYSTEM, user)


def comparison_messages(
    question: str, compare_type: str, keywords: Sequence[str], passages: Sequence[Numbered]
) -> Messages:
    """The RAG prompt, told what kind of comparison to make and between which items."""
    refs = format_passages(passages) if passages else "(no passages were found)"
    user = (
        "Below are passages taken from a larger collection, followed by a question that asks "
        "for a comparison. Answer it as a comparison of the given kind, covering each of the "
        f"items listed. {CITE_RULE}\n\n"
        f"### Question\n{question}\n\n"
        f"### Comparison type\n{compare_type}\n\n"
        f"### Items to compare\n{'; '.join(keywords)}\n\n"
        f"### References\n{refs}\n\n"
        "### Answer\n"
    )
    return _msgs(ANSWER_SYSTEM, user)


# --- Experience ------------------------------------------------------------------------


def experience_plan_messages(question: str) -> Messages:
    """Pull out the keywords that say what experience or advice the asker wants."""
    user = (
        "Act as a query analyst. The question below asks for experience, advice or "
        "recommendations. Work out what topic the asker wants to hear experiences about, "
        "then list the key entities and phrases of the question that a search for such "
        "experiences should match.\n\n"
        "### Output format\n"
        '{"keywords": ["keyword", ...]}\n\n'
        "### Example\n"
        'Question: "Which hiking trails in Scotland are worth doing in winter?"\n'
        'Output: {"keywords": ["hiking trails in Scotland", "winter hiking", "worth doing"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return _msgs(ANALYST_SYSTEM, user)


# --- Reason / Instruction decomposition and aggregation -------------------------------

_DECOMPOSE_KIND = {
    "REASON": (
        "a reason question: it asks why something is the case or what lies behind a concept "
        "or event",
        '"Why do cats purr?"',
        '{"sub_queries": ["what produces the purring sound in cats", "in which situations do '
        'cats purr", "what purring tells about a cat\'s health or mood"]}',
    ),
    "INSTRUCTION": (
        "an instruction question: it asks how to do something, as guidance or steps to follow",
        '"How do I fix a flat bicycle tyre?"',
        '{"sub_queries": ["tools needed to repair a bicycle puncture", "how to take the tyre '
        'off a bicycle wheel", "how to patch or replace an inner tube"]}',
    ),
}


_PARAPHRASE_EXAMPLE = {
    "REASON": '{"sub_queries": ["what makes cats purr", "reason domestic cats produce a purring '
    'sound", "cause and purpose of purring in cats"]}',
    "INSTRUCTION": '{"sub_queries": ["steps to repair a punctured bicycle tyre", "how to mend '
    'a flat tyre on a bike", "fixing a bicycle inner tube puncture"]}',
}


def decomposition_plan_messages(
    question: str, question_type: str, limit: int = 5, style: str = "aspects"
) -> Messages:
    """Split a reason or instruction question into 2-``limit`` sub-queries.

    ``aspects``: each looks at one aspect of the question. ``paraphrase`` (the
    paper's Figures 13/14): each keeps the whole question and rewords it.
    """
    key = question_type.upper() if question_type.upper() in _DECOMPOSE_KIND else "REASON"
    kind, example_q, example_a = _DECOMPOSE_KIND[key]
    if style == "paraphrase":
        steps = (
            "1. Rewrite it as search queries that each keep the whole meaning and intent of "
            "the question but put it in other words and another structure, so that together "
            "they match passages phrased in different ways.\n"
            f"2. Write between 2 and {limit} distinct queries, each naming the question's "
            "subject explicitly.\n\n"
        )
        example_a = _PARAPHRASE_EXAMPLE[key]
    else:
        steps = (
            "1. Break it into sub-queries that keep its intent but each look at a single "
            "aspect of it, worded differently from one another.\n"
            f"2. Write between 2 and {limit} distinct sub-queries, each usable on its own as a "
            "search query about the question's own subject (name the subject; no pronouns).\n\n"
        )
    user = (
        f"Act as a query analyst. The question below is {kind}.\n"
        f"{steps}"
        "### Output format\n"
        f'{{"sub_queries": [2 to {limit} strings]}}\n\n'
        "### Example\n"
        f"Question: {example_q}\n"
        f"Output: {example_a}\n\n"
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return _msgs(ANALYST_SYSTEM, user)


def aggregation_messages(
    question: str, pairs: Sequence[tuple[str, str]], passages: Sequence[Numbered] = ()
) -> Messages:
    """Merge the sub-query answers into one answer to the original question.

    With ``passages`` (grounded aggregation) the aggregator also reads the best
    passages and keeps only the sub-answer claims that one of them supports.
    """
    qa = "\n\n".join(
        f"Question {i}: {q}\nAnswer {i}: {a.strip()}" for i, (q, a) in enumerate(pairs, 1)
    )
    if passages:
        user = (
            "Write a short, clear answer to the original question from the question-answer "
            "pairs and the references below. The pairs were written quickly and may misread "
            "their sources: keep a claim from them only where one of the references supports "
            "it, and leave out every claim that no reference supports. Cite the supporting "
            "reference next to each claim by its number, such as [2].\n\n"
            f"### Original question\n{question}\n\n"
            f"### References\n{format_passages(passages)}\n\n"
            f"### Question-answer pairs\n{qa}\n\n"
            "### Answer\n"
        )
        return _msgs(AGGREGATOR_SYSTEM, user)
    user = (
        "Use the question-answer pairs below to write a short, clear answer to the original "
        "question. Keep the citation numbers such as [2] that the answers use, next to the "
        "facts they support.\n\n"
        f"### Original question\n{question}\n\n"
        f"### Question-answer pairs\n{qa}\n\n"
        "### Answer\n"
    )
    return _msgs(AGGREGATOR_SYSTEM, user)


# --- Core sub-question augmentation (beyond the paper) -------------------------------


def core_sub_question_messages(question: str, limit: int) -> Messages:
    """The 1-``limit`` sub-questions any complete answer must address (Xie et al.'s "core")."""
    user = (
        "Act as a query analyst. List the core sub-questions of the question below: the "
        "points that any complete answer must address, each a self-contained question "
        "about the question's own subject. Leave out background and follow-up questions.\n\n"
        "### Output format\n"
        f'{{"sub_questions": [1 to {limit} strings]}}\n\n'
        "### Example\n"
        'Question: "What causes inflation in an economy?"\n'
        'Output: {"sub_questions": ["how does growth of the money supply raise prices", '
        '"how do rising demand and production costs push up prices"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return _msgs(ANALYST_SYSTEM, user)


# --- Debate ----------------------------------------------------------------------------


def debate_plan_messages(question: str, limit: int = 5) -> Messages:
    """Topic, 2-``limit`` perspectives, and one sub-query biased toward each perspective."""
    user = (
        "Act as a query analyst. The question below is a debate question: people answer it "
        "from different standpoints.\n"
        "1. State the topic of the debate.\n"
        f"2. Name 2 to {limit} distinct perspectives on it.\n"
        "3. For each perspective write one search query leaning toward that perspective, so "
        "that it finds passages supporting that view.\n\n"
        "### Output format\n"
        '{"debate_topic": "topic", "dist_opinion": ["perspective", ...], '
        '"sub_queries": {"perspective": "query leaning toward it", ...}}\n\n'
        "### Example\n"
        'Question: "Should homework be banned in primary schools?"\n'
        'Output: {"debate_topic": "homework in primary schools", "dist_opinion": ["against '
        'homework", "for homework"], "sub_queries": {"against homework": "harms of homework '
        'for young children", "for homework": "benefits of homework for primary pupils"}}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return _msgs(ANALYST_SYSTEM, user)


def mediator_messages(
    question: str,
    topic: str,
    responses: Sequence[tuple[str, str]],
    passages: Sequence[Numbered] = (),
) -> Messages:
    """Summarise the perspectives' answers into a fair, balanced direct answer.

    With ``passages`` the mediator also reads the best passages and keeps only
    the claims of the responses that one of them supports.
    """
    lines = "\n".join(
        f'- Response {i} (perspective: {view}): "{answer.strip()}"'
        for i, (view, answer) in enumerate(responses, 1)
    )
    if passages:
        grounding = (
            "The responses may misread their sources: keep a claim only where one of the "
            "references supports it, leave out every claim that no reference supports, and "
            "cite the supporting reference next to each claim by its number, such as [2]. "
        )
        refs = f"### References\n{format_passages(passages)}\n\n"
    else:
        grounding = "Keep the citation numbers such as [2] that the responses use. "
        refs = ""
    user = (
        "Below are a debate topic and the responses of participants who each hold a "
        "different perspective. Weigh the topic and every viewpoint and write a fair, "
        "balanced answer: cover the main points, say where the views disagree, and keep it "
        "short. Answer the question directly; do not mention a debate or participants. "
        f"{grounding}\n\n"
        f"### Question\n{question}\n\n"
        f"### Debate topic\n{topic}\n\n"
        f"{refs}"
        f"### Responses\n{lines}\n\n"
        "### Answer\n"
    )
    return _msgs(MEDIATOR_SYSTEM, user)


# --- Final-answer guidance (issue 15; each part behind a method.* setting) ------------

# How the final answer of each type is laid out (``method.answer_shapes``).
ANSWER_SHAPES: dict[str, str] = {
    "INSTRUCTION": (
        "Lay the answer out as numbered steps (1., 2., ...) in the order they are done, one "
        "action per step; if something is needed before starting, say so in one line first."
    ),
    "COMPARISON": (
        "Compare point by point: for each aspect, say how each item does on it, side by "
        "side; end with one sentence that sums up the comparison of the kind asked."
    ),
    "DEBATE": (
        "First give each main perspective in its own short paragraph: who holds it and its "
        "strongest reasons. Then end with a paragraph that weighs them into a balanced "
        "conclusion. Write plain paragraphs; do not copy this prompt's headings (such as "
        "Question, Debate topic or Responses) into the answer."
    ),
    "REASON": (
        "Give the causes one at a time, the main one first: for each, state the cause and "
        "then the evidence from the references that supports it."
    ),
    "EXPERIENCE": (
        "Give practical advice or recommendations as a short list; ground each one in what "
        "the references report, and say when a choice depends on taste or circumstances."
    ),
}

# Xie et al.'s M1: the generator works out the core sub-questions itself.
CORE_DEFINITION = (
    "Before writing, work out the core sub-questions of the question: the points any "
    "complete answer must address (not background, not follow-up questions). Make sure the "
    "answer covers each of them, the most important first."
)

STRICT_CITE_RULE = (
    "Cite the reference numbers shown above in square brackets right after each statement "
    "they support, for example [1] or [2][3]. Use only numbers that appear above; every "
    "paragraph, step or list item needs at least one citation."
)


def core_list_guidance(sub_questions: Sequence[str]) -> str:
    """Xie et al.'s M2: name the core sub-questions the answer must address."""
    listed = "\n".join(f"  {i}. {q}" for i, q in enumerate(sub_questions, 1))
    return f"Make sure the answer addresses each of these core sub-questions:\n{listed}"


def with_guidance(messages: Messages, lines: Sequence[str]) -> Messages:
    """``messages`` with a "How to write the answer" section before the closing heading."""
    if not lines:
        return messages
    out = [dict(m) for m in messages]
    content = out[-1]["content"]
    cut = content.rfind("### ")
    note = "### How to write the answer\n" + "\n".join(f"- {line}" for line in lines) + "\n\n"
    out[-1]["content"] = (
        content[:cut] + note + content[cut:] if cut >= 0 else content + "\n\n" + note
    )
    return out
