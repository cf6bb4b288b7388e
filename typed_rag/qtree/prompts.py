"""The chat prompts of QTREE building, outline judging, the planner and outline-guided answers.

Written in the project's words after the structure of Jeong et al.'s
appendix E: what each step is given and what it must return are the paper's;
the wording, the JSON shapes (which follow our schemas) and the rubric
phrasing are ours.
"""

from __future__ import annotations

from collections.abc import Sequence

from typed_rag.qtree.outlines import OUTLINE_SIZE, Intent
from typed_rag.qtree.tree import QTree

Messages = list[dict[str, str]]
JSON_SYSTEM = "You help plan answers to questions. Reply with JSON only."


def _msgs(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def tree_messages(question: str, width: int = 3, depth: int = 3) -> Messages:
    """Ask for the question's sub-query tree: ``width`` viewpoints, each ``depth`` levels deep."""
    user = (
        f"Break the question below into a tree of search queries, {depth} levels deep.\n"
        f"- The top level has {width} queries, each reading the question from a different "
        "angle.\n"
        f"- Every query above the last level has exactly {width} more specific queries under it.\n"
        "- Write every node as a short question that makes sense on its own (it will be sent "
        "to a search engine without the rest of the tree).\n"
        "- No two nodes may ask the same thing, and no node may repeat the question.\n\n"
        'Shape: {"subqueries": [{"question": "...", "children": [{"question": "...", '
        '"children": ["...", "...", "..."]}, ...]}, ...]}\n\n'
        f"Question: {question.strip()}\n"
    )
    return _msgs(JSON_SYSTEM, user)


_INTENT_GUIDE: dict[str, str] = {
    "include": (
        "The asker does NOT yet know the answer to the sub-question and wants the answer to "
        "cover it: every request must ask to include that topic."
    ),
    "exclude": (
        "The asker ALREADY knows the answer to the sub-question: every request must ask to "
        "leave that topic out (and may say what to focus on instead)."
    ),
}


def instruction_messages(question: str, background: str, intent: Intent, n: int = 5) -> Messages:
    """Ask for ``n`` first-person coverage requests about one sub-question and one intent."""
    user = (
        f"Write {n} different requests that a person could add after the question below, "
        "telling an assistant what the answer should cover.\n"
        f"{_INTENT_GUIDE[intent]}\n"
        "- Write in the first person, e.g. 'As I already know ..., please ...' or "
        "'I have no idea about ..., so make sure to ...'.\n"
        "- Keep each request to one or two sentences, vary the wording, and never contradict "
        "the question itself.\n\n"
        'Shape: {"instructions": ["...", ...]}\n\n'
        f"Question: {question.strip()}\n"
        f"Sub-question: {background.strip()}\n"
    )
    return _msgs(JSON_SYSTEM, user)


def outline_messages(
    tree: QTree,
    conditioned: str,
    background: str | None,
    intent: Intent | None,
    n: int = 3,
    size: int = OUTLINE_SIZE,
) -> Messages:
    """Ask for ``n`` outlines (lists of node numbers) picked from the tree."""
    rule = ""
    if background is not None and intent is not None:
        verb = "must contain" if intent == "include" else "must not contain (nor anything below)"
        rule = f"Rule for every outline: it {verb} node {background}.\n"
    user = (
        f'Below is a tree of search queries for the question "{tree.question.strip()}".\n'
        f"Pick {n} outlines from it. An outline is {size} node numbers that stay connected in "
        "the tree: each node must be the parent, a child or a sibling of another node in the "
        "outline; nodes from unrelated branches are not allowed.\n"
        f"{rule}"
        "The FIRST outline must also serve the request as well as possible; the others only "
        "need to follow the rule, and should differ from the first and from each other.\n\n"
        f"Tree:\n{tree.render()}\n\n"
        f"Request: {conditioned.strip()}\n\n"
        'Shape: {"outlines": [["1", "1.1", "1.1.1", "1.1.2"], ...]}\n'
    )
    return _msgs(JSON_SYSTEM, user)


JUDGE_SYSTEM = "You grade plans for answers. Reply with a single digit."
RUBRIC = (
    "Rate how well the search queries follow the request, including every instruction about "
    "what to cover and what to leave out:\n"
    "5 = they follow it completely, every nuance included\n"
    "4 = they follow it closely, with a small lapse\n"
    "3 = they follow it on the whole but miss some detail of it\n"
    "2 = they touch on it but miss its main point\n"
    "1 = they ignore it"
)


def judge_messages(conditioned: str, queries: Sequence[str]) -> Messages:
    """The outline judge's prompt; the reply is scored over the digits 1-5."""
    listed = "\n".join(f"- {q.strip()}" for q in queries)
    user = (
        f"A request and the search queries planned to answer it.\n\nRequest: "
        f"{conditioned.strip()}\n\nQueries:\n{listed}\n\n{RUBRIC}\n\nRating (1-5):"
    )
    return _msgs(JUDGE_SYSTEM, user)


PLANNER_SYSTEM = "You plan answers: you write the search queries an answer should follow."


def planner_messages(
    conditioned: str, with_tree: bool = True, size: int = OUTLINE_SIZE
) -> Messages:
    """The QPlanner input: the conditioned question; the reply is a tree then an outline.

    The same messages train the planner and prompt the untrained baseline, so
    the two are compared on one prompt.
    """
    tree_step = (
        "First write a tree of search queries about the question, three levels deep, one "
        "numbered query per line (1., 1.1., 1.1.1., ...). Then write the line 'Outline:' and "
        if with_tree
        else "Write the line 'Outline:' and then "
    )
    user = (
        f"{tree_step}the {size} numbered queries (taken from the tree, connected in it) that "
        "best answer the request, one per line, most general first.\n\n"
        f"Request: {conditioned.strip()}\n"
    )
    return _msgs(PLANNER_SYSTEM, user)


OUTLINE_ANSWER_SYSTEM = (
    "You are an experienced writer who answers from the evidence given and nothing else."
)


def outline_answer_prompt(conditioned: str, queries: Sequence[str], evidence: str) -> Messages:
    """The final prompt of outline-guided answering: the outline is the answer's skeleton."""
    plan = "\n".join(f"{i}. {q.strip()}" for i, q in enumerate(queries, start=1))
    user = (
        "Answer the request below in Markdown. Use the outline's queries as the section "
        "headings, in order, and fill each section from the evidence found for it; leave out "
        "a section the evidence says nothing about, and say so in one line. Do not add facts "
        "that are not in the evidence, and cite the numbers of the passages you use, e.g. [2].\n\n"
        f"### Request\n{conditioned.strip()}\n\n### Outline\n{plan}\n\n"
        f"### Evidence\n{evidence}\n\n### Answer\n"
    )
    return _msgs(OUTLINE_ANSWER_SYSTEM, user)
