"""The prompt parts the pipelines share: the baselines' prompts (the paper's Figures 8 and 9),
the citation rule, and the guidance a final answer can be given (``method.*``, issue 15).

A pipeline's own plan and answer prompts live in its module; the numbered
passage convention and chat message shape are :mod:`typed_rag.messages`.
"""

from __future__ import annotations

from collections.abc import Sequence

from typed_rag.finishing.verify import DO_NOT_SAY
from typed_rag.messages import Messages, Numbered, chat, format_passages, instruction

ANSWER_SYSTEM = "You are an assistant that answers questions accurately and helpfully."

CITE_RULE = instruction(
    "Use the references where they help and cite them by their numbers in square brackets, "
    "for example [1] or [2][3]. Do not cite a number that is not listed."
)


def llm_messages(question: str) -> Messages:
    """The LLM baseline: the question alone, answered from the model's own knowledge."""
    user = f"Answer the question below.\n\n### Question\n{question}\n\n### Answer\n"
    return chat(ANSWER_SYSTEM, user)


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
    return chat(ANSWER_SYSTEM, user)


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
for _shape in ANSWER_SHAPES.values():
    instruction(_shape)

# ``method.own_knowledge``: passages that miss the question need not steer the answer.
OWN_KNOWLEDGE = instruction(
    "The material above may miss parts of the question or be about something else: ignore "
    "whatever is not about the question, and answer the parts it leaves open from your own "
    "knowledge."
)
# ... and with a closed-book draft shown to the final prompt.
DRAFT_USE = instruction(
    "The draft above was written from memory without the references: keep what the "
    "references support or do not contradict, correct what they contradict, and add what "
    "they contribute."
)

# Xie et al.'s M1: the generator works out the core sub-questions itself.
CORE_DEFINITION = instruction(
    "Before writing, work out the core sub-questions of the question: the points any "
    "complete answer must address (not background, not follow-up questions). Make sure the "
    "answer covers each of them, the most important first."
)

# Over a user's documents (issue 77): the answer is what the shown pages say.
DOCUMENTS_ONLY = instruction(
    "Answer only with what the references above say. Copy commands, options, file names, "
    "settings and numbers exactly as the references write them. If the references do not "
    "answer the question, say that the documents do not say, and do not answer from memory."
)

# The answer over documents when no passage of the collection matched the question.
NOT_IN_DOCUMENTS = (
    f"{DO_NOT_SAY} no passage of this collection matches the question closely enough to answer it."
)


def not_in_documents(unknown: Sequence[str]) -> str:
    """The answer over documents that never use ``unknown``, words of the question."""
    if not unknown:
        return NOT_IN_DOCUMENTS
    named = ", ".join(f'"{w}"' for w in unknown[:3])
    return f"{DO_NOT_SAY} no page of this collection mentions {named}."


STRICT_CITE_RULE = instruction(
    "Cite the reference numbers shown above in square brackets right after each statement "
    "they support, for example [1] or [2][3]. Use only numbers that appear above; every "
    "paragraph, step or list item needs at least one citation."
)


def with_section(messages: Messages, heading: str, body: str) -> Messages:
    """``messages`` with a ``### heading`` section before the closing heading."""
    out = [dict(m) for m in messages]
    content = out[-1]["content"]
    cut = content.rfind("### ")
    note = f"### {heading}\n{body}\n\n"
    out[-1]["content"] = (
        content[:cut] + note + content[cut:] if cut >= 0 else content + "\n\n" + note
    )
    return out


def with_guidance(messages: Messages, lines: Sequence[str]) -> Messages:
    """``messages`` with a "How to write the answer" section before the closing heading."""
    if not lines:
        return messages
    return with_section(
        messages, "How to write the answer", "\n".join(f"- {line}" for line in lines)
    )
