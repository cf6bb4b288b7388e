"""QTREE and QPlanner (Jeong et al.): outlines for coverage-conditioned questions.

The project's ``constraints`` mode splits "explain X, but skip Y" into a core
question and subtopic lists. This package is the paper's fuller method:

- ``tree``: a question's sub-queries as a fixed-width, three-level tree;
- ``coverage``: coverage instructions written from one node of the tree (the
  background sub-query) and one intent, include or exclude;
- ``outlines``: candidate outlines, connected sets of tree nodes, parsed by
  the LLM and checked here;
- ``judge``: each outline scored 1-5 for the conditioned question from the
  judge's digit probabilities (deterministic);
- ``dataset`` / ``summary``: the resumable build over a question set, its
  summary and the SFT / DPO examples it yields;
- ``planner`` / ``training``: QPlanner, prompted or trained (TRL SFT then
  DPO with LoRA), behind one interface;
- ``answering``: outline-guided answering, the pipeline option
  ``constraints.outline``.

Entry points for the CLI: :func:`build_qtree_dataset`, :func:`write_summary`,
:func:`train_planner` (lazy: needs the ``planner`` extra), :func:`load_planner`.
"""

from __future__ import annotations

from typing import Any

from typed_rag.qtree.dataset import (
    DATASET,
    BuildStats,
    QTreeBuilder,
    QTreeConfig,
    QTreeQuestion,
    build_qtree_dataset,
)
from typed_rag.qtree.judge import OutlineScore, judge_outlines
from typed_rag.qtree.outlines import Outline, check_outline, is_connected, parse_outlines, trim
from typed_rag.qtree.planner import EnginePlanner, HFPlanner, Planner, load_planner
from typed_rag.qtree.summary import load_examples, summarize, write_summary
from typed_rag.qtree.tree import QTree, TreeError, parse_tree


def train_planner(*args: Any, **kwargs: Any) -> Any:
    """:func:`typed_rag.qtree.training.train_planner`, imported on use (trl is optional)."""
    from typed_rag.qtree.training import train_planner as train

    return train(*args, **kwargs)


__all__ = [
    "DATASET",
    "BuildStats",
    "EnginePlanner",
    "HFPlanner",
    "Outline",
    "OutlineScore",
    "Planner",
    "QTree",
    "QTreeBuilder",
    "QTreeConfig",
    "QTreeQuestion",
    "TreeError",
    "build_qtree_dataset",
    "check_outline",
    "is_connected",
    "judge_outlines",
    "load_examples",
    "load_planner",
    "parse_outlines",
    "parse_tree",
    "summarize",
    "train_planner",
    "trim",
    "write_summary",
]
