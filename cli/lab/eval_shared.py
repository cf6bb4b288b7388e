"""What the ``eval`` subcommands share: the data and scorer options, loading both, and the
questions' types (``obtain_labels``).

Factories that tests replace (``typed_rag.classifier.build_classifier``,
``typed_rag.engines.build_engine``, ``typed_rag.system.TypedRAG``) are called through
their module, so a replacement made there is the one used.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from eval.data.graded import load_graded
from eval.data.labels import classify_questions, default_labels_path, load_labels, save_labels
from eval.data.wikinfqa import WikiNFQA, load_wikinfqa
from eval.runs.manifest import scorer_name
from eval.runs.runner import RUN_LABELS
from eval.settings import load_lab_settings
from typed_rag import classifier as type_classifier
from typed_rag import engines
from typed_rag.config import Settings
from typed_rag.engines.base import Engine
from typed_rag.errors import UserError

log = logging.getLogger(__name__)


def require_token_probabilities(scorer: Settings, what: str, instead: str = "") -> None:
    """A UserError naming ``what``, the scorer's engine and the setting to change when that
    engine has no next-token probabilities (``Engine.scores_choices``: the probability
    judges read them, they do not sample a verdict). Asked before any engine is built, so
    a run refuses at once instead of after its answers."""
    backend = scorer.engine.backend
    if engines.backend_scores_choices(backend):
        return
    able = " or ".join(f"--scorer-backend {b}" for b in engines.scoring_backends())
    raise UserError(
        f"{what} reads token probabilities, which the {backend} engine "
        f"(engine.backend={backend}) does not expose; use {able}"
        + (f", or {instead}" if instead else "")
    )


def require_protocol_probabilities(settings: Settings, scorer: Settings) -> None:
    """:func:`require_token_probabilities` for the run's LINKAGE protocol
    (``eval.judge_protocol``), which reads them unless it samples the verdict."""
    protocol = settings.eval.judge_protocol
    if protocol.startswith("linkage-prob"):
        require_token_probabilities(
            scorer,
            f"judge protocol {protocol}",
            "--set eval.judge_protocol=linkage (a sampled verdict)",
        )


def data_args(p: argparse.ArgumentParser) -> None:
    """Where the questions come from (Wiki-NFQA or --data) and what to do with bad records."""
    p.add_argument("--data-dir", type=Path, help="Wiki-NFQA folder (default: eval.data_dir)")
    p.add_argument(
        "--data",
        type=Path,
        metavar="FILE.jsonl",
        help="your own graded questions instead of Wiki-NFQA (format: docs/evaluation.md)",
    )
    p.add_argument("--subsets", default="all", help="comma list of subsets, or all")
    p.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        help="bad records: skip and count, or stop with an error (default: skip for "
        "Wiki-NFQA, stop for --data)",
    )


def scorer_args(p: argparse.ArgumentParser, role: str) -> None:
    """The engine of a judge or writer, when it is not the generator's."""
    p.add_argument("--scorer-config", type=Path, help=f"TOML settings for the {role} engine")
    p.add_argument("--scorer-backend", help=f"{role} engine backend (llamacpp, vllm, openai)")
    p.add_argument("--scorer-model", help=f"{role} model name, path or id")
    p.add_argument("--scorer-base-url", help=f"{role} OpenAI-compatible base URL")


def load_data(args: argparse.Namespace, settings: Settings) -> WikiNFQA:
    """The questions the options name (--data's file, else Wiki-NFQA); bad records are
    listed, none left is an error."""
    data_file = getattr(args, "data", None)
    if data_file is not None:
        if args.data_dir is not None:
            raise UserError("--data and --data-dir name two question sets; give one")
        data: WikiNFQA = load_graded(data_file, args.subsets, args.on_error or "stop")
    else:
        data = load_wikinfqa(
            args.data_dir or settings.eval.data_dir, args.subsets, args.on_error or "skip"
        )
    if data.bad:
        print(f"skipped {len(data.bad)} bad record(s):")
        for bad in data.bad[:20]:
            print(f"  {bad}")
    if not data.records:
        raise UserError(f"no valid questions to evaluate in {data_file or 'Wiki-NFQA'}")
    return data


def build_classifier(settings: Settings) -> Any:
    """The configured question-type classifier, or a UserError that says how to train one."""
    found = type_classifier.build_classifier(settings)
    if found is None:
        raise UserError(
            "no question-type classifier is available; run `typed-rag classifier train`"
        )
    return found


def scorer_settings_for(settings: Settings, args: argparse.Namespace) -> Settings:
    """The scorer's own settings: --scorer-config, else the generator's, then --scorer-* flags."""
    base = load_lab_settings(args.scorer_config) if args.scorer_config else settings
    update = {
        k: v
        for k, v in {
            "backend": args.scorer_backend,
            "model": args.scorer_model,
            "base_url": args.scorer_base_url,
        }.items()
        if v is not None
    }
    if not update:
        return base
    try:
        return base.with_section("engine", **update)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise UserError(f"invalid scorer setting {field}: {first['msg']}") from None


def warn_if_self_judged(settings: Settings, scorer: Settings, role: str) -> None:
    """A model judging its own answers is lenient; say so, once per run."""
    if scorer.engine == settings.engine:
        log.warning(
            "the %s is the generator's own model (%s); pass --scorer-model or "
            "--scorer-config for an independent judge",
            role,
            scorer_name(scorer),
        )


def probability_judge(
    settings: Settings, args: argparse.Namespace, role: str
) -> tuple[Settings, Engine]:
    """The scorer settings and engine of a judge that reads yes/no token probabilities
    (``role``: "support judge"), checked before anything is asked of it."""
    scorer = scorer_settings_for(settings, args)
    require_token_probabilities(scorer, f"the {role}")
    warn_if_self_judged(settings, scorer, role)
    return scorer, engines.build_engine(scorer)


def obtain_labels(
    settings: Settings,
    records: list[Any],
    run_dir: Path,
    labels_file: Path | None,
    given: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's stored labels, else --labels, else the default file; classify what is missing.

    ``given`` (a graded file's own types, see eval/data/graded.py) overrides them all, and
    the default file, Wiki-NFQA's labels, is not read for such a file's questions.
    """
    run_labels = run_dir / RUN_LABELS
    labels: dict[str, Any] = {}
    if run_labels.exists():
        labels = load_labels(run_labels)
    elif labels_file is not None:
        labels = load_labels(labels_file)
    elif given is None and default_labels_path(settings).exists():
        labels = load_labels(default_labels_path(settings))
    labels.update(given or {})
    missing = [r for r in records if r.question_id not in labels]
    if missing:
        log.info("classifying %d question(s) without a stored type", len(missing))
        try:
            classifier = build_classifier(settings)
        except UserError as exc:
            raise UserError(
                f"{exc} (needed to type {len(missing)} question(s); or run `typed-rag eval "
                "label` first, or pass --labels FILE)"
            ) from None
        labels.update(classify_questions(missing, classifier, settings.classifier.min_confidence))
    save_labels(labels, run_labels, source="run")
    return labels
