"""A run's stored answers re-finished by today's last finishing steps (``typed-rag eval refinish``),
and a run moved to answers that changed without a method option (``eval splice --changed``).

The scaffolding guard (:mod:`typed_rag.finishing.scaffolding`) and the verification against
the shown passages (:mod:`typed_rag.finishing.verify`) rewrite a finished answer with no model
call (:func:`typed_rag.finishing.finish.last_checks`), so a run need not be answered again to
read it: :func:`refinish` copies
the run, guards the stored answers of the chosen methods, keeps the verdicts of the answers it
leaves unchanged (the judge is deterministic: same answer, same references, same verdict) and
reports the share of answers that leak scaffolding, before and after, by the project's pattern
(:data:`LEAK`, issue 64). ``eval run`` with the run's own command, ``--stored-only`` and
``--out`` the copy then judges only the changed answers, ``eval compare`` pairs the two, and
:func:`splice_changed` takes the changed answers and their verdicts into the run, keeping the
rows it replaces under ``spliced/<n>/`` as :func:`eval.runs.splice.splice` does.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.citation_support import Lookup
from eval.grounding.run import shown_passages
from eval.runs.manifest import git_commit, read_manifest, save_manifest
from eval.runs.runner import ANSWERS, RUN_LABELS, SCORES
from eval.runs.splice import SPLICED
from typed_rag.errors import UserError
from typed_rag.finishing.finish import last_checks
from typed_rag.method_settings import MethodOptions
from typed_rag.result import Result

# An answer leaking scaffolding, as the project counts it (issue 64; ../shared/tools/scoreboard).
LEAK = re.compile(
    r"\b(Question \d|[Ss]ub-?questions?\b|[Ss]ub-?quer(y|ies)|Response \d|[Pp]erspective \d"
    r"|the draft( answer)?\b|the (references?|passages?|context) (provided|given)"
    r"|the (provided|given) (references?|passages?|context)|[Pp]assage \d|Reference \d)"
)
REPORT = "refinish.json"

Row = dict[str, Any]


def leak_shares(rows: Iterable[Mapping[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per method: answers, answers leaking scaffolding (:data:`LEAK`) and their share."""
    out: dict[str, Any] = {}
    for method in methods:
        answers = [str(r.get("answer") or "") for r in rows if r.get("method") == method]
        leaking = sum(bool(LEAK.search(a)) for a in answers)
        out[method] = {
            "answers": len(answers),
            "leaking": leaking,
            "share": leaking / len(answers) if answers else None,
        }
    return out


def refinished(row: Row, opts: MethodOptions, texts: Mapping[str, str]) -> Row | None:
    """``row`` with its answer re-finished by :func:`last_checks` (the scaffolding guard on
    whatever ``opts`` say, then the verification; trace and valid citations updated); None
    when that leaves it unchanged. A passage stored without its text (``eval.store_passage_text``
    off) is checked against ``texts`` (by passage id) and stored as it was."""
    stored = {
        "question": row.get("question", ""),
        "mode": row.get("method"),
        **(row.get("result") or {}),
    }
    stored["passages"] = [
        {**p, "text": p["text"] if "text" in p else texts[str(p["id"])]}
        for p in stored.get("passages") or []
    ]
    result = Result.model_validate(stored)
    result.answer = str(row.get("answer") or "")
    unscaffolded = result.unscaffolded
    last_checks(result, opts.model_copy(update={"drop_scaffolding": True}))
    if result.answer == row.get("answer"):
        return None
    result.unscaffolded = unscaffolded or result.unscaffolded
    done = result.model_dump(mode="json")
    done["passages"] = [  # as the run stored them: without the texts it did not keep
        p if "text" in q else {k: v for k, v in p.items() if k != "text"}
        for p, q in zip(
            done["passages"], (row.get("result") or {}).get("passages") or [], strict=True
        )
    ]
    return {**row, "answer": result.answer, "result": done}


def missing_texts(rows: Sequence[Row], lookup: Lookup | None) -> dict[str, str]:
    """The texts of the passages ``rows`` were shown but stored without (by id), from
    ``lookup`` (:func:`~eval.grounding.run.shown_passages`); a :class:`UserError` names how
    many it cannot find."""
    unstored = {
        str(p["id"])
        for row in rows
        for p in (row.get("result") or {}).get("passages") or []
        if "text" not in p
    }
    if not unstored:
        return {}
    shown = shown_passages(rows, lookup)
    lacking = sorted(pid for pid in unstored if not shown[pid]["text"])
    if lacking:
        raise UserError(
            f"{len(lacking)} shown passages were stored without their text (e.g. {lacking[0]}) "
            "and the index does not hold them: re-finishing checks the answer against them; "
            "run it with the settings (corpus, index) the run was made with"
        )
    return {pid: shown[pid]["text"] for pid in unstored}


def refinish(
    run_dir: Path, out: Path, methods: Sequence[str], lookup: Lookup | None = None
) -> dict[str, Any]:
    """Copy ``run_dir`` to ``out`` with the answers of ``methods`` guarded and the verdicts of
    the changed ones left out (every other line copied as it is); returns (and writes to
    ``out/refinish.json``) the leak shares before and after and the changed answers.
    ``lookup`` gives the texts of shown passages the run stored without them."""
    manifest = read_manifest(run_dir)
    if (out / ANSWERS).exists():
        raise UserError(f"{out / ANSWERS} exists; use a new --out")
    lines = _lines(run_dir / ANSWERS)
    rows = [row for _, row in lines]
    absent = [m for m in methods if not any(r.get("method") == m for r in rows)]
    if absent:
        raise UserError(f"{run_dir} has no answers of {', '.join(absent)}")
    opts = MethodOptions(**manifest.get("fingerprint", {}).get("method", {}))
    texts = missing_texts([r for r in rows if r.get("method") in methods], lookup)
    new_lines, new_rows, changed = [], [], []
    for line, row in lines:
        new = refinished(row, opts, texts) if row.get("method") in methods else None
        new_lines.append(_line(new) if new else line)
        new_rows.append(new or row)
        if new is not None:
            changed.append(
                {
                    "method": row["method"],
                    "question_id": row["question_id"],
                    "type": row.get("type"),
                    "route": row.get("route"),
                    "found": new["result"]["scaffolding"],
                    "leaked": bool(LEAK.search(row["answer"])),
                    "leaks": bool(LEAK.search(new["answer"])),
                    "removed": [u["sentence"] for u in new["result"]["unverified"] if u["removed"]],
                }
            )
    moved = {(c["method"], c["question_id"]) for c in changed}
    out.mkdir(parents=True, exist_ok=True)
    _write(out / ANSWERS, new_lines)
    _write(out / SCORES, [line for line, s in _lines(run_dir / SCORES) if _key(s) not in moved])
    if (run_dir / RUN_LABELS).exists():
        shutil.copyfile(run_dir / RUN_LABELS, out / RUN_LABELS)
    save_manifest(out, {**manifest, "refinished_from": str(run_dir)})
    report = {
        "from": str(run_dir),
        "methods": list(methods),
        "before": leak_shares(rows, methods),
        "after": leak_shares(new_rows, methods),
        "changed": changed,
    }
    (out / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def splice_changed(
    run_dir: Path, source_dir: Path, methods: Sequence[str], reason: str
) -> dict[str, Any]:
    """Take into ``run_dir`` the answers of ``methods`` that differ in ``source_dir`` (a copy
    of it re-finished or re-answered after a code change that no option names) with their
    verdicts; every taken answer must be judged. The rows replaced go to ``spliced/<n>/``,
    the others stay as written, and the splice is recorded in ``run.json`` with ``reason``."""
    run_m, source_m = read_manifest(run_dir), read_manifest(source_dir)
    if source_m.get("fingerprint") != run_m.get("fingerprint"):
        raise UserError(f"{source_dir} was made with other settings than {run_dir}")
    theirs = {
        _key(r): (line, r) for line, r in _lines(source_dir / ANSWERS) if r.get("method") in methods
    }
    answers = _lines(run_dir / ANSWERS)
    taken = {
        _key(r): theirs[_key(r)][0]
        for _, r in answers
        if _key(r) in theirs and theirs[_key(r)][1].get("answer") != r.get("answer")
    }
    if not taken:
        raise UserError(f"no answer of {', '.join(methods)} differs in {source_dir}")
    verdicts = {_key(s): line for line, s in _lines(source_dir / SCORES) if _key(s) in taken}
    unjudged = sorted(f"{m}:{q}" for m, q in taken.keys() - verdicts.keys())
    if unjudged:
        raise UserError(
            f"{len(unjudged)} changed answers of {source_dir} have no verdict (judge them "
            f"with `eval run ... --stored-only --out {source_dir}`): {', '.join(unjudged[:5])}"
        )
    scores = _lines(run_dir / SCORES)
    aside = run_dir / SPLICED / str(len(run_m.get("splices", [])) + 1)
    aside.mkdir(parents=True, exist_ok=True)
    _write(aside / ANSWERS, [line for line, r in answers if _key(r) in taken])
    _write(aside / SCORES, [line for line, s in scores if _key(s) in taken])
    _write(run_dir / ANSWERS, [taken.get(_key(r), line) for line, r in answers])
    _write(run_dir / SCORES, [verdicts.get(_key(s), line) for line, s in scores])
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "from": str(source_dir),
        "methods": list(methods),
        "reason": reason,
        "answers_taken": len(taken),
        "answers_removed": 0,
        "scores_taken": len(verdicts),
        "rows_before": str(aside.relative_to(run_dir)),
        "git": git_commit(),
    }
    run_m.setdefault("splices", []).append(record)
    save_manifest(run_dir, run_m)
    return record


def _key(row: Mapping[str, Any]) -> tuple[str, str]:
    """A row's (method, question id)."""
    return str(row.get("method")), str(row.get("question_id"))


def _lines(path: Path) -> list[tuple[str, Row]]:
    """The lines of a JSONL file as written, each with its record: a rewrite keeps the lines
    it does not change byte for byte (older lines escape non-ASCII, newer ones do not)."""
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append((line, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n}: not JSON ({exc})") from None
    return out


def _line(row: Row) -> str:
    return json.dumps(row, ensure_ascii=False)


def _write(path: Path, lines: Iterable[str]) -> None:
    """Replace ``path`` with ``lines``: written beside it, then renamed."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)
