"""The scaffolding guard: talk about the pipeline ("Perspective 1", "Response 2 (perspective:
X)", "Question 3", "the references provided", "sub-questions") rewritten or dropped in every
mode, never emptying the answer, the [n] markers kept with what they cite."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from eval.runs.refinish import LEAK
from typed_rag.engines.fake import scripted_responder
from typed_rag.finishing.finish import finish
from typed_rag.finishing.scaffolding import unscaffold, unscaffold_stream
from typed_rag.method_settings import MethodOptions
from typed_rag.result import CitedPassage, Result
from typed_rag.types import QuestionType as T

MARKER = re.compile(r"\[[\d,; ]+\]")

# (kind, answer as generated, answer as the reader gets it)
REWRITES = [
    (
        "label-heading",
        "**Perspective 1: Friendship**\n\nThey were friends [1].\n\n"
        "**Main Perspective 2 (Love affair [2])**\n\nThey were lovers [2].",
        "**Friendship**\n\nThey were friends [1].\n\n**Love affair [2]**\n\nThey were lovers [2].",
    ),
    (
        "label-heading",
        '- **Response 1 (perspective: natural defense)**: "Spines deter herbivores [1]."\n'
        '**Response 2** (perspective: chemical defense): "Toxins deter them [2]."',
        '- **Natural defense**: "Spines deter herbivores [1]."\n'
        '**Chemical defense**: "Toxins deter them [2]."',
    ),
    (
        "label-heading",
        "**Perspective 1:** Disclosure should start at the top [2].\n"
        "1. **Question 1**: Roncalli was chosen among candidates [1].",
        "Disclosure should start at the top [2].\n1. Roncalli was chosen among candidates [1].",
    ),
    (
        "label-heading",
        "**Perspective 1**:\n- Direct control [1].\n\n**Perspective 2**:\n- Market position [4].",
        "**First perspective**:\n- Direct control [1].\n\n"
        "**Second perspective**:\n- Market position [4].",
    ),
    (
        "label-heading",
        "- Response 2 (perspective: lettuce cultivation) states that China grows the most "
        "lettuce [2].",
        "- The lettuce cultivation perspective states that China grows the most lettuce [2].",
    ),
    (
        "response-view",
        "Lettuce is popular [3]. Response 2 (perspective: lettuce cultivation) states that "
        "China grows the most [2].",
        "Lettuce is popular [3]. The lettuce cultivation perspective states that China grows "
        "the most [2].",
    ),
    (
        "label-aside",
        "Both views, for research (Response 1) and for innovation (Response 2), stress "
        "research [2].",
        "Both views, for research and for innovation, stress research [2].",
    ),
    (
        "label-attribution",
        "The show is popular [5]. The evidence for this is found in Question 3, which states "
        "that viewers already know the news [6].",
        "The show is popular [5]. Viewers already know the news [6].",
    ),
    (
        "label-attribution",
        "Evidence:\n- In Answer 1, we see that the film came out in 3-D [1].",
        "Evidence:\n- We see that the film came out in 3-D [1].",
    ),
    (
        "label-reference",
        "He left, and this aligns with the statement from Question 2 that he met Tardini [1].",
        "He left, and this aligns with the statement that he met Tardini [1].",
    ),
    (
        "label-ordinal",
        "Both are valid.\n\n- **Perspective 2** is based on a personal account [2].",
        "Both are valid.\n\n- The second perspective is based on a personal account [2].",
    ),
    (
        "source-attribution",
        "According to the references provided, the need for salt diminished after 1812 [3].",
        "The need for salt diminished after 1812 [3].",
    ),
    (
        "source-attribution",
        "Based on the information provided in the references, if you had a ZE postcode you "
        "would live in Shetland [4].",
        "If you had a ZE postcode you would live in Shetland [4].",
    ),
    (  # c++-annotations: the sources' statement, cited, without the sentence about them
        "source-attribution",
        "The references [1], [2], and [3] state that variables can be defined within the "
        "condition clauses of if-else statements. The definition must be initialized [1].",
        "Variables can be defined within the condition clauses of if-else statements "
        "[1][2][3]. The definition must be initialized [1].",
    ),
    (
        "source-attribution",
        "The method pairs chunks [1]. The reference [1] clearly states that this method "
        "returns a new stream.",
        "The method pairs chunks [1]. This method returns a new stream [1].",
    ),
    (
        "source-attribution",
        "- Reference [2] says that the callback runs once.\n"
        "- The passages [1] and [3] explain that `fit` scales the page [4].",
        "- The callback runs once [2].\n- `fit` scales the page [1][3][4].",
    ),
    (
        "source-clause",
        "The name was changed at a developer's request, which aligns with the references "
        "provided in the passage [5].",
        "The name was changed at a developer's request [5].",
    ),
    (
        "source-clause",
        "The Gospel is read last for several reasons, which are supported by the references "
        "provided:\n\n1. Tradition [2].",
        "The Gospel is read last for several reasons:\n\n1. Tradition [2].",
    ),
    (
        "source-words",
        "The cause of his death is not mentioned in any of the provided references.",
        "The cause of his death is not mentioned in any of the sources.",
    ),
    (
        "sub-question-heading",
        "### Core sub-questions\n1. Why did Alsace decline?\n   - A war divided it [8].",
        "1. Why did Alsace decline?\n   - A war divided it [8].",
    ),
]

# (kind, answer with a sentence that only talks about the pipeline, answer without it)
DROPS = [
    (
        "pipeline-talk",
        "Widders died in Warwick in 1688 [2]. The evidence comes from the references provided, "
        "which include his biography.",
        "Widders died in Warwick in 1688 [2].",
    ),
    (
        "pipeline-talk",
        "The show succeeds because viewers know the news [6]. The evidence for this is found "
        "in Question 3.",
        "The show succeeds because viewers know the news [6].",
    ),
    (
        "pipeline-lead-in",
        "To answer the original question, we need to address the following core "
        "sub-questions:\n1. **When was it founded [4]?**\nIt was founded in 1542 [1].",
        "1. **When was it founded [4]?**\nIt was founded in 1542 [1].",
    ),
    (
        "pipeline-lead-in",
        "Hippophobia is the fear of horses.\nThis is supported by the following points from "
        "the question-answer pairs:\n- Horses can frighten people [7].",
        "Hippophobia is the fear of horses.\n\n- Horses can frighten people [7].",
    ),
    (  # headline: an answer grading itself, with and without a citation
        "pipeline-talk",
        "The solid part of the Earth is called the crust [4]. This answer is correct based on "
        "the information provided in the first reference.",
        "The solid part of the Earth is called the crust [4].",
    ),
    (
        "pipeline-talk",
        "Toy Story was the first fully computer-animated film [1]. The answer is concise and "
        "directly relevant to the question, with only one reference used to back it up [1].",
        "Toy Story was the first fully computer-animated film [1].",
    ),
]


@pytest.mark.parametrize(("kind", "before", "after"), REWRITES + DROPS)
def test_each_kind_is_rewritten_or_dropped(kind: str, before: str, after: str) -> None:
    guard = unscaffold(before)
    assert guard.answer == after
    assert kind in guard.found
    assert not LEAK.search(guard.answer)


@pytest.mark.parametrize(("kind", "before", "after"), REWRITES)
def test_rewrites_keep_every_citation_marker(kind: str, before: str, after: str) -> None:
    assert Counter(MARKER.findall(unscaffold(before).answer)) == Counter(MARKER.findall(before))


def test_a_marker_stays_with_the_content_it_cites() -> None:
    guard = unscaffold(
        "It changed at a developer's request, which aligns with the references provided [5]."
    )
    assert guard.answer == "It changed at a developer's request [5]."


@pytest.mark.parametrize(
    "answer",
    [
        "The evidence for this is found in Question 3.",
        "This answer is supported by the references provided.",
    ],
)
def test_never_empties_an_answer(answer: str) -> None:
    assert unscaffold(answer).answer == answer


@pytest.mark.parametrize(
    "answer",
    [
        # content that only looks like the labels
        "Rostker v. Goldberg held that requiring only men to register for the draft was "
        "constitutional [1].",
        "According to the passage, the crust is the solid part of the Earth [4].",
        "According to [2], the crust is the solid part of the Earth.",
        "The solid part of the Earth is the crust [4]. This is supported by [4].",
        "The Northwest Passage links the Atlantic and the Pacific [2].",
        "**Main points:** The 1921 conference called for socialisation [8].",
        # prose that says whose context or references it means
        "The context given by the treaty explains the border [2].",
        "In the given context of the war, rationing was accepted [1].",
        "The references provided by the author are listed in the appendix [3].",
        # an answer named as content, or a grading sentence that quotes what it covers
        "The answer is that the crust is the solid part of the Earth [4].",
        "The answer is 21 in every state [2].",
        'This answer is supported by the Resolutions, which state that "measures of the '
        'Federal Government" were void [1].',
    ],
)
def test_leaves_answers_without_scaffolding_alone(answer: str) -> None:
    guard = unscaffold(answer)
    assert guard.answer == answer and guard.found == []


def test_a_perspective_sentence_is_content_not_talk() -> None:
    """A sentence about a perspective is rewritten, never dropped as talk about sources."""
    answer = "- **Perspective 2** is based on personal information about Thompson [2]."
    assert unscaffold(answer).answer == (
        "- The second perspective is based on personal information about Thompson [2]."
    )


LEAKY = (
    "**Perspective 1: Against**\nIt costs too much [1].\n\n**Perspective 2: For**\nIt helps [1]."
)
CLEAN = "**Against**\nIt costs too much [1].\n\n**For**\nIt helps [1]."
PASSAGE = CitedPassage(citation=1, id="p1", title="T", text="It costs too much.", score=1.0)


@pytest.mark.parametrize("mode", ["llm", "rag", "typed-rag"])
def test_finish_guards_every_mode(mode: str) -> None:
    result = Result(question="Q?", mode=mode, answer=LEAKY, passages=[PASSAGE])
    done = finish(result, MethodOptions(drop_scaffolding=True), time.perf_counter())
    assert done.answer == CLEAN and done.unscaffolded
    assert done.scaffolding == ["label-heading"] and done.citations == [1]


def test_finish_records_a_streamed_answer_without_changing_it() -> None:
    result = Result(question="Q?", mode="typed-rag", answer=LEAKY, passages=[PASSAGE])
    done = finish(result, MethodOptions(drop_scaffolding=True), time.perf_counter(), streamed=True)
    assert done.answer == LEAKY and not done.unscaffolded
    assert done.scaffolding == ["label-heading"]


def test_finish_leaves_a_clean_answer_unflagged() -> None:
    result = Result(question="Q?", mode="rag", answer=CLEAN, passages=[PASSAGE])
    done = finish(result, MethodOptions(), time.perf_counter())
    assert done.answer == CLEAN and not done.unscaffolded and done.scaffolding == []


@pytest.mark.parametrize("mode", ["llm", "rag", "typed-rag"])
async def test_the_system_guards_every_mode(make_rag, mode: str) -> None:
    rag, _ = make_rag(scripted_responder({}, lambda req: LEAKY))
    rag.settings.method.drop_scaffolding = True
    result = await rag.answer("Should cities ban cars?", mode=mode, force_type=T.EVIDENCE_BASED)
    assert result.answer == CLEAN and result.unscaffolded


def test_the_default_profile_guards_and_the_paper_profile_keeps_the_text() -> None:
    from typed_rag.config import Settings

    assert Settings().method.options().drop_scaffolding
    assert not Settings(method={"profile": "paper"}).method.options().drop_scaffolding


async def test_scaffolding_is_recorded_and_kept_when_the_guard_is_off(make_rag) -> None:
    rag, _ = make_rag(scripted_responder({}, lambda req: LEAKY))
    rag.settings.method.drop_scaffolding = False
    result = await rag.answer("Should cities ban cars?", mode="rag")
    assert result.answer == LEAKY and not result.unscaffolded
    assert result.scaffolding == ["label-heading"]


async def _deltas(text: str, size: int, closed: list[bool]):
    """``text`` as a stream of ``size``-character deltas after one empty delta; ``closed``
    records that the stream was closed."""
    try:
        yield ""
        for i in range(0, len(text), size):
            yield text[i : i + size]
    finally:
        closed.append(True)


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
async def test_a_stream_is_guarded_as_the_whole_answer_is(size: int) -> None:
    talk = LEAKY + " The evidence for this is found in Question 3."
    found: list[str] = []
    closed: list[bool] = []
    out = [d async for d in unscaffold_stream(_deltas(talk, size, closed), found)]
    assert out[0] == ""  # the empty delta (a progress event waits on it) passes at once
    assert "".join(out) == unscaffold(talk).answer == CLEAN
    assert found == ["label-heading", "pipeline-talk"] and closed == [True]


async def test_a_clean_stream_passes_unchanged_and_an_abandoned_one_is_closed() -> None:
    found: list[str] = []
    closed: list[bool] = []
    out = [d async for d in unscaffold_stream(_deltas(CLEAN, 2, closed), found)]
    assert "".join(out) == CLEAN and found == []
    stream = unscaffold_stream(_deltas(CLEAN * 20, 2, closed := []), [])
    async for delta in stream:
        if delta:
            break
    await stream.aclose()
    assert closed == [True]  # the engine's stream under it stops too


async def test_the_system_guards_a_streamed_answer(make_rag) -> None:
    rag, _ = make_rag(scripted_responder({}, lambda req: LEAKY))
    rag.settings.method.drop_scaffolding = True
    events = [e async for e in rag.answer_stream("Should cities ban cars?", mode="rag")]
    *deltas, result = events
    assert "".join(d for d in deltas if isinstance(d, str)) == CLEAN == result.answer
    assert result.unscaffolded and result.scaffolding == ["label-heading"]


async def test_a_failing_stream_sends_what_came_before_the_failure() -> None:
    async def failing():
        yield "**Perspective 1: Against**\nIt costs"
        raise RuntimeError("boom")

    out: list[str] = []
    with pytest.raises(RuntimeError, match="boom"):
        async for delta in unscaffold_stream(failing(), []):
            out.append(delta)
    assert "".join(out) == "**Against**\nIt costs"


async def test_a_stream_kept_as_it_was_is_not_flagged_unscaffolded(make_rag) -> None:
    talk = "The evidence for this is found in Question 3."  # only talk: never emptied
    rag, _ = make_rag(scripted_responder({}, lambda req: talk))
    rag.settings.method.drop_scaffolding = True
    *_, result = [e async for e in rag.answer_stream("Should cities ban cars?", mode="rag")]
    assert result.answer == talk and not result.unscaffolded
    assert result.scaffolding == ["pipeline-talk"]  # found in the whole answer, and kept


def test_a_copied_instruction_of_the_prompt_is_dropped_and_its_topic_words_are_not() -> None:
    from typed_rag.pipelines.prompting import CORE_DEFINITION, STRICT_CITE_RULE

    content = "- `ios::openmode` values say how a file is opened [1]."
    # copied as the answer's first line, with "sub-questions" already reworded
    copied = CORE_DEFINITION.split(". Make")[0].replace("sub-questions", "questions") + "."
    guarded = unscaffold(f"{copied}\n\n{content}\n{STRICT_CITE_RULE.split('. Use')[0]}.")
    assert guarded.answer == content
    assert "pipeline-talk" in guarded.found
    # an answer that uses a few of the same words is not a copy
    own = "Work out the core points first: a complete answer must address each of them [2]."
    assert unscaffold(f"{own}\n{content}").answer == f"{own}\n{content}"
