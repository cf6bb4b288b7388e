"""What the ``eval`` subcommands share: the data and scorer options, and loading both.

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

from eval.data.wikinfqa import WikiNFQA, load_wikinfqa
from eval.runs.manifest import scorer_name
from typed_rag import classifier as type_classifier
from typed_rag.config import EngineSettings, Settings, load_settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)

# Backends whose engine exposes next-token probabilities (Engine.score_choices).
PROB_BACKENDS = ("llamacpp", "fake")


def require_token_probabilities(scorer: Settings, what: str, instead: str) -> None:
    """A UserError naming ``what`` and ``instead`` when the judge's backend has no
    next-token probabilities (they are read, not sampled, by the probability judges)."""
    backend = scorer.engine.backend
    if backend not in PROB_BACKENDS:
        raise UserError(
            f"{what} reads token probabilities, which the {backend} backend does not "
            f"expose; {instead}"
        )


def data_args(p: argparse.ArgumentParser) -> None:
    """Where the Wiki-NFQA questions come from and what to do with bad records."""
    p.add_argument("--data-dir", type=Path, help="Wiki-NFQA folder (default: eval.data_dir)")
    p.add_argument("--subsets", default="all", help="comma list of subsets, or all")
    p.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        default="skip",
        help="bad records: skip and count (default) or stop with an error",
    )


def scorer_args(p: argparse.ArgumentParser, role: str) -> None:
    """The engine of a judge or writer, when it is not the generator's."""
    p.add_argument("--scorer-config", type=Path, help=f"TOML settings for the {role} engine")
    p.add_argument("--scorer-backend", help=f"{role} engine backend (llamacpp, vllm, openai)")
    p.add_argument("--scorer-model", help=f"{role} model name, path or id")
    p.add_argument("--scorer-base-url", help=f"{role} OpenAI-compatible base URL")


def load_data(args: argparse.Namespace, settings: Settings) -> WikiNFQA:
    """The Wiki-NFQA questions the options name; bad records are listed, none left is an error."""
    data = load_wikinfqa(args.data_dir or settings.eval.data_dir, args.subsets, args.on_error)
    if data.bad:
        print(f"skipped {len(data.bad)} bad record(s):")
        for bad in data.bad[:20]:
            print(f"  {bad}")
    if not data.records:
        raise UserError("no valid Wiki-NFQA questions to evaluate")
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
    base = load_settings(args.scorer_config) if args.scorer_config else settings
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
        engine = EngineSettings.model_validate({**base.engine.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise UserError(f"invalid scorer setting {field}: {first['msg']}") from None
    return base.model_copy(update={"engine": engine})


def warn_if_self_judged(settings: Settings, scorer: Settings, role: str) -> None:
    """A model judging its own answers is lenient; say so, once per run."""
    if scorer.engine == settings.engine:
        log.warning(
            "the %s is the generator's own model (%s); pass --scorer-model or "
            "--scorer-config for an independent judge",
            role,
            scorer_name(scorer),
        )
