"""LINKAGE: reference lists, the prompt, strict [[k]] parsing, bounded resampling, off-by-one."""

from __future__ import annotations

import pytest

from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import (
    AMBIGUOUS,
    EMPTY_CANDIDATE,
    NO_MATCH,
    OUT_OF_RANGE,
    LinkageItem,
    LinkageScorer,
    Reference,
    build_references,
    parse_rank,
    scorer_messages,
)
from eval.judging.resample import generate_until_parsed
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine


def record(qid: str = "q1", labels: tuple[int, ...] = (0, 3, 1, 2, 0, 1, 3, 2)) -> WikiNFQARecord:
    answers = tuple(f"a{i}-label{lab}" for i, lab in enumerate(labels))
    return WikiNFQARecord("nq", qid, "why?", answers, labels)


# --------------------------------------------------------------------- references


def test_references_are_one_per_label_best_first() -> None:
    refs = build_references(record(), seed=42)
    assert [r.label for r in refs] == [3, 2, 1, 0]
    for r in refs:
        assert r.text.endswith(f"label{r.label}")


def test_references_skip_empty_label_groups() -> None:
    refs = build_references(record(labels=(0, 3, 0, 3, 0)), seed=42)
    assert [r.label for r in refs] == [3, 0]


def test_references_are_deterministic_per_question_whatever_the_order() -> None:
    recs = [record(f"q{i}") for i in range(30)]
    forward = {r.question_id: build_references(r, 42) for r in recs}
    backward = {r.question_id: build_references(r, 42) for r in reversed(recs)}
    assert forward == backward
    # the draw depends on the question id and the seed, not on a shared RNG state
    texts = {tuple(x.text for x in refs) for refs in forward.values()}
    assert len(texts) > 1
    other_seed = {r.question_id: build_references(r, 7) for r in recs}
    assert other_seed != forward


# --------------------------------------------------------------------- prompt


def test_prompt_lists_references_best_first_and_asks_for_n_plus_1() -> None:
    refs = [Reference("best one", 3), Reference("middle", 2), Reference("worst", 0)]
    msgs = scorer_messages("Why is the sky blue?", refs, "Because of Rayleigh scattering.")
    user = msgs[-1]["content"]
    assert "Question: Why is the sky blue?" in user
    assert (
        user.index("Answer 1: best one")
        < user.index("Answer 2: middle")
        < user.index("Answer 3: worst")
    )
    assert "Candidate answer: Because of Rayleigh scattering." in user
    assert "worse than all three references, reply [[4]]" in user


def test_paper_off_by_one_prompt_asks_for_n() -> None:
    refs = [Reference("a", 3), Reference("b", 2), Reference("c", 0)]
    user = scorer_messages("q", refs, "cand", off_by_one=True)[-1]["content"]
    assert "worse than all three references, reply [[3]]" in user
    assert "[[4]]" not in user


# --------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "rank", "status"),
    [
        ("[[2]]", 2, "ok"),
        ("[[ 2 ]]", 2, "ok"),
        ("The candidate ranks here: [[3]].", 3, "ok"),
        ("[[5]]", 5, "ok"),  # n + 1 = worse than all 4
        ("[[2]] ... so the answer is [[2]]", 2, "ok"),  # repeated, same value
        ("[2]", None, NO_MATCH),
        ("2", None, NO_MATCH),
        ("[[two]]", None, NO_MATCH),
        ("[[2]", None, NO_MATCH),
        ("", None, NO_MATCH),
        ("[[0]]", None, OUT_OF_RANGE),
        ("[[6]]", None, OUT_OF_RANGE),  # n + 2
        ("[[1]] or maybe [[3]]", None, AMBIGUOUS),
    ],
)
def test_parse_rank_is_strict(text: str, rank: int | None, status: str) -> None:
    parsed = parse_rank(text, n=4)
    assert parsed.value == rank
    assert parsed.status == status


def test_parse_rank_off_by_one_caps_at_n() -> None:
    assert parse_rank("[[4]]", n=4, off_by_one=True).value == 4
    assert parse_rank("[[5]]", n=4, off_by_one=True).status == OUT_OF_RANGE


# --------------------------------------------------------------------- scorer


def items(n: int) -> list[LinkageItem]:
    refs = [Reference("a", 3), Reference("b", 2), Reference("c", 1), Reference("d", 0)]
    return [LinkageItem(f"k{i}", f"question {i}", refs, f"candidate {i}") for i in range(n)]


async def test_scorer_sends_one_batch_and_parses() -> None:
    engine = FakeEngine(lambda req: "[[2]]")
    scores = await LinkageScorer(engine, max_resamples=3).score(items(5))
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 5
    assert [s.rank for s in scores] == [2] * 5
    assert all(s.status == "ok" and s.attempts == 1 and s.n == 4 for s in scores)


async def test_resampling_is_bounded_and_unparsed_are_counted() -> None:
    seeds: list[int | None] = []

    def respond(req: ChatRequest) -> str:
        seeds.append(req.seed)
        if "question 0" in req.messages[-1]["content"]:
            return "I think it is good."  # never parses
        if "question 1" in req.messages[-1]["content"] and req.seed == 10:
            return "[2]"  # first attempt unparsable, second fine
        return "[[1]]"

    engine = FakeEngine(respond)
    scores = await LinkageScorer(engine, max_resamples=2, seed=10).score(items(3))
    # round 0: all 3; round 1: q0 and q1; round 2: only q0 -> 3 batches, never more
    assert [len(b) for b in engine.batches] == [3, 2, 1]
    assert sorted(set(seeds)) == [10, 11, 12]  # a new seed every round
    s0, s1, s2 = scores
    assert s0.rank is None and s0.status == NO_MATCH and s0.attempts == 3
    assert len(s0.outputs) == 3
    assert s1.rank == 1 and s1.attempts == 2
    assert s2.rank == 1 and s2.attempts == 1


async def test_zero_resamples_means_one_attempt() -> None:
    engine = FakeEngine(lambda req: "no verdict")
    (score,) = await LinkageScorer(engine, max_resamples=0).score(items(1))
    assert score.rank is None and score.attempts == 1 and len(engine.batches) == 1


async def test_empty_candidate_is_ranked_last_without_asking() -> None:
    engine = FakeEngine(lambda req: "[[1]]")
    its = items(2)
    its[1].candidate = "   "
    scores = await LinkageScorer(engine).score(its)
    assert len(engine.calls) == 1
    assert scores[1].rank == 5 and scores[1].status == EMPTY_CANDIDATE
    scores = await LinkageScorer(engine, off_by_one=True).score(its)
    assert scores[1].rank == 4


async def test_off_by_one_scorer_rejects_n_plus_1() -> None:
    engine = FakeEngine(lambda req: "[[5]]")
    (score,) = await LinkageScorer(engine, off_by_one=True, max_resamples=1).score(items(1))
    assert score.rank is None and score.status == OUT_OF_RANGE and score.attempts == 2


async def test_generate_until_parsed_rejects_wrong_result_count() -> None:
    class Short(FakeEngine):
        async def generate(self, requests):  # type: ignore[override]
            return (await super().generate(requests))[:-1]

    with pytest.raises(RuntimeError, match="returned 1 results for 2"):
        await generate_until_parsed(
            Short(), [ChatRequest(messages=[])] * 2, lambda i, t: parse_rank(t, 2), 1, 0
        )
