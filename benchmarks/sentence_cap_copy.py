"""A copy of an eval run as ``method.factoid_sentences = N`` would have left it.

The option only shortens a finished factoid-route answer (the last step of
``typed_rag.finishing.finish``), so applying the same function to a run's stored answers
gives the answers the option produces, without generating again. Verdicts of the answers it
changes are dropped; the run's own command plus ``--set method.factoid_sentences=N``
judges them again and rebuilds the report.

    python -m benchmarks.sentence_cap_copy RUN --sentences N --out COPY
"""

from __future__ import annotations

import argparse
import json
import shutil
from datetime import date
from pathlib import Path

from typed_rag.citations import check_citations
from typed_rag.finishing import first_sentences


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def sentence_cap_copy(run: Path, out: Path, sentences: int) -> int:
    """Copy ``run`` to ``out`` with its typed-rag factoid-route answers cut to their first
    ``sentences`` sentences; returns how many answers changed (their verdicts are dropped)."""
    if out.exists():
        raise SystemExit(f"{out} exists: choose a new folder")
    shutil.copytree(run, out)
    answers = read_jsonl(out / "answers.jsonl")
    changed: set[tuple[str, str]] = set()
    for row in answers:
        result = row.get("result") or {}
        if row["method"] != "typed-rag" or result.get("type") != "FACTOID":
            continue
        short = first_sentences(row["answer"], sentences)
        if short == row["answer"]:
            continue
        shown = {p["citation"] for p in result.get("passages", [])}
        row["answer"] = result["answer"] = short
        result["shortened"] = True
        result["citations"] = check_citations(short, shown).valid
        changed.add((row["method"], row["question_id"]))
    write_jsonl(out / "answers.jsonl", answers)
    scores = read_jsonl(out / "scores.jsonl")
    write_jsonl(
        out / "scores.jsonl",
        [s for s in scores if (s["method"], s["question_id"]) not in changed],
    )
    manifest = json.loads((out / "run.json").read_text())
    manifest["fingerprint"]["method"]["factoid_sentences"] = sentences
    manifest["factoid_sentences_copy"] = {
        "date": date.today().isoformat(),
        "from": str(run),
        "changed": len(changed),
        "note": "typed-rag factoid-route answers cut to their first sentences "
        "(typed_rag.finishing.first_sentences), their verdicts removed for judging again",
    }
    (out / "run.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return len(changed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--sentences", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.sentences < 1:
        raise SystemExit(f"--sentences must be 1 or more, got {args.sentences}")
    print(json.dumps({"changed": sentence_cap_copy(args.run, args.out, args.sentences)}))


if __name__ == "__main__":
    main()
