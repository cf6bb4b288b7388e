"""What a chat request adds to a question: earlier turns, the asker's instructions, output form.

A follow-up ("where was it first grown?") cannot be classified, planned or
retrieved for on its own words. When a request carries earlier turns and
the last message looks like it leans on them (a pronoun, a very short
message, "and ..."/"what about ..."), one short engine call under a JSON
schema rewrites it into a standalone question, which then drives the whole
pipeline. A self-contained message skips the call (``conversation.rewrite =
"cue"``, the default).

The asker's system/developer messages, stop strings and response format
apply to the final generation only: plan rounds keep their own prompts and
schemas.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from typed_rag.json_reply import PlanError, extract_json
from typed_rag.messages import Messages

MAX_QUESTION_CHARS = 400
# What the rewrite sees of the history: the last 6 messages (three exchanges), each cut to
# 600 characters, enough to name what a follow-up refers to without a long prompt.
MAX_TURNS = 6
MAX_TURN_CHARS = 600

REWRITE_SCHEMA: dict[str, Any] = {
    "title": "standalone_question",
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 1, "maxLength": 300}},
    "required": ["question"],
    "additionalProperties": False,
}

REWRITE_SYSTEM = (
    "You rewrite the last message of a conversation into a standalone question. "
    "Replace every pronoun and reference (it, they, this, that, there, the same, ...) "
    "with what it refers to in the conversation, so the question can be understood "
    "without the conversation. Keep the kind of question (why, how, which is better, ...) "
    "and its wording otherwise. Do not answer it. If the message is already standalone, "
    'return it unchanged. Reply with JSON only: {"question": "..."}'
)

# A message needs the conversation when it refers back (a pronoun or a
# demonstrative), continues the previous one ("and ...", "what about ..."),
# or is too short to stand alone.
_REFERS_BACK = re.compile(
    r"\b(it|its|it's|itself|they|them|their|theirs|themselves|this|that|these|those|"
    r"he|him|his|she|her|hers|there|then|such|same|former|latter|above|previous|"
    r"earlier|aforementioned|one|ones|else)\b",
    re.IGNORECASE,
)
_CONTINUES = re.compile(
    r"^\s*(and|but|so|also|or|then|what about|how about|why not|why so|how so|and why|"
    r"what else|more|tell me more|go on|same)\b",
    re.IGNORECASE,
)
SHORT_WORDS = 4


@dataclass(frozen=True)
class Turn:
    """One earlier message of the conversation."""

    role: str  # "user" | "assistant" | "tool"
    text: str


@dataclass(frozen=True)
class ChatOptions:
    """A chat request's additions to its last user message (all optional)."""

    history: Sequence[Turn] = ()
    system: str = ""  # the asker's system/developer messages, joined
    stop: Sequence[str] = ()
    json_schema: dict[str, Any] | None = None


def needs_rewrite(message: str) -> bool:
    """Whether ``message`` probably leans on earlier turns (cheap, lexical)."""
    words = re.findall(r"\w+", message)
    return (
        len(words) <= SHORT_WORDS
        or bool(_REFERS_BACK.search(message))
        or bool(_CONTINUES.search(message))
    )


def rewrite_messages(
    history: Sequence[Turn],
    message: str,
    *,
    max_turns: int = MAX_TURNS,
    max_turn_chars: int = MAX_TURN_CHARS,
) -> Messages:
    """The rewrite prompt: the last ``max_turns`` turns (each cut to ``max_turn_chars``)."""
    lines = []
    for turn in list(history)[-max_turns:]:
        text = " ".join(turn.text.split())
        if len(text) > max_turn_chars:
            text = text[:max_turn_chars].rsplit(" ", 1)[0] + " ..."
        who = "User" if turn.role == "user" else "Assistant"
        lines.append(f"{who}: {text}")
    user = (
        "### Conversation\n"
        + "\n".join(lines)
        + f"\n\n### Last message\nUser: {message}\n\n### Standalone question (JSON)"
    )
    return [{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": user}]


def parse_rewrite(text: str) -> str:
    """The standalone question in the reply; :class:`PlanError` when there is none."""
    value = extract_json(text)
    if not isinstance(value, dict) or not isinstance(value.get("question"), str):
        raise PlanError('expected {"question": "..."}')
    question = " ".join(value["question"].split())
    if not question:
        raise PlanError("empty question")
    if len(question) > MAX_QUESTION_CHARS:
        raise PlanError(f"question longer than {MAX_QUESTION_CHARS} characters")
    return question


ANSWER_HEADING = "### Answer\n"


def with_chat_options(messages: Messages, options: ChatOptions | None) -> Messages:
    """The final generation's messages with the asker's instructions and output form added.

    They go at the end of the system message, so the pipeline's own prompt
    (passages, citations) stays as it is; the instructions are said again right
    before the answer (above the user message's closing ``### Answer`` heading),
    the last thing a small model reads and the place it follows best. Without
    instructions or a schema the messages are returned unchanged.
    """
    if options is None or (not options.system and options.json_schema is None):
        return messages
    notes = []
    if options.system:
        notes.append(f"Instructions from the asker (follow them):\n{options.system.strip()}")
    if options.json_schema is not None:
        schema = json.dumps(options.json_schema, ensure_ascii=False)
        notes.append(f"Reply with JSON only, matching this JSON schema:\n{schema}")
    note = "\n\n".join(notes)
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{note}"
    else:
        out.insert(0, {"role": "system", "content": note})
    if options.system and out[-1]["role"] == "user":
        out[-1]["content"] = _before_answer(out[-1]["content"], options.system.strip())
    return out


def _before_answer(user: str, instructions: str) -> str:
    """``user`` with the asker's instructions as its last section before the answer."""
    section = f"### Instructions from the asker (follow them)\n{instructions}\n\n"
    if user.endswith(ANSWER_HEADING):
        return user[: -len(ANSWER_HEADING)] + section + ANSWER_HEADING
    return f"{user.rstrip()}\n\n{section}".rstrip() + "\n"
