"""``method.trim_cut_off`` (with ``method.drop_echo``, ``method.drop_draft_talk``,
``method.drop_source_talk``, ``method.drop_passage_copies``, ``method.drop_repeats`` and
``method.factoid_sentences``) replayed on the answers of an ``eval run`` directory.

Each cuts a finished answer, so the run's answers need not be generated again: this copies a
method's answers (typed-rag by default) into a new run directory, cut by the function the
pipeline runs (:func:`typed_rag.finishing.cut_answer`): with ``--drop-echo`` copied prompt
sections dropped, each answer the token cap cut off (``finish_reason == "length"``) ended at
its last complete sentence, and with ``--factoid-sentences N`` each typed-rag factoid-route
answer cut to its first N sentences. It copies the verdict of every answer left unchanged
(the judge is deterministic: same answer, same references, same verdict). ``eval run`` with
the run's command plus the options (``--set method.drop_echo=true`` ...) and ``--out`` this
directory then resumes every answer and judges only the changed ones; ``eval compare``
pairs the two.

    python -m benchmarks.trim_replay results/wiki-nfqa/reranked --out results/method/trim/reranked
    python -m benchmarks.trim_replay RUN --factoid-sentences 2 --out DIR
    python -m benchmarks.trim_replay RUN --drop-echo --out DIR
    python -m benchmarks.trim_replay RUN --drop-draft-talk --out DIR
    python -m benchmarks.trim_replay RUN --drop-source-talk --out DIR
    python -m benchmarks.trim_replay RUN --drop-passage-copies --out DIR
    python -m benchmarks.trim_replay RUN --drop-repeats --out DIR

``--match-length rag`` is a probe of the judge, not a method: each answer is cut to its
longest run of whole sentences no longer (in words the judge reads) than the named method's
answer to the same question, at least one sentence. The judge pays for length
(``docs/judge-validity.md``), so pairing the cut answers with that method reads the lead at
(about) equal length.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.runner import ANSWERS, SCORES
from typed_rag.citations import check_citations, without_citations
from typed_rag.finishing import cut_answer, first_sentences
from typed_rag.store import read_jsonl


def words(text: str) -> int:
    """Words the judge reads (``eval.judge_citations=strip``)."""
    return len(without_citations(text).split())


def within_words(answer: str, budget: int) -> str:
    """The longest run of ``answer``'s first whole sentences with at most ``budget`` words;
    its first sentence when even that is longer."""
    if words(answer) <= budget:
        return answer
    kept = first_sentences(answer, 1)
    n = 2
    while (longer := first_sentences(answer, n)) != kept and words(longer) <= budget:
        kept, n = longer, n + 1
    return kept


def budgets(run_dir: Path, method: str) -> dict[str, int]:
    """Words of ``method``'s answer per question id."""
    return {
        r["question_id"]: words(r.get("answer") or "")
        for r in read_jsonl(run_dir / ANSWERS)
        if r.get("method") == method
    }


def replay(
    run_dir: Path,
    out: Path,
    methods: set[str],
    factoid_sentences: int | None = None,
    drop_echo: bool = False,
    match_length: str | None = None,
    drop_draft_talk: bool = False,
    drop_source_talk: bool = False,
    drop_passage_copies: bool = False,
    drop_repeats: bool = False,
) -> tuple[int, int]:
    """Write the cut answers of ``methods`` (:func:`typed_rag.finishing.cut_answer`; with
    ``match_length`` also :func:`within_words` that method's answer) and the unchanged
    answers' verdicts; returns (answers, changed)."""
    budget = budgets(run_dir, match_length) if match_length else {}
    out.mkdir(parents=True, exist_ok=True)
    if (out / ANSWERS).exists():
        raise SystemExit(f"{out / ANSWERS} exists; use a new --out")
    unchanged: set[tuple[str, str]] = set()
    answers = changed = 0
    with (out / ANSWERS).open("w", encoding="utf-8") as sink:
        for line in (run_dir / ANSWERS).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("method") not in methods:
                continue
            answers += 1
            result = row.get("result") or {}
            factoid = row["method"] == "typed-rag" and result.get("type") == "FACTOID"
            cut = cut_answer(
                row["answer"],
                drop_echo=drop_echo,
                cut_off=result.get("finish_reason") == "length",
                sentences=factoid_sentences if factoid else None,
                draft_talk=drop_draft_talk and "draft" in (result.get("plan") or {}),
                source_talk=drop_source_talk,
                passage_copies=drop_passage_copies,
                repeats=drop_repeats,
            )
            text = cut.answer
            if row["question_id"] in budget:
                text = within_words(text, budget[row["question_id"]])
            for flag, cut_made in cut.flags().items():
                if cut_made:
                    result[flag] = True
            if text != row["answer"]:
                changed += 1
                row["answer"] = result["answer"] = text
                shown = {p["citation"] for p in result.get("passages", [])}
                result["citations"] = check_citations(text, shown).valid
            else:
                unchanged.add((row["method"], row["question_id"]))
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / SCORES).open("w", encoding="utf-8") as sink:
        for line in (run_dir / SCORES).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if (row.get("method"), row.get("question_id")) in unchanged:
                sink.write(line + "\n")
    return answers, changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
    parser.add_argument("--out", type=Path, required=True, help="the new run directory")
    parser.add_argument(
        "--methods",
        default="typed-rag",
        help="comma list; the pipeline trims typed-rag answers only, rag shows what the "
        "same rule would do for the baseline",
    )
    parser.add_argument(
        "--factoid-sentences",
        type=int,
        help="also cut typed-rag factoid-route answers to their first N sentences",
    )
    parser.add_argument("--drop-echo", action="store_true", help="also drop copied prompt sections")
    parser.add_argument(
        "--drop-draft-talk",
        action="store_true",
        help="also drop the sentences about the draft answer of answers written from a draft",
    )
    parser.add_argument(
        "--drop-source-talk",
        action="store_true",
        help="also drop the sentences about the sources (This is supported by [1] and [3].)",
    )
    parser.add_argument(
        "--drop-passage-copies",
        action="store_true",
        help="also drop the paragraphs after the first that copy a shown passage",
    )
    parser.add_argument(
        "--drop-repeats", action="store_true", help="also drop the sentences said again"
    )
    parser.add_argument(
        "--match-length",
        metavar="METHOD",
        help="also cut each answer to whole sentences no longer than METHOD's answer (a judge probe)",
    )
    args = parser.parse_args()
    if args.factoid_sentences is not None and args.factoid_sentences < 1:
        raise SystemExit(f"--factoid-sentences must be 1 or more, got {args.factoid_sentences}")
    methods = {m.strip() for m in args.methods.split(",") if m.strip()}
    answers, changed = replay(
        args.run_dir,
        args.out,
        methods,
        factoid_sentences=args.factoid_sentences,
        drop_echo=args.drop_echo,
        match_length=args.match_length,
        drop_draft_talk=args.drop_draft_talk,
        drop_source_talk=args.drop_source_talk,
        drop_passage_copies=args.drop_passage_copies,
        drop_repeats=args.drop_repeats,
    )
    print(f"{answers} answers copied to {args.out}, {changed} changed (to be judged)")


if __name__ == "__main__":
    main()
