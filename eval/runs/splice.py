"""Move a run to a new default of a method option (``typed-rag eval splice``).

Some method options apply to the questions of listed types only (``method.own_knowledge``
with ``method.own_knowledge_types``). When such an option becomes the default, the
answers of the other types do not change, so the headline run need not be re-answered:
the method's answers of the affected types are taken from a run made with the option
(same questions, generator, retrieval and judge), those it lacks are removed so that the
next ``eval run`` answers them, and the run's fingerprint moves to the new options so it
keeps growing under them. ``run.json`` records every splice, and the rows it replaced or
removed are kept under ``spliced/<n>/``.

A run can move between ``eval.route=labels``, ``labels-factoid`` and ``labels-classifier``
the same way: the questions whose route changes (:func:`eval.data.routes.label_route`) are the
affected ones, together with those whose route a changed option acts on.

The options that act on one route only (``method_settings.ROUTE_ONLY``: the factoid
route's, e.g. ``method.factoid_guidance``; DEBATE's ``method.debate_route``) affect that
route's answers, taken from the source likewise; so does an option that is itself a list of
types answered another way (``method.rag_types``): the types it adds or drops.

An option that acts on every type (``method.drop_echo``) affects every answer of the method:
all of them are taken from the source, typically a replay of this run
(``benchmarks.trim_replay``) judged under the new option.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.data.routes import CLASSIFIED, label_route
from eval.runs.manifest import _diff, filled, git_commit, read_manifest, save_manifest
from eval.runs.runner import ANSWERS, SCORES
from eval.store import read_jsonl, rewrite_jsonl
from typed_rag.classifier.base import TypePrediction
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.method_settings import ROUTE_ONLY, MethodOptions

Classify = Callable[[Sequence[str]], Sequence[TypePrediction | None]]
# Fingerprint keys a splice may change: the method options and how typed-rag is routed.
MOVABLE = ("method", "route")

# A method option -> the option listing the question types it applies to.
TYPE_SCOPED = {"own_knowledge": "own_knowledge_types"}
# Options whose value is the list of types they act on (those types answered by plain RAG).
TYPE_LISTS = ("rag_types",)
PAPER = MethodOptions().model_dump(mode="json")
# The folder of a run where each splice keeps the rows it replaced or removed.
SPLICED = "spliced"


def _options(manifest: dict[str, Any]) -> dict[str, Any]:
    """A run's method options (absent from the fingerprint: the paper's)."""
    return filled(manifest.get("fingerprint", {}).get("method"), PAPER)


def _active(options: dict[str, Any], option: str) -> set[str]:
    """The types an option acts on: none while it stands at the paper's (inactive) value."""
    return set() if options[option] == PAPER[option] else set(options[TYPE_SCOPED[option]])


def _unscoped_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The options that act on every type and differ between two sets of method options."""
    scoped = (
        set(TYPE_SCOPED)
        | set(TYPE_SCOPED.values())
        | set(TYPE_LISTS)
        | {o for os in ROUTE_ONLY.values() for o in os}
    )
    return [k for k in b if k not in scoped and a[k] != b[k]]


def affected_types(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """The question types whose answers differ between two sets of method options, as far
    as the type-scoped options tell (one that acts on every type: see :func:`splice`)."""
    types: set[str] = set()
    for option in TYPE_SCOPED:
        before, after = _active(old, option), _active(new, option)
        types |= before ^ after
        if old[option] != new[option]:
            types |= before & after
    for option in TYPE_LISTS:
        types |= set(old[option]) ^ set(new[option])
    types |= {r for r, opts in ROUTE_ONLY.items() if any(old[o] != new[o] for o in opts)}
    return types


def _same_apart_from_method(
    source: dict[str, Any], run: dict[str, Any], source_dir: Path, run_dir: Path
) -> None:
    """Generator, retrieval, judge and references must match for answers to carry over."""
    mine, theirs = (
        {k: v for k, v in m.get("fingerprint", {}).items() if k not in MOVABLE}
        for m in (source, run)
    )
    diffs = _diff(filled(mine, theirs), filled(theirs, mine))
    if diffs:
        raise UserError(
            f"{source_dir} and {run_dir} differ in more than method options and routing: "
            + "; ".join(diffs)
        )


def _answers_like(source: dict[str, Any], new: dict[str, Any], types: set[str], name: Path) -> None:
    """The source run must answer the affected types exactly as the new options do."""
    others = _unscoped_differences(source, new)
    if others:
        raise UserError(f"{name} was answered with other method options: {', '.join(others)}")
    for option in TYPE_SCOPED:
        on_source, on_new = _active(source, option), _active(new, option)
        differ = sorted(
            t
            for t in types
            if (t in on_source) != (t in on_new) or (t in on_new and source[option] != new[option])
        )
        if differ:
            raise UserError(
                f"{name} answered {', '.join(differ)} with {option}={source[option]!r} "
                f"for {sorted(on_source) or 'no type'}; the settings given have "
                f"{new[option]!r} for {sorted(on_new) or 'no type'}"
            )
    for option in TYPE_LISTS:
        differ = sorted(t for t in types if (t in source[option]) != (t in new[option]))
        if differ:
            raise UserError(
                f"{name} answered {', '.join(differ)} with {option}={source[option]!r}; "
                f"the settings given have {new[option]!r}"
            )
    for route in types & set(ROUTE_ONLY):
        differ = [o for o in ROUTE_ONLY[route] if source[o] != new[o]]
        if differ:
            raise UserError(
                f"{name} answered the {route} route with other method options: "
                + ", ".join(f"{o}={source[o]!r} (the settings given: {new[o]!r})" for o in differ)
            )


def route_of(row: dict[str, Any]) -> str:
    """The pipeline that answered a row (runs older than the field: its label's)."""
    return str(row.get("route") or row.get("type"))


def new_routes(rows: list[dict[str, Any]], route: str, classify: Classify | None) -> dict[str, str]:
    """The route each answered question takes under ``eval.route``, by question id."""
    if route == "labels":
        return {r["question_id"]: str(r.get("type")) for r in rows}
    if route not in CLASSIFIED or classify is None:
        raise UserError(f"eval splice cannot move a run to eval.route={route}")
    predictions = classify([r["question"] for r in rows])
    return {
        r["question_id"]: label_route(str(r.get("type")), p, route)
        for r, p in zip(rows, predictions, strict=True)
    }


def splice(
    run_dir: Path,
    source_dir: Path,
    method: str,
    settings: Settings,
    classify: Classify | None = None,
) -> dict[str, Any]:
    """Give ``run_dir`` the method options and ``eval.route`` of ``settings``, carrying over
    what still holds; ``classify`` routes questions for the routes that read the classifier.

    Returns the splice record written to ``run.json`` (types, rows taken, rows removed).
    """
    run_m, source_m = read_manifest(run_dir), read_manifest(source_dir)
    for name, manifest in ((run_dir, run_m), (source_dir, source_m)):
        if method not in manifest.get("methods", []):
            raise UserError(f"{name} has no answers of method {method!r}")
    _same_apart_from_method(source_m, run_m, source_dir, run_dir)
    new = settings.method.options().model_dump(mode="json")
    old = _options(run_m)
    every = bool(_unscoped_differences(old, new))
    scoped = set() if every else affected_types(old, new)
    route = settings.eval.route
    old_route = run_m.get("fingerprint", {}).get("route", "labels")
    mine = [r for r in read_jsonl(run_dir / ANSWERS) if r.get("method") == method]
    routes = new_routes(mine, route, classify)
    affected = {
        r["question_id"]
        for r in mine
        if every or routes[r["question_id"]] in scoped or routes[r["question_id"]] != route_of(r)
    }
    if not affected:
        raise UserError(f"{run_dir} already answers every type as the settings given do")
    types = {routes[q] for q in affected}
    _answers_like(_options(source_m), new, types, source_dir)
    source_route = source_m.get("fingerprint", {}).get("route", "labels")
    if route != old_route and source_route != route:
        raise UserError(f"{source_dir} was routed with eval.route={source_route}, not {route}")

    def replaced(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, int]:
        """The file's rows with the affected ones swapped in, the rows set aside (replaced by
        a different row, or removed to wait for the next ``eval run``), how many were
        swapped and how many removed."""
        taken_ids = {
            r["question_id"]
            for r in read_jsonl(source_dir / ANSWERS)
            if r.get("method") == method and routes.get(r["question_id"]) == route_of(r)
        }
        source = {
            r["question_id"]: r
            for r in read_jsonl(source_dir / name)
            if r.get("method") == method and r["question_id"] in taken_ids & affected
        }
        kept, aside, taken, removed = [], [], 0, 0
        for row in read_jsonl(run_dir / name):
            if row.get("method") != method or row["question_id"] not in affected:
                kept.append(row)
                continue
            new = source.get(row["question_id"])
            if new is None:
                removed += 1
            else:
                kept.append(new)
                taken += 1
            if new != row:  # a row the source repeats needs no undoing
                aside.append(row)
        return kept, aside, taken, removed

    answers, old_answers, taken, removed = replaced(ANSWERS)
    scores, old_scores, scored, _ = replaced(SCORES)
    # The rows replaced or removed stay on disk: the comparison with the options before
    # the splice (and undoing it) needs them.
    aside = run_dir / SPLICED / str(len(run_m.get("splices", [])) + 1)
    aside.mkdir(parents=True, exist_ok=True)
    rewrite_jsonl(aside / ANSWERS, old_answers)
    rewrite_jsonl(aside / SCORES, old_scores)
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "from": str(source_dir),
        "method": method,
        "types": sorted(types),
        "answers_taken": taken,
        "answers_removed": removed,
        "scores_taken": scored,
        "rows_before": str(aside.relative_to(run_dir)),
        "method_options_before": old,
        **({"route_before": old_route, "route": route} if route != old_route else {}),
        "git": git_commit(),
    }
    rewrite_jsonl(run_dir / ANSWERS, answers)
    rewrite_jsonl(run_dir / SCORES, scores)
    fingerprint = {k: v for k, v in run_m.get("fingerprint", {}).items() if k != "route"}
    run_m["fingerprint"] = {
        **fingerprint,
        "method": new,
        **({"route": route} if route != "labels" else {}),
    }
    run_m.setdefault("splices", []).append(record)
    save_manifest(run_dir, run_m)
    return record
