"""``typed-rag classifier predict``: the question type of questions (``train`` and ``eval`` are
the lab's, :mod:`cli.lab.classifier`)."""

from __future__ import annotations

import argparse

from typed_rag.classifier import build_classifier
from typed_rag.config import Settings


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``classifier`` and its subcommands."""
    parser = sub.add_parser("classifier", help="train and evaluate the question-type classifier")
    inner = parser.add_subparsers(dest="classifier_command", required=True, metavar="ACTION")

    pr = inner.add_parser("predict", help="print the type and probabilities of questions")
    pr.add_argument("questions", nargs="+", help="one or more questions")
    pr.set_defaults(func=_predict)


def _predict(args: argparse.Namespace, settings: Settings) -> int:
    classifier = build_classifier(settings)
    preds = classifier.predict(args.questions, settings.classifier.min_confidence)
    for q, p in zip(args.questions, preds, strict=True):
        top = sorted(p.probabilities.items(), key=lambda kv: -kv[1])[:3]
        shown = ", ".join(f"{k} {v:.2f}" for k, v in top)
        flag = "" if p.confident else "  (unsure: plain RAG)"
        print(f"{p.type.value:<15} {shown}{flag}  | {q}")
    return 0
