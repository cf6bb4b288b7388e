"""The lab's settings: the runtime's :class:`~typed_rag.config.Settings` and an ``eval``
section (Wiki-NFQA's location and LINKAGE scoring), which the server never reads.

The ``typed-rag`` command loads these where the lab is installed, from the same TOML file,
environment (``TYPED_RAG_EVAL__...``) and ``--set eval.KEY=VALUE`` overrides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from typed_rag.config import DATA_ROOT, Settings, load_settings


class EvalSettings(BaseModel):
    """Wiki-NFQA location and LINKAGE scoring options."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    data_dir: Path = DATA_ROOT / "wiki-nfqa"
    """The Wiki-NFQA benchmark folder."""
    paper_off_by_one: bool = False
    """The paper's LINKAGE prompt, where ``[[n]]`` (not ``[[n+1]]``) means worse than all
    n references."""
    # "linkage-prob-gated" was chosen by the judge-validity benchmark (docs/evaluation.md).
    judge_protocol: Literal["linkage", "linkage-prob", "linkage-prob-gated"] = "linkage-prob-gated"
    """How the LINKAGE scorer gives its verdict: ``linkage-prob`` reads the distribution
    of ``[[k]]`` from token probabilities; ``linkage-prob-gated`` also asks whether the
    answer addresses the question and ranks it last when not; ``linkage`` decodes a text
    verdict (any engine, e.g. a server)."""
    # Wiki-NFQA's graded references cite nothing, and the 1.5B judge ranks the same answer
    # higher with its markers than without (docs/experiments.md), favouring methods that cite.
    judge_citations: Literal["keep", "strip"] = "keep"
    """What the LINKAGE judge reads of an answer: as written, or without its ``[n]``
    citation groups."""
    # The judge pays for a sentence vouching for the sources as for content (judge
    # validity), and no graded reference has one.
    judge_source_talk: Literal["keep", "strip"] = "keep"
    """... and with or without its sentences that vouch for its sources ("This answer is
    supported by the references."; :mod:`typed_rag.finishing.source_talk`)."""
    # The judge pays for the pipeline's talk about its sources as for content (judge
    # validity's scaffolded probe), and no graded reference has any.
    judge_scaffolding: Literal["keep", "strip"] = "keep"
    """... and with or without its talk about the pipeline ("Based on the references
    provided, ...", "Perspective 1"), rewritten away as the scaffolding guard does
    (:mod:`typed_rag.finishing.scaffolding`)."""
    store_passage_text: bool = True
    """Keep passage texts in ``answers.jsonl`` (the context judges read them); false for runs
    committed under ``results/``, where ids, titles and scores suffice (the index has the
    text)."""
    route: Literal["labels", "classifier", "labels-factoid", "labels-classifier"] = "labels"
    """How typed-rag picks a question's pipeline in an evaluation: ``labels`` follows the
    run's recorded type (the paper's protocol), ``classifier`` routes as the server does,
    ``labels-factoid`` follows the labels except where the classifier is confident the
    question is FACTOID, ``labels-classifier`` also where it is confident of a typed type
    (:mod:`eval.data.routes`)."""


class LabSettings(Settings):
    """The runtime's settings with the evaluation section."""

    eval: EvalSettings = Field(default_factory=EvalSettings)


def load_lab_settings(config_file: str | Path | None = None, **overrides: Any) -> LabSettings:
    """:func:`typed_rag.config.load_settings` for the lab's settings."""
    return load_settings(config_file, cls=LabSettings, **overrides)
