"""``method.trim_cut_off`` replayed on the answers of an ``eval run`` directory.

Trimming is applied after generation, so the run's answers need not be generated again:
this copies a method's answers (typed-rag by default) into a new run directory, each one
the token cap cut off (``finish_reason == "length"``) ended at its last complete sentence
by the function the pipeline runs, and copies the verdict of every answer left unchanged
(the judge is deterministic: same answer, same references, same verdict). ``eval run``
with the run's command plus ``--set method.trim_cut_off=true`` and ``--out`` this
directory then resumes every answer and judges only the trimmed ones; ``eval compare``
pairs the two.

    python -m benchmarks.trim_replay results/wiki-nfqa/reranked --out results/method/trim/reranked
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval.runner import ANSWERS, SCORES
from typed_rag.citations import check_citations
from typed_rag.finishing import trim_to_sentence


def replay(run_dir: Path, out: Path, methods: set[str]) -> tuple[int, int]:
    """Write the trimmed answers of ``methods`` and the unchanged answers' verdicts;
    returns (answers, trimmed)."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / ANSWERS).exists():
        raise SystemExit(f"{out / ANSWERS} exists; use a new --out")
    unchanged: set[tuple[str, str]] = set()
    answers = trimmed = 0
    with (out / ANSWERS).open("w", encoding="utf-8") as sink:
        for line in (run_dir / ANSWERS).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("method") not in methods:
                continue
            answers += 1
            result = row.get("result") or {}
            text = (
                trim_to_sentence(row["answer"])
                if result.get("finish_reason") == "length"
                else row["answer"]
            )
            if text != row["answer"]:
                trimmed += 1
                row["answer"] = result["answer"] = text
                result["trimmed"] = True
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
    return answers, trimmed


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
    args = parser.parse_args()
    methods = {m.strip() for m in args.methods.split(",") if m.strip()}
    answers, trimmed = replay(args.run_dir, args.out, methods)
    print(f"{answers} answers copied to {args.out}, {trimmed} trimmed (to be judged)")


if __name__ == "__main__":
    main()
