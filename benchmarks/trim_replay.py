"""``method.trim_cut_off`` (and ``method.factoid_sentences``) replayed on the answers of an
``eval run`` directory.

Both cut a finished answer, so the run's answers need not be generated again: this copies a
method's answers (typed-rag by default) into a new run directory, each one the token cap cut
off (``finish_reason == "length"``) ended at its last complete sentence by the function the
pipeline runs, and with ``--factoid-sentences N`` each typed-rag factoid-route answer cut to
its first N sentences (the pipeline's last step, so after the trim), and copies the verdict
of every answer left unchanged (the judge is deterministic: same answer, same references,
same verdict). ``eval run`` with the run's command plus ``--set method.trim_cut_off=true``
(``--set method.factoid_sentences=N``) and ``--out`` this directory then resumes every
answer and judges only the changed ones; ``eval compare`` pairs the two.

    python -m benchmarks.trim_replay results/wiki-nfqa/reranked --out results/method/trim/reranked
    python -m benchmarks.trim_replay RUN --factoid-sentences 2 --out DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.runner import ANSWERS, SCORES
from typed_rag.citations import check_citations
from typed_rag.finishing import first_sentences, trim_to_sentence


def replay(
    run_dir: Path, out: Path, methods: set[str], factoid_sentences: int | None = None
) -> tuple[int, int]:
    """Write the trimmed (and shortened) answers of ``methods`` and the unchanged answers'
    verdicts; returns (answers, changed)."""
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
            text = row["answer"]
            if result.get("finish_reason") == "length":
                trimmed = trim_to_sentence(text)
                if trimmed != text:
                    text, result["trimmed"] = trimmed, True
            if (
                factoid_sentences
                and row["method"] == "typed-rag"
                and result.get("type") == "FACTOID"
            ):
                short = first_sentences(text, factoid_sentences)
                if short != text:
                    text, result["shortened"] = short, True
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
    args = parser.parse_args()
    if args.factoid_sentences is not None and args.factoid_sentences < 1:
        raise SystemExit(f"--factoid-sentences must be 1 or more, got {args.factoid_sentences}")
    methods = {m.strip() for m in args.methods.split(",") if m.strip()}
    answers, changed = replay(args.run_dir, args.out, methods, args.factoid_sentences)
    print(f"{answers} answers copied to {args.out}, {changed} changed (to be judged)")


if __name__ == "__main__":
    main()
