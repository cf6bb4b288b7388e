"""Over a user's documents typed-rag answers from the passages alone (issue 77): one answer
with no type's shape, no closed-book draft, the documents-only rule in the prompt, and
sentences stating a command or number no shown passage holds removed (kept, and recorded,
by the RAG baseline)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.documents.makers import shop_settings
from tests.serving.conftest import ProbeEngine, collect, live_server, make_rag
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, ChoiceRequest
from typed_rag.finishing.finish import amendment_note
from typed_rag.finishing.verify import UNSUPPORTED
from typed_rag.pipelines.prompting import ANSWER_SHAPES, DOCUMENTS_ONLY, NOT_IN_DOCUMENTS
from typed_rag.progress import Progress

INVENTED = "Then run `oilctl --reset` to clear the counter [1]."
ANSWER = f"Change the hydraulic oil every 2000 hours [1]. {INVENTED}"
QUESTION = "Why is the hydraulic oil changed every 2000 hours?"


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return shop_settings(tmp_path)


def reply(request: ChatRequest) -> str:
    if request.json_schema is not None:  # a plan: no typed pipeline should ask for one
        return '{"sub_queries": ["a", "b"]}'
    return ANSWER


async def test_reason_over_documents_is_one_answer_from_the_passages(settings: Settings) -> None:
    engine = ProbeEngine(reply)
    async with make_rag(settings, engine) as rag:
        result = await rag.answer(QUESTION, force_type="REASON", collection="shop")
        wiki = await rag.answer(QUESTION, force_type="REASON")
    assert result.corpus == "documents" and wiki.corpus == "wikipedia"
    steps = [c.step for c in result.calls]
    # no plan, no sub-answers, no draft; the cited sentence asked against its passage
    assert steps == ["answer", "support"], steps
    assert "draft" not in result.plan
    final_prompt = engine.calls[0].messages[-1]["content"]
    (asked,) = engine.choice_calls
    assert "Statement: Change the hydraulic oil every 2000 hours." in asked.messages[-1]["content"]
    assert DOCUMENTS_ONLY in final_prompt and "own knowledge" not in final_prompt
    # the invented command left the answer; the trace says which sentence and why
    assert result.answer == "Change the hydraulic oil every 2000 hours [1]."
    (gone,) = result.unverified
    assert gone.removed and gone.missing == ["oilctl --reset"]
    assert gone.sentence.startswith("Then run `oilctl --reset`")
    assert ANSWER_SHAPES["REASON"] not in final_prompt
    # the same question over Wikipedia still takes the REASON pipeline (plan, then the
    # answer; no closed-book draft since issue 79) and no support check
    assert [c.step for c in wiki.calls] == ["plan", "aggregate"] and "draft" not in wiki.plan


@pytest.mark.parametrize("qtype", ["DEBATE", "INSTRUCTION"])
async def test_no_type_shape_over_documents(settings: Settings, qtype: str) -> None:
    """A factual question routed DEBATE gets no invented sides over documents, and a how-to
    no imposed step list; the same how-to over Wikipedia keeps its shape."""
    engine = ProbeEngine(reply)
    async with make_rag(settings, engine) as rag:
        await rag.answer(QUESTION, force_type=qtype, collection="shop")
        (docs_call,) = engine.calls
        await rag.answer(QUESTION, force_type="INSTRUCTION")
    docs_prompt = docs_call.messages[-1]["content"]
    assert ANSWER_SHAPES[qtype] not in docs_prompt and DOCUMENTS_ONLY in docs_prompt
    wiki_prompts = [c.messages[-1]["content"] for c in engine.calls[1:]]
    assert any(ANSWER_SHAPES["INSTRUCTION"] in p for p in wiki_prompts)


async def test_rag_baseline_records_unverified_sentences_but_keeps_them(
    settings: Settings,
) -> None:
    async with make_rag(settings, ProbeEngine(reply)) as rag:
        result = await rag.answer(QUESTION, mode="rag", collection="shop")
    assert result.answer == ANSWER
    assert [u.sentence for u in result.unverified] == [INVENTED]
    assert not result.unverified[0].removed


async def test_over_wikipedia_unverified_sentences_are_recorded_not_removed(
    settings: Settings,
) -> None:
    async with make_rag(settings, ProbeEngine(reply)) as rag:
        result = await rag.answer(QUESTION, force_type="EVIDENCE-BASED")
    assert result.corpus == "wikipedia"
    assert INVENTED.split(" [")[0] in result.answer
    assert result.unverified and not any(u.removed for u in result.unverified)


async def test_no_matching_passage_over_documents_is_declined_without_generating(
    settings: Settings,
) -> None:
    from eval.grounding.measure import declines

    engine = ProbeEngine(reply)
    async with make_rag(settings, engine) as rag:
        result = await rag.answer("How do I calibrate the laser sensor?", collection="shop")
        baseline = await rag.answer(
            "How do I calibrate the laser sensor?", mode="rag", collection="shop"
        )
    assert result.passages == [] and result.calls == []  # nothing shown, nothing generated
    assert result.answer == NOT_IN_DOCUMENTS and declines(result.answer)
    assert any("the documents do not say" in f for f in result.fallbacks)
    assert baseline.answer == ANSWER  # the paper's RAG baseline still generates


async def test_a_question_naming_only_what_the_collection_never_mentions_is_declined(
    settings: Settings,
) -> None:
    engine = ProbeEngine(reply)
    async with make_rag(settings, engine) as rag:
        # "hydraulic oil" finds the Hydraulics page, but no page names Why3
        other = await rag.answer("How often does Why3 change the hydraulic oil?", collection="shop")
        # a name the manual does use, a typo, and a plain word it never uses: answered
        named = await rag.answer("How often is the Hydraulics oil changed?", collection="shop")
        typo = await rag.answer("How oftn is the hydraulic oil changed?", collection="shop")
    assert other.passages and other.calls == []  # shown, but nothing generated
    assert other.answer == 'The documents do not say: no page of this collection mentions "why3".'
    assert any("never uses ['why3']" in f for f in other.fallbacks)
    for answered in (named, typo):  # generated, then its cited sentence checked
        assert [c.step for c in answered.calls] == ["answer", "support"]


async def test_an_answer_no_shown_passage_backs_says_the_documents_do_not_say(
    settings: Settings,
) -> None:
    invented = "Run `oilctl --reset` first [1]. Then `oilctl --flush` clears it [1]."
    async with make_rag(settings, ProbeEngine(lambda _: invented)) as rag:
        result = await rag.answer(QUESTION, force_type="REASON", collection="shop")
        baseline = await rag.answer(QUESTION, mode="rag", collection="shop")
    assert result.answer == UNSUPPORTED and result.passages  # the passages are still shown
    assert [u.missing for u in result.unverified] == [["oilctl --reset"], ["oilctl --flush"]]
    assert any(f.startswith("verification: no sentence") for f in result.fallbacks)
    assert baseline.answer == invented  # the paper's RAG baseline is kept as it came


def test_unknown_words_are_the_index_vocabulary_misses(settings: Settings) -> None:
    from typed_rag.retrieval.base import unknown_words
    from typed_rag.retrieval.bm25 import BM25Index
    from typed_rag.retrieval.collections import collection_dir

    index = BM25Index(collection_dir(settings, "shop"))
    # stemmed as the index stems: "changing" is "change"; stop words are never unknown
    assert unknown_words(index, "Is the Why3 oil changing in the press?") == ["why3"]
    assert unknown_words(object(), "Why3") == []  # nothing lexical to ask


# Worded from the Hydraulics page (so the citation and word checks keep both), one turned around.
TURNED = "Do not change the hydraulic oil every 2000 hours [1]."
KEPT = "Change the hydraulic oil every 2000 hours [1]."


def _judge(supported: set[str]) -> Callable[[ChoiceRequest], dict[str, float]]:
    """P(yes) 0.9 for a statement listed, 0.2 for any other."""

    def chooser(request: ChoiceRequest) -> dict[str, float]:
        statement = request.messages[-1]["content"].rsplit("Statement: ", 1)[1]
        yes = 0.9 if statement in supported else 0.2
        return {"yes": yes, "no": 1 - yes}

    return chooser


@pytest.mark.parametrize(
    ("answer", "supported", "expected"),
    [
        (f"{TURNED} {KEPT}", {KEPT.replace(" [1]", "")}, KEPT),
        (TURNED, set(), UNSUPPORTED),  # nothing left: the documents do not say
    ],
)
async def test_a_cited_sentence_its_passage_does_not_support_is_removed_and_recorded(
    settings: Settings, answer: str, supported: set[str], expected: str
) -> None:
    engine = ProbeEngine(lambda request: answer)
    engine.chooser = _judge(supported)
    async with make_rag(settings, engine) as rag:
        result = await rag.answer(QUESTION, force_type="DEBATE", collection="shop")
        rag_mode = await rag.answer(QUESTION, mode="rag", collection="shop")
    unchecked = settings.model_copy(
        update={"method": settings.method.model_copy(update={"support_check": False})}
    )
    async with make_rag(unchecked, engine) as rag:
        off = await rag.answer(QUESTION, force_type="DEBATE", collection="shop")
    assert result.answer == expected
    (turned,) = [u for u in result.unverified if u.kind == "support"]
    assert turned.sentence == TURNED and turned.removed and turned.p_supported == 0.2
    checks = [c for c in result.calls if c.step == "support"]
    cited = len(answer.split(" [1]")) - 1
    others = len(result.passages) - 1  # the turned sentence asked again of the other pages
    rounds = sorted({c.round for c in checks})
    # one verdict a cited sentence in one round, then one round for the other pages (if any)
    assert [sum(c.round == r for c in checks) for r in rounds] == [cited] + [others] * (others > 0)
    assert "support" in result.timings
    # off, and in the RAG baseline, nothing is asked and the answer stays as written
    assert off.answer == answer and not [c for c in off.calls if c.step == "support"]
    assert rag_mode.answer == answer and not [c for c in rag_mode.calls if c.step == "support"]


async def test_a_streamed_answer_over_documents_is_checked_after_it_is_sent(
    settings: Settings,
) -> None:
    """The text streams as the model writes it; then the checks run (a "check" event), a note
    says what they removed, and the result holds the checked answer beside what was sent."""
    sent = f"{TURNED} {KEPT}"
    engine = ProbeEngine(lambda request: sent)
    engine.chooser = _judge({KEPT.replace(" [1]", "")})
    async with make_rag(settings, engine) as rag:
        items = [
            e
            async for e in rag.answer_stream(
                QUESTION, force_type="DEBATE", collection="shop", progress=True
            )
        ]
        engine.chooser = _judge({KEPT.replace(" [1]", ""), TURNED.replace(" [1]", "")})
        *_, held = [e async for e in rag.answer_stream(QUESTION, collection="shop")]
        wiki = [e async for e in rag.answer_stream(QUESTION, force_type="EVIDENCE-BASED")]
    *before, note, result = items
    check = next(i for i, e in enumerate(before) if isinstance(e, Progress) and e.kind == "check")
    assert "".join(e for e in before[:check] if isinstance(e, str)) == sent
    assert before[check + 1 :] == []  # the note comes after the check, then the result
    assert result.streamed_answer == sent and result.answer == KEPT
    assert note == amendment_note(result)
    assert note.startswith("\n\n*Checked against the shown passages") and f'"{TURNED}"' in note
    assert [c.step for c in result.calls].count("support") >= 2
    # every sentence supported: nothing changes, nothing follows the text
    assert held.streamed_answer is None and held.answer == sent
    # over Wikipedia a streamed answer is left as sent and no check runs
    assert wiki[-1].streamed_answer is None and not any(isinstance(e, Progress) for e in wiki)
    assert not [c for c in wiki[-1].calls if c.step == "support"]


def test_the_server_and_the_demo_show_the_checked_answer(settings: Settings) -> None:
    """Over real HTTP: the stream's text, then the note; the last chunk's
    ``typed_rag.checked_answer``; the demo's chat shows the checked text and says why."""
    from ui.demo import make_responder

    sent = f"{TURNED} {KEPT}"
    engine = ProbeEngine(lambda request: sent)
    engine.chooser = _judge({KEPT.replace(" [1]", "")})
    body = {
        "model": "typed-rag",
        "stream": True,
        "collection": "shop",
        "messages": [{"role": "user", "content": QUESTION}],
    }
    with live_server(settings, make_rag(settings, engine)) as srv:
        with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=60) as r:
            assert r.status_code == 200
            data = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        outputs = asyncio.run(collect(make_responder(srv.api)(QUESTION, [], "typed-rag", "shop")))
    chunks = [json.loads(d) for d in data if d != "[DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.startswith(sent) and "(no shown passage supports it)" in text
    final = chunks[-1]["typed_rag"]
    assert final["checked_answer"] == KEPT
    (flagged,) = [u for u in final["unverified"] if u["kind"] == "support"]
    assert flagged["removed"] and flagged["sentence"] == TURNED
    assert any(c["typed_rag"].get("event") == "check" for c in chunks if c.get("typed_rag"))
    history, *_, status = outputs[-1]
    shown = history[-1]["content"]
    assert "hydraulic oil every 2000 hours" in shown and "Do not change" not in shown
    assert (
        status
        == "_Checked against the sources: 1 sentence removed (no shown passage supports it)._"
    )
