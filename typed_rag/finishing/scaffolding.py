"""Talk about the pipeline in the answer the user reads: rewritten or dropped, in every mode.

The final prompts label what the model reads: the aggregator's "Question 1: ... Answer 1:
...", the debate mediator's "- Response 1 (perspective: X): ...", the RAG prompt's
"References". The 1.5B generator copies the labels into its answer: "**Perspective 1:
Friendship**", "Response 2 (perspective: lettuce cultivation) states that ...", "According to
the references provided, ...", "The evidence for this is found in Question 3." (11% of the
headline's typed-rag answers, 8% of RAG's). The reader never saw those prompts, so the labels
tell them nothing, and the judge does not punish them.

:func:`unscaffold` rewrites what can be said without the label, keeping the content and its
``[n]`` markers next to it ("**Perspective 1: Friendship**" -> "**Friendship**", "Response 2
(perspective: X) states" -> "The X perspective states", "According to the references
provided, X" -> "X", "The references [1] and [3] state that X" -> "X [1][3]", "(Question
2)" -> nothing, "the references provided" -> "the sources"),
and drops the sentences that only talk about the pipeline ("The evidence for this is found in
Question 3.") or grade the answer itself ("This answer covers the key points of the
question.", "The answer is concise and directly relevant to the question."). It never
empties an answer. Deterministic, no model call; on in the ``fast``
profile (``method.drop_scaffolding``). :func:`unscaffold_stream` does the same to a streamed
answer, a sentence at a time.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from typed_rag.finishing.sentences import answer_pieces
from typed_rag.finishing.source_talk import is_source_talk
from typed_rag.messages import INSTRUCTION_RUNS, word_runs

# The prompts' labels, numbered: "Perspective 2", "Response 1", "Question 3", "Answer 1".
_WORD = (
    r"(?:(?:Main|Core|Key) )?(?:Perspective|Response|Question|Answer|Reference|Passage"
    r"|Sub-?question|Sub-?query|Viewpoint)"
)
_LABEL = rf"{_WORD} \d{{1,2}}\b"
_LIST = r"(?:(?:[-*+•]|\d{1,2}[.)])[ \t]+)"
_CITES = r"(?:\s*\[[\d,; ]+\])*"
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
# The labels a reader can still follow as "the first perspective"; the others (questions,
# answers, references the reader never saw) go.
_VIEWS = {"perspective": "perspective", "viewpoint": "perspective", "response": "view"}

# Where the answer says the prompt's sources are: "the references provided", "the given
# passages", "the information provided in the references", "the question-answer pairs", "the
# references" (the RAG prompt's heading). "The passage" alone stays: a reader sees passages.
_NOUN = (
    r"(?:references?|passages?|context|sources?|texts?|documents?|excerpts?"
    r"|question-answer pairs?|search results?)"
)
_SHOWN = r"(?:provided|given|above|supplied)"
_INFO = r"(?:information|details|facts|text|data)"
_SRC = (
    rf"(?:the |these |those |this )?(?:{_SHOWN} {_NOUN}|{_NOUN} {_SHOWN}"
    rf"|(?:{_INFO} (?:{_SHOWN} )?(?:in|from|by|within) (?:the |these )?)?(?:{_SHOWN} )?"
    rf"(?:references?|question-answer pairs?)(?: {_SHOWN})?"
    rf"|{_INFO} {_SHOWN} (?:in|from|by|within) (?:the |these )?{_NOUN})"
)
# Not the prompt's sources when the prose says whose or of what: "the context given by the
# treaty", "the references provided by the author", "the given context of the war".
_OWNED = r"(?!\s+(?:by|of)\b)"
# The wordings that name the prompt's sources outright (the project's leak pattern).
_SOURCE_NOUN = r"(?:references?|passages?|context)"
_NAMED_SOURCES = (
    rf"(?:{_SOURCE_NOUN} (?:provided|given)|(?:provided|given) {_SOURCE_NOUN})\b{_OWNED}"
)
_PROMPT_SOURCES = re.compile(rf"\b(?P<the>[Tt]he) {_NAMED_SOURCES}")
_SUB = re.compile(r"\b(?P<s>[Ss])ub-?(?P<w>questions?|quer(?:y|ies))\b")
_PIPELINE = re.compile(
    rf"\b(?:{_LABEL}|sub-?questions?|sub-?quer(?:y|ies)|question-answer pairs?)"
    rf"|\bthe {_NAMED_SOURCES}",
    re.IGNORECASE,
)

# A line that opens with a label: "**Perspective 1: Friendship**", "### Perspective 2: Do
# it", "- **Response 1 (perspective: X)**:", "**Response 2** (perspective: X): ...",
# "1. **Question 1**: ...", "**Perspective 1:** ...".
_HEADING = re.compile(
    rf"^(?P<lead>[ \t]*(?:#{{1,6}}[ \t]+)?{_LIST}?)(?P<bold>\*\*)?(?P<word>{_WORD})[ \t]+"
    r"(?P<num>\d{1,2})\b(?P<tail>[^\n]*)$",
    re.MULTILINE | re.IGNORECASE,
)
_NAMED = re.compile(
    r"(?P<close>\*\*)?[ \t]*\((?:(?:perspective|view(?:point)?)[ \t]*:[ \t]*)?"
    r"(?P<name>[^()\n]*?(?:\[[\d,; ]+\][^()\n]*?)*)\)(?P<rest>.*)",
    re.IGNORECASE,
)
_COLON_NAME = re.compile(r":[ \t]*(?P<name>[^*\n]+?)[ \t]*\*\*(?P<rest>.*)")
_SEPARATOR = re.compile(r"(?P<sep>\*\*:|:\*\*|\*\*|:)?[ \t]*(?P<rest>.*)")
_SUB_HEADING = re.compile(
    rf"^[ \t]*(?:#{{1,6}}[ \t]*)?{_LIST}?(?:\*\*)?(?:The )?(?:(?:Core|Main|Key) )?"
    r"sub-?(?:questions?|quer(?:y|ies))[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$\n?",
    re.MULTILINE | re.IGNORECASE,
)

# "Response 2 (perspective: lettuce cultivation)" inside a sentence.
_RESPONSE_VIEW = re.compile(
    r"\bResponse \d{1,2}\s*\((?:perspective|view(?:point)?)\s*:\s*(?P<name>[^()\n]+?)\)",
    re.IGNORECASE,
)
# "(Response 2)", "(see Question 3)", "(perspective 1)".
_PAREN = re.compile(
    rf"[ \t]*\((?:see |from |in |as in |cf\.? )?{_LABEL}(?:\s*(?:,|and|or|&)\s*{_LABEL})*\)",
    re.IGNORECASE,
)
# "The evidence for this is found in Question 3, which states that X" -> "X".
_START = rf"^(?P<lead>[ \t]*{_LIST}?)"
_LABEL_SAYS = re.compile(
    _START + r"(?:(?:The evidence(?: for this)? (?:is|can be) found in|The (?:reference|"
    r"statement|information) (?:from|in)|According to|As (?:stated|mentioned|noted) in|In)\s+)?"
    rf"(?:\*\*)?{_LABEL}(?:\*\*)?,?\s+(?:which\s+)?(?:(?:also|directly|clearly|specifically"
    r"|further|explicitly)\s+)?(?:states?|mentions?|says|notes?|shows?|indicates?|suggests?"
    r"|explains?|reports?|adds?|confirms?|describes?|highlights?)\s+(?:that\s+)?",
    re.IGNORECASE | re.MULTILINE,
)
_LABEL_PREFIX = re.compile(
    _START + rf"(?:According to|As (?:stated|mentioned|noted) in|From|In) {_LABEL},\s*",
    re.IGNORECASE | re.MULTILINE,
)
# "the statement from Question 2 that" -> "the statement that".
_FROM_LABEL = re.compile(rf"(?<=\w)\s+(?:from|in|of|by) (?:the )?{_LABEL}", re.IGNORECASE)
# A label that names something the model was shown (not a perspective).
_SOURCE_LABEL = re.compile(
    r"(?:\*\*)?\b(?:Question|Answer|Reference|Passage|Sub-?question|Sub-?query) \d{1,2}\b"
    r"(?:\*\*)?",
    re.IGNORECASE,
)
_LEFT_LABEL = re.compile(
    rf"(?:\*\*)?\b(?P<word>{_WORD}) (?P<num>\d{{1,2}})\b(?:\*\*)?", re.IGNORECASE
)
# "According to the references provided, X" -> "X".
_SOURCE_PREFIX = re.compile(
    _START + r"(?:Based on|According to|From|Using|Judging (?:by|from)|As (?:stated|mentioned"
    rf"|shown|described|given) in|In light of|Drawing on|Going by)\s+{_SRC}"
    r"(?:\s+(?:above|here|below))?\s*,\s*",
    re.IGNORECASE | re.MULTILINE,
)
# "The references [1], [2], and [3] state that X." -> "X [1][2][3].": what the sources say,
# cited, without the sentence about them ("According to [2], X" is the reader's to keep).
_SOURCES_SAY = re.compile(
    r"^(?P<lead>\s*" + _LIST + r"?)(?:(?:the|these|both) )?(?:references?|passages?|sources?"
    r"|documents?)\s+(?P<cites>\[\d{1,3}\](?:\s*,?\s*(?:and\s+)?\[\d{1,3}\])*)\s+"
    r"(?:(?:all|both|also|clearly|explicitly|further|directly)\s+)?(?:state|say|explain|mention"
    r"|note|show|indicate|suggest|describe|confirm|highlight|specif(?:y|ie)|clarif(?:y|ie))s?"
    r"\s+that\s+(?P<claim>\S.*?)(?P<own>" + _CITES + r")(?P<end>[.!?:;]?[\"')*]*\s*)$",
    re.IGNORECASE | re.DOTALL,
)


def _sources_say(piece: str) -> str:
    """One sentence of :data:`_SOURCES_SAY` as its claim, citing the sources it named (then
    its own), each once, as adjacent groups."""
    m = _SOURCES_SAY.match(piece)
    if not m:
        return piece
    numbers = dict.fromkeys(re.findall(r"\d+", m["cites"] + m["own"]))
    cites = "".join(f"[{n}]" for n in numbers)
    cap = "" if m["claim"].startswith("`") else _CAP  # code is copied as written
    return f"{m['lead']}{cap}{m['claim'].rstrip()} {cites}{m['end']}"


# "X, which are supported by the references provided:" -> "X:".
_SOURCE_CLAUSE = re.compile(
    r"(?:,\s*(?:which|as)|,?\s+and this)\s+(?:(?:is|are|was|were|can be|has been|have been)\s+)?"
    r"(?:(?:also|all|directly|clearly|further|explicitly|fully)\s+)?(?:stated|supported"
    r"|mentioned|outlined|described|confirmed|shown|found|given|provided|indicated|noted"
    rf"|evidenced|documented|aligns?|consistent|in line)\s+(?:with|by|in|from)\s+{_SRC}"
    r"(?:\s+(?:in|from) (?:the )?passage)?"
    rf"(?={_CITES}\s*(?:[.:;!?](?:\s|$)|$))",
    re.IGNORECASE,
)


@dataclass
class Unscaffolded:
    """An answer after :func:`unscaffold`, and which kinds of scaffolding were found."""

    answer: str
    found: list[str] = field(default_factory=list)


# Marks where a rewrite starts a sentence: the letter after it becomes a capital.
_CAP = "\x00"
_SENTENCE_START = re.compile(rf"(?:^|\n|[.!?][\"')\]]*\s)[ \t]*{_LIST}?(?:\*\*)?$")


def _cap(text: str) -> str:
    """``text`` with its first letter upper-case, after any markup or quotes before it."""
    m = re.match(r"[\s\"'“*(]*", text)
    i = m.end() if m else 0
    return text[:i] + text[i : i + 1].upper() + text[i + 1 :]


def _ordinal(word: str, num: str) -> str | None:
    """ "first perspective" for a label the reader can follow; None for the others."""
    noun = _VIEWS.get(word.split()[-1].lower())
    n = int(num)
    if noun is None or not 1 <= n <= len(_ORDINALS):
        return None
    return f"{_ORDINALS[n - 1]} {noun}"


def _view_name(name: str) -> str:
    """ "the X perspective" for a perspective's name."""
    name = name.strip()
    return name if re.search(r"\b(?:perspective|view)$", name, re.I) else f"the {name} perspective"


def _heading(m: re.Match[str]) -> str:
    """One line that opens with a label, without it (see :data:`_HEADING`)."""
    lead, bold, tail = m["lead"], m["bold"] or "", m["tail"]
    named = _NAMED.match(tail)
    if named and named["name"].strip():
        rest = named["rest"]
        if not bold and not named["close"] and re.match(r"\s+[a-z]", rest):
            return lead + _cap(_view_name(named["name"])) + rest  # "Response 1 (...) states"
        return lead + bold + _cap(named["name"].strip()) + (named["close"] or "") + rest
    colon = _COLON_NAME.match(tail) if bold else None
    if colon:  # "**Perspective 1: Friendship**"
        return lead + bold + _cap(colon["name"]) + "**" + colon["rest"]
    sep = _SEPARATOR.fullmatch(tail)
    assert sep is not None  # the rest may be anything
    rest = sep["rest"].rstrip()
    if not rest:  # a heading that is only the label
        ordinal = _ordinal(m["word"], m["num"])
        return lead + bold + ordinal.capitalize() + (sep["sep"] or "") if ordinal else ""
    if re.match(r"[a-z]", rest) or not (sep["sep"] or bold):
        return m[0]  # the label is the sentence's subject: the inline rules say it
    return lead + _cap(rest)


def _left_label(m: re.Match[str]) -> str:
    ordinal = _ordinal(m["word"], m["num"])
    return _starting(m, f"the {ordinal}") if ordinal else m[0]


def _starting(m: re.Match[str], text: str) -> str:
    """``text`` in place of ``m``, marked to start with a capital where ``m`` started a
    sentence or line."""
    before = m.string[: m.start()]
    return _CAP + text if _SENTENCE_START.search(before) else text


def _prompt_sources(m: re.Match[str]) -> str:
    noun = next(w for w in m[0].lower().split()[1:] if w not in ("provided", "given"))
    plural = noun.endswith("s") or noun == "context"
    return f"{m['the']} source{'s' if plural else ''}"


def _sub(m: re.Match[str]) -> str:
    """ "questions" for "sub-questions" or "sub-queries", in the case it was written."""
    word = "questions" if m["w"].lower() in ("questions", "queries") else "question"
    return word if m["s"] == "s" else word.capitalize()


def _strip_start(pattern: re.Pattern[str]) -> Callable[[str], str]:
    """A rewrite removing what ``pattern`` matches at a line's start (after its list
    marker, kept), what follows starting with a capital."""
    return lambda piece: pattern.sub(lambda m: m["lead"] + _CAP, piece)


# Rewrites of a sentence that keep its content, in order: the attributions to a label or
# to the sources first, so that what they attribute stays.
_REWRITES: tuple[tuple[str, Callable[[str], str]], ...] = (
    (
        "response-view",
        lambda p: _RESPONSE_VIEW.sub(lambda m: _starting(m, _view_name(m["name"])), p),
    ),
    ("label-aside", lambda p: _PAREN.sub("", p)),
    ("label-attribution", _strip_start(_LABEL_SAYS)),
    ("label-attribution", _strip_start(_LABEL_PREFIX)),
    ("source-attribution", _strip_start(_SOURCE_PREFIX)),
    ("source-attribution", _sources_say),
    ("source-clause", lambda p: _SOURCE_CLAUSE.sub("", p)),
)
# Rewrites of what is left once the sentences that only talk about the pipeline are gone.
_LAST_REWRITES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("label-reference", lambda p: _FROM_LABEL.sub("", p)),
    ("label-ordinal", lambda p: _LEFT_LABEL.sub(_left_label, p)),
    ("source-words", lambda p: _PROMPT_SOURCES.sub(_prompt_sources, p)),
    ("sub-question-words", lambda p: _SUB.sub(_sub, p)),
)


# A sentence that grades the answer it ends instead of saying something: "This answer
# directly addresses the question ...", "The answer covers all the key points ...". "The
# answer is that ..." and "The answer is 21" are content, and so is a grading sentence that
# quotes or lists what it covers (a quote, a colon, "which states that").
_QUOTES = re.compile(r"[\"“:]|\b(?:states?|says?|mentions?|notes?|shows?) that\b", re.IGNORECASE)
_SELF_REVIEW = re.compile(
    r"^[\s\-*\d.]*(?:This|The|My|Above) (?:answer|response)\s+"
    r"(?:(?:also|directly|fully|clearly|effectively|therefore)\s+)*"
    r"(?:address(?:es)?|covers?|provides|meets|satisfies|follows|does not contradict"
    r"|is (?:(?:both|also|very)\s+)?(?:correct|complete|concise|clear|accurate|comprehensive"
    r"|relevant|well-supported|supported|based|consistent|directly))\b",
    re.IGNORECASE,
)


def copied_instruction(sentence: str) -> str:
    """The words ``sentence`` copies from an instruction line of the prompts, a run of
    :data:`~typed_rag.messages.COPIED_WORDS` words or more (one such run, as lower-case
    words, the same one every time); "" when it copies none."""
    runs = word_runs(sentence)
    if INSTRUCTION_RUNS.isdisjoint(runs):
        return ""
    return " ".join(min(INSTRUCTION_RUNS & runs))


def _talk(sentence: str) -> bool:
    """Whether ``sentence`` only says where the answer came from, naming the pipeline ("The
    evidence for this is found in Question 3.", "This is supported by the points from the
    question-answer pairs:"), grades the answer itself, or copies an instruction of the
    prompt."""
    if copied_instruction(sentence):
        return True
    if _SELF_REVIEW.search(sentence) and not _QUOTES.search(sentence):
        return True
    if not _PIPELINE.search(sentence):
        return False
    probe = _SOURCE_LABEL.sub("the reference", sentence.strip())
    probe = re.sub(r"[*\s]*:[*\s]*$", ".", probe)
    return is_source_talk(probe)


def _lead_in(sentence: str) -> bool:
    """Whether ``sentence``, which introduces what follows (it ends with ":"), is about the
    pipeline: its sub-questions, question-answer pairs, or sources vouching for it."""
    return bool(re.search(r"sub-?quer|sub-?question|question-answer pair", sentence, re.I)) or (
        _talk(sentence)
    )


_LEAD_IN_END = re.compile(r":[*\s]*$")  # a line that introduces what follows


def _drop_lead_ins(text: str) -> str:
    """``text`` without the last sentence of each line ending in ":" that :func:`_lead_in`
    picks (the list it introduces stays)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not _LEAD_IN_END.search(line):
            continue
        tail_at = len(line) - len(answer_pieces(line)[-1])
        if _lead_in(line[tail_at:]):
            lines[i] = line[:tail_at].rstrip()
    return "\n".join(lines)


def _capitals(text: str) -> str:
    """``text`` with the letter after each :data:`_CAP` mark a capital, without the marks."""
    return re.sub(rf"{_CAP}([^{_CAP}\w]*)(\w)", lambda m: m[1] + m[2].upper(), text).replace(
        _CAP, ""
    )


def _rewrite(
    pieces: list[str], rules: tuple[tuple[str, Callable[[str], str]], ...], found: list[str]
) -> list[str]:
    out = []
    for piece in pieces:
        new = piece
        for name, rule in rules:
            changed = rule(new)
            if changed != new and name not in found:
                found.append(name)
            new = changed
        out.append(_capitals(new))
    return out


def unscaffold(answer: str) -> Unscaffolded:
    """``answer`` without talk about the pipeline: labels rewritten away, sentences that only
    talk about the pipeline dropped (never all of them), ``[n]`` markers kept with their
    content; ``found`` names the kinds of scaffolding found, in the order they were handled."""
    found: list[str] = []
    text = answer
    for name, pattern, repl in (
        ("label-heading", _HEADING, _heading),
        ("sub-question-heading", _SUB_HEADING, ""),
    ):
        new = pattern.sub(repl, text)
        if new != text:
            found.append(name)
        text = new
    text = "".join(_rewrite(answer_pieces(text), _REWRITES, found))
    new = _drop_lead_ins(text)
    if new != text and new.strip():
        found.append("pipeline-lead-in")
        text = new
    pieces = answer_pieces(text)
    kept = [p for p in pieces if not _talk(p)]
    if len(kept) < len(pieces):
        found.append("pipeline-talk")
    if "".join(kept).strip():
        text = "".join(_rewrite(kept, _LAST_REWRITES, found))
    # else only talk: kept as it is, since reworded it would say nothing
    if text == answer:
        return Unscaffolded(answer, found)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if not re.search(r"\w", text):
        return Unscaffolded(answer, found)
    return Unscaffolded(text, found)


async def unscaffold_stream(deltas: AsyncIterator[str], found: list[str]) -> AsyncIterator[str]:
    """A streamed answer's deltas with talk about the pipeline rewritten away, as
    :func:`unscaffold` does, a sentence at a time: each sentence (or line) is held until the
    next one starts, then sent rewritten; one that only talks about the pipeline is dropped
    once something was sent. Empty deltas pass at once (a progress event waits on them).
    ``found`` gets the kinds of scaffolding found."""
    pending, sent = "", False
    try:
        try:
            async for delta in deltas:
                if not delta:
                    yield delta
                    continue
                *done, pending = answer_pieces(pending + delta)
                for piece in done:
                    if out := _guard_piece(piece, sent, found):
                        sent = sent or bool(re.search(r"\w", out))
                        yield out
        except Exception:
            if out := _guard_piece(pending, sent, found):
                yield out  # what came before a failure is sent, as an unguarded stream would
            raise
        if out := _guard_piece(pending, sent, found):
            yield out
    finally:
        await deltas.aclose()  # type: ignore[attr-defined]  # an abandoned stream stops its engine


def _guard_piece(piece: str, sent: bool, found: list[str]) -> str:
    """One streamed sentence, guarded (see :func:`unscaffold_stream`). ``found`` gets the
    kinds that changed it, so it is empty exactly when the stream went out unchanged; what
    was found and kept, :func:`~typed_rag.finishing.finish.finish` records from the whole."""
    body = piece.lstrip()
    if not re.search(r"\w", body):
        return piece
    if sent and (_talk(body) or (_LEAD_IN_END.search(body) and _lead_in(body))):
        add_kinds(found, ["pipeline-talk"])
        return ""
    guard = unscaffold(body)
    if guard.answer == body:
        return piece
    add_kinds(found, guard.found)
    return piece[: len(piece) - len(body)] + guard.answer + body[len(body.rstrip()) :]


def add_kinds(found: list[str], kinds: list[str]) -> None:
    """``kinds`` added to ``found``, each once, in order."""
    found.extend(k for k in dict.fromkeys(kinds) if k not in found)
