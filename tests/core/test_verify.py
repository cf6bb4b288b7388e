"""The check after generation (typed_rag.finishing.verify): sentences stating spans that no
shown passage holds are found, and removed only when asked and only when something is left."""

from __future__ import annotations

import math

from typed_rag.engines.base import ChoiceRequest, ChoiceResult
from typed_rag.finishing.verify import UNSUPPORTED, verify_answer
from typed_rag.pipelines import TYPED, plain
from typed_rag.pipelines.support import (
    check_support,
    drop_unsupported,
    statement_of,
    without_sentences,
)
from typed_rag.result import CitedPassage, Result
from typed_rag.routing import ROUTES, choose
from typed_rag.types import QuestionType

PASSAGES = ["To undo the last commit but keep its changes, run git reset --soft HEAD^."]
QUESTION = "How do I undo the last commit and keep the changes?"


def test_a_sentence_with_a_command_the_page_does_not_give_is_removed() -> None:
    answer = (
        "Run `git reset --soft HEAD^` [1]. Then run `git commit -a` to commit again [1]. "
        "The changes stay in the working tree [1]."
    )
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert (
        verified.answer
        == "Run `git reset --soft HEAD^` [1]. The changes stay in the working tree [1]."
    )
    (u,) = verified.unverified
    assert u.missing == ["git commit -a"] and u.removed


def test_recorded_but_kept_when_not_dropping() -> None:
    wrong = "Use `git stash` [1]."
    kept = verify_answer(wrong + " It keeps the changes [1].", PASSAGES, QUESTION, drop=False)
    assert kept.answer.startswith(wrong) and not kept.unverified[0].removed
    alone = verify_answer(wrong, PASSAGES, QUESTION, drop=False)
    assert alone.answer == wrong


def test_an_answer_no_sentence_of_which_holds_says_the_documents_do_not_say() -> None:
    from eval.grounding.measure import declines

    wrong = "Use `git stash` [1]. Then `git stash pop` brings it back [1]."
    alone = verify_answer(wrong, PASSAGES, QUESTION, drop=True)
    assert alone.answer == UNSUPPORTED and declines(alone.answer)
    assert [u.missing for u in alone.unverified] == [["git stash"], ["git stash pop"]]
    assert all(u.removed for u in alone.unverified)  # the removed text stays in the trace


def test_a_sentence_after_a_code_block_is_checked_and_the_block_stays_closed() -> None:
    answer = (
        "Undo it like this [1]:\n\n```\ngit reset --soft HEAD^\n```\n\n"
        "In this example, `undo.sh` holds the command. The changes are kept [1]."
    )
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert "undo.sh" not in verified.answer
    assert verified.answer.endswith("```\n\nThe changes are kept [1].")


def test_a_faithful_answer_is_untouched() -> None:
    answer = "Run `git reset --soft HEAD^`; the changes are kept [1]."
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert verified.answer == answer and verified.unverified == []


def test_routes_by_corpus_kind(settings) -> None:  # type: ignore[no-untyped-def]
    for qtype in QuestionType:
        docs = choose("typed-rag", None, qtype, settings, corpus="documents")
        wiki = choose("typed-rag", None, qtype, settings, corpus="wikipedia")
        assert docs.pipeline is plain.GUIDED.prepare and docs.type is qtype
        assert wiki.pipeline is TYPED[qtype].prepare
    assert set(ROUTES) == {"wikipedia", "documents"}
    # the baselines stay the paper's whatever is searched
    assert choose("rag", None, QuestionType.REASON, settings, corpus="documents").pipeline is (
        plain.RAG.prepare
    )


def test_code_blocks_are_never_cut_in_half() -> None:
    answer = (
        "Run `git reset --soft HEAD^` [1]. Example:\n```\ngit commit -a. git push -f.\n```\n"
        "Done. Then run `git stash pop` to restore it [1]."
    )
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert verified.answer.count("```") == 2  # the block stays whole, its lines unchecked
    assert "git stash pop" not in verified.answer  # the sentence outside it goes
    assert [u.removed for u in verified.unverified] == [False, False, True]


def test_uncited_filler_no_passage_holds_is_removed_and_recorded() -> None:
    filler = "This helps in maintaining a consistent and organized codebase."
    answer = f"Run `git reset --soft HEAD^` to undo it [1]. {filler} For example:"
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert verified.answer == "Run `git reset --soft HEAD^` to undo it [1]. For example:"
    (u,) = verified.unverified
    assert u.kind == "words" and u.removed and u.sentence == filler
    assert {"maintaining", "codebase"} <= set(u.missing)


def test_an_uncited_sentence_the_passage_says_stays() -> None:
    # uncited, but its own words (run, reset, soft, HEAD) are the passage's
    answer = "Run `git reset --soft HEAD^` [1]. Then run git reset --soft HEAD^ once."
    verified = verify_answer(answer, PASSAGES, QUESTION, drop=True)
    assert verified.answer == answer and verified.unverified == []


def test_unsupported_sentences_leave_the_lines_around_them_and_code_blocks_whole() -> None:

    answer = (
        "Steps:\n1. Open the file [1].\n2. Delete the disk [2].\n3. Save it [1].\n"
        "```\nrm -rf / [2].\n```"
    )
    kept, removed = without_sentences(answer, {"Delete the disk.", "rm -rf /."})
    assert removed == {"Delete the disk."}  # the code line is never a piece to cut
    assert kept == "Steps:\n1. Open the file [1].\n3. Save it [1].\n```\nrm -rf / [2].\n```"
    assert statement_of("2. **Delete** the disk [2].") == "Delete the disk."


async def test_headings_and_lead_ins_are_not_asked() -> None:
    asked: list[str] = []

    async def score(requests: list[ChoiceRequest]) -> list[ChoiceResult]:
        asked.extend(r.messages[-1]["content"].rsplit("Statement: ", 1)[1] for r in requests)
        return [ChoiceResult({"yes": math.log(0.9), "no": math.log(0.1)}) for _ in requests]

    passage = CitedPassage(citation=2, id="p", title="t", text="Use bitor.", score=1.0)
    answer = "3. **Combining values** [2]:\n- Use `bitor` to combine them [2]."
    (verdict,) = await check_support(score, answer, [passage])
    assert asked == ["Use `bitor` to combine them."] and verdict.supported


async def test_a_sentence_citing_the_wrong_page_cites_the_shown_page_that_supports_it() -> None:
    # the judge: yes where the passage holds the statement's last word, no elsewhere
    async def score(requests: list[ChoiceRequest]) -> list[ChoiceResult]:
        out = []
        for r in requests:
            passage, statement = r.messages[-1]["content"].rsplit("\n\nStatement: ", 1)
            yes = 0.9 if statement.rstrip(".").split()[-1] in passage else 0.1
            out.append(ChoiceResult({"yes": math.log(yes), "no": math.log(1 - yes)}))
        return out

    shown = [
        CitedPassage(citation=1, id="a", title="Stash", text="git stash saves changes.", score=1.0),
        CitedPassage(citation=2, id="b", title="Reset", text="Use git reset --soft.", score=1.0),
    ]
    result = Result(question=QUESTION, mode="typed-rag", passages=shown)
    result.answer = "Save them with stash [1]. Undo with --soft [1][1]. Then reboot [1, 2]."
    await drop_unsupported(result, score)
    # re-cited to the page that says it; unsupported by every shown page: removed
    assert result.answer == "Save them with stash [1]. Undo with --soft [2]."
    moved, gone = [u for u in result.unverified if u.kind == "support"]
    assert (moved.sentence, moved.recited, moved.removed) == ("Undo with --soft [1][1].", 2, False)
    assert (gone.recited, gone.removed) == (None, True)
    assert result.citations == [1, 2]


def test_an_unsupported_list_item_under_a_heading_goes_and_the_heading_stays() -> None:
    answer = "1. **Differences** [1]:\n   - Y is slow [1].\n   - Z is fast [1].\n\n2. **More**"
    kept, removed = without_sentences(answer, {"Y is slow."})
    assert removed == {"Y is slow."}
    assert kept == "1. **Differences** [1]:\n   - Z is fast [1].\n\n2. **More**"


def test_an_answer_that_only_copies_prompt_instructions_says_the_documents_do_not_say() -> None:
    """The DEBATE answer over a documentation collection that was two instruction lines of
    its prompt: the guard keeps an answer it would empty, so the check removes them."""
    import time

    from typed_rag.finishing.finish import finish
    from typed_rag.method_settings import MethodOptions
    from typed_rag.pipelines.prompting import CITE_RULE, DOCUMENTS_ONLY

    copied = f"- {CITE_RULE}\n- {DOCUMENTS_ONLY.split('. Copy')[0]}."
    verified = verify_answer(copied, PASSAGES, QUESTION, drop=True)
    assert verified.answer == UNSUPPORTED
    assert {u.kind for u in verified.unverified} == {"instruction"}
    assert all(u.removed and u.missing for u in verified.unverified)
    # recorded, not removed, where nothing is dropped (Wikipedia, or the option off)
    kept = verify_answer(copied, PASSAGES, QUESTION, drop=False)
    assert kept.answer == copied and not any(u.removed for u in kept.unverified)
    # beside a real sentence only the copy goes
    real = "Run `git reset --soft HEAD^` to keep the changes [1]."
    mixed = verify_answer(f"{real}\n- {CITE_RULE}", PASSAGES, QUESTION, drop=True)
    assert mixed.answer == real and {u.kind for u in mixed.unverified} == {"instruction"}
    # through the finishing step, over documents, with the fallback in the trace
    passage = CitedPassage(citation=1, id="p1", title="git", text=PASSAGES[0], score=1.0)
    result = Result(
        question=QUESTION, mode="typed-rag", answer=copied, passages=[passage], corpus="documents"
    )
    opts = MethodOptions(drop_scaffolding=True, drop_unshown_spans=True)
    done = finish(result, opts, time.perf_counter())
    assert done.answer == UNSUPPORTED and done.citations == []
    assert any(f.startswith("verification:") for f in done.fallbacks)
