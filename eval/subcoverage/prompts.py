"""The judge's prompts for sub-question coverage (Xie et al., appendix Tables 5-6, reworded).

Three prompts, each a fixed preamble followed by what varies, so that an
engine's prompt cache reuses the preamble: listing sub-questions (a
comprehensive collection first, as the paper does; asking for a few of each
kind directly gives near-duplicates), classifying them into core /
background / follow-up against written definitions and worked examples, and
judging whether a text answers one sub-question (the text comes before the
sub-question, so consecutive judgements of one text share their prefix).
The examples are the project's own, not the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence

Messages = list[dict[str, str]]

MAX_SUB_QUESTIONS = 12
MAX_TEXT_CHARS = 4000
VERDICT_PREFIX = "[["

LIST_SYSTEM = "You break complex questions into sub-questions. Reply in JSON only."
CLASSIFY_SYSTEM = "You sort sub-questions by the role they play for a question. Reply in JSON only."
JUDGE_SYSTEM = "You check whether a text answers a question, using only what the text says."

DEFINITIONS = (
    "Kinds of sub-question:\n"
    "core: central to the question. Answering it directly or partly answers the question, "
    "or supplies a step of the reasoning the question needs; a complete, well-rounded answer "
    "cannot leave it out. Core sub-questions often cover the different steps or viewpoints "
    "of the question.\n"
    "background: optional. It supplies context, definitions or supporting facts that help a "
    "reader follow the answer, but the question can be answered without it.\n"
    "follow_up: not needed to answer the question. It is what a reader might ask after "
    "reading an answer: more depth on one detail, a consequence, a remedy, or a related "
    "topic beyond what was asked."
)

# Worked classification examples, written for this project.
EXAMPLES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Why are cities usually warmer than the countryside around them?",
        (
            (
                "How do asphalt and concrete absorb and release heat compared with vegetation?",
                "core",
            ),
            ("How does the lack of trees and open soil reduce cooling by evaporation?", "core"),
            ("How much heat do cars, air conditioners and factories add to a city?", "core"),
            ("How do tall buildings trap heat and block wind?", "core"),
            ("What is the urban heat island effect?", "background"),
            (
                "How is the temperature difference between a city and its surroundings measured?",
                "background",
            ),
            ("How does urban heat affect the health of elderly residents?", "follow_up"),
            ("Which cities have used green roofs to lower their temperatures?", "follow_up"),
        ),
    ),
    (
        "How should a beginner start training for a first marathon?",
        (
            ("How many months of preparation does a beginner need before a marathon?", "core"),
            ("How should weekly distance be increased without causing injury?", "core"),
            ("What role do long slow runs play in a training plan?", "core"),
            ("How should rest days and recovery be scheduled?", "core"),
            ("How long is a marathon and where does the race come from?", "background"),
            ("What happens in the body during endurance exercise?", "background"),
            ("How can an experienced runner improve a marathon finishing time?", "follow_up"),
            ("What should a runner eat during an ultramarathon?", "follow_up"),
        ),
    ),
)

JUDGE_RULES = (
    "You are given a text and a question. Decide whether some part of the text answers the "
    "question, using only what the text says (not your own knowledge). A passing mention of "
    "the topic, a restatement of the question or a statement that the information is "
    "missing does not answer it; a partial but real answer does.\n\n"
    "Examples:\n"
    "Text: Paved surfaces soak up sunlight during the day and give the heat back at night, "
    "which keeps city streets warm after sunset.\n"
    "Question: How do asphalt and concrete absorb and release heat?\n"
    "-> The text answers it, from: Paved surfaces soak up sunlight during the day and give "
    "the heat back at night\n\n"
    "Text: Many cities are planting trees along their main roads.\n"
    "Question: How much heat do cars and air conditioners add to a city?\n"
    "-> The text does not answer it."
)


def clip(text: str) -> str:
    return text.strip()[:MAX_TEXT_CHARS]


def list_messages(question: str) -> Messages:
    """Step 1: one comprehensive collection, kinds not yet asked for."""
    user = (
        "Write a comprehensive collection of sub-questions that together would answer the "
        "question below fully: the points it asks about, the context a reader would need, "
        "and the questions a reader might ask next. Each sub-question is short, "
        "self-contained (no pronouns that point back to the question) and asks for one "
        f"distinct piece of information; give about ten, at most {MAX_SUB_QUESTIONS}. "
        'Reply with one JSON object: {"sub_questions": ["...", ...]}.\n\n'
        f"Question: {question.strip()}"
    )
    return [{"role": "system", "content": LIST_SYSTEM}, {"role": "user", "content": user}]


def _example_block(question: str, items: Sequence[tuple[str, str]]) -> str:
    listed = "\n".join(f"{i}. {sq}" for i, (sq, _) in enumerate(items, start=1))
    labels = ", ".join(f'{{"id": {i}, "type": "{t}"}}' for i, (_, t) in enumerate(items, start=1))
    return f'Question: {question}\nSub-questions:\n{listed}\nReply: {{"labels": [{labels}]}}'


def classify_messages(question: str, sub_questions: Sequence[str]) -> Messages:
    """Step 2: every sub-question of one question labelled in one reply, after the examples."""
    examples = "\n\n".join(_example_block(q, items) for q, items in EXAMPLES)
    listed = "\n".join(f"{i}. {sq.strip()}" for i, sq in enumerate(sub_questions, start=1))
    user = (
        "Label each numbered sub-question by its relevance and role in answering the main "
        "question.\n\n"
        f"{DEFINITIONS}\n\n"
        f"Worked examples:\n\n{examples}\n\n"
        "Now label these, one entry per id. Reply with one JSON object: "
        '{"labels": [{"id": 1, "type": "core"}, ...]}.\n\n'
        f"Question: {question.strip()}\nSub-questions:\n{listed}"
    )
    return [{"role": "system", "content": CLASSIFY_SYSTEM}, {"role": "user", "content": user}]


def _judge_user(text: str, sub_question: str, task: str) -> str:
    return f"{JUDGE_RULES}\n\nText:\n{clip(text)}\n\nQuestion: {sub_question.strip()}\n\n{task}"


def verdict_messages(text: str, sub_question: str) -> Messages:
    """The yes/no judgement, read from the next-token distribution after ``[[``."""
    task = 'Does some part of the text answer the question? Reply "[[yes]]" or "[[no]]".'
    user = _judge_user(text, sub_question, task)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def fragment_messages(text: str, sub_question: str) -> Messages:
    """For a covered answer cell: the words of the text that answer the sub-question."""
    task = (
        "Copy, word for word, the shortest fragment of the text that answers the question "
        '(where the answer starts). Reply with one JSON object: {"fragment": "..."}; '
        'if no part of the text answers it, {"fragment": "None"}.'
    )
    user = _judge_user(text, sub_question, task)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
